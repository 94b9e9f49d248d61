//===- Propagation.cpp - Complete partial sharding annotations ------------===//
//
// The algorithm behind -cleave-propagate-sharding (see the pass description
// in Transforms/Passes.td for the policy).
//
//===----------------------------------------------------------------------===//

#include "cleave/Sharding/Propagation.h"
#include "cleave/Sharding/FactorAssignment.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// What is known about one value.
struct Known {
  ShardingAttr sharding;
  bool isUser = false;
  std::optional<Location> annotatedAt;
};

/// Propagation within one function.
class Propagator {
public:
  Propagator(func::FuncOp func, MeshOp mesh) : func(func), mesh(mesh) {}
  LogicalResult run(bool recordAttributes);
  /// The sharding of `v` (replicated if propagation left it open).
  ShardingAttr shardingOf(Value v) {
    auto it = known.find(v);
    return it != known.end() ? it->second.sharding : replicated(v);
  }

private:
  void seed();
  LogicalResult sweep(bool &changed);
  LogicalResult visit(ShardingRuleOpInterface op, bool &changed);
  bool hintReturnedValues();
  void record();
  /// The sharding an argument has or, for a result, should keep.
  ShardingAttr resultTarget(unsigned index);
  ShardingAttr replicated(Value v) {
    return ShardingAttr::getReplicated(
        func.getContext(), mesh.getSymName(),
        cast<RankedTensorType>(v.getType()).getRank());
  }

  func::FuncOp func;
  MeshOp mesh;
  llvm::DenseMap<Value, Known> known;
  SmallVector<ShardingRuleOpInterface> ops;
  llvm::DenseSet<Operation *> warned;
};

void Propagator::seed() {
  for (BlockArgument arg : func.getArguments())
    if (auto s = func.getArgAttrOfType<ShardingAttr>(
            arg.getArgNumber(), CleaveDialect::kShardingAttrName))
      known[arg] = {s, true, arg.getLoc()};
  func.walk([&](Operation *op) {
    auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
    if (!ruled)
      return;
    ops.push_back(ruled);
    if (auto constraint = dyn_cast<ShardingConstraintOp>(op)) {
      known[constraint.getResult()] = {constraint.getSharding(), true,
                                       op->getLoc()};
      return;
    }
    if (auto recorded = op->getAttrOfType<ArrayAttr>(
            CleaveDialect::kShardingsAttrName))
      for (auto [result, s] : llvm::zip(op->getResults(), recorded))
        known[result] = {cast<ShardingAttr>(s), true, op->getLoc()};
  });
}

LogicalResult Propagator::visit(ShardingRuleOpInterface op, bool &changed) {
  ShardingRule rule = op.getShardingRule();
  // User annotations first (operands, then results), then propagated
  // operands, then propagated results.
  SmallVector<KnownSharding> offers;
  // A constraint pins its result; its operand may be sharded differently
  // (that is the point: the partitioner reshards between them).
  if (auto constraint = dyn_cast<ShardingConstraintOp>(op.getOperation())) {
    const Known &pinned = known[constraint.getResult()];
    offers.push_back({pinned.sharding, true, 0, true, pinned.annotatedAt});
  } else
  for (bool user : {true, false})
    for (bool isResult : {false, true}) {
      ValueRange values = isResult ? ValueRange(op->getResults())
                                   : ValueRange(op->getOperands());
      for (auto [i, v] : llvm::enumerate(values)) {
        auto it = known.find(v);
        if (it != known.end() && it->second.isUser == user)
          offers.push_back({it->second.sharding, isResult, unsigned(i), user,
                            it->second.annotatedAt});
      }
    }
  // Disagreeing user annotations are reported once per op.
  FactorAxes assigned = assignFactors(op, rule, mesh, offers,
                                      ReductionPolicy::Free,
                                      /*warn=*/warned.insert(op).second);
  FactorAxes *axes = &assigned;
  auto offer = [&](Value v, ShardingAttr s) {
    if (known.count(v) || s.isFullyReplicated())
      return;
    known[v] = {s, false, std::nullopt};
    changed = true;
  };
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (isa<RankedTensorType>(v.getType()))
      offer(v, shardingFromFactors(mesh, rule, rule.getOperand(i), *axes,
                                   /*withPartial=*/false));
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    offer(v, shardingFromFactors(mesh, rule, rule.getResult(i), *axes,
                                 /*withPartial=*/true));
  return success();
}

LogicalResult Propagator::sweep(bool &changed) {
  for (ShardingRuleOpInterface op : ops)
    if (failed(visit(op, changed)))
      return failure();
  for (ShardingRuleOpInterface op : llvm::reverse(ops))
    if (failed(visit(op, changed)))
      return failure();
  return success();
}

ShardingAttr Propagator::resultTarget(unsigned index) {
  if (auto s = func.getResultAttrOfType<ShardingAttr>(
          index, CleaveDialect::kShardingAttrName))
    return s;
  // The new value of an argument keeps the argument's sharding.
  auto name = func.getResultAttrOfType<StringAttr>(
      index, CleaveDialect::kOutputAttrName);
  if (!name)
    return {};
  for (BlockArgument arg : func.getArguments())
    for (StringRef role :
         {CleaveDialect::kParamAttrName, CleaveDialect::kStateAttrName})
      if (func.getArgAttr(arg.getArgNumber(), role) == name) {
        auto it = known.find(arg);
        return it != known.end() ? it->second.sharding : replicated(arg);
      }
  return {};
}

bool Propagator::hintReturnedValues() {
  bool changed = false;
  Operation *ret = func.getBody().front().getTerminator();
  for (auto [i, v] : llvm::enumerate(ret->getOperands())) {
    ShardingAttr target = resultTarget(i);
    if (target && !known.count(v) && !target.isFullyReplicated()) {
      known[v] = {target, false, std::nullopt};
      changed = true;
    }
  }
  return changed;
}

void Propagator::record() {
  for (BlockArgument arg : func.getArguments())
    if (isa<RankedTensorType>(arg.getType()))
      func.setArgAttr(arg.getArgNumber(), CleaveDialect::kShardingAttrName,
                      shardingOf(arg));
  for (ShardingRuleOpInterface op : ops) {
    if (isa<ShardingConstraintOp>(op) || op->getNumResults() == 0)
      continue;
    SmallVector<Attribute> shardings;
    for (Value r : op->getResults())
      shardings.push_back(shardingOf(r));
    op->setAttr(CleaveDialect::kShardingsAttrName,
                ArrayAttr::get(func.getContext(), shardings));
  }
  Operation *ret = func.getBody().front().getTerminator();
  for (auto [i, v] : llvm::enumerate(ret->getOperands())) {
    if (!isa<RankedTensorType>(v.getType()))
      continue;
    ShardingAttr target = resultTarget(i);
    func.setResultAttr(i, CleaveDialect::kShardingAttrName,
                       target ? target : withoutPartial(shardingOf(v)));
  }
}

LogicalResult Propagator::run(bool recordAttributes) {
  seed();
  for (bool hinted = true; hinted;) {
    for (bool changed = true; changed;) {
      changed = false;
      if (failed(sweep(changed)))
        return failure();
    }
    hinted = hintReturnedValues();
  }
  if (recordAttributes)
    record();
  return success();
}

} // namespace

FailureOr<llvm::DenseMap<Value, ShardingAttr>>
mlir::cleave::propagateShardings(func::FuncOp func, MeshOp mesh) {
  Propagator propagator(func, mesh);
  if (failed(propagator.run(/*recordAttributes=*/false)))
    return failure();
  llvm::DenseMap<Value, ShardingAttr> result;
  auto add = [&](Value v) {
    if (isa<RankedTensorType>(v.getType()))
      result[v] = propagator.shardingOf(v);
  };
  for (BlockArgument arg : func.getArguments())
    add(arg);
  func.walk([&](Operation *op) {
    for (Value r : op->getResults())
      add(r);
  });
  return result;
}

LogicalResult mlir::cleave::propagateAndRecord(func::FuncOp func, MeshOp mesh) {
  return Propagator(func, mesh).run(/*recordAttributes=*/true);
}
