//===- Propagation.cpp - Complete partial sharding annotations ------------===//
//
// The algorithm behind -cleave-propagate-sharding (see the pass description
// in Transforms/Passes.td for the policy).
//
//===----------------------------------------------------------------------===//

#include "cleave/Sharding/Propagation.h"
#include "cleave/Sharding/FactorAssignment.h"
#include "llvm/ADT/BitVector.h"

#include <queue>

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// What is known about one value.
struct Known {
  ShardingAttr sharding;
  bool isUser = false;
  std::optional<Location> annotatedAt;
};

} // namespace

/// Propagation within one function. `run` sweeps over all ops until nothing
/// changes (the pass); the incremental mode (IncrementalPropagation) instead
/// keeps a worklist of the ops next to a tensor that became known, so that
/// annotations added one at a time cost only the ops they reach.
class mlir::cleave::detail::Propagator {
public:
  Propagator(func::FuncOp func, MeshOp mesh) : func(func), mesh(mesh) {}
  LogicalResult run(bool recordAttributes);
  /// The sharding of `v` (replicated if propagation left it open).
  ShardingAttr shardingOf(Value v) {
    auto it = known.find(v);
    return it != known.end() ? it->second.sharding : replicated(v);
  }

  /// Incremental mode: seeds, indexes the ops and queues them all.
  void startIncremental();
  void annotate(Value v, ShardingAttr sharding);
  /// Visits queued ops, in program order, up to (excluding) `stop`; with
  /// no `stop`, all of them and then the returned values' hints.
  LogicalResult drain(Operation *stop);

private:
  void seed();
  LogicalResult sweep(bool &changed);
  LogicalResult visit(ShardingRuleOpInterface op, bool &changed);
  bool hintReturnedValues();
  bool hint(unsigned index);
  void record();
  /// The sharding an argument has or, for a result, should keep.
  ShardingAttr resultTarget(unsigned index);
  /// Fills `updatedArg` (once).
  void indexUpdatedArgs();
  ShardingAttr replicated(Value v) {
    return ShardingAttr::getReplicated(
        func.getContext(), mesh.getSymName(),
        cast<RankedTensorType>(v.getType()).getRank());
  }
  /// Records that `v` became known; queues its neighbours (incremental).
  void learned(Value v);
  void enqueue(Operation *op);

  func::FuncOp func;
  MeshOp mesh;
  llvm::DenseMap<Value, Known> known;
  SmallVector<ShardingRuleOpInterface> ops;
  llvm::DenseSet<Operation *> warned;
  /// The parameter or state argument each result named by
  /// `cleave.output` updates (built once: results x arguments otherwise).
  llvm::DenseMap<unsigned, BlockArgument> updatedArg;
  bool argsIndexed = false;

  // Incremental mode.
  bool incremental = false;
  llvm::DenseMap<Operation *, unsigned> opIndex;
  llvm::BitVector queued;
  std::priority_queue<unsigned, std::vector<unsigned>, std::greater<unsigned>>
      worklist;
  /// Returned values to hint from each argument once it is known.
  llvm::DenseMap<Value, SmallVector<unsigned, 1>> hintsOf;
  SmallVector<unsigned> pendingHints;
};

using mlir::cleave::detail::Propagator;

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
    if (auto recorded =
            op->getAttrOfType<ArrayAttr>(CleaveDialect::kShardingsAttrName))
      for (auto [result, s] : llvm::zip(op->getResults(), recorded))
        known[result] = {cast<ShardingAttr>(s), true, op->getLoc()};
  });
}

/// Whether `s` keeps every split and pending sum of `old` and adds splits
/// of dimensions `old` leaves whole or pending sums over more axes: a
/// propagated sharding that a later proposal refines (a sequence split over
/// cp that a consumer proposes for a value its producer split over dp only;
/// then the sum over that sequence, pending over dp, pending over dp and
/// cp).
static bool splitsFurther(ShardingAttr s, ShardingAttr old) {
  if (s.getRank() != old.getRank() || s.getMesh() != old.getMesh())
    return false;
  SmallVector<StringRef> partial = s.getPartialAxes(),
                         oldPartial = old.getPartialAxes();
  if (!oldPartial.empty() && partial.empty())
    return false;
  for (StringRef axis : oldPartial)
    if (!llvm::is_contained(partial, axis))
      return false;
  bool more = partial.size() > oldPartial.size();
  for (unsigned d = 0; d < s.getRank(); ++d) {
    SmallVector<StringRef> a = s.getDimAxes(d), b = old.getDimAxes(d);
    if (!b.empty() && a != b)
      return false;
    more |= b.empty() && !a.empty();
  }
  return more;
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
  FactorAxes assigned =
      assignFactors(op, rule, mesh, offers, ReductionPolicy::Free,
                    /*warn=*/warned.insert(op).second);
  FactorAxes *axes = &assigned;
  auto offer = [&](Value v, ShardingAttr s) {
    if (s.isFullyReplicated())
      return;
    // A constraint's operand may stay sharded differently (the
    // partitioner reshards between them): it refines nothing.
    if (auto it = known.find(v);
        it != known.end() &&
        (it->second.isUser || isa<ShardingConstraintOp>(op.getOperation()) ||
         !splitsFurther(s, it->second.sharding)))
      return;
    known[v] = {s, false, std::nullopt};
    changed = true;
    learned(v);
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

void Propagator::indexUpdatedArgs() {
  if (argsIndexed)
    return;
  argsIndexed = true;
  // The first argument with the name, as a parameter or a state.
  llvm::DenseMap<Attribute, BlockArgument> byName;
  for (BlockArgument arg : func.getArguments())
    for (StringRef role :
         {CleaveDialect::kParamAttrName, CleaveDialect::kStateAttrName})
      if (Attribute name = func.getArgAttr(arg.getArgNumber(), role))
        byName.try_emplace(name, arg);
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (Attribute name = func.getResultAttr(i, CleaveDialect::kOutputAttrName))
      if (BlockArgument arg = byName.lookup(name))
        updatedArg[i] = arg;
}

ShardingAttr Propagator::resultTarget(unsigned index) {
  if (auto s = func.getResultAttrOfType<ShardingAttr>(
          index, CleaveDialect::kShardingAttrName))
    return s;
  // The new value of an argument keeps the argument's sharding.
  indexUpdatedArgs();
  BlockArgument arg = updatedArg.lookup(index);
  if (!arg)
    return {};
  auto it = known.find(arg);
  return it != known.end() ? it->second.sharding : replicated(arg);
}

/// Gives returned value `index` the sharding it should keep, if it has none.
bool Propagator::hint(unsigned index) {
  Value v = func.getBody().front().getTerminator()->getOperand(index);
  ShardingAttr target = resultTarget(index);
  if (!target || known.count(v) || target.isFullyReplicated())
    return false;
  known[v] = {target, false, std::nullopt};
  learned(v);
  return true;
}

bool Propagator::hintReturnedValues() {
  bool changed = false;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    changed |= hint(i);
  return changed;
}

void Propagator::record() {
  // Argument and result attributes are set all at once: one setArgAttr per
  // argument would create a new attribute array per argument (quadratic in
  // time, and in memory since attributes are never freed).
  MLIRContext *ctx = func.getContext();
  auto setIn = [&](DictionaryAttr dict, Attribute value) {
    NamedAttrList attrs(dict);
    attrs.set(CleaveDialect::kShardingAttrName, value);
    return attrs.getDictionary(ctx);
  };
  SmallVector<DictionaryAttr> argAttrs;
  func.getAllArgAttrs(argAttrs);
  for (BlockArgument arg : func.getArguments())
    if (isa<RankedTensorType>(arg.getType()))
      argAttrs[arg.getArgNumber()] =
          setIn(argAttrs[arg.getArgNumber()], shardingOf(arg));
  func.setAllArgAttrs(argAttrs);
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
  SmallVector<DictionaryAttr> resultAttrs;
  func.getAllResultAttrs(resultAttrs);
  for (auto [i, v] : llvm::enumerate(ret->getOperands())) {
    if (!isa<RankedTensorType>(v.getType()))
      continue;
    ShardingAttr target = resultTarget(i);
    resultAttrs[i] =
        setIn(resultAttrs[i], target ? target : withoutPartial(shardingOf(v)));
  }
  func.setAllResultAttrs(resultAttrs);
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

void Propagator::enqueue(Operation *op) {
  auto it = opIndex.find(op);
  if (it == opIndex.end() || queued.test(it->second))
    return;
  queued.set(it->second);
  worklist.push(it->second);
}

void Propagator::learned(Value v) {
  if (!incremental)
    return;
  enqueue(v.getDefiningOp());
  for (Operation *user : v.getUsers())
    enqueue(user);
  auto it = hintsOf.find(v);
  if (it != hintsOf.end())
    llvm::append_range(pendingHints, it->second);
}

void Propagator::startIncremental() {
  incremental = true;
  seed();
  queued.resize(ops.size());
  for (auto [i, op] : llvm::enumerate(ops))
    opIndex[op] = i;
  // A returned value is hinted once the argument it updates is known (or
  // right away when the result itself is annotated).
  indexUpdatedArgs();
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    if (func.getResultAttr(i, CleaveDialect::kShardingAttrName))
      pendingHints.push_back(i);
    else if (BlockArgument arg = updatedArg.lookup(i)) {
      hintsOf[arg].push_back(i);
      if (known.count(arg))
        pendingHints.push_back(i);
    }
  }
  for (unsigned i = 0, e = ops.size(); i < e; ++i) {
    queued.set(i);
    worklist.push(i);
  }
}

void Propagator::annotate(Value v, ShardingAttr sharding) {
  std::optional<Location> at;
  if (auto arg = dyn_cast<BlockArgument>(v))
    at = arg.getLoc();
  else
    at = v.getDefiningOp()->getLoc();
  known[v] = {sharding, true, at};
  learned(v);
}

LogicalResult Propagator::drain(Operation *stop) {
  unsigned end = ops.size();
  if (stop) {
    auto it = opIndex.find(stop);
    assert(it != opIndex.end() && "propagateBefore: an op with a rule");
    end = it->second;
  }
  // Ops in program order, then (at the end) the returned values' hints, as
  // `run` does after its sweeps.
  while (!worklist.empty() || (!stop && !pendingHints.empty())) {
    while (!worklist.empty() && worklist.top() < end) {
      unsigned i = worklist.top();
      worklist.pop();
      queued.reset(i);
      bool changed = false;
      if (failed(visit(ops[i], changed)))
        return failure();
    }
    if (stop)
      return success();
    SmallVector<unsigned> hints = std::move(pendingHints);
    pendingHints.clear();
    for (unsigned i : hints)
      hint(i);
  }
  return success();
}

IncrementalPropagation::IncrementalPropagation(func::FuncOp func, MeshOp mesh)
    : impl(std::make_unique<Propagator>(func, mesh)) {
  impl->startIncremental();
}

IncrementalPropagation::~IncrementalPropagation() = default;

void IncrementalPropagation::annotate(Value v, ShardingAttr sharding) {
  impl->annotate(v, sharding);
}

LogicalResult IncrementalPropagation::propagate() {
  return impl->drain(nullptr);
}

LogicalResult IncrementalPropagation::propagateBefore(Operation *op) {
  return impl->drain(op);
}

ShardingAttr IncrementalPropagation::shardingOf(Value v) {
  return impl->shardingOf(v);
}

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
