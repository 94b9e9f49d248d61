//===- GraphWorkload.cpp - Kernels of a step from the module's ops --------===//

#include "cleave/Planner/GraphWorkload.h"

#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Dialect/LocalOp.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <algorithm>
#include <map>
#include <tuple>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::planner {

using cost::CollectiveKind;
using cost::Phase;
using cost::WorkItem;

namespace {

/// How a value is laid out over the tensor-parallel axis.
struct TpState {
  enum Kind : uint8_t { Whole, Split, Partial, Weight } kind = Whole;
};

/// The tensor-parallel layout of every forward op.
struct TpLayout {
  /// Per op: the factor the tp axis splits (-1: none).
  std::vector<int> factor;
  /// Per op: operands that are partial sums to reduce first (region exits).
  std::vector<llvm::SmallVector<unsigned, 2>> exits;
  /// Per op: results that are partial sums read by another region (a
  /// layer reading the embedding): reduced right after the op, once.
  std::vector<llvm::SmallVector<unsigned, 2>> resultExits;
  /// Per op: whole activations that enter a split op (region entries).
  std::vector<llvm::SmallVector<unsigned, 2>> entries;
  /// Per op: split operands that the op cannot take split (a slice across
  /// the split dimension, as of a fused QKV projection's output): gathered
  /// over tp before it.
  std::vector<llvm::SmallVector<unsigned, 2>> gathers;
  /// Per op: only weights in, only weights out (parameter preparation).
  std::vector<bool> weightOnly;
};

/// The major factor of dimension `d` of a tensor, or -1.
int majorFactor(const TensorFactors &tf, size_t d) {
  return d < tf.size() && !tf[d].empty() ? int(tf[d][0]) : -1;
}

bool hasMajor(const TensorFactors &tf, int f) {
  for (size_t d = 0; d < tf.size(); ++d)
    if (majorFactor(tf, d) == f)
      return true;
  return false;
}

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

/// The weight factor of an op whose activations are whole: a factor only
/// weights carry, that tp divides and that may be split; one the op reduces
/// over first (an embedding's vocabulary, as Megatron's vocabulary-parallel
/// embedding splits it, also where the vocabulary is narrower than the
/// hidden size), else the largest.
int weightFactor(const ForwardView &v, size_t i,
                 const llvm::DenseMap<Value, TpState> &state, int tp) {
  Operation *op = v.ops[i];
  const ShardingRule &rule = v.rules[i];
  llvm::DenseSet<int> inActivations;
  for (auto [k, x] : llvm::enumerate(op->getOperands()))
    if (state.lookup(x).kind != TpState::Weight)
      for (const auto &list : rule.getOperand(unsigned(k)))
        for (int64_t f : list)
          inActivations.insert(int(f));
  int best = -1;
  for (auto [k, x] : llvm::enumerate(op->getOperands())) {
    if (state.lookup(x).kind != TpState::Weight)
      continue;
    const TensorFactors &tf = rule.getOperand(unsigned(k));
    for (size_t d = 0; d < tf.size(); ++d) {
      int f = majorFactor(tf, d);
      // A size tp does not divide is padded (Megatron pads the
      // vocabulary), so every rank holds ceil(size / tp).
      if (f < 0 || inActivations.contains(f) ||
          rule.getFactorKind(f) == FactorKind::NeedReplication ||
          rule.getFactorSize(f) < tp)
        continue;
      auto rank = [&](int g) {
        return std::make_pair(rule.getFactorKind(g) == FactorKind::Reduction,
                              rule.getFactorSize(g));
      };
      if (best < 0 || rank(f) > rank(best))
        best = f;
    }
  }
  return best;
}

/// How an op's factors are split on one device (see localType).
struct LocalSplit {
  int batchFactor = -1, splitFactor = -1, seqFactor = -1;
  int64_t batch = 0, microBatch = 1;
  int tp = 1, cp = 1;
};

Type localType(Type type, const TensorFactors &tf, const LocalSplit &s);

/// Whether `op` with factor `f` split `tp` ways is a valid op: a clone on
/// the local types verifies.
bool localFormIsValid(Operation *op, const ShardingRule &rule, int f, int tp) {
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(op->getLoc());
  OpBuilder b(op->getContext());
  b.setInsertionPointToEnd(scratch->getBody());
  auto fn =
      b.create<func::FuncOp>(op->getLoc(), "probe", b.getFunctionType({}, {}));
  Block *block = fn.addEntryBlock();
  b.setInsertionPointToEnd(block);
  IRMapping map;
  LocalSplit probe;
  probe.splitFactor = f;
  probe.tp = tp;
  for (auto [k, x] : llvm::enumerate(op->getOperands()))
    map.map(
        x, block->addArgument(localType(x.getType(), rule.getOperand(k), probe),
                              x.getLoc()));
  Operation *c = b.clone(*op, map);
  for (auto [r, y] : llvm::enumerate(c->getResults()))
    y.setType(localType(y.getType(), rule.getResult(r), probe));
  ScopedDiagnosticHandler quiet(op->getContext(),
                                [](Diagnostic &) { return success(); });
  return succeeded(mlir::verify(c));
}

/// Lays tensor parallelism out over the whole forward view (see the file
/// comment of GraphWorkload.h).
TpLayout layoutTp(const ForwardView &v, int tp) {
  size_t n = v.ops.size();
  TpLayout l;
  l.factor.assign(n, -1);
  l.exits.resize(n);
  l.entries.resize(n);
  l.gathers.resize(n);
  l.weightOnly.assign(n, false);
  llvm::DenseMap<Value, TpState> state;
  for (BlockArgument a : mlir::func::FuncOp(v.func).getArguments())
    if (v.isParam(a))
      state[a].kind = TpState::Weight;
  llvm::DenseSet<Value> entered;
  for (size_t i = 0; i < n; ++i) {
    Operation *op = v.ops[i];
    const ShardingRule &rule = v.rules[i];
    bool activation = false;
    int f = -1;
    for (auto [k, x] : llvm::enumerate(op->getOperands())) {
      TpState &s = state[x];
      if (s.kind == TpState::Partial) {
        l.exits[i].push_back(unsigned(k));
        s.kind = TpState::Whole;
      }
      activation |= s.kind != TpState::Weight;
    }
    if (!activation) {
      l.weightOnly[i] = true;
      for (Value r : op->getResults())
        state[r].kind = TpState::Weight;
      continue;
    }
    if (tp > 1) {
      // A split operand carries its factor into this op, unless the op
      // needs that dimension whole.
      auto carried = [&](unsigned k, Value x) {
        auto it = v.position.find(x.getDefiningOp());
        if (state.lookup(x).kind != TpState::Split || it == v.position.end())
          return -1;
        // Which result dimension of the producer is split.
        size_t p = size_t(it->second);
        const TensorFactors &out =
            v.rules[p].getResult(cast<OpResult>(x).getResultNumber());
        for (size_t d = 0; d < out.size(); ++d)
          if (majorFactor(out, d) == l.factor[p])
            return majorFactor(rule.getOperand(k), d);
        return -1;
      };
      // A factor the rule needs whole is still carried where the op's
      // local form is valid (a cross entropy over a block of the classes is
      // priced as Megatron's vocabulary-parallel one), not where it reads
      // outside its block (a slice of a fused QKV projection).
      for (auto [k, x] : llvm::enumerate(op->getOperands())) {
        int g = carried(unsigned(k), x);
        if (g >= 0 && (rule.getFactorKind(g) != FactorKind::NeedReplication ||
                       localFormIsValid(op, rule, g, tp))) {
          f = g;
          break;
        }
      }
      // The other split operands are gathered first.
      for (auto [k, x] : llvm::enumerate(op->getOperands()))
        if (state.lookup(x).kind == TpState::Split &&
            (carried(unsigned(k), x) != f || f < 0)) {
          l.gathers[i].push_back(unsigned(k));
          state[x].kind = TpState::Whole;
        }
      if (f < 0) {
        f = weightFactor(v, i, state, tp);
        if (f >= 0 && rule.getFactorKind(f) != FactorKind::Reduction)
          for (auto [k, x] : llvm::enumerate(op->getOperands()))
            if (state.lookup(x).kind == TpState::Whole && isFloatTensor(x) &&
                entered.insert(x).second)
              l.entries[i].push_back(unsigned(k));
      }
    }
    l.factor[i] = f;
    for (auto [r, y] : llvm::enumerate(op->getResults())) {
      TpState &s = state[y];
      if (f < 0)
        s.kind = TpState::Whole;
      else if (rule.getFactorKind(f) == FactorKind::Reduction)
        s.kind = TpState::Partial;
      else
        s.kind = hasMajor(rule.getResult(unsigned(r)), f) ? TpState::Split
                                                          : TpState::Whole;
    }
  }
  // A partial sum another region reads is reduced where it is made, so
  // that the repeated block does not pay it once per layer.
  l.resultExits.resize(n);
  int end = v.start + v.length * v.count;
  auto regionOf = [&](int i) {
    return i < v.start ? -1 : i < end ? v.instanceOf(i) : v.count;
  };
  for (size_t i = 0; i < n; ++i) {
    Operation *op = v.ops[i];
    llvm::SmallVector<unsigned, 2> kept;
    for (unsigned k : l.exits[i]) {
      Value x = op->getOperand(k);
      auto it = v.position.find(x.getDefiningOp());
      if (it == v.position.end() || regionOf(it->second) == regionOf(int(i))) {
        kept.push_back(k);
        continue;
      }
      unsigned r = cast<OpResult>(x).getResultNumber();
      auto &list = l.resultExits[size_t(it->second)];
      if (!llvm::is_contained(list, r))
        list.push_back(r);
    }
    l.exits[i] = kept;
  }
  // Weights take the split of the op that uses them: walk the weight-only
  // ops backwards (a cast or broadcast of a weight splits like its user).
  for (size_t i = n; i-- > 0;) {
    if (!l.weightOnly[i])
      continue;
    Operation *op = v.ops[i];
    for (OpOperand &use : op->getResult(0).getUses()) {
      auto it = v.position.find(use.getOwner());
      if (it == v.position.end() || l.factor[size_t(it->second)] < 0)
        continue;
      size_t u = size_t(it->second);
      const TensorFactors &in = v.rules[u].getOperand(use.getOperandNumber());
      const TensorFactors &out = v.rules[i].getResult(0);
      for (size_t d = 0; d < in.size(); ++d)
        if (majorFactor(in, d) == l.factor[u] && d < out.size())
          l.factor[i] = majorFactor(out, d);
      break;
    }
  }
  return l;
}

/// The local type of a tensor of op `i` with factors `tf`: the batch factor
/// holds `microBatch` of the `batch` sequences (also where batch and
/// sequence are one flattened dimension), the split factor 1/tp of its size
/// and the sequence factor 1/cp (context parallelism; also inside a
/// flattened dimension).
Type localType(Type type, const TensorFactors &tf, const LocalSplit &s) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t)
    return type;
  SmallVector<int64_t> shape(t.getShape());
  for (size_t d = 0; d < shape.size() && d < tf.size(); ++d) {
    for (int64_t f : tf[d]) {
      if (f == s.batchFactor && s.batch > 0 && shape[d] % s.batch == 0)
        shape[d] = shape[d] / s.batch * s.microBatch;
      if (f == s.splitFactor && tf[d][0] == f)
        shape[d] = (shape[d] + s.tp - 1) / s.tp;
      if (f == s.seqFactor && s.cp > 1 && shape[d] % s.cp == 0)
        shape[d] /= s.cp;
    }
  }
  return t.clone(shape);
}

/// Whether dimension `d` of a tensor with factors `tf` holds factor `f`.
bool holds(const TensorFactors &tf, size_t d, int f) {
  return f >= 0 && d < tf.size() && llvm::is_contained(tf[d], int64_t(f));
}

/// The dimension of `x` that context parallelism splits where it is made
/// (-1: whole): the sequence of a token input, the sequence factor's
/// dimension of an op's result. Parameters are never split.
int cpSplitDim(const ForwardView &v, Value x) {
  if (auto a = dyn_cast<BlockArgument>(x))
    return v.isTokenInput(a) ? 1 : -1;
  auto it = v.position.find(x.getDefiningOp());
  if (it == v.position.end())
    return -1;
  size_t j = size_t(it->second);
  const TensorFactors &tf =
      v.rules[j].getResult(cast<OpResult>(x).getResultNumber());
  for (size_t d = 0; d < tf.size(); ++d)
    if (holds(tf, d, v.seqFactor[j]))
      return int(d);
  return -1;
}

/// Per op: the operands split over cp that the op needs whole (an
/// attention's keys and values): all-gathered over cp before the op, their
/// gradients reduce-scattered back after its backward.
std::vector<llvm::SmallVector<unsigned, 2>> layoutCp(const ForwardView &v,
                                                     int cp) {
  std::vector<llvm::SmallVector<unsigned, 2>> gathers(v.ops.size());
  if (cp <= 1)
    return gathers;
  for (size_t i = 0; i < v.ops.size(); ++i)
    for (auto [k, x] : llvm::enumerate(v.ops[i]->getOperands())) {
      int d = cpSplitDim(v, x);
      if (d >= 0 &&
          !holds(v.rules[i].getOperand(unsigned(k)), size_t(d), v.seqFactor[i]))
        gathers[i].push_back(unsigned(k));
    }
  return gathers;
}

/// One region (ops before the block, one block instance, ops after it)
/// cloned on local types and differentiated.
class RegionBuilder {
public:
  RegionBuilder(const ForwardView &v, const TpLayout &l,
                const std::vector<llvm::SmallVector<unsigned, 2>> &cpGathers,
                const cost::ParallelPlan &p, std::vector<int> ops)
      : v(v), l(l), cpGathers(cpGathers), p(p), ops(std::move(ops)),
        scratch(ModuleOp::create(mlir::func::FuncOp(v.func).getLoc())),
        builder(mlir::func::FuncOp(v.func).getContext()) {
    for (int i : this->ops)
      inRegion.insert(v.ops[size_t(i)]);
    act = p.dtype == DType::F32 ? 4 : 2;
    sp = p.sequenceParallel && p.tp > 1;
  }

  LogicalResult build(std::string &error);
  void emit(std::vector<WorkItem> &items, double *outputBytes);
  /// Weights the region reads (arguments) and their local elements.
  const llvm::MapVector<Value, double> &weightsRead() const { return weights; }
  /// Bytes the region keeps for its backward pass, one micro-batch: the
  /// forward results and non-weight inputs that a backward op reads, on the
  /// local shapes and element types, a view counted once at its root.
  double keptBytes() const;
  /// Marks the region inputs that sequence parallelism gathers (the whole
  /// activations entering a split op).
  void markGatheredEntries();

private:
  /// `x` as an operand of type `type`; `gathered` where a collective
  /// gathers it, `weightElements` its elements if it is a weight.
  Value operandFor(Value x, Type type, bool gathered, double weightElements);
  /// The per-device form of `op` on local operands and result types.
  Operation *buildLocal(Operation *op, const ShardingRule &rule,
                        const LocalSplit &split, ValueRange operands,
                        TypeRange resultTypes);
  /// A scratch mesh whose axes split the batch, tp and cp factors.
  MeshOp meshFor(int64_t batchBlocks);
  void mergeGemms();
  int passOf(Operation *op) const {
    return forwardClones.contains(op) ? 0 : weightGrad.contains(op) ? 2 : 1;
  }
  /// The parameter a weight value is prepared from (a cast, a broadcast),
  /// or null for an activation.
  Value rootWeight(Value x) const;
  void emitOp(Operation *op, Phase phase, double scale, bool core,
              std::vector<WorkItem> &items);
  void flushGroup(Phase phase, std::vector<WorkItem> &items);
  /// Bytes of `x` on the local shape: floats in the plan's precision,
  /// integers at their width.
  double valueBytes(Value x) const;
  /// Bytes of the operands of view op `i` (clone `c`) that cp gathers,
  /// whole; only the float ones (those with gradients) if `floatOnly`.
  double cpGatherBytes(int i, Operation *c, bool floatOnly = false) const;
  void comm(std::vector<WorkItem> &items, const char *name, Phase phase,
            CollectiveKind kind, double bytes, bool overlaps = false,
            cost::Axis axis = cost::Axis::TP);

  const ForwardView &v;
  const TpLayout &l;
  const std::vector<llvm::SmallVector<unsigned, 2>> &cpGathers;
  const cost::ParallelPlan &p;
  std::vector<int> ops;
  llvm::DenseSet<Operation *> inRegion;
  OwningOpRef<ModuleOp> scratch;
  OpBuilder builder;
  Block *block = nullptr;
  double act = 2;
  bool sp = false;
  IRMapping map;
  std::map<int64_t, MeshOp> meshes;
  /// Per region op: its clone and the backward ops its VJP built.
  llvm::DenseMap<Operation *, Operation *> cloneOf;
  llvm::DenseMap<Operation *, std::vector<Operation *>> backwardOf;
  llvm::DenseSet<Operation *> forwardClones, weightGrad;
  /// Weights read by the region: argument -> local elements.
  llvm::MapVector<Value, double> weights;
  llvm::DenseSet<Value> weightArgs;
  /// The incoming gradients of the region's outputs.
  llvm::DenseSet<Value> gradArgs;
  /// An argument standing for a region value at another layout (gathered
  /// over tp) -> that value: its gradient flows back through a slice.
  llvm::DenseMap<Value, Value> gatheredFrom;
  /// A forward value -> its gathered argument.
  llvm::DenseMap<Value, Value> gatheredOf;
  /// Arguments standing for values all-gathered over cp.
  llvm::DenseSet<Value> cpGathered;
  /// Values gathered over tp at a region entry (sequence parallelism).
  llvm::DenseSet<Value> gatheredEntries;
  /// Forward clone -> index of its op in the view.
  llvm::DenseMap<Operation *, int> indexOfClone;
  /// Adds that sum the gradient contributions of a value's uses.
  llvm::DenseSet<Operation *> accumulations;
  /// GEMMs run as one kernel: the leader's merged shape; the others and the
  /// accumulations they replace are not emitted.
  llvm::DenseMap<Operation *, GemmWork> mergedGemm;
  llvm::DenseSet<Operation *> absorbed;
  std::vector<Value> outputs;
  double groupBytes = 0;
  bool groupOpen = false;
};

Value RegionBuilder::rootWeight(Value x) const {
  while (Operation *d = x.getDefiningOp()) {
    auto it = v.position.find(d);
    if (it == v.position.end() || !l.weightOnly[size_t(it->second)] ||
        d->getNumOperands() == 0)
      return {};
    x = d->getOperand(0);
  }
  auto a = cast<BlockArgument>(x);
  return v.isParam(a) ? x : Value();
}

Operation *RegionBuilder::buildLocal(Operation *op, const ShardingRule &rule,
                                     const LocalSplit &split,
                                     ValueRange operands,
                                     TypeRange resultTypes) {
  int batchFactor = split.batchFactor, splitFactor = split.splitFactor;
  // The op's own per-device form (sizes held in attributes, positions of
  // its block), as the partitioner builds it, when that is one op of the
  // same kind; otherwise a clone on the local types.
  if (auto shardable = dyn_cast<ShardingRuleOpInterface>(op)) {
    FactorAxes axes(size_t(rule.getNumFactors()));
    int64_t batchBlocks = 1;
    if (batchFactor >= 0 && v.batch % p.microBatchSize == 0)
      batchBlocks = v.batch / p.microBatchSize;
    if (batchBlocks > 1)
      axes[size_t(batchFactor)].push_back("b");
    if (splitFactor >= 0 && p.tp > 1)
      axes[size_t(splitFactor)].push_back("tp");
    if (split.seqFactor >= 0 && split.cp > 1)
      axes[size_t(split.seqFactor)].push_back("cp");
    MeshOp mesh = meshFor(batchBlocks);
    Operation *last = block->empty() ? nullptr : &block->back();
    SmallVector<Value> results;
    LogicalResult built = failure();
    {
      ScopedDiagnosticHandler quiet(op->getContext(),
                                    [](Diagnostic &) { return success(); });
      LocalOpContext context(op, rule, axes, mesh, operands, resultTypes);
      built = shardable.buildLocalOp(builder, context, results);
    }
    Operation *local = results.empty() ? nullptr : results[0].getDefiningOp();
    // Ops built before it must do no work (the block index of a causal
    // attention's queries under cp).
    bool helpersFree = true;
    for (Operation *o = last ? last->getNextNode() : &block->front();
         o && o != local; o = o->getNextNode()) {
      auto c = dyn_cast<CostOpInterface>(o);
      helpersFree &= !c || c.getWork(OpShapes::of(o)).kind == WorkKind::None;
    }
    if (succeeded(built) && local && helpersFree &&
        local->getName() == op->getName() &&
        local->getNumResults() == results.size() &&
        llvm::equal(local->getResults(), results) &&
        TypeRange(local->getResultTypes()) == resultTypes &&
        local == &block->back())
      return local;
    // Not one op: undo and clone.
    while (!block->empty() && &block->back() != last)
      block->back().erase();
  }
  Operation *c = builder.clone(*op, map);
  c->setOperands(operands);
  for (auto [y, type] : llvm::zip_equal(c->getResults(), resultTypes))
    y.setType(type);
  return c;
}

MeshOp RegionBuilder::meshFor(int64_t batchBlocks) {
  MeshOp &mesh = meshes[batchBlocks];
  if (!mesh) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(scratch->getBody());
    std::string name = "planner_mesh_" + std::to_string(batchBlocks);
    mesh = builder.create<MeshOp>(
        scratch->getLoc(), name, ArrayRef<StringRef>{"b", "tp", "cp"},
        ArrayRef<int64_t>{batchBlocks, std::max<int64_t>(p.tp, 1),
                          std::max<int64_t>(p.cp, 1)},
        ArrayRef<LinkKind>{LinkKind::NVLink, LinkKind::NVLink,
                           LinkKind::NVLink});
    if (p.cp > 1 && p.cpBalanced)
      mesh.setBalancedAxesAttr(builder.getStrArrayAttr({"cp"}));
  }
  return mesh;
}

Value RegionBuilder::operandFor(Value x, Type type, bool gathered,
                                double weightElements) {
  if (Value m = map.lookupOrNull(x); m && m.getType() == type)
    return m;
  if (Value g = gatheredOf.lookup(x); g && g.getType() == type)
    return g;
  // A value from outside the region, or one a collective reshapes.
  Value arg = block->addArgument(type, x.getLoc());
  if (Value w = rootWeight(x)) {
    weightArgs.insert(arg);
    weights.insert({w, weightElements});
  }
  if (Value m = map.lookupOrNull(x); m && gathered) {
    gatheredFrom[arg] = m; // the same value, gathered over tp
    gatheredOf[x] = arg;
  } else if (!m) {
    map.map(x, arg);
  }
  return arg;
}

LogicalResult RegionBuilder::build(std::string &error) {
  builder.setInsertionPointToEnd(scratch->getBody());
  auto fn =
      builder.create<func::FuncOp>(mlir::func::FuncOp(v.func).getLoc(),
                                   "region", builder.getFunctionType({}, {}));
  block = fn.addEntryBlock();
  builder.setInsertionPointToEnd(block);
  int64_t mbs = p.microBatchSize;
  for (int i : ops) {
    Operation *op = v.ops[size_t(i)];
    if (!isa<CostOpInterface>(op) && !l.weightOnly[size_t(i)]) {
      error = describeOp(op) +
              " has no cost rule (CostOpInterface::getWork): the planner "
              "cannot price its work";
      return failure();
    }
    const ShardingRule &rule = v.rules[size_t(i)];
    LocalSplit split;
    split.batchFactor = v.batchFactor[size_t(i)];
    split.splitFactor = l.factor[size_t(i)];
    split.seqFactor = v.seqFactor[size_t(i)];
    split.batch = v.batch;
    split.microBatch = mbs;
    split.tp = p.tp;
    split.cp = p.cp;
    // A weight is whole over cp (only the op's use of it is sliced).
    LocalSplit weightSplit = split;
    weightSplit.cp = 1;
    SmallVector<Value> operands;
    for (auto [k, x] : llvm::enumerate(op->getOperands())) {
      auto whole = dyn_cast<RankedTensorType>(
          localType(x.getType(), rule.getOperand(k), weightSplit));
      bool overCp = llvm::is_contained(cpGathers[size_t(i)], unsigned(k));
      operands.push_back(operandFor(
          x, localType(x.getType(), rule.getOperand(k), split),
          llvm::is_contained(l.gathers[size_t(i)], unsigned(k)) || overCp,
          whole ? double(whole.getNumElements()) : 0));
      if (overCp)
        cpGathered.insert(operands.back());
    }
    SmallVector<Type> resultTypes;
    for (auto [r, y] : llvm::enumerate(op->getResults()))
      resultTypes.push_back(localType(y.getType(), rule.getResult(r), split));
    Operation *c = buildLocal(op, rule, split, operands, resultTypes);
    for (auto [r, y] : llvm::enumerate(c->getResults()))
      map.map(op->getResult(unsigned(r)), y);
    cloneOf[op] = c;
    indexOfClone[c] = i;
    forwardClones.insert(c);
  }
  // Gradients flow back from every value the rest of the program reads.
  llvm::DenseMap<Value, Value> grads;
  for (int i : ops) {
    Operation *op = v.ops[size_t(i)];
    if (l.weightOnly[size_t(i)])
      continue;
    for (Value y : op->getResults())
      if (isFloatTensor(y) && llvm::any_of(y.getUsers(), [&](Operation *u) {
            return !inRegion.contains(u);
          })) {
        Value local = map.lookup(y);
        outputs.push_back(local);
        grads[local] = block->addArgument(local.getType(), y.getLoc());
        gradArgs.insert(grads[local]);
      }
  }
  for (int i : llvm::reverse(ops)) {
    // Parameter preparation (casts, broadcasts of weights) and its
    // gradient are taken as fused into the kernels around them.
    if (l.weightOnly[size_t(i)])
      continue;
    Operation *op = v.ops[size_t(i)];
    Operation *c = cloneOf[op];
    SmallVector<Value> dys;
    bool any = false;
    for (Value y : c->getResults()) {
      dys.push_back(grads.lookup(y));
      any |= bool(dys.back());
    }
    if (!any)
      continue;
    auto vjp = dyn_cast<VJPOpInterface>(c);
    if (!vjp) {
      error = describeOp(op) +
              " has no gradient rule (VJPOpInterface): the planner cannot "
              "price its backward pass";
      return failure();
    }
    Operation *before = block->empty() ? nullptr : &block->back();
    SmallVector<Value> dxs;
    if (failed(vjp.buildVJP(builder, dys, dxs))) {
      error = describeOp(op) +
              ": its gradient rule failed on the local shapes of the plan";
      return failure();
    }
    for (auto [k, dx] : llvm::enumerate(dxs)) {
      if (!dx)
        continue;
      Value x = c->getOperand(unsigned(k));
      if (Value from = gatheredFrom.lookup(x)) {
        // The gradient of a gather: each rank keeps its own part.
        auto type = cast<RankedTensorType>(from.getType());
        SmallVector<int64_t> offsets(type.getRank(), 0),
            strides(type.getRank(), 1);
        dx = builder.create<SliceOp>(op->getLoc(), dx, offsets, type.getShape(),
                                     strides);
        // Over cp the reduce-scatter delivers that part: no copy.
        if (cpGathered.contains(x))
          absorbed.insert(dx.getDefiningOp());
        x = from;
      }
      if (Value prev = grads.lookup(x);
          prev && prev.getType() == dx.getType()) {
        dx = builder.create<AddOp>(op->getLoc(), dx.getType(), prev, dx);
        accumulations.insert(dx.getDefiningOp());
      }
      grads[x] = dx;
    }
    std::vector<Operation *> &list = backwardOf[op];
    for (Operation *it = before ? before->getNextNode() : &block->front(); it;
         it = it->getNextNode())
      list.push_back(it);
  }
  // Backward ops that the gradients of activations need; the rest only
  // feed weight gradients.
  llvm::DenseSet<Operation *> needed;
  std::vector<Operation *> work;
  for (BlockArgument a : block->getArguments()) {
    Value g = grads.lookup(a);
    if (g && !weightArgs.contains(a))
      if (Operation *d = g.getDefiningOp())
        work.push_back(d);
  }
  while (!work.empty()) {
    Operation *o = work.back();
    work.pop_back();
    if (forwardClones.contains(o) || !needed.insert(o).second)
      continue;
    for (Value x : o->getOperands())
      if (Operation *d = x.getDefiningOp())
        work.push_back(d);
  }
  for (auto &[op, list] : backwardOf)
    for (Operation *o : list)
      if (!needed.contains(o))
        weightGrad.insert(o);
  mergeGemms();
  markGatheredEntries();
  return success();
}

/// `x` seen through views (reshapes: ops that run no kernel).
Value viewRoot(Value x) {
  while (Operation *d = x.getDefiningOp()) {
    auto c = dyn_cast<CostOpInterface>(d);
    if (!c || d->getNumOperands() != 1 ||
        c.getWork(OpShapes::of(d)).kind != WorkKind::None)
      break;
    x = d->getOperand(0);
  }
  return x;
}

void RegionBuilder::markGatheredEntries() {
  for (int i : ops)
    if (!l.weightOnly[size_t(i)])
      for (unsigned k : l.entries[size_t(i)])
        gatheredEntries.insert(
            viewRoot(cloneOf[v.ops[size_t(i)]]->getOperand(k)));
}

double RegionBuilder::keptBytes() const {
  llvm::DenseSet<Value> kept;
  double total = 0;
  for (Operation &o : *block) {
    if (forwardClones.contains(&o))
      continue;
    for (Value x : o.getOperands()) {
      Value root = viewRoot(x);
      if (weightArgs.contains(root) || gradArgs.contains(root))
        continue;
      Operation *d = root.getDefiningOp();
      if (d && !forwardClones.contains(d))
        continue; // a backward value
      if (!kept.insert(root).second)
        continue;
      if (!isa<RankedTensorType>(root.getType()))
        continue;
      // Sequence parallelism splits the values between the tensor-parallel
      // regions (and the region's inputs, the residual stream) by sequence.
      auto it = d ? indexOfClone.find(d) : indexOfClone.end();
      bool between = it == indexOfClone.end()
                         ? true
                         : l.factor[size_t(it->second)] < 0 &&
                               v.batchFactor[size_t(it->second)] >= 0;
      // Cleave's step keeps a gathered region input whole for the backward
      // pass instead of gathering it again.
      bool split = sp && between &&
                   (p.regatherForBackward || !gatheredEntries.contains(root));
      // Floats take the plan's precision (as the work does), integers
      // their width.
      total += valueBytes(root) / (split ? p.tp : 1);
    }
  }
  return total;
}

/// The GEMM shape of `op`, if it runs as a GEMM.
std::optional<GemmWork> gemmOf(Operation *op) {
  auto c = dyn_cast<CostOpInterface>(op);
  if (!c)
    return std::nullopt;
  OpWork w = c.getWork(OpShapes::of(op));
  if (w.kind != WorkKind::Gemm)
    return std::nullopt;
  return w.gemm;
}

/// Megatron's fused projections, as a code generator batches them: GEMMs of
/// one pass that read the same operand with the same rows and depth run as
/// one GEMM over the concatenated weights (q, k and v; gate and up), and
/// GEMMs whose results are summed (the input gradients of those
/// projections) run as one GEMM over the concatenated depth.
void RegionBuilder::mergeGemms() {
  std::vector<Operation *> list;
  for (Operation &op : *block)
    list.push_back(&op);
  for (size_t a = 0; a < list.size(); ++a) {
    std::optional<GemmWork> ga = gemmOf(list[a]);
    if (!ga || absorbed.contains(list[a]))
      continue;
    GemmWork merged = *ga;
    for (size_t b = a + 1; b < list.size(); ++b) {
      std::optional<GemmWork> gb = gemmOf(list[b]);
      if (!gb || absorbed.contains(list[b]) || mergedGemm.count(list[b]) ||
          passOf(list[a]) != passOf(list[b]) || gb->k != ga->k ||
          gb->batch != ga->batch)
        continue;
      auto shares = [&](unsigned pos) {
        return viewRoot(list[a]->getOperand(pos)) ==
               viewRoot(list[b]->getOperand(pos));
      };
      // A shared left operand concatenates the columns, a shared right
      // one the rows.
      if (shares(0) && gb->m == ga->m)
        merged.n += gb->n;
      else if (shares(1) && gb->n == ga->n)
        merged.m += gb->m;
      else
        continue;
      absorbed.insert(list[b]);
    }
    if (merged.n != ga->n || merged.m != ga->m)
      mergedGemm[list[a]] = merged;
  }
  for (Operation *root : list) {
    if (!accumulations.contains(root) ||
        llvm::any_of(root->getUsers(),
                     [&](Operation *u) { return accumulations.contains(u); }))
      continue;
    std::vector<Operation *> adds, leaves;
    std::vector<Operation *> work{root};
    bool ok = true;
    while (!work.empty() && ok) {
      Operation *o = work.back();
      work.pop_back();
      adds.push_back(o);
      for (Value x : o->getOperands()) {
        Operation *d = viewRoot(x).getDefiningOp();
        if (d && accumulations.contains(d))
          work.push_back(d);
        else if (d && gemmOf(d) && !absorbed.contains(d) &&
                 !mergedGemm.count(d))
          leaves.push_back(d);
        else
          ok = false;
      }
    }
    if (!ok || leaves.size() < 2)
      continue;
    std::sort(leaves.begin(), leaves.end(),
              [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
    GemmWork merged = *gemmOf(leaves[0]);
    bool same = true;
    for (Operation *leaf : llvm::drop_begin(leaves)) {
      GemmWork g = *gemmOf(leaf);
      same &= g.m == merged.m && g.n == merged.n && g.batch == merged.batch &&
              passOf(leaf) == passOf(leaves[0]);
      merged.k += g.k;
    }
    if (!same)
      continue;
    mergedGemm[leaves[0]] = merged;
    for (Operation *leaf : llvm::drop_begin(leaves))
      absorbed.insert(leaf);
    for (Operation *add : adds)
      absorbed.insert(add);
  }
}

void RegionBuilder::comm(std::vector<WorkItem> &items, const char *name,
                         Phase phase, CollectiveKind kind, double bytes,
                         bool overlaps, cost::Axis axis) {
  flushGroup(phase, items);
  WorkItem it;
  it.name = name;
  it.phase = phase;
  it.isComm = true;
  it.commKind = kind;
  it.commBytes = bytes;
  it.commAxis = axis;
  it.overlapsPrevious = overlaps;
  items.push_back(it);
}

double RegionBuilder::valueBytes(Value x) const {
  auto t = dyn_cast<RankedTensorType>(x.getType());
  if (!t)
    return 0;
  double e = isa<FloatType>(t.getElementType())
                 ? act
                 : double((t.getElementTypeBitWidth() + 7) / 8);
  return double(t.getNumElements()) * e;
}

double RegionBuilder::cpGatherBytes(int i, Operation *c, bool floatOnly) const {
  double total = 0;
  for (unsigned k : cpGathers[size_t(i)])
    if (!floatOnly || isFloatTensor(c->getOperand(k)))
      total += valueBytes(c->getOperand(k));
  return total;
}

void RegionBuilder::flushGroup(Phase phase, std::vector<WorkItem> &items) {
  if (groupOpen && groupBytes > 0) {
    WorkItem it;
    it.name = "fused_elementwise";
    it.phase = phase;
    it.kernel = cost::Kernel::makeMemory(groupBytes);
    items.push_back(it);
  }
  groupOpen = false;
  groupBytes = 0;
}

/// Whether `op` is an elementwise op a fusing code generator merges.
bool fusable(Operation *op) {
  auto c = dyn_cast<CostOpInterface>(op);
  return c && c.getWork(OpShapes::of(op)).fusable;
}

/// The operand of fusable `op` that a kernel (a GEMM, a norm) made for
/// `op` alone, with the result's type: `op` runs in that kernel's epilogue
/// (a bias add after a GEMM, a gradient accumulated by a norm's backward).
/// Null when there is none.
Value epilogueInput(Operation *op) {
  if (op->getNumResults() != 1)
    return {};
  for (Value x : op->getOperands()) {
    Operation *d = x.getDefiningOp();
    auto c = d ? dyn_cast<CostOpInterface>(d) : CostOpInterface();
    if (!c || !x.hasOneUse() || x.getType() != op->getResult(0).getType())
      continue;
    OpWork w = c.getWork(OpShapes::of(d));
    if (!w.fusable && w.kind != WorkKind::None)
      return x;
  }
  return {};
}

void RegionBuilder::emitOp(Operation *op, Phase phase, double scale, bool core,
                           std::vector<WorkItem> &items) {
  auto c = dyn_cast<CostOpInterface>(op);
  if (!c || absorbed.contains(op))
    return;
  OpWork w = c.getWork(OpShapes::of(op).setFloatBytes(act));
  if (auto it = mergedGemm.find(op); it != mergedGemm.end()) {
    w.gemm = it->second;
    w.gemmFlops = 2 * w.gemm.m * w.gemm.n * w.gemm.k * w.gemm.batch;
  }
  auto bytesOf = [&](Value x) { return valueBytes(x); };
  bool isForward = forwardClones.contains(op);
  if (w.fusable) {
    if (Value x = epilogueInput(op)) {
      // Runs in the epilogue of the kernel that made `x`: that kernel
      // wrote the result in place of `x`.
      w.bytesRead -= bytesOf(x);
      w.bytesWritten = 0;
    }
    // Inputs made by a fused neighbour are not read back; results that
    // only fused neighbours of the same pass read are not written (the
    // backward pass reads what it saved, so those are written).
    for (Value x : op->getOperands())
      if (Operation *d = x.getDefiningOp();
          d && fusable(d) && !epilogueInput(d) &&
          forwardClones.contains(d) == isForward)
        w.bytesRead -= bytesOf(x);
    for (Value y : op->getResults()) {
      bool internal =
          !epilogueInput(op) && !y.use_empty() &&
          !llvm::is_contained(outputs, y) &&
          llvm::all_of(y.getUsers(), [&](Operation *u) {
            return forwardClones.contains(u) == isForward && fusable(u);
          });
      if (internal)
        w.bytesWritten -= bytesOf(y);
    }
    groupOpen = true;
    groupBytes += std::max(0.0, w.bytes()) * scale;
    return;
  }
  flushGroup(phase, items);
  WorkItem it;
  it.name = op->getName().getStringRef().data();
  it.phase = phase;
  it.attentionCore = core;
  DType dtype = p.dtype;
  switch (w.kind) {
  case WorkKind::None:
    return;
  case WorkKind::Vector:
    if (w.bytes() <= 0)
      return;
    it.kernel = cost::Kernel::makeMemory(w.bytes() * scale);
    break;
  case WorkKind::Gemm:
    it.kernel = cost::Kernel::makeGemm(
        {w.gemm.m, w.gemm.n, w.gemm.k, w.gemm.batch}, dtype);
    it.conventionFlops = w.gemmFlops;
    break;
  case WorkKind::Attention: {
    const AttentionWork &a = w.attention;
    // A block of the queries against every key (context parallelism): the
    // load-balanced layout gives every rank half of its causal scores, a
    // contiguous one the last rank (2n-1)/2n of them.
    double share = 0.5;
    if (a.causal && a.seqKV > a.seqQ && !p.cpBalanced) {
      double n = a.seqKV / a.seqQ;
      share = (2 * n - 1) / (2 * n);
    }
    it.kernel = cost::Kernel::makeAttention(
        {a.batch, a.heads, a.seqQ, a.seqKV, a.headDim, a.causal, share},
        a.backward, dtype);
    it.conventionFlops =
        a.backward ? w.attentionFlops / 2.5 * 2 : w.attentionFlops;
    break;
  }
  }
  items.push_back(it);
}

void RegionBuilder::emit(std::vector<WorkItem> &items, double *outputBytes) {
  auto bytes = [&](Value x) {
    auto t = cast<RankedTensorType>(x.getType());
    return double(t.getNumElements()) * act;
  };
  auto scaleOf = [&](int i) {
    // Sequence parallelism splits the ops between the tensor-parallel
    // regions (norms, residual adds, dropout) by sequence.
    bool between = l.factor[size_t(i)] < 0 && v.batchFactor[size_t(i)] >= 0;
    return sp && between ? 1.0 / p.tp : 1.0;
  };
  CollectiveKind exitKind =
      sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  Phase groupPhase = Phase::Backward;
  for (int i : ops) {
    if (l.weightOnly[size_t(i)])
      continue;
    Operation *op = v.ops[size_t(i)];
    Operation *c = cloneOf[op];
    for (unsigned k : l.exits[size_t(i)])
      comm(items, "tp_exit", Phase::Forward, exitKind, bytes(c->getOperand(k)));
    for (unsigned k : l.gathers[size_t(i)])
      comm(items, "tp_gather", Phase::Forward, CollectiveKind::AllGather,
           bytes(c->getOperand(k)));
    if (sp)
      for (unsigned k : l.entries[size_t(i)])
        comm(items, "tp_entry_all_gather", Phase::Forward,
             CollectiveKind::AllGather, bytes(c->getOperand(k)));
    if (double b = cpGatherBytes(i, c); b > 0)
      comm(items, "cp_all_gather", Phase::Forward, CollectiveKind::AllGather, b,
           false, cost::Axis::CP);
    bool core = false;
    if (auto cost = dyn_cast<CostOpInterface>(c))
      core = cost.getWork(OpShapes::of(c)).kind == WorkKind::Attention;
    emitOp(c, Phase::Forward, scaleOf(i), core, items);
    for (unsigned r : l.resultExits[size_t(i)])
      comm(items, "tp_exit", Phase::Forward, exitKind, bytes(c->getResult(r)));
  }
  flushGroup(Phase::Forward, items);
  for (int i : llvm::reverse(ops)) {
    Operation *op = v.ops[size_t(i)];
    if (sp && !l.weightOnly[size_t(i)])
      for (unsigned r : l.resultExits[size_t(i)])
        comm(items, "tp_exit_grad_all_gather", Phase::Backward,
             CollectiveKind::AllGather, bytes(cloneOf[op]->getResult(r)));
    auto it = backwardOf.find(op);
    if (it != backwardOf.end()) {
      // A fused group spans the gradients of consecutive ops; a change
      // between the input- and weight-gradient passes ends it.
      Phase current = groupPhase;
      for (Operation *o : it->second) {
        Phase ph = weightGrad.contains(o) ? Phase::WeightGrad : Phase::Backward;
        if (ph != current)
          flushGroup(current, items);
        current = groupPhase = ph;
        emitOp(o, ph, scaleOf(i), false, items);
      }
    }
    if (!l.weightOnly[size_t(i)])
      if (double b = cpGatherBytes(i, cloneOf[op], /*float only*/ true); b > 0)
        comm(items, "cp_grad_reduce_scatter", Phase::Backward,
             CollectiveKind::ReduceScatter, b, false, cost::Axis::CP);
    if (l.weightOnly[size_t(i)])
      continue;
    Operation *c = cloneOf[op];
    for (unsigned k : l.exits[size_t(i)])
      if (sp)
        comm(items, "tp_exit_grad_all_gather", Phase::Backward,
             CollectiveKind::AllGather, bytes(c->getOperand(k)));
    for (unsigned k : l.entries[size_t(i)]) {
      double b = bytes(c->getOperand(k));
      if (sp && p.regatherForBackward) // the input for the weight gradient
        comm(items, "tp_entry_regather", Phase::Backward,
             CollectiveKind::AllGather, b, true);
      comm(items, "tp_entry_grad", Phase::Backward, exitKind, b);
    }
  }
  flushGroup(groupPhase, items);
  if (outputBytes) {
    *outputBytes = 0;
    for (Value y : outputs)
      *outputBytes += bytes(y);
  }
}

} // namespace

cost::Result<GraphItems> deriveGraphItems(const ForwardView &v,
                                          const cost::ParallelPlan &p) {
  using R = cost::Result<GraphItems>;
  if (v.count == 0)
    return R::failure("the function has no repeated block (layers)");
  if (p.cp > 1 && llvm::all_of(v.seqFactor, [](int f) { return f < 0; }))
    return R::failure("plan.cp = " + std::to_string(p.cp) +
                      ": context parallelism splits the sequence of a "
                      "[batch, sequence] integer token input, and the "
                      "function has none");
  TpLayout layout = layoutTp(v, p.tp);
  std::vector<llvm::SmallVector<unsigned, 2>> cpGathers = layoutCp(v, p.cp);
  std::vector<int> before, layer, after;
  int end = v.start + v.length * v.count;
  for (int i = 0; i < int(v.ops.size()); ++i) {
    if (i < v.start)
      before.push_back(i);
    else if (i < v.start + v.length)
      layer.push_back(i);
    else if (i >= end)
      after.push_back(i);
  }
  GraphItems g;
  std::string error;
  struct Part {
    std::vector<int> *ops;
    std::vector<WorkItem> *items;
    double *params;
    double *output;
    double *kept;
  } parts[] = {{&before, &g.embedding, &g.embeddingParams, nullptr,
                &g.embeddingKeptBytes},
               {&layer, &g.layer, &g.layerParams, &g.layerOutputBytes,
                &g.layerKeptBytes},
               {&after, &g.head, &g.headParams, nullptr, &g.headKeptBytes}};
  llvm::DenseSet<Value> firstStageWeights;
  for (Part &part : parts) {
    RegionBuilder rb(v, layout, cpGathers, p, *part.ops);
    if (failed(rb.build(error)))
      return R::failure(error);
    rb.emit(*part.items, part.output);
    *part.kept = rb.keptBytes();
    for (auto &[x, n] : rb.weightsRead()) {
      // A tied weight (the embedding as output layer) is held once when
      // one stage has both ends; the last stage keeps a copy otherwise.
      if (part.items == &g.head && p.pp == 1 && firstStageWeights.contains(x))
        continue;
      if (part.items == &g.embedding)
        firstStageWeights.insert(x);
      *part.params += n;
    }
  }
  return g;
}

cost::Result<cost::Workload> buildGraphWorkload(const ForwardView &v,
                                                const ModelConfig &m,
                                                const cost::ClusterSpec &cl,
                                                const cost::ParallelPlan &p,
                                                const cost::CostConstants &c) {
  cost::Result<GraphItems> items = deriveGraphItems(v, p);
  if (!items)
    return cost::Result<cost::Workload>::failure(items.error());
  return workloadFromItems(*items, m, cl, p, c);
}

cost::Workload workloadFromItems(const GraphItems &g, const ModelConfig &m,
                                 const cost::ClusterSpec &cl,
                                 const cost::ParallelPlan &p,
                                 const cost::CostConstants &c) {
  cost::Workload w;
  w.layerForward = cost::costPhase(g.layer, Phase::Forward, cl, p, c);
  w.layerBackward = cost::costPhase(g.layer, Phase::Backward, cl, p, c);
  w.layerWeightGrad = cost::costPhase(g.layer, Phase::WeightGrad, cl, p, c);
  for (cost::Recompute kind :
       {cost::Recompute::None, cost::Recompute::Selective,
        cost::Recompute::Full})
    w.layerRecomputeOf[size_t(kind)] =
        cost::recomputeCost(g.layer, cl, p, kind, c);
  w.layerRecompute = w.layerRecomputeOf[size_t(p.recompute)];
  w.embeddingForward = cost::costPhase(g.embedding, Phase::Forward, cl, p, c);
  w.embeddingBackward = cost::costPhase(g.embedding, Phase::Backward, cl, p, c);
  w.embeddingBackward +=
      cost::costPhase(g.embedding, Phase::WeightGrad, cl, p, c);
  w.headForward = cost::costPhase(g.head, Phase::Forward, cl, p, c);
  w.headBackward = cost::costPhase(g.head, Phase::Backward, cl, p, c);
  w.headWeightGrad = cost::costPhase(g.head, Phase::WeightGrad, cl, p, c);
  if (p.schedule != cost::Schedule::ZeroBubbleH1) {
    w.layerBackward += w.layerWeightGrad;
    w.layerWeightGrad = {};
    w.headBackward += w.headWeightGrad;
    w.headWeightGrad = {};
  }
  w.layerParams = g.layerParams;
  w.embeddingParams = g.embeddingParams;
  w.headParams = g.headParams;
  w.layerActivationBytes = g.layerKeptBytes;
  w.embeddingActivationBytes = g.embeddingKeptBytes;
  w.headActivationBytes = g.headKeptBytes;
  bool shard = p.sequenceParallel || p.scatterGatherP2p;
  w.p2pBytes = g.layerOutputBytes / (shard ? p.tp : 1);
  // Whole-model FLOPs: the local items times the tp and cp splits, per
  // sequence.
  double perRank = double(p.tp) * p.cp / double(p.microBatchSize);
  double layerFwd =
      cost::conventionFlops(g.layer, Phase::Forward, false) * perRank;
  double headFwd =
      cost::conventionFlops(g.head, Phase::Forward, false) * perRank;
  double perSeq = 3 * (double(m.layers) * layerFwd + headFwd);
  double core = cost::conventionFlops(g.layer, Phase::Forward, true) * perRank;
  double recomputed = 0;
  for (int s = 0; s < p.pp; ++s) {
    cost::Recompute kind = p.recomputeOf(s);
    double f = kind == cost::Recompute::Full        ? layerFwd
               : kind == cost::Recompute::Selective ? core
                                                    : 0;
    for (int ch = 0; ch < p.chunks(); ++ch)
      recomputed += double(cost::layersInChunk(m, p, ch * p.pp + s)) * f;
  }
  double batch = double(p.globalBatch());
  w.modelFlopsPerStep = batch * perSeq;
  w.hardwareFlopsPerStep = batch * (perSeq + recomputed);
  return w;
}

std::function<cost::Workload(const cost::ParallelPlan &)>
graphWorkloadFunction(const ForwardView &view, const ModelConfig &model,
                      const cost::ClusterSpec &cluster,
                      std::shared_ptr<std::string> error) {
  using Key = std::tuple<int, bool, int64_t, DType, int, bool>;
  auto cache = std::make_shared<std::map<Key, GraphItems>>();
  const ForwardView *v = &view;
  const cost::CostConstants *c = &cost::defaultConstants();
  return [=](const cost::ParallelPlan &plan) {
    Key key{plan.tp,
            plan.sequenceParallel && plan.tp > 1,
            plan.microBatchSize,
            plan.dtype,
            plan.cp,
            plan.cp > 1 && plan.cpBalanced};
    auto it = cache->find(key);
    if (it == cache->end()) {
      cost::Result<GraphItems> items = deriveGraphItems(*v, plan);
      if (!items) {
        if (error->empty())
          *error = items.error();
        return cost::buildWorkload(model, cluster, plan, *c);
      }
      it = cache->emplace(key, *items).first;
    }
    return workloadFromItems(it->second, model, cluster, plan, *c);
  };
}

cost::Result<ModelConfig> deriveModelConfig(const ForwardView &v) {
  using R = cost::Result<ModelConfig>;
  mlir::func::FuncOp f = v.func;
  if (v.count == 0)
    return R::failure("function @" + f.getSymName().str() +
                      ": no repeated block (layers) found");
  ModelConfig m;
  m.name = f.getSymName().str();
  m.layers = v.count;
  m.tiedEmbeddings = false;
  for (BlockArgument a : f.getArguments()) {
    if (v.isTokenInput(a)) {
      auto t = cast<RankedTensorType>(a.getType());
      m.batch = t.getDimSize(0);
      m.seqLen = t.getDimSize(1);
      break;
    }
  }
  int end = v.start + v.length * v.count;
  Value table;
  for (int i = 0; i < int(v.ops.size()); ++i) {
    Operation *op = v.ops[size_t(i)];
    bool inBlock = i >= v.start && i < v.start + v.length;
    if (auto e = dyn_cast<EmbeddingOp>(op); e && i < v.start && !table) {
      table = e.getTable();
      m.vocab = e.getTable().getType().getDimSize(0);
      m.hidden = e.getTable().getType().getDimSize(1);
    }
    if (auto a = dyn_cast<AttentionOp>(op); a && inBlock && !m.heads) {
      m.heads = a.getQuery().getType().getDimSize(2);
      m.kvHeads = a.getKey().getType().getDimSize(2);
    }
    if (auto mm = dyn_cast<MatmulOp>(op); mm && inBlock) {
      int64_t n = mm.getType().getShape().back();
      if (n != m.hidden)
        m.ffnHidden = std::max(m.ffnHidden, n);
    }
    if (isa<RMSNormOp>(op) && inBlock)
      m.arch = Architecture::Llama;
    if (auto d = dyn_cast<DropoutOp>(op); d && inBlock)
      m.dropout = d.getRate().convertToDouble();
    if (i >= end && table)
      for (Value x : op->getOperands())
        for (Value y = x; y;) {
          if (y == table)
            m.tiedEmbeddings = true;
          Operation *d = y.getDefiningOp();
          y = d && d->getNumOperands() == 1 ? d->getOperand(0) : Value();
        }
  }
  if (!table)
    return R::failure("function @" + m.name +
                      ": no token embedding (cleave.embedding) before the "
                      "repeated block");
  if (!m.heads)
    return R::failure("function @" + m.name +
                      ": the repeated block has no cleave.attention");
  if (m.seqLen == 0)
    return R::failure("function @" + m.name +
                      ": no [batch, sequence] integer token input");
  return m;
}

} // namespace cleave::planner
