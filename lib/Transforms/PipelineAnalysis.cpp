//===- PipelineAnalysis.cpp - Regions and stages of a training step -------===//
//
// Classifies every op of a partitioned training step (Pipeline.h): data that
// differs per micro-batch comes from arguments split over the `mb` axis;
// a sum over `mb` (an all-reduce naming it) is where the micro-batches meet,
// so what depends on one runs once per step; what depends on neither runs
// once per step before the micro-batches. Stages come from `cleave.stage`
// (the forward ops, their gradients and updates: cleave-autodiff and
// cleave-partition carry them); untagged ops run where their first user
// runs.
//
//===----------------------------------------------------------------------===//

#include "Pipeline.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <functional>

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::pipeline;

cost::PassKind pipeline::passKindOf(Phase r) {
  switch (r) {
  case Phase::Forward:
    return cost::PassKind::Forward;
  case Phase::Weight:
    return cost::PassKind::WeightGrad;
  default:
    return cost::PassKind::Backward;
  }
}

Phase pipeline::phaseOf(cost::PassKind kind) {
  switch (kind) {
  case cost::PassKind::Forward:
    return Phase::Forward;
  case cost::PassKind::Backward:
    return Phase::Backward;
  case cost::PassKind::WeightGrad:
    return Phase::Weight;
  }
  return Phase::Backward;
}

Phase Analysis::phaseOfValue(Value v) const {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return argPerMicroBatch[arg.getArgNumber()] ? Phase::Forward
                                                : Phase::Invariant;
  return region.lookup(v.getDefiningOp());
}

bool Analysis::isPerMicroBatchValue(Value v) const {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return argPerMicroBatch[arg.getArgNumber()];
  return isPerMicroBatch(region.lookup(v.getDefiningOp()));
}

int64_t Analysis::stageOfValue(Value v) const {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return argStage[arg.getArgNumber()];
  auto it = stage.find(v.getDefiningOp());
  return it == stage.end() ? -1 : it->second;
}

namespace {

bool namesAxis(Operation *op, StringRef axis) {
  auto axes = op->getAttrOfType<ArrayAttr>("axes");
  return axes && llvm::any_of(axes, [&](Attribute a) {
           return cast<StringAttr>(a).getValue() == axis;
         });
}

/// Ops whose result is a linear function of their operand: summing the
/// operand over micro-batches first gives the same result.
bool isLinearCollective(Operation *op) {
  if (auto ar = dyn_cast<AllReduceOp>(op))
    return ar.getReduction() == ReductionKind::Sum;
  if (auto rs = dyn_cast<ReduceScatterOp>(op))
    return rs.getReduction() == ReductionKind::Sum;
  return isa<AllGatherOp, AllToAllOp, ShardOp>(op);
}

class Analyzer {
public:
  Analyzer(Analysis &a) : a(a), func(a.func), mb(a.plan.mbAxis) {}
  LogicalResult run();

private:
  LogicalResult classifyArguments();
  LogicalResult classifyOps();
  void hoistLinearCollectives();
  /// Whether the invariant `op` is rebuilt in each pass that reads it
  /// (Analysis::rebuiltInPasses).
  bool isRebuiltInPasses(Operation *op) const;
  void keepInvariantsNearUse();
  LogicalResult splitForward();
  LogicalResult assignStages();
  void assignHomes();
  LogicalResult checkDirections();
  void splitWeightGradients();
  bool isMbReduction(Operation *op) const {
    return a.plan.hasMbAxis && isa<AllReduceOp>(op) && namesAxis(op, mb);
  }
  std::optional<int64_t> tagOf(Operation *op) const {
    if (auto s = op->getAttrOfType<IntegerAttr>(CleaveDialect::kStageAttrName))
      return s.getInt();
    return std::nullopt;
  }

  Analysis &a;
  func::FuncOp func;
  StringRef mb;
  SmallVector<Operation *> ops;
};

LogicalResult Analyzer::classifyArguments() {
  for (BlockArgument arg : func.getArguments()) {
    auto layout = func.getArgAttrOfType<ShardingAttr>(
        arg.getArgNumber(), CleaveDialect::kLayoutAttrName);
    bool perMb = false;
    SmallVector<StringRef> minor;
    if (layout && a.plan.hasMbAxis)
      for (unsigned d = 0, e = layout.getRank(); d < e; ++d) {
        SmallVector<StringRef> axes = layout.getDimAxes(d);
        auto at = llvm::find(axes, mb);
        if (at == axes.end())
          continue;
        if (d != 0)
          return func.emitError()
                 << "cleave-pipeline: argument #" << arg.getArgNumber()
                 << " splits a dimension over " << layout
                 << "; micro-batches must split the first dimension";
        perMb = true;
        minor.assign(std::next(at), axes.end());
      }
    if (perMb &&
        !func.getArgAttr(arg.getArgNumber(), CleaveDialect::kInputAttrName))
      return func.emitError()
             << "cleave-pipeline: argument #" << arg.getArgNumber()
             << " is split over micro-batches but is not a "
                "data input (cleave.input)";
    a.argPerMicroBatch.push_back(perMb);
    a.argMinorAxes.push_back(minor);
    a.argStage.push_back(-1);
  }
  return success();
}

/// The ops that `reduce`'s operand is computed by, in program order, if
/// they read nothing but per-micro-batch data arguments and constants and
/// have no effects but linear collectives over other axes than the
/// micro-batches' (the labels gathered over cp), so they can run on every
/// micro-batch's data before the micro-batches, every member of those
/// collectives' groups doing the same; nullopt otherwise.
static std::optional<SmallVector<Operation *>>
dataOnlySlice(const Analysis &a, Operation *reduce) {
  SetVector<Operation *> slice;
  SmallVector<Value> work = {reduce->getOperand(0)};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (!a.argPerMicroBatch[arg.getArgNumber()])
        return std::nullopt;
      continue;
    }
    Operation *def = v.getDefiningOp();
    bool collective = isLinearCollective(def) &&
                      !(a.plan.hasMbAxis && namesAxis(def, a.plan.mbAxis));
    if ((!collective && !isMemoryEffectFree(def)) ||
        def->getNumRegions() != 0 || isa<AxisIndexOp>(def))
      return std::nullopt;
    if (slice.insert(def))
      llvm::append_range(work, def->getOperands());
  }
  SmallVector<Operation *> ordered(slice.begin(), slice.end());
  llvm::sort(ordered,
             [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
  return ordered;
}

/// Forward over the ops: per micro-batch (reads per-micro-batch data),
/// per step (reads a sum over micro-batches), invariant or constant.
LogicalResult Analyzer::classifyOps() {
  for (Operation &op : func.getBody().front().without_terminator()) {
    ops.push_back(&op);
    bool anyStep = false, anyMb = false, allConst = true;
    for (Value v : op.getOperands()) {
      Phase r = a.phaseOfValue(v);
      anyStep |= r == Phase::Step;
      anyMb |= isPerMicroBatch(r);
      allConst &= !isa<BlockArgument>(v) && r == Phase::Const;
    }
    bool namesMb = a.plan.hasMbAxis && namesAxis(&op, mb);
    if (isMbReduction(&op)) {
      if (cast<AllReduceOp>(op).getReduction() != ReductionKind::Sum)
        return op.emitError() << "cleave-pipeline: a "
                              << "reduction over "
                                 "micro-batches must be a sum";
      // A sum of the data alone (a label count) is known before any
      // micro-batch runs: the micro-batches may read it.
      if (std::optional<SmallVector<Operation *>> slice =
              dataOnlySlice(a, &op)) {
        a.region[&op] = Phase::Invariant;
        a.dataReductions[&op] = std::move(*slice);
        continue;
      }
      a.region[&op] = Phase::Step;
      continue;
    }
    if (namesMb && !isa<AxisIndexOp>(op))
      return op.emitError()
             << "cleave-pipeline: this op communicates across micro-batches "
                "(its axes name '"
             << mb << "'); only sums over micro-batches can be pipelined";
    if (isa<AxisIndexOp>(op) && namesMb) {
      // The position of the micro-batch (dropout counters): each pass call
      // gets it as an operand (PipelineBuild.cpp).
      a.region[&op] = Phase::Forward;
      a.microBatchIndices.insert(&op);
      continue;
    }
    if (isa<SendOp, RecvOp>(op))
      return op.emitError() << "cleave-pipeline: the program already has "
                               "point-to-point communication";
    if (anyStep && anyMb && llvm::any_of(op.getOperands(), [&](Value v) {
          auto arg = dyn_cast<BlockArgument>(v);
          return arg && a.argPerMicroBatch[arg.getArgNumber()];
        }))
      return op.emitError()
             << "cleave-pipeline: this op reads a micro-batch's data and a "
                "value summed over all micro-batches that their forward "
                "passes compute (e.g. a normalization by a statistic of the "
                "whole batch's activations), so no micro-batch can run before "
                "all have; not supported (sums of the data alone, such as a "
                "label count, are)";
    if (anyStep)
      a.region[&op] = Phase::Step;
    else if (anyMb)
      a.region[&op] = Phase::Forward; // split into F and B later
    else if (allConst && isMemoryEffectFree(&op) && op.getNumRegions() == 0)
      a.region[&op] = Phase::Const;
    else {
      a.region[&op] = Phase::Invariant;
      if (isRebuiltInPasses(&op))
        a.rebuiltInPasses.insert(&op);
    }
  }
  return success();
}

/// Bytes of a statically shaped tensor, or nullopt.
static std::optional<int64_t> staticBytes(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape() || !t.getElementType().isIntOrFloat())
    return std::nullopt;
  return t.getNumElements() *
         int64_t(llvm::divideCeil(t.getElementTypeBitWidth(), 8));
}

bool Analyzer::isRebuiltInPasses(Operation *op) const {
  if (op->getNumResults() != 1 || op->getNumRegions() != 0 ||
      !isMemoryEffectFree(op) || isa<AxisIndexOp>(op) ||
      a.dataReductions.count(op))
    return false;
  std::optional<int64_t> out = staticBytes(op->getResult(0).getType());
  int64_t in = 0;
  for (Value v : op->getOperands()) {
    std::optional<int64_t> bytes = staticBytes(v.getType());
    if (!bytes)
      return false;
    in += *bytes;
    // Its operands must be at hand in a pass: arguments (parameters, sent
    // to the pass's rank like any parameter it reads), constants, other
    // rebuilt ops, or invariants the prologue computes and the pass then
    // reads in its place (a ZeRO-3 all-gather of a bias, which the
    // broadcast would otherwise expand once and keep for the whole step).
    Operation *def = v.getDefiningOp();
    if (def && a.region.lookup(def) != Phase::Const &&
        a.region.lookup(def) != Phase::Invariant)
      return false;
  }
  return out && *out > in;
}

/// A linear collective whose only use is a sum over micro-batches runs once,
/// after the sum: reduce-scatter (ZeRO-2) and friends move to the step.
void Analyzer::hoistLinearCollectives() {
  for (Operation *op : ops) {
    if (!isMbReduction(op))
      continue;
    Operation *def = op->getOperand(0).getDefiningOp();
    while (def && isLinearCollective(def) && def->hasOneUse() &&
           isPerMicroBatch(a.region[def])) {
      a.region[def] = Phase::Step;
      def = def->getOperand(0).getDefiningOp();
    }
  }
  // Per-micro-batch values read by per-step ops are their accumulated sums.
  for (Operation *op : ops) {
    if (a.region[op] != Phase::Step)
      continue;
    for (Value v : op->getOperands())
      if (a.isPerMicroBatchValue(v))
        a.accumulated.insert(v);
  }
}

/// Invariant ops that no per-micro-batch op needs run with the step.
void Analyzer::keepInvariantsNearUse() {
  for (Operation *op : llvm::reverse(ops)) {
    if (a.region[op] != Phase::Invariant)
      continue;
    bool neededPerMb = llvm::any_of(op->getUsers(), [&](Operation *user) {
      Phase r = a.region.lookup(user);
      return user->getBlock() == op->getBlock() &&
             (isPerMicroBatch(r) || r == Phase::Invariant) &&
             !isa<func::ReturnOp>(user);
    });
    if (!neededPerMb)
      a.region[op] = Phase::Step;
  }
}

/// Forward = what the loss of a micro-batch depends on; the rest of the
/// per-micro-batch ops are backward.
LogicalResult Analyzer::splitForward() {
  Operation *ret = func.getBody().front().getTerminator();
  std::optional<unsigned> loss;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (auto name = func.getResultAttrOfType<StringAttr>(
            i, CleaveDialect::kOutputAttrName);
        name && name.getValue() == "loss")
      loss = i;
  if (!loss)
    return func.emitError() << "cleave-pipeline: @" << func.getName()
                            << " has no result named 'loss' (cleave.output)";
  a.lossResult = *loss;
  for (Value v : ret->getOperands())
    if (a.isPerMicroBatchValue(v))
      return ret->emitError()
             << "cleave-pipeline: a result of @" << func.getName()
             << " is computed per micro-batch and not summed "
                "over micro-batches";
  DenseSet<Operation *> onLossPath;
  SmallVector<Value> work = {ret->getOperand(*loss)};
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !onLossPath.insert(def).second)
      continue;
    llvm::append_range(work, def->getOperands());
  }
  for (Operation *op : ops)
    if (a.region[op] == Phase::Forward && !onLossPath.contains(op))
      a.region[op] = Phase::Backward;
  return success();
}

} // namespace

namespace {

LogicalResult Analyzer::assignStages() {
  int64_t n = a.plan.numStages(), highest = -1;
  DenseMap<Operation *, unsigned> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = i;
  // Report a stage beyond the plan on an op the user wrote if there is one
  // (ops built by autodiff or canonicalization may have no location).
  Operation *beyond = nullptr;
  for (Operation *op : ops)
    if (std::optional<int64_t> tag = tagOf(op); tag && *tag >= n)
      if (!beyond ||
          (isa<UnknownLoc>(beyond->getLoc()) && !isa<UnknownLoc>(op->getLoc())))
        beyond = op;
  if (beyond)
    return beyond->emitError()
           << "cleave-pipeline: stage " << *tagOf(beyond)
           << " is beyond the plan's " << n << " stages (pp = " << a.plan.pp
           << ", virtual stages = " << a.plan.virtualStages << ")";
  for (Operation *op : ops)
    if (std::optional<int64_t> tag = tagOf(op)) {
      highest = std::max(highest, *tag);
      if (a.region[op] != Phase::Const)
        a.stage[op] = *tag;
    }
  if (highest < 0 && n > 1)
    return func.emitError()
           << "cleave-pipeline: the plan has " << n
           << " stages but no op has a cleave.stage annotation (annotate the "
              "forward function or run cleave-pipeline-stages before "
              "cleave-autodiff)";
  if (highest >= 0 && highest + 1 != n)
    return func.emitError() << "cleave-pipeline: the plan has " << n
                            << " stages but the ops are annotated with "
                               "stages 0 to "
                            << highest;
  // Untagged ops run where their first user runs ...
  for (Operation *op : llvm::reverse(ops)) {
    if (a.region[op] == Phase::Const || a.stage.count(op))
      continue;
    Operation *first = nullptr;
    for (Operation *user : op->getUsers())
      if (a.stage.count(user) && (!first || position[user] < position[first]))
        first = user;
    if (first)
      a.stage[op] = a.stage[first];
  }
  // ... or, if only the results use them, where their operands are.
  for (Operation *op : ops) {
    if (a.region[op] == Phase::Const || a.stage.count(op))
      continue;
    int64_t s = 0;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && a.stage.count(def))
        s = std::max(s, a.stage[def]);
    a.stage[op] = s;
  }
  assignHomes();
  return success();
}

/// Parameters and state live where they are updated, else where first used;
/// results are produced where their value is.
void Analyzer::assignHomes() {
  Operation *ret = func.getBody().front().getTerminator();
  // The results by output name (a scan of all results per argument would be
  // quadratic).
  DenseMap<Attribute, SmallVector<unsigned, 1>> resultsNamed;
  for (unsigned r = 0, e = func.getNumResults(); r < e; ++r)
    if (Attribute name = func.getResultAttr(r, CleaveDialect::kOutputAttrName))
      resultsNamed[name].push_back(r);
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (func.getArgAttr(i, CleaveDialect::kInputAttrName))
      continue;
    StringAttr name =
        func.getArgAttrOfType<StringAttr>(i, CleaveDialect::kParamAttrName);
    if (!name)
      name =
          func.getArgAttrOfType<StringAttr>(i, CleaveDialect::kStateAttrName);
    std::optional<int64_t> home;
    if (name)
      for (unsigned r : resultsNamed.lookup(name))
        if (Operation *def = ret->getOperand(r).getDefiningOp();
            def && a.stage.count(def))
          home = a.stage[def];
    if (!home)
      for (Operation *user : arg.getUsers())
        if (a.stage.count(user))
          home = std::min(home.value_or(a.stage[user]), a.stage[user]);
    a.argStage[i] = home.value_or(0);
  }
  for (Value v : ret->getOperands())
    a.resultStage.push_back(std::max<int64_t>(a.stageOfValue(v), 0));
}

/// Forward values flow to the same or later stages, gradients to the same
/// or earlier ones: every schedule runs a micro-batch's forward passes in
/// stage order and its backward passes in reverse.
LogicalResult Analyzer::checkDirections() {
  for (Operation *op : ops) {
    Phase r = a.region[op];
    if (r != Phase::Forward && r != Phase::Backward)
      continue;
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def || a.region[def] != r)
        continue;
      int64_t from = a.stage[def], to = a.stage[op];
      if ((r == Phase::Forward && from > to) ||
          (r == Phase::Backward && from < to))
        return (op->emitError()
                << "cleave-pipeline: this "
                << (r == Phase::Forward ? "forward" : "backward")
                << " op of stage " << to << " uses a value of stage " << from
                << ", which runs after it in every schedule")
                   .attachNote(def->getLoc())
               << "the value is computed here";
    }
  }
  return success();
}

/// Zero-bubble schedules: B keeps what other stages need (the gradients of
/// the stage's inputs and everything they depend on); W gets the rest,
/// which only feeds the accumulated parameter gradients.
void Analyzer::splitWeightGradients() {
  DenseSet<Operation *> needed;
  SmallVector<Operation *> work;
  for (Operation *op : ops) {
    if (a.region[op] != Phase::Backward)
      continue;
    bool leaves = llvm::any_of(op->getUsers(), [&](Operation *user) {
      return isPerMicroBatch(a.region.lookup(user)) &&
             a.stage.lookup(user) != a.stage[op];
    });
    if (leaves && needed.insert(op).second)
      work.push_back(op);
  }
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp();
          def && a.region[def] == Phase::Backward &&
          a.stage[def] == a.stage[op] && needed.insert(def).second)
        work.push_back(def);
  }
  for (Operation *op : ops)
    if (a.region[op] == Phase::Backward && !needed.contains(op))
      a.region[op] = Phase::Weight;
}

LogicalResult Analyzer::run() {
  if (!func.getBody().hasOneBlock())
    return func.emitError()
           << "cleave-pipeline: @" << func.getName() << " must have one block";
  if (failed(classifyArguments()) || failed(classifyOps()))
    return failure();
  hoistLinearCollectives();
  keepInvariantsNearUse();
  if (failed(splitForward()) || failed(assignStages()) ||
      failed(checkDirections()))
    return failure();
  if (a.plan.splitsWeightGrad())
    splitWeightGradients();
  return success();
}

} // namespace

FailureOr<Analysis> pipeline::analyze(func::FuncOp func, MeshOp mesh,
                                      const Plan &plan) {
  Analysis a;
  a.func = func;
  a.mesh = mesh;
  a.plan = plan;
  if (failed(Analyzer(a).run()))
    return failure();
  return a;
}

PassGroups pipeline::collectPassGroups(const Analysis &a) {
  PassGroups groups;
  for (int64_t s = 0; s < a.plan.numStages(); ++s)
    for (Phase r : {Phase::Forward, Phase::Backward, Phase::Weight})
      if (r != Phase::Weight || a.plan.splitsWeightGrad())
        groups[{r, s}] = PassGroup{r, s, {}, {}, {}};
  func::FuncOp func = a.func;
  for (Operation &op : func.getBody().front().without_terminator()) {
    Phase r = a.region.lookup(&op);
    if (!isPerMicroBatch(r) || a.microBatchIndices.contains(&op))
      continue;
    PassGroup &g = groups[{r, a.stage.lookup(&op)}];
    g.ops.push_back(&op);
  }
  for (auto &[key, g] : groups) {
    DenseSet<Operation *> inside(g.ops.begin(), g.ops.end());
    for (Operation *op : g.ops) {
      // A rebuilt invariant's operands (and theirs) are the pass's inputs
      // in its place, in operand order.
      std::function<void(Value)> read = [&](Value v) {
        Operation *def = v.getDefiningOp();
        if (def && a.rebuiltInPasses.contains(def)) {
          llvm::for_each(def->getOperands(), read);
          return;
        }
        bool isConst = def && a.region.lookup(def) == Phase::Const;
        if (!isConst && !(def && inside.contains(def)))
          g.inputs.insert(v);
      };
      llvm::for_each(op->getOperands(), read);
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(), [&](Operation *user) {
              return !inside.contains(user);
            }))
          g.outputs.insert(r);
    }
  }
  return groups;
}
