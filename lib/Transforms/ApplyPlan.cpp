//===- ApplyPlan.cpp - Named parallel plans as annotations ----------------===//
//
// Implements -cleave-apply-plan. See Passes.td for the contract. The pass
// writes annotations only; it asks sharding propagation what the annotations
// so far imply (is this activation already split?) instead of matching model
// structure.
//
//===----------------------------------------------------------------------===//

#include "cleave/Sharding/FactorAssignment.h"
#include "cleave/Sharding/Propagation.h"
#include "cleave/Transforms/Passes.h"

#define DEBUG_TYPE "cleave-apply-plan"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEAPPLYPLANPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

constexpr StringLiteral kDp = "dp", kTp = "tp";

using DimAxes = SmallVector<SmallVector<StringRef>>;

DimAxes dimsOf(ShardingAttr s) {
  DimAxes dims;
  for (unsigned d = 0, e = s.getRank(); d < e; ++d)
    dims.push_back(s.getDimAxes(d));
  return dims;
}

class PlanWriter {
public:
  PlanWriter(ModuleOp module, int64_t dp, int64_t tp, bool sp, int64_t zero)
      : module(module), dp(dp), tp(tp), sp(sp), zero(zero) {}
  LogicalResult run();

private:
  ShardingAttr sharding(const DimAxes &dims) {
    return ShardingAttr::get(module.getContext(), mesh.getSymName(), dims);
  }
  ShardingAttr argSharding(func::FuncOp f, unsigned i) {
    return f.getArgAttrOfType<ShardingAttr>(i,
                                            CleaveDialect::kShardingAttrName);
  }
  void setArgSharding(func::FuncOp f, unsigned i, const DimAxes &dims) {
    f.setArgAttr(i, CleaveDialect::kShardingAttrName, sharding(dims));
  }
  LogicalResult splitInputs(func::FuncOp f);
  LogicalResult splitMatmuls(func::FuncOp f);
  void pinSequence(func::FuncOp f);
  LogicalResult shardOptimizer(func::FuncOp f);
  /// `dims` with `dp` added to the first dimension that still divides.
  DimAxes withDp(DimAxes dims, RankedTensorType type);
  Value pin(OpBuilder &b, Location loc, Value v, const DimAxes &dims) {
    return b.create<ShardingConstraintOp>(loc, v, sharding(dims));
  }

  ModuleOp module;
  MeshOp mesh;
  int64_t dp, tp;
  bool sp;
  int64_t zero;
};

LogicalResult PlanWriter::splitInputs(func::FuncOp f) {
  for (BlockArgument arg : f.getArguments()) {
    auto name = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                               CleaveDialect::kInputAttrName);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!name || !type || type.getRank() == 0)
      continue;
    if (type.getDimSize(0) % dp != 0)
      return f.emitError() << "data parallelism over " << dp
                           << " devices needs the batch of input '"
                           << name.getValue() << "' (" << type.getDimSize(0)
                           << ") to be divisible by " << dp;
    DimAxes dims(type.getRank());
    dims[0].push_back(kDp);
    setArgSharding(f, arg.getArgNumber(), dims);
  }
  return success();
}

/// The parameter behind a matmul operand: a block argument, possibly cast.
BlockArgument parameterOf(func::FuncOp f, Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (def->getNumOperands() != 1 ||
        !def->hasTrait<OpTrait::Elementwise>())
      return {};
    v = def->getOperand(0);
  }
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || !f.getArgAttr(arg.getArgNumber(), CleaveDialect::kParamAttrName))
    return {};
  return arg;
}

LogicalResult PlanWriter::splitMatmuls(func::FuncOp f) {
  SmallVector<MatmulOp> matmuls(f.getOps<MatmulOp>());
  // A weight that tp does not divide stays whole (a vocabulary of 65 under
  // tp = 2); a plan that can split no weight at all is an error.
  int64_t split = 0;
  BlockArgument unsplit;
  for (MatmulOp mm : matmuls) {
    BlockArgument w = parameterOf(f, mm.getRhs());
    auto type = w ? cast<RankedTensorType>(w.getType()) : RankedTensorType();
    if (!w || type.getRank() != 2 || argSharding(f, w.getArgNumber()))
      continue;
    // Do the activations arrive split over tp along the contraction?
    auto shardings = propagateShardings(f, mesh);
    if (failed(shardings))
      return failure();
    int64_t lhsRank = mm.getLhs().getType().getRank();
    int64_t lhsK = mm.getTransposeLhs() ? lhsRank - 2 : lhsRank - 1;
    ShardingAttr lhs = (*shardings)[mm.getLhs()];
    bool rowParallel = llvm::is_contained(lhs.getDimAxes(lhsK), kTp);
    int64_t k = mm.getTransposeRhs() ? 1 : 0;
    int64_t d = rowParallel ? k : 1 - k;
    if (type.getDimSize(d) % tp != 0) {
      unsplit = unsplit ? unsplit : w;
      continue;
    }
    DimAxes dims(2);
    dims[d].push_back(kTp);
    setArgSharding(f, w.getArgNumber(), dims);
    ++split;
  }
  if (split == 0 && unsplit) {
    auto type = cast<RankedTensorType>(unsplit.getType());
    return f.emitError()
           << "tensor parallelism over " << tp
           << " devices splits no matmul weight: parameter '"
           << f.getArgAttrOfType<StringAttr>(unsplit.getArgNumber(),
                                             CleaveDialect::kParamAttrName)
                  .getValue()
           << "' is " << type.getDimSize(0) << " x " << type.getDimSize(1)
           << ", and tp must divide the dimension it splits";
  }
  return success();
}

void PlanWriter::pinSequence(func::FuncOp f) {
  SmallVector<Operation *> targets;
  f.walk([&](Operation *op) {
    if (isa<LayerNormOp, RMSNormOp, DropoutOp>(op))
      targets.push_back(op);
  });
  for (Operation *op : targets) {
    auto type = cast<RankedTensorType>(op->getOperand(0).getType());
    if (type.getRank() != 3 || type.getDimSize(1) % tp != 0)
      continue;
    DimAxes dims(3);
    if (dp > 1 && type.getDimSize(0) % dp == 0)
      dims[0].push_back(kDp);
    dims[1].push_back(kTp);
    OpBuilder b(op);
    op->setOperand(0, pin(b, op->getLoc(), op->getOperand(0), dims));
  }
}

DimAxes PlanWriter::withDp(DimAxes dims, RankedTensorType type) {
  for (auto [d, axes] : llvm::enumerate(dims)) {
    if (llvm::is_contained(axes, kDp))
      return dims;
    int64_t blocks = mesh.getGroupSize(axes) * dp;
    if (type.getDimSize(d) % blocks == 0) {
      axes.push_back(kDp);
      return dims;
    }
  }
  return dims;
}

/// The op computing the new value of parameter `name` in `f`, if any.
Operation *updateOf(func::FuncOp f, StringAttr name) {
  Operation *ret = f.getBody().front().getTerminator();
  for (unsigned i = 0, e = f.getNumResults(); i < e; ++i)
    if (f.getResultAttr(i, CleaveDialect::kOutputAttrName) == name)
      return ret->getOperand(i).getDefiningOp();
  return nullptr;
}

LogicalResult PlanWriter::shardOptimizer(func::FuncOp f) {
  auto shardings = propagateShardings(f, mesh);
  if (failed(shardings))
    return failure();
  // Parameters by name, with the sharding the plan gives them so far.
  llvm::StringMap<std::pair<BlockArgument, DimAxes>> params;
  for (BlockArgument arg : f.getArguments())
    if (auto name = f.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), CleaveDialect::kParamAttrName))
      params[name.getValue()] = {
          arg, dimsOf(withoutPartial((*shardings)[arg]))};
  for (BlockArgument arg : f.getArguments()) {
    auto name = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                               CleaveDialect::kStateAttrName);
    if (!name)
      continue;
    // "h.0.mlp.fc.weight.exp_avg" belongs to "h.0.mlp.fc.weight".
    StringRef owner = name.getValue().rsplit('.').first;
    auto it = params.find(owner);
    if (it == params.end())
      continue;
    setArgSharding(f, arg.getArgNumber(),
                   withDp(it->second.second,
                          cast<RankedTensorType>(arg.getType())));
  }
  for (auto &[name, entry] : params) {
    auto [arg, dims] = entry;
    auto type = cast<RankedTensorType>(arg.getType());
    Operation *update =
        updateOf(f, StringAttr::get(module.getContext(), name));
    setArgSharding(f, arg.getArgNumber(),
                   zero >= 3 ? withDp(dims, type) : dims);
    if (zero == 1 && update)
      // Reduce gradients whole (all-reduce), then update a slice.
      for (OpOperand &operand : update->getOpOperands()) {
        Value v = operand.get();
        if (isa<BlockArgument>(v) || v.getType() != arg.getType())
          continue;
        OpBuilder b(update);
        operand.set(pin(b, update->getLoc(), v, dims));
      }
    if (zero >= 3)
      // Gather before every use but the update (FSDP).
      for (OpOperand &use : llvm::make_early_inc_range(arg.getUses())) {
        if (use.getOwner() == update)
          continue;
        OpBuilder b(use.getOwner());
        use.set(pin(b, use.getOwner()->getLoc(), arg, dims));
      }
  }
  return success();
}

LogicalResult PlanWriter::run() {
  if (!module.getOps<MeshOp>().empty())
    return module.emitError()
           << "cleave-apply-plan: the module already has a cleave.mesh";
  if (dp < 1 || tp < 1 || zero < 0 || zero > 3)
    return module.emitError() << "cleave-apply-plan: dp and tp must be >= 1 "
                                 "and zero in 0..3";
  if (sp && tp == 1)
    return module.emitError()
           << "cleave-apply-plan: sequence parallelism (sp) needs tp > 1";
  if (zero > 0 && dp == 1)
    return module.emitError() << "cleave-apply-plan: ZeRO shards over the "
                                 "data-parallel axis; it needs dp > 1";
  SmallVector<StringRef> axes;
  SmallVector<int64_t> shape;
  SmallVector<LinkKind> links;
  if (dp > 1 || tp == 1) {
    axes.push_back(kDp);
    shape.push_back(dp);
    links.push_back(LinkKind::InfiniBand);
  }
  if (tp > 1) {
    axes.push_back(kTp);
    shape.push_back(tp);
    links.push_back(LinkKind::NVLink);
  }
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  mesh = b.create<MeshOp>(module.getLoc(), "mesh", axes, shape, links);
  for (auto f : module.getOps<func::FuncOp>()) {
    if (f.isExternal())
      continue;
    if (dp > 1 && failed(splitInputs(f)))
      return failure();
    if (tp > 1 && failed(splitMatmuls(f)))
      return failure();
    if (sp)
      pinSequence(f);
    if (zero > 0 && failed(shardOptimizer(f)))
      return failure();
  }
  module->setAttr(CleaveDialect::kPlanAttrName,
                  b.getDictionaryAttr(
                      b.getNamedAttr("zero", b.getI64IntegerAttr(zero))));
  return success();
}

struct CleaveApplyPlanPass final
    : cleave::impl::CleaveApplyPlanPassBase<CleaveApplyPlanPass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(PlanWriter(getOperation(), dp, tp, sp, zero).run()))
      signalPassFailure();
  }
};

} // namespace
