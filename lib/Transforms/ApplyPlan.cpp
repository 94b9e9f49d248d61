//===- ApplyPlan.cpp - Named parallel plans as annotations ----------------===//
//
// Implements -cleave-apply-plan. See Passes.td for the contract. The pass
// writes annotations only; it asks sharding propagation what the annotations
// so far imply (is this activation already split?) instead of matching model
// structure, and it knows ops only through their sharding rules and traits:
// a contraction is an op whose rule contracts a weight dimension with
// another operand, a sequence-parallel op carries the SequenceParallel
// trait, an expert weight is a batched GEMM's weight (its dimension 0 a
// batch factor shared with the activations). Propagation is incremental
// (IncrementalPropagation): one walk in program order serves every decision,
// so the pass is linear in the program.
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

constexpr StringLiteral kDp = "dp", kEp = "ep", kCp = "cp", kTp = "tp",
                        kPp = "pp", kMb = "mb";

using DimAxes = SmallVector<SmallVector<StringRef>>;

DimAxes dimsOf(ShardingAttr s) {
  DimAxes dims;
  for (unsigned d = 0, e = s.getRank(); d < e; ++d)
    dims.push_back(s.getDimAxes(d));
  return dims;
}

class PlanWriter {
public:
  PlanWriter(ModuleOp module, const CleaveApplyPlanPassOptions &o)
      : module(module), dp(o.dp), tp(o.tp), ep(o.ep), cp(o.cp), sp(o.sp),
        zero(o.zero), pp(o.pp), micro(o.micro), schedule(o.schedule),
        virtualStages(o.virtualStages), recompute(o.recompute),
        cpLayout(o.cpLayout) {}
  LogicalResult run();

private:
  ShardingAttr sharding(const DimAxes &dims) {
    return ShardingAttr::get(module.getContext(), mesh.getSymName(), dims);
  }
  /// The argument attributes of `f` are edited in `argAttrs` and written
  /// back at once (one setArgAttr per argument would build a new attribute
  /// array each time: quadratic in time and memory). Propagation reads the
  /// function's, so they are written back before it runs.
  void loadArgAttrs(func::FuncOp f) {
    argAttrs.clear();
    f.getAllArgAttrs(argAttrs);
  }
  void storeArgAttrs(func::FuncOp f) { f.setAllArgAttrs(argAttrs); }
  ShardingAttr argSharding(func::FuncOp f, unsigned i) {
    return dyn_cast_or_null<ShardingAttr>(
        argAttrs[i].get(CleaveDialect::kShardingAttrName));
  }
  void setArgSharding(func::FuncOp f, unsigned i, const DimAxes &dims) {
    NamedAttrList attrs(argAttrs[i]);
    attrs.set(CleaveDialect::kShardingAttrName, sharding(dims));
    argAttrs[i] = attrs.getDictionary(module.getContext());
  }
  LogicalResult validate();
  void createMesh();
  void writePlanAttribute();
  /// Pipelining or micro-batching asked for: the mesh gets `pp` and the
  /// micro-batch axis `mb` (cleave-pipeline turns it into a loop).
  bool microBatched() const { return pp > 1 || micro > 1; }
  /// The axes splitting the batch dimension of data: [dp, mb, ep] (those
  /// used). `ep` is the minor axis: the all-to-all that moves it from the
  /// batch to the experts moves a dimension's minor axis, so every expert
  /// buffer stays split over [dp, mb] and a micro-batch's all-to-all stays
  /// inside the micro-batch. cleave-pipeline cuts the micro-batch out of a
  /// replica's block, then this device's ep block out of the micro-batch.
  DimAxes::value_type batchAxes() const {
    DimAxes::value_type axes;
    if (dp > 1)
      axes.push_back(kDp);
    if (microBatched())
      axes.push_back(kMb);
    if (ep > 1)
      axes.push_back(kEp);
    return axes;
  }
  /// How many blocks the batch dimension of data splits into.
  int64_t batchBlocks() const { return dp * micro * ep; }
  LogicalResult splitInputs(func::FuncOp f);
  LogicalResult splitContractions(func::FuncOp f);
  LogicalResult splitExperts(func::FuncOp f);
  void pinSequence(func::FuncOp f);
  LogicalResult shardOptimizer(func::FuncOp f);
  /// `dims` with `dp` added to the first dimension that still divides.
  DimAxes withDp(DimAxes dims, RankedTensorType type);
  Value pin(OpBuilder &b, Location loc, Value v, const DimAxes &dims) {
    return b.create<ShardingConstraintOp>(loc, v, sharding(dims));
  }

  ModuleOp module;
  MeshOp mesh;
  int64_t dp, tp, ep, cp;
  bool sp;
  int64_t zero, pp, micro;
  std::string schedule;
  int64_t virtualStages;
  std::string recompute;
  std::string cpLayout;
  /// Whether the sequence blocks over cp are load-balanced (cp-layout).
  bool balanced = false;
  SmallVector<DictionaryAttr> argAttrs;
};

LogicalResult PlanWriter::splitInputs(func::FuncOp f) {
  for (BlockArgument arg : f.getArguments()) {
    auto name = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                               CleaveDialect::kInputAttrName);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!name || !type || type.getRank() == 0)
      continue;
    if (type.getDimSize(0) % batchBlocks() != 0) {
      // At the input: on a zoo model its location names it.
      InFlightDiagnostic diag = emitError(arg.getLoc())
                                << "data parallelism over " << dp << " devices";
      if (ep > 1)
        diag << ", expert parallelism over " << ep;
      if (micro > 1)
        diag << " and " << micro << " micro-batches";
      return diag << " needs the batch of input '" << name.getValue() << "' ("
                  << type.getDimSize(0) << ") to be divisible by "
                  << batchBlocks();
    }
    DimAxes dims(type.getRank());
    dims[0] = batchAxes();
    if (cp > 1 && type.getRank() >= 2) {
      if (balanced && type.getDimSize(1) % (2 * cp) != 0)
        return emitError(arg.getLoc())
               << "context parallelism (cp=" << cp
               << ") with cp-layout=balanced needs the sequence (dimension 1) "
                  "of input '"
               << name.getValue() << "' (" << type.getDimSize(1)
               << ") to be divisible by 2*cp = " << 2 * cp
               << " (or cp-layout=contiguous: divisible by cp)";
      if (type.getDimSize(1) % cp != 0)
        return emitError(arg.getLoc())
               << "context parallelism (cp=" << cp << ") needs the sequence "
               << "(dimension 1) of input '" << name.getValue() << "' ("
               << type.getDimSize(1) << ") to be divisible by " << cp;
      if (balanced) {
        // Each device reads the whole sequence (token ids: small) and the
        // partitioner cuts its balanced block out of it
        // (buildBalancedPermutation): the runtime's blocks are contiguous.
        setArgSharding(f, arg.getArgNumber(), dims);
        DimAxes split = dims;
        split[1].push_back(kCp);
        OpBuilder b = OpBuilder::atBlockBegin(&f.front());
        Value pinned = pin(b, arg.getLoc(), arg, split);
        arg.replaceAllUsesExcept(pinned, pinned.getDefiningOp());
        continue;
      }
      dims[1].push_back(kCp);
    }
    setArgSharding(f, arg.getArgNumber(), dims);
  }
  return success();
}

/// The parameter behind an operand: a block argument, possibly cast.
BlockArgument parameterOf(func::FuncOp f, Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (def->getNumOperands() != 1 || !def->hasTrait<OpTrait::Elementwise>())
      return {};
    v = def->getOperand(0);
  }
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || !f.getArgAttr(arg.getArgNumber(), CleaveDialect::kParamAttrName))
    return {};
  return arg;
}

/// An op that contracts activations with a 2-d weight, read off its sharding
/// rule: one dimension of the weight is a reduction factor that another
/// operand shares (the contraction, K of a matmul), the other a
/// pass-through factor (the output features). An embedding's table is not
/// one: its reduction factor (the vocabulary) is in no other operand.
struct Contraction {
  Operation *op;
  BlockArgument weight;
  ShardingRule rule;
  int64_t factor;    ///< The contracted factor.
  int64_t weightDim; ///< The weight dimension it occupies (row-parallel).
  int64_t outputDim; ///< The weight's other dimension (column-parallel).
  unsigned operand;  ///< Which operand is the weight.
};

/// The factor of dimension `d` of `tensor` when it has exactly one.
std::optional<int64_t> soleFactor(const TensorFactors &tensor, int64_t d) {
  if (tensor[d].size() != 1)
    return std::nullopt;
  return tensor[d][0];
}

/// True if an operand of `rule` other than `except` has factor `k`.
bool otherOperandHas(const ShardingRule &rule, unsigned except, int64_t k) {
  for (auto [j, tensor] : llvm::enumerate(rule.getOperandFactors()))
    if (j != except)
      for (ArrayRef<int64_t> dim : tensor)
        if (llvm::is_contained(dim, k))
          return true;
  return false;
}

std::optional<Contraction> asContraction(func::FuncOp f,
                                         ShardingRuleOpInterface op) {
  for (unsigned i = 0, e = op->getNumOperands(); i < e; ++i) {
    BlockArgument w = parameterOf(f, op->getOperand(i));
    if (!w || cast<RankedTensorType>(w.getType()).getRank() != 2)
      continue;
    ShardingRule rule = op.getShardingRule();
    const TensorFactors &tensor = rule.getOperand(i);
    for (int64_t d : {0, 1}) {
      std::optional<int64_t> k = soleFactor(tensor, d);
      std::optional<int64_t> n = soleFactor(tensor, 1 - d);
      if (k && n && rule.getFactorKind(*k) == FactorKind::Reduction &&
          rule.getFactorKind(*n) == FactorKind::PassThrough &&
          otherOperandHas(rule, i, *k))
        return Contraction{op, w, rule, *k, d, 1 - d, i};
    }
  }
  return std::nullopt;
}

LogicalResult PlanWriter::splitContractions(func::FuncOp f) {
  // The first contraction that uses a weight decides its split, also when
  // it leaves it whole: later ones are its gradients, whose "output
  // features" are the forward's input features. A weight that tp does not
  // divide stays whole (a vocabulary of 65 under tp = 2); a plan that can
  // split no weight at all is an error.
  std::vector<Contraction> decisions;
  llvm::SmallDenseSet<BlockArgument> decided;
  for (auto op : f.getOps<ShardingRuleOpInterface>()) {
    std::optional<Contraction> c = asContraction(f, op);
    if (c && !argSharding(f, c->weight.getArgNumber()) &&
        decided.insert(c->weight).second)
      decisions.push_back(std::move(*c));
  }
  // One propagation for all decisions, walking the program in order: each
  // decision sees what the ops before it make of the annotations so far.
  storeArgAttrs(f);
  IncrementalPropagation propagation(f, mesh);
  int64_t split = 0;
  BlockArgument unsplit;
  for (const Contraction &c : decisions) {
    if (failed(propagation.propagateBefore(c.op)))
      return failure();
    // Do the activations arrive split over tp along the contraction?
    bool rowParallel = false;
    for (auto [j, tensor] : llvm::enumerate(c.rule.getOperandFactors())) {
      if (j == c.operand)
        continue;
      ShardingAttr s = propagation.shardingOf(c.op->getOperand(j));
      for (auto [d, factors] : llvm::enumerate(tensor))
        if (llvm::is_contained(factors, c.factor) &&
            llvm::is_contained(s.getDimAxes(d), kTp))
          rowParallel = true;
    }
    int64_t d = rowParallel ? c.weightDim : c.outputDim;
    auto type = cast<RankedTensorType>(c.weight.getType());
    if (type.getDimSize(d) % tp != 0) {
      unsplit = unsplit ? unsplit : c.weight;
    } else {
      DimAxes dims(2);
      dims[d].push_back(kTp);
      setArgSharding(f, c.weight.getArgNumber(), dims);
      propagation.annotate(c.weight, sharding(dims));
      ++split;
    }
  }
  if (split == 0 && unsplit) {
    auto type = cast<RankedTensorType>(unsplit.getType());
    return emitError(unsplit.getLoc())
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

/// The expert weight behind operand `i` of `op`, read off its rule: a
/// parameter of rank 3 or more whose dimension 0 is a pass-through factor
/// that another operand shares (the batch factor of a batched GEMM: the
/// experts) and which is contracted with another operand along another
/// dimension. A dense weight (rank 2) or an optimizer update (no
/// contraction) is not one.
BlockArgument expertWeightOf(func::FuncOp f, ShardingRuleOpInterface op,
                             unsigned i) {
  BlockArgument w = parameterOf(f, op->getOperand(i));
  if (!w || cast<RankedTensorType>(w.getType()).getRank() < 3)
    return {};
  ShardingRule rule = op.getShardingRule();
  const TensorFactors &tensor = rule.getOperand(i);
  std::optional<int64_t> e = soleFactor(tensor, 0);
  if (!e || rule.getFactorKind(*e) != FactorKind::PassThrough ||
      !otherOperandHas(rule, i, *e))
    return {};
  for (int64_t d = 1, n = tensor.size(); d < n; ++d)
    for (int64_t k : tensor[d])
      if (rule.getFactorKind(k) == FactorKind::Reduction &&
          otherOperandHas(rule, i, k))
        return w;
  return {};
}

/// The tensors of an op (operands, then results) with their factors.
SmallVector<std::pair<Value, const TensorFactors *>>
tensorsOf(Operation *op, const ShardingRule &rule) {
  SmallVector<std::pair<Value, const TensorFactors *>> tensors;
  for (auto [v, factors] :
       llvm::zip(op->getOperands(), rule.getOperandFactors()))
    tensors.push_back({v, &factors});
  for (auto [v, factors] : llvm::zip(op->getResults(), rule.getResultFactors()))
    tensors.push_back({v, &factors});
  return tensors;
}

LogicalResult PlanWriter::splitExperts(func::FuncOp f) {
  // The expert weights, each checked against ep.
  llvm::SetVector<BlockArgument> experts;
  for (auto op : f.getOps<ShardingRuleOpInterface>())
    for (unsigned i = 0, e = op->getNumOperands(); i < e; ++i)
      if (BlockArgument w = expertWeightOf(f, op, i))
        experts.insert(w);
  auto paramName = [&](BlockArgument w) {
    return f
        .getArgAttrOfType<StringAttr>(w.getArgNumber(),
                                      CleaveDialect::kParamAttrName)
        .getValue();
  };
  if (experts.empty())
    return emitError(f.getLoc())
           << "expert parallelism (ep=" << ep << ") needs expert weights, "
           << "and '" << f.getSymName()
           << "' has none (no mixture-of-experts layer: no parameter of "
              "rank 3 or more whose dimension 0 is the batch of a batched "
              "matmul)";
  for (BlockArgument w : experts) {
    int64_t count = cast<RankedTensorType>(w.getType()).getDimSize(0);
    if (count % ep != 0)
      return emitError(w.getLoc())
             << "expert parallelism (ep=" << ep << ") needs ep to divide the "
             << "experts, and parameter '" << paramName(w) << "' has " << count
             << " experts (its dimension 0)";
  }

  // The token side: what the plan so far makes of every value.
  storeArgAttrs(f);
  auto tokens = propagateShardings(f, mesh);
  if (failed(tokens))
    return failure();
  // The expert side: the values the expert factor reaches from the expert
  // weights' split alone.
  auto expertDims = [&](BlockArgument w) {
    DimAxes dims(cast<RankedTensorType>(w.getType()).getRank());
    dims[0].push_back(kEp);
    return dims;
  };
  SmallVector<DictionaryAttr> onlyExperts;
  for (BlockArgument arg : f.getArguments()) {
    NamedAttrList attrs(argAttrs[arg.getArgNumber()]);
    attrs.erase(CleaveDialect::kShardingAttrName);
    if (experts.contains(arg))
      attrs.set(CleaveDialect::kShardingAttrName, sharding(expertDims(arg)));
    onlyExperts.push_back(attrs.getDictionary(module.getContext()));
  }
  f.setAllArgAttrs(onlyExperts);
  auto expertSide = propagateShardings(f, mesh);
  storeArgAttrs(f);
  if (failed(expertSide))
    return failure();
  auto onExperts = [&](Value v) {
    ShardingAttr s = expertSide->lookup(v);
    if (!s || s.getRank() < 2)
      return false;
    SmallVector<StringRef> lead = s.getDimAxes(0);
    return lead.size() == 1 && lead[0] == kEp;
  };

  // The boundaries: an op whose rule puts, in an expert-side tensor, the
  // factor that leads a token-side tensor (the group) in dimension 1. The
  // expert-side tensor is pinned: a result (tokens to experts) split by
  // expert, an operand (experts back to tokens) as the token side has it.
  SmallVector<std::pair<OpOperand *, ShardingAttr>> operandPins;
  SmallVector<std::pair<Value, ShardingAttr>> resultPins;
  for (auto op : f.getOps<ShardingRuleOpInterface>()) {
    ShardingRule rule = op.getShardingRule();
    auto tensors = tensorsOf(op, rule);
    for (auto [i, entry] : llvm::enumerate(tensors)) {
      auto [v, factors] = entry;
      if (factors->size() < 2 || !onExperts(v))
        continue;
      std::optional<int64_t> group = soleFactor(*factors, 1);
      bool boundary = group && llvm::any_of(tensors, [&](auto other) {
                        return other.second->size() >= 1 &&
                               soleFactor(*other.second, 0) == group &&
                               !onExperts(other.first);
                      });
      ShardingAttr token = tokens->lookup(v);
      if (!boundary || !token)
        continue;
      DimAxes dims = dimsOf(withoutPartial(token));
      if (i < op->getNumOperands()) {
        operandPins.push_back({&op->getOpOperand(i), sharding(dims)});
        continue;
      }
      for (auto &axes : dims)
        llvm::erase(axes, kEp);
      dims[0].insert(dims[0].begin(), kEp);
      resultPins.push_back({v, sharding(dims)});
    }
  }
  for (auto [operand, s] : operandPins) {
    OpBuilder b(operand->getOwner());
    operand->set(b.create<ShardingConstraintOp>(operand->getOwner()->getLoc(),
                                                operand->get(), s));
  }
  for (auto [v, s] : resultPins) {
    OpBuilder b = OpBuilder::atBlockBegin(v.getParentBlock());
    b.setInsertionPointAfterValue(v);
    Value pinned = b.create<ShardingConstraintOp>(v.getLoc(), v, s);
    v.replaceAllUsesExcept(pinned, pinned.getDefiningOp());
  }
  for (BlockArgument w : experts)
    setArgSharding(f, w.getArgNumber(), expertDims(w));
  return success();
}

void PlanWriter::pinSequence(func::FuncOp f) {
  SmallVector<Operation *> targets;
  f.walk([&](Operation *op) {
    if (op->hasTrait<SequenceParallel>())
      targets.push_back(op);
  });
  for (Operation *op : targets) {
    auto type = cast<RankedTensorType>(op->getOperand(0).getType());
    if (type.getRank() != 3 || type.getDimSize(1) % (cp * tp) != 0)
      continue;
    DimAxes dims(3);
    if (type.getDimSize(0) % batchBlocks() == 0)
      dims[0] = batchAxes();
    // The sequence is split over cp everywhere; sp splits each block again.
    if (cp > 1)
      dims[1].push_back(kCp);
    dims[1].push_back(kTp);
    OpBuilder b(op);
    op->setOperand(0, pin(b, op->getLoc(), op->getOperand(0), dims));
  }
}

DimAxes PlanWriter::withDp(DimAxes dims, RankedTensorType type) {
  for (const SmallVector<StringRef> &axes : dims)
    if (llvm::is_contained(axes, kDp))
      return dims;
  // ZeRO shards over the batch axes the tensor is replicated on: dp, and ep
  // for a tensor that ep does not split (a dense parameter, which every ep
  // rank holds whole and whose gradient is reduced over dp and ep, as
  // Megatron's distributed optimizer shards it); an expert weight over dp.
  // If dp x ep divides no dimension, dp alone.
  bool expert = llvm::any_of(dims, [](const SmallVector<StringRef> &axes) {
    return llvm::is_contained(axes, kEp);
  });
  SmallVector<SmallVector<StringRef>> choices = {{kDp}};
  if (ep > 1 && !expert)
    choices.insert(choices.begin(), {kDp, kEp});
  for (ArrayRef<StringRef> zeroAxes : choices)
    for (auto [d, axes] : llvm::enumerate(dims)) {
      int64_t blocks = mesh.getGroupSize(axes) * mesh.getGroupSize(zeroAxes);
      if (type.getDimSize(d) % blocks == 0) {
        llvm::append_range(axes, zeroAxes);
        return dims;
      }
    }
  return dims;
}

/// The op computing the new value of each output of `f`, by output name.
llvm::DenseMap<Attribute, Operation *> updatesOf(func::FuncOp f) {
  llvm::DenseMap<Attribute, Operation *> updates;
  Operation *ret = f.getBody().front().getTerminator();
  for (unsigned i = 0, e = f.getNumResults(); i < e; ++i)
    if (Attribute name = f.getResultAttr(i, CleaveDialect::kOutputAttrName))
      updates.try_emplace(name, ret->getOperand(i).getDefiningOp());
  return updates;
}

LogicalResult PlanWriter::shardOptimizer(func::FuncOp f) {
  storeArgAttrs(f);
  auto shardings = propagateShardings(f, mesh);
  if (failed(shardings))
    return failure();
  llvm::DenseMap<Attribute, Operation *> updates = updatesOf(f);
  // Parameters by name, with the sharding the plan gives them so far.
  llvm::StringMap<std::pair<BlockArgument, DimAxes>> params;
  for (BlockArgument arg : f.getArguments())
    if (auto name = f.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), CleaveDialect::kParamAttrName))
      params[name.getValue()] = {arg,
                                 dimsOf(withoutPartial((*shardings)[arg]))};
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
    setArgSharding(
        f, arg.getArgNumber(),
        withDp(it->second.second, cast<RankedTensorType>(arg.getType())));
  }
  for (auto &[name, entry] : params) {
    auto [arg, dims] = entry;
    auto type = cast<RankedTensorType>(arg.getType());
    Operation *update =
        updates.lookup(StringAttr::get(module.getContext(), name));
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

LogicalResult PlanWriter::validate() {
  if (!module.getOps<MeshOp>().empty())
    return module.emitError()
           << "cleave-apply-plan: the module already has a cleave.mesh";
  if (dp < 1 || tp < 1 || ep < 1 || cp < 1 || pp < 1 || micro < 1 || zero < 0 ||
      zero > 3)
    return module.emitError() << "cleave-apply-plan: dp, tp, ep, cp, pp and "
                                 "micro must be >= 1 and zero in 0..3";
  if (sp && tp == 1)
    return module.emitError()
           << "cleave-apply-plan: sequence parallelism (sp) needs tp > 1";
  if (zero > 0 && dp == 1)
    return module.emitError() << "cleave-apply-plan: ZeRO shards over the "
                                 "data-parallel axis; it needs dp > 1";
  if (!llvm::is_contained({"gpipe", "1f1b", "interleaved", "zb-h1"}, schedule))
    return module.emitError()
           << "cleave-apply-plan: unknown schedule '" << schedule
           << "' (expected gpipe, 1f1b, interleaved or zb-h1)";
  SmallVector<StringRef> kinds;
  StringRef(recompute).split(kinds, '/');
  for (StringRef kind : kinds)
    if (!llvm::is_contained({"none", "selective", "full"}, kind))
      return module.emitError()
             << "cleave-apply-plan: unknown recompute '" << kind
             << "' (expected none, selective or full, or one of them per "
                "pipeline rank: full/none)";
  if (kinds.size() > 1 && int64_t(kinds.size()) != pp)
    return module.emitError()
           << "cleave-apply-plan: recompute=" << recompute << " gives "
           << kinds.size() << " pipeline ranks, the plan has pp = " << pp;
  if (!llvm::is_contained({"auto", "balanced", "contiguous"}, cpLayout))
    return module.emitError()
           << "cleave-apply-plan: unknown cp-layout '" << cpLayout
           << "' (expected balanced, contiguous or auto)";
  if (virtualStages < 1 || (virtualStages > 1 && schedule != "interleaved"))
    return module.emitError()
           << "cleave-apply-plan: virtual-stages=" << virtualStages
           << " needs schedule=interleaved (and must be >= 1)";
  return success();
}

void PlanWriter::createMesh() {
  SmallVector<StringRef> axes;
  SmallVector<int64_t> shape;
  SmallVector<LinkKind> links;
  auto add = [&](StringRef axis, int64_t size, LinkKind link) {
    axes.push_back(axis);
    shape.push_back(size);
    links.push_back(link);
  };
  if (microBatched())
    add(kPp, pp, LinkKind::InfiniBand);
  if (dp > 1 || (tp == 1 && cp == 1 && ep == 1))
    add(kDp, dp, LinkKind::InfiniBand);
  // Not devices: micro-batches, which cleave-pipeline runs one after another.
  if (microBatched())
    add(kMb, micro, LinkKind::Host);
  if (ep > 1)
    add(kEp, ep, LinkKind::InfiniBand);
  if (cp > 1)
    add(kCp, cp, LinkKind::InfiniBand);
  if (tp > 1)
    add(kTp, tp, LinkKind::NVLink);
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  mesh = b.create<MeshOp>(module.getLoc(), "mesh", axes, shape, links);
  if (balanced)
    mesh.setBalancedAxesAttr(b.getStrArrayAttr({kCp}));
}

void PlanWriter::writePlanAttribute() {
  Builder b(module.getContext());
  NamedAttrList entries;
  if (auto old =
          module->getAttrOfType<DictionaryAttr>(CleaveDialect::kPlanAttrName))
    entries.append(old.getValue());
  entries.set("zero", b.getI64IntegerAttr(zero));
  // One kind per pipeline rank ("full/none"): `recompute` is the heaviest,
  // `recompute_per_stage` each rank's, as the planner writes them.
  SmallVector<StringRef> kinds;
  StringRef(recompute).split(kinds, '/');
  StringRef heaviest = "none";
  for (StringRef kind : kinds)
    if (kind == "full" || (kind == "selective" && heaviest == "none"))
      heaviest = kind;
  if (heaviest != "none")
    entries.set("recompute", b.getStringAttr(heaviest));
  if (kinds.size() > 1) {
    SmallVector<Attribute> perStage;
    for (StringRef kind : kinds)
      perStage.push_back(b.getStringAttr(kind));
    entries.set("recompute_per_stage", b.getArrayAttr(perStage));
  }
  if (microBatched()) {
    entries.set("num_micro_batches", b.getI64IntegerAttr(micro));
    entries.set("schedule", b.getStringAttr(schedule));
    entries.set("virtual_stages", b.getI64IntegerAttr(virtualStages));
    // Sequences per micro-batch per replica, from the first batched input.
    for (auto f : module.getOps<func::FuncOp>())
      for (BlockArgument arg : f.getArguments()) {
        auto type = dyn_cast<RankedTensorType>(arg.getType());
        if (type && type.getRank() > 0 &&
            f.getArgAttr(arg.getArgNumber(), CleaveDialect::kInputAttrName) &&
            !entries.get("micro_batch"))
          entries.set("micro_batch",
                      b.getI64IntegerAttr(type.getDimSize(0) / batchBlocks()));
      }
  }
  module->setAttr(CleaveDialect::kPlanAttrName,
                  entries.getDictionary(module.getContext()));
}

LogicalResult PlanWriter::run() {
  if (failed(validate()))
    return failure();
  // auto: balanced where causal attention makes contiguous blocks uneven.
  bool causal = false;
  module.walk([&](AttentionOp op) { causal |= op.getCausal(); });
  balanced =
      cp > 1 && (cpLayout == "balanced" || (cpLayout == "auto" && causal));
  createMesh();
  for (auto f : module.getOps<func::FuncOp>()) {
    if (f.isExternal())
      continue;
    loadArgAttrs(f);
    if ((!batchAxes().empty() || cp > 1) && failed(splitInputs(f)))
      return failure();
    if (tp > 1 && failed(splitContractions(f)))
      return failure();
    if (ep > 1 && failed(splitExperts(f)))
      return failure();
    if (sp)
      pinSequence(f);
    if (zero > 0 && failed(shardOptimizer(f)))
      return failure();
    storeArgAttrs(f);
  }
  writePlanAttribute();
  return success();
}

struct CleaveApplyPlanPass final
    : cleave::impl::CleaveApplyPlanPassBase<CleaveApplyPlanPass> {
  using Base::Base;
  void runOnOperation() override {
    CleaveApplyPlanPassOptions o;
    o.dp = dp;
    o.tp = tp;
    o.ep = ep;
    o.cp = cp;
    o.sp = sp;
    o.zero = zero;
    o.pp = pp;
    o.micro = micro;
    o.schedule = schedule;
    o.virtualStages = virtualStages;
    o.recompute = recompute;
    o.cpLayout = cpLayout;
    if (failed(PlanWriter(getOperation(), o).run()))
      signalPassFailure();
  }
};

} // namespace
