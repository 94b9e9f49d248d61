//===- Partition.cpp - Global program to per-device program ---------------===//
//
// Implements -cleave-partition. See Passes.td for the contract. The work per
// op is generic: factor axes from lib/Sharding, resharding steps from
// Reshard.h (the candidate of least time on the cluster, MeshCost.h), and
// the op's own buildLocalOp.
//
//===----------------------------------------------------------------------===//

#include "cleave/Sharding/FactorAssignment.h"
#include "cleave/Sharding/Reshard.h"
#include "cleave/Transforms/MeshCost.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <functional>

#define DEBUG_TYPE "cleave-partition"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEPARTITIONPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// The per-device value standing for a global value, and its sharding.
struct Local {
  Value value;
  ShardingAttr sharding;
  RankedTensorType global;
};

class Partitioner {
public:
  Partitioner(func::FuncOp func, MeshOp mesh, ReshardStepCost stepCost)
      : func(func), mesh(mesh), stepCost(stepCost) {}
  LogicalResult run();

private:
  LogicalResult partitionOp(Operation *op);
  LogicalResult partitionRuled(ShardingRuleOpInterface op);
  LogicalResult partitionReturn(func::ReturnOp ret);
  /// The local value of `global` resharded to `target`, built before `at`.
  FailureOr<Value> reshard(Value global, ShardingAttr target, Operation *at);
  FailureOr<Value> reshardLocal(Local local, ShardingAttr target,
                                Operation *at);

  func::FuncOp func;
  MeshOp mesh;
  /// Ranks the candidate resharding sequences.
  ReshardStepCost stepCost;
  llvm::DenseMap<Value, Local> locals;
  /// Every op's rule, taken while all types are still global.
  llvm::DenseMap<Operation *, ShardingRule> rules;
  /// Reshardings already built, so consumers that want the same layout of a
  /// value share the collectives.
  llvm::DenseMap<std::pair<Value, Attribute>, Value> reshardCache;
};

FailureOr<Value> Partitioner::reshardLocal(Local local, ShardingAttr target,
                                           Operation *at) {
  if (local.sharding == target)
    return local.value;
  std::string why;
  auto steps =
      planReshard(local.global, local.sharding, target, mesh, why, stepCost);
  if (failed(steps))
    return at->emitError() << "cannot reshard a value from " << local.sharding
                           << " to " << target << ": " << why;
  OpBuilder b(at);
  return emitReshard(b, at->getLoc(), local.value, local.global, local.sharding,
                     *steps, mesh);
}

FailureOr<Value> Partitioner::reshard(Value global, ShardingAttr target,
                                      Operation *at) {
  auto it = locals.find(global);
  if (it == locals.end())
    return at->emitError() << "an operand has no per-device value (it is "
                              "defined by an op the partitioner skipped)";
  auto key = std::make_pair(global, Attribute(target));
  if (auto cached = reshardCache.find(key); cached != reshardCache.end())
    return cached->second;
  FailureOr<Value> value = reshardLocal(it->second, target, at);
  if (succeeded(value))
    reshardCache[key] = *value;
  return value;
}

LogicalResult Partitioner::partitionRuled(ShardingRuleOpInterface op) {
  const ShardingRule &rule = rules[op];
  auto recorded =
      op->getAttrOfType<ArrayAttr>(CleaveDialect::kShardingsAttrName);
  if (op->getNumResults() != 0 &&
      (!recorded || recorded.size() != op->getNumResults()))
    return op->emitError() << "has no '" << CleaveDialect::kShardingsAttrName
                           << "' (run cleave-propagate-sharding first)";
  // The results' shardings are fixed; operands propose after them.
  SmallVector<KnownSharding> offers;
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    offers.push_back({cast<ShardingAttr>(recorded[i]), true, i, false, {}});
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (auto it = locals.find(v); it != locals.end())
      offers.push_back({it->second.sharding, false, unsigned(i), false, {}});
  FactorAxes assigned = assignFactors(op, rule, mesh, offers,
                                      ReductionPolicy::MatchResultPartials);
  FactorAxes *axes = &assigned;

  SmallVector<Value> operands;
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    FailureOr<Value> local = reshard(
        v, shardingFromFactors(mesh, rule, rule.getOperand(i), *axes, false),
        op);
    if (failed(local))
      return failure();
    operands.push_back(*local);
  }
  SmallVector<ShardingAttr> derived;
  SmallVector<Type> resultTypes;
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    derived.push_back(
        shardingFromFactors(mesh, rule, rule.getResult(i), *axes, true));
    resultTypes.push_back(getLocalType(cast<RankedTensorType>(r.getType()),
                                       derived.back(), mesh));
  }
  LocalOpContext context(op, rule, *axes, mesh, operands, resultTypes);
  SmallVector<Value> results;
  OpBuilder b(op);
  if (failed(op.buildLocalOp(b, context, results)))
    return failure();
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    auto global = cast<RankedTensorType>(r.getType());
    // Normally the op produces what propagation recorded; if not, reshard.
    auto target = cast<ShardingAttr>(recorded[i]);
    FailureOr<Value> local =
        reshardLocal({results[i], derived[i], global}, target, op);
    if (failed(local))
      return failure();
    locals[r] = {*local, target, global};
  }
  return success();
}

/// `sharding` without the dimensions led by a balanced axis (cleave.mesh's
/// balanced_axes), which stay whole: the runtime hands out and gathers
/// contiguous blocks, so a function's arguments and results are never in
/// the balanced layout; the partitioner permutes and splits them inside.
static ShardingAttr contiguousAtBoundary(ShardingAttr sharding, MeshOp mesh) {
  SmallVector<SmallVector<StringRef>> dims;
  bool changed = false;
  for (unsigned d = 0, e = sharding.getRank(); d < e; ++d) {
    dims.push_back(sharding.getDimAxes(d));
    if (!dims.back().empty() && mesh.isBalancedAxis(dims.back().front())) {
      dims.back().clear();
      changed = true;
    }
  }
  if (!changed)
    return sharding;
  return ShardingAttr::get(sharding.getContext(), sharding.getMesh().getValue(),
                           dims, sharding.getPartialAxes());
}

LogicalResult Partitioner::partitionReturn(func::ReturnOp ret) {
  SmallVector<Value> values;
  SmallVector<DictionaryAttr> resultAttrs;
  func.getAllResultAttrs(resultAttrs);
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto target = func.getResultAttrOfType<ShardingAttr>(
        i, CleaveDialect::kShardingAttrName);
    if (!target)
      return ret.emitError() << "result #" << i << " has no '"
                             << CleaveDialect::kShardingAttrName
                             << "' (run cleave-propagate-sharding first)";
    target = contiguousAtBoundary(target, mesh);
    FailureOr<Value> local = reshard(v, target, ret);
    if (failed(local))
      return failure();
    values.push_back(*local);
    NamedAttrList attrs(resultAttrs[i]);
    attrs.erase(CleaveDialect::kShardingAttrName);
    attrs.set(CleaveDialect::kLayoutAttrName, target);
    resultAttrs[i] = attrs.getDictionary(func.getContext());
  }
  func.setAllResultAttrs(resultAttrs);
  ret->setOperands(values);
  return success();
}

LogicalResult Partitioner::partitionOp(Operation *op) {
  if (auto ret = dyn_cast<func::ReturnOp>(op))
    return partitionReturn(ret);
  if (auto constraint = dyn_cast<ShardingConstraintOp>(op)) {
    FailureOr<Value> local =
        reshard(constraint.getInput(), constraint.getSharding(), op);
    if (failed(local))
      return failure();
    locals[constraint.getResult()] = {*local, constraint.getSharding(),
                                      constraint.getType()};
    return success();
  }
  if (auto ruled = dyn_cast<ShardingRuleOpInterface>(op))
    return partitionRuled(ruled);
  return op->emitError() << "cannot be partitioned: '" << op->getName()
                         << "' has no sharding rule";
}

LogicalResult Partitioner::run() {
  Block &body = func.getBody().front();
  // Rules depend on types; arguments are about to take local types.
  for (Operation &op : body)
    if (auto ruled = dyn_cast<ShardingRuleOpInterface>(op))
      rules[&op] = ruled.getShardingRule();
  SmallVector<Type> argTypes;
  // Set all at once (one attribute array, not one per argument).
  SmallVector<DictionaryAttr> argAttrs;
  func.getAllArgAttrs(argAttrs);
  for (BlockArgument arg : body.getArguments()) {
    auto global = dyn_cast<RankedTensorType>(arg.getType());
    auto sharding = func.getArgAttrOfType<ShardingAttr>(
        arg.getArgNumber(), CleaveDialect::kShardingAttrName);
    if (!global)
      return func.emitError()
             << "argument #" << arg.getArgNumber() << " has type "
             << arg.getType()
             << ", but partitioning handles ranked tensors only";
    if (!sharding)
      return func.emitError() << "argument #" << arg.getArgNumber()
                              << " has no '" << CleaveDialect::kShardingAttrName
                              << "' (run cleave-propagate-sharding first)";
    sharding = contiguousAtBoundary(sharding, mesh);
    arg.setType(getLocalType(global, sharding, mesh));
    locals[arg] = {arg, sharding, global};
    NamedAttrList attrs(argAttrs[arg.getArgNumber()]);
    attrs.erase(CleaveDialect::kShardingAttrName);
    attrs.set(CleaveDialect::kLayoutAttrName, sharding);
    argAttrs[arg.getArgNumber()] = attrs.getDictionary(func.getContext());
    argTypes.push_back(arg.getType());
  }
  func.setAllArgAttrs(argAttrs);
  SmallVector<Operation *> globalOps;
  for (Operation &op : body)
    globalOps.push_back(&op);
  for (Operation *op : globalOps) {
    Operation *before = op->getPrevNode();
    if (failed(partitionOp(op)))
      return failure();
    // What was built for an op of a pipeline stage belongs to that stage.
    if (Attribute stage = op->getAttr(CleaveDialect::kStageAttrName))
      for (Operation *built = before ? before->getNextNode() : &body.front();
           built != op; built = built->getNextNode())
        if (!built->hasAttr(CleaveDialect::kStageAttrName))
          built->setAttr(CleaveDialect::kStageAttrName, stage);
  }
  // The global ops are dead now; the return was updated in place.
  for (Operation *op : llvm::reverse(globalOps))
    if (!isa<func::ReturnOp>(op)) {
      op->dropAllUses();
      op->erase();
    }
  func.setFunctionType(FunctionType::get(
      func.getContext(), argTypes, body.getTerminator()->getOperandTypes()));
  return success();
}

struct CleavePartitionPass final
    : mlir::cleave::impl::CleavePartitionPassBase<CleavePartitionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<MeshOp> mesh = getModuleMesh(module);
    if (failed(mesh))
      return signalPassFailure();
    std::function<double(const ReshardStep &)> stepCost = reshardStepBytes;
    if (reshardCost == "time") {
      auto cl = clusterForModule(module, cluster, clusterFile, nodes);
      if (!cl) {
        mesh->emitError() << "cleave-partition: " << cl.error();
        return signalPassFailure();
      }
      stepCost = [mesh = *mesh, cl = *cl](const ReshardStep &step) {
        return reshardStepTime(step, mesh, cl);
      };
    } else if (reshardCost != "bytes") {
      mesh->emitError() << "cleave-partition: reshard-cost must be 'time' or "
                           "'bytes', not '"
                        << reshardCost << "'";
      return signalPassFailure();
    }
    for (auto func :
         llvm::make_early_inc_range(module.getOps<func::FuncOp>())) {
      if (func.isExternal())
        continue;
      if (!func.getBody().hasOneBlock()) {
        func.emitError() << "partitioning needs a function with one block";
        return signalPassFailure();
      }
      if (failed(Partitioner(func, *mesh, stepCost).run()))
        return signalPassFailure();
    }
    // Local blocks of broadcasts are broadcast at the local shape
    // (ShardOp's canonicalization), so no device-dependent slice of a
    // replicated value is left (cleave-pipeline cannot slice along the
    // micro-batch axis) and no device builds the global-size tensor; the
    // block of an all-reduce used for nothing else is a reduce-scatter.
    RewritePatternSet patterns(&getContext());
    ShardOp::getCanonicalizationPatterns(patterns, &getContext());
    SmallVector<Operation *> shards;
    module.walk([&](ShardOp op) { shards.push_back(op); });
    GreedyRewriteConfig config;
    config.strictMode = GreedyRewriteStrictness::ExistingAndNewOps;
    (void)applyOpPatternsAndFold(shards, std::move(patterns), config);
  }
};

} // namespace
