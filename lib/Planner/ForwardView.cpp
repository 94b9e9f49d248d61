//===- ForwardView.cpp - Loss, forward ops, batch dims, repeated block ----===//

#include "cleave/Planner/ForwardView.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Hashing.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::planner {

bool ForwardView::isParam(BlockArgument a) const {
  return bool(mlir::func::FuncOp(func).getArgAttr(
      a.getArgNumber(), CleaveDialect::kParamAttrName));
}

bool ForwardView::isInput(BlockArgument a) const {
  return bool(mlir::func::FuncOp(func).getArgAttr(
      a.getArgNumber(), CleaveDialect::kInputAttrName));
}

bool ForwardView::isTokenInput(BlockArgument a) const {
  auto t = dyn_cast<RankedTensorType>(a.getType());
  return isInput(a) && t && t.getRank() == 2 && t.getElementType().isInteger();
}

OperandSource ForwardView::sourceOf(int t, int j, unsigned k) const {
  using S = OperandSource;
  Value x = at(t, j)->getOperand(k);
  if (auto a = dyn_cast<BlockArgument>(x))
    return isParam(a) ? S{S::Param, -1, {}} : S{S::External, -1, x};
  int p = position.lookup(x.getDefiningOp());
  int u = instanceOf(p);
  if (u < 0 && p < start)
    return {S::External, -1, x};
  if (u == t)
    return {S::Same, slotOf(p), {}};
  if (u == t - 1)
    return {S::Previous, slotOf(p), {}};
  return {S::Irregular, -1, {}};
}

std::string describeOp(Operation *op) {
  std::string where;
  llvm::raw_string_ostream os(where);
  os << op->getLoc();
  return "op '" + op->getName().getStringRef().str() + "' at " + where;
}

namespace {

Value findLoss(func::FuncOp func, std::string &error) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  Value scalar;
  int scalars = 0;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto name =
        func.getResultAttrOfType<StringAttr>(i, CleaveDialect::kOutputAttrName);
    if (name && name.getValue() == "loss")
      return v;
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (t && t.getRank() == 0 && isa<FloatType>(t.getElementType())) {
      scalar = v;
      ++scalars;
    }
  }
  if (scalars == 1)
    return scalar;
  error = "function @" + func.getSymName().str() +
          " has no loss to plan for: expected a result named \"loss\" "
          "(cleave.output) or exactly one scalar float result";
  return {};
}

/// The ops `loss` depends on, in program order.
std::vector<Operation *> forwardOps(func::FuncOp func, Value loss) {
  llvm::DenseSet<Value> needed{loss};
  std::vector<Operation *> ops;
  Block &body = func.getBody().front();
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (llvm::none_of(op.getResults(),
                      [&](Value r) { return needed.contains(r); }))
      continue;
    ops.push_back(&op);
    for (Value v : op.getOperands())
      needed.insert(v);
  }
  std::reverse(ops.begin(), ops.end());
  return ops;
}

/// Per op, the factors that carry a dimension of the data inputs: from
/// dimension `seedDim` of the inputs `seeds` accepts, through the rules both
/// ways until nothing changes. With `majorOnly` only a dimension's major
/// factor carries it (the batch, outermost where dimensions are flattened);
/// otherwise, in a dimension of several factors, those not in `excluded`
/// (the sequence inside a flattened batch x sequence dimension, the batch
/// factors excluded).
std::vector<llvm::SmallVector<bool>>
propagateDim(const ForwardView &v, int64_t seedDim,
             llvm::function_ref<bool(BlockArgument)> seeds, bool majorOnly,
             const std::vector<llvm::SmallVector<bool>> *excluded = nullptr) {
  llvm::DenseMap<Value, uint64_t> dims;
  for (BlockArgument a : mlir::func::FuncOp(v.func).getArguments()) {
    auto t = dyn_cast<RankedTensorType>(a.getType());
    if (v.isInput(a) && t && t.getRank() > seedDim && seeds(a))
      dims[a] = uint64_t(1) << seedDim;
  }
  std::vector<llvm::SmallVector<bool>> marked(v.ops.size());
  for (size_t i = 0; i < v.ops.size(); ++i)
    marked[i].assign(size_t(v.rules[i].getNumFactors()), false);
  auto carriers = [&](size_t i, ArrayRef<int64_t> list) {
    llvm::SmallVector<int64_t, 2> out;
    for (int64_t f : majorOnly ? list.take_front(1) : list)
      if (list.size() == 1 || !excluded || !(*excluded)[i][size_t(f)])
        out.push_back(f);
    return out;
  };
  auto visit = [&](size_t i) {
    Operation *op = v.ops[i];
    const ShardingRule &rule = v.rules[i];
    bool changed = false;
    auto mark = [&](ValueRange values, ArrayRef<TensorFactors> factors) {
      for (auto [value, tf] : llvm::zip(values, factors))
        for (auto [d, list] : llvm::enumerate(tf))
          if (dims.lookup(value) >> d & 1)
            for (int64_t f : carriers(i, list))
              if (!marked[i][size_t(f)])
                marked[i][size_t(f)] = changed = true;
    };
    mark(op->getOperands(), rule.getOperandFactors());
    mark(op->getResults(), rule.getResultFactors());
    auto spread = [&](ValueRange values, ArrayRef<TensorFactors> factors) {
      for (auto [value, tf] : llvm::zip(values, factors))
        for (auto [d, list] : llvm::enumerate(tf))
          if (llvm::any_of(carriers(i, list),
                           [&](int64_t f) { return marked[i][size_t(f)]; }) &&
              !(dims.lookup(value) >> d & 1)) {
            dims[value] |= uint64_t(1) << d;
            changed = true;
          }
    };
    spread(op->getOperands(), rule.getOperandFactors());
    spread(op->getResults(), rule.getResultFactors());
    return changed;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < v.ops.size(); ++i)
      changed |= visit(i);
    for (size_t i = v.ops.size(); i-- > 0;)
      changed |= visit(i);
  }
  return marked;
}

/// Marks the batch factor of every op (dimension 0 of each data input) and
/// the sequence factor (dimension 1 of each [batch, sequence] integer
/// token input) that context parallelism splits: the first in the op's
/// operands' dimension order that the op does not need whole.
void propagateBatchAndSequence(ForwardView &v) {
  for (BlockArgument a : v.func.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(a.getType());
    if (v.isInput(a) && t && t.getRank() >= 1 && !v.batch)
      v.batch = t.getDimSize(0);
  }
  auto batch = propagateDim(
      v, 0, [](BlockArgument) { return true; }, /*majorOnly=*/true);
  auto sequence = propagateDim(
      v, 1, [&](BlockArgument a) { return v.isTokenInput(a); },
      /*majorOnly=*/false, &batch);
  for (size_t i = 0; i < v.ops.size(); ++i) {
    auto it = std::find(batch[i].begin(), batch[i].end(), true);
    v.batchFactor[i] = it == batch[i].end() ? -1 : int(it - batch[i].begin());
    const ShardingRule &rule = v.rules[i];
    auto splits = [&](ArrayRef<TensorFactors> tensors) {
      for (const TensorFactors &tf : tensors)
        for (const auto &list : tf)
          for (int64_t f : list)
            if (sequence[i][size_t(f)] &&
                rule.getFactorKind(f) != FactorKind::NeedReplication)
              return int(f);
      return -1;
    };
    v.seqFactor[i] = splits(rule.getOperandFactors());
    if (v.seqFactor[i] < 0)
      v.seqFactor[i] = splits(rule.getResultFactors());
  }
}

/// What planning sees of an op: types, rule, FLOPs, argument kinds.
uint64_t signature(const ForwardView &v, size_t i) {
  Operation *op = v.ops[i];
  llvm::hash_code h =
      llvm::hash_combine(op->getName().getStringRef(), v.rules[i].toString(),
                         llvm::hash_combine_range(op->getResultTypes().begin(),
                                                  op->getResultTypes().end()),
                         llvm::hash_combine_range(op->getOperandTypes().begin(),
                                                  op->getOperandTypes().end()));
  if (auto c = dyn_cast<CostOpInterface>(op))
    h = llvm::hash_combine(h, uint64_t(c.getFlops()));
  for (Value operand : op->getOperands())
    if (auto a = dyn_cast<BlockArgument>(operand))
      h = llvm::hash_combine(h, v.isParam(a));
  return uint64_t(h);
}

/// The longest run of a repeating op sequence: (start, period, end).
std::tuple<int, int, int> longestRepeat(const std::vector<uint64_t> &sig) {
  int n = int(sig.size()), bestStart = 0, bestPeriod = 0, bestEnd = 0;
  int bestCover = 0;
  for (int k = 2; 2 * k <= n; ++k) {
    int run = 0;
    for (int i = 0; i + k < n; ++i) {
      run = sig[size_t(i)] == sig[size_t(i + k)] ? run + 1 : 0;
      if (run < k)
        continue;
      int begin = i - run + 1, end = i + k + 1;
      int cover = (end - begin) / k * k;
      // A longer run of the same repetition keeps growing its region (a
      // rotation of the block needs the ops past the last whole instance).
      bool longer = k == bestPeriod && begin == bestStart && end > bestEnd;
      if (cover > bestCover || longer) {
        bestCover = cover;
        bestStart = begin;
        bestPeriod = k;
        bestEnd = end;
      }
    }
  }
  return {bestStart, bestPeriod, bestEnd};
}

/// Among the rotations of the repeated block, the cut where the fewest
/// values cross from one instance into the next (a transformer layer
/// boundary: only the residual stream).
int bestPhase(const ForwardView &v, int begin, int period) {
  int n = int(v.ops.size());
  std::vector<int> delta(size_t(n + 2), 0);
  for (int i = 0; i < n; ++i)
    for (Value r : v.ops[size_t(i)]->getResults()) {
      int last = -1;
      for (Operation *user : r.getUsers())
        if (auto it = v.position.find(user); it != v.position.end())
          last = std::max(last, it->second);
      if (last > i) {
        ++delta[size_t(i + 1)];
        --delta[size_t(last + 1)];
      }
    }
  std::vector<int> crossing(size_t(n + 1), 0);
  for (int c = 1; c <= n; ++c)
    crossing[size_t(c)] = crossing[size_t(c - 1)] + delta[size_t(c)];
  int best = 0;
  for (int phi = 1; phi < period && begin + phi < n; ++phi)
    if (crossing[size_t(begin + phi)] < crossing[size_t(begin + best)])
      best = phi;
  return best;
}

/// Whether instance `t` is wired like instance 1 (or, for t = 0, like
/// instance 1 with entries from before the block where 1 reads instance 0).
bool wiredAlike(const ForwardView &v, int t) {
  for (int j = 0; j < v.length; ++j)
    for (unsigned k = 0; k < v.at(t, j)->getNumOperands(); ++k) {
      OperandSource mine = v.sourceOf(t, j, k), ref = v.sourceOf(1, j, k);
      if (t == 0 && ref.kind == OperandSource::Previous) {
        if (mine.kind != OperandSource::External)
          return false;
        continue;
      }
      if (!(mine == ref) || mine.kind == OperandSource::Irregular)
        return false;
    }
  return true;
}

void findBlock(ForwardView &v) {
  std::vector<uint64_t> sig;
  for (size_t i = 0; i < v.ops.size(); ++i)
    sig.push_back(signature(v, i));
  auto [begin, period, end] = longestRepeat(sig);
  if (period == 0)
    return;
  v.start = begin + bestPhase(v, begin, period);
  v.length = period;
  v.count = (end - v.start) / period;
  if (v.count < 2) {
    v.count = 0;
    return;
  }
  for (int t = 2; t < v.count; ++t)
    if (!wiredAlike(v, t)) {
      v.count = t;
      break;
    }
  if (!wiredAlike(v, 0) || v.count < 2)
    v.count = 0;
}

} // namespace

FailureOr<ForwardView> analyzeForward(func::FuncOp func, std::string &error) {
  ForwardView v;
  v.func = func;
  if (func.getBody().getBlocks().size() != 1) {
    error = "function @" + func.getSymName().str() + " must have one block";
    return failure();
  }
  v.loss = findLoss(func, error);
  if (!v.loss)
    return failure();
  v.ops = forwardOps(func, v.loss);
  for (auto [i, op] : llvm::enumerate(v.ops)) {
    v.position[op] = int(i);
    auto rule = dyn_cast<ShardingRuleOpInterface>(op);
    if (!rule) {
      error = describeOp(op) +
              " has no sharding rule (ShardingRuleOpInterface): the planner "
              "cannot split or price it on the path to the loss";
      return failure();
    }
    v.rules.push_back(rule.getShardingRule());
  }
  v.batchFactor.assign(v.ops.size(), -1);
  v.seqFactor.assign(v.ops.size(), -1);
  propagateBatchAndSequence(v);
  findBlock(v);
  return v;
}

} // namespace cleave::planner
