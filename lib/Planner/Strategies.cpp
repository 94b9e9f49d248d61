//===- Strategies.cpp - An op's strategies from its sharding rule ---------===//

#include "Strategies.h"

#include "cleave/CostModel/OpCost.h"

#include <functional>
#include <optional>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::planner::detail {

double bytesOf(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return 0;
  Type e = t.getElementType();
  unsigned bits = e.isIntOrFloat() ? e.getIntOrFloatBitWidth() : 64;
  return double(t.getNumElements()) * double((bits + 7) / 8);
}

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

double shardsOf(uint8_t mask, const std::vector<MeshAxis> &axes) {
  double n = 1;
  for (size_t a = 0; a < axes.size(); ++a)
    if (mask >> a & 1)
      n *= double(axes[a].size);
  return n;
}

double localBytes(Value v, const Layout &l, const std::vector<MeshAxis> &axes) {
  return bytesOf(v.getType()) / shardsOf(l.splitAxes(), axes);
}

namespace {

/// Axes (bit mask) assigned to factor `f` by `choice`.
uint8_t axesOf(int f, ArrayRef<int8_t> choice) {
  uint8_t m = 0;
  for (size_t a = 0; a < choice.size(); ++a)
    if (choice[a] == f)
      m |= uint8_t(1u << a);
  return m;
}

Layout layoutOf(const TensorFactors &tf, ArrayRef<int8_t> choice) {
  Layout l;
  for (const auto &list : tf) {
    uint8_t m = 0;
    for (int64_t f : list)
      m |= axesOf(int(f), choice);
    l.dims.push_back(m);
  }
  return l;
}

/// Axes assigned to factors that `tf` does not contain.
uint8_t missing(const TensorFactors &tf, ArrayRef<int8_t> choice) {
  uint8_t present = 0, all = 0;
  for (const auto &list : tf)
    for (int64_t f : list)
      present |= axesOf(int(f), choice);
  for (size_t a = 0; a < choice.size(); ++a)
    if (choice[a] >= 0)
      all |= uint8_t(1u << a);
  return all & ~present;
}

/// Divisible factors, and only the major factor of a compound dimension
/// split.
bool valid(const ShardingRule &rule, ArrayRef<int8_t> choice,
           const std::vector<MeshAxis> &axes) {
  for (int64_t f = 0; f < rule.getNumFactors(); ++f) {
    int64_t n = 1;
    for (size_t a = 0; a < choice.size(); ++a)
      if (choice[a] == f)
        n *= axes[a].size;
    if (rule.getFactorSize(f) % n != 0)
      return false;
  }
  auto compoundOk = [&](ArrayRef<TensorFactors> tensors) {
    for (const TensorFactors &tf : tensors)
      for (const auto &list : tf)
        for (size_t i = 1; i < list.size(); ++i)
          if (axesOf(int(list[i]), choice))
            return false;
    return true;
  };
  return compoundOk(rule.getOperandFactors()) &&
         compoundOk(rule.getResultFactors());
}

} // namespace

double StrategyCosts::opTime(Operation *op, const Strategy &s,
                             uint8_t computeAxes) const {
  double flops = 0;
  if (auto c = dyn_cast<CostOpInterface>(op))
    flops = c.getFlops();
  double bytes = 0;
  for (auto [v, l] : llvm::zip(op->getOperands(), s.operands))
    bytes += localBytes(v, l, axes);
  for (auto [v, l] : llvm::zip(op->getResults(), s.results))
    bytes += localBytes(v, l, axes);
  double local = flops / shardsOf(computeAxes, axes);
  // Forward and backward (about twice the forward).
  return 3 * (cost::rooflineTime(local, bytes, dtype, cluster.gpu) +
              constants.kernelOverhead);
}

std::vector<Strategy> StrategyCosts::opStrategies(const ForwardView &v,
                                                  size_t i) const {
  Operation *op = v.ops[i];
  const ShardingRule &rule = v.rules[i];
  std::vector<int8_t> options = {-1};
  for (int64_t f = 0; f < rule.getNumFactors(); ++f)
    if (rule.getFactorKind(f) != FactorKind::NeedReplication)
      options.push_back(int8_t(f));
  std::vector<Strategy> out;
  llvm::SmallVector<int8_t, 4> choice(axes.size(), -1);
  std::function<void(size_t)> rec = [&](size_t a) {
    if (a == axes.size()) {
      if (!valid(rule, choice, axes))
        return;
      Strategy s;
      s.choice = choice;
      uint8_t used = 0;
      for (size_t b = 0; b < choice.size(); ++b)
        if (choice[b] >= 0)
          used |= uint8_t(1u << b);
      for (auto [k, tf] : llvm::enumerate(rule.getOperandFactors())) {
        s.operands.push_back(layoutOf(tf, choice));
        s.gradPartial.push_back(
            isFloatTensor(op->getOperand(k)) ? missing(tf, choice) : 0);
      }
      for (const TensorFactors &tf : rule.getResultFactors()) {
        Layout l = layoutOf(tf, choice);
        l.partial = missing(tf, choice);
        s.results.push_back(l);
      }
      s.time = opTime(op, s, used);
      for (auto [r, l] : llvm::zip(op->getResults(), s.results))
        if (isFloatTensor(r))
          s.activationBytes += localBytes(r, l, axes);
      out.push_back(std::move(s));
      return;
    }
    if (axes[a].size == 1) {
      choice[a] = -1;
      rec(a + 1);
    } else if (axes[a].batch) {
      choice[a] = int8_t(v.batchFactor[i]);
      rec(a + 1);
    } else {
      for (int8_t f : options) {
        choice[a] = f;
        rec(a + 1);
      }
    }
    choice[a] = -1;
  };
  rec(0);
  return out;
}

std::vector<Strategy> StrategyCosts::argStrategies(Value arg, bool param,
                                                   bool batchDim0) const {
  auto type = cast<RankedTensorType>(arg.getType());
  int rank = int(type.getRank());
  std::vector<Strategy> out;
  llvm::SmallVector<int8_t, 4> choice(axes.size(), -1);
  std::function<void(size_t)> rec = [&](size_t a) {
    if (a == axes.size()) {
      Layout l;
      l.dims.assign(size_t(rank), 0);
      for (size_t b = 0; b < axes.size(); ++b)
        if (choice[b] >= 0)
          l.dims[size_t(choice[b])] |= uint8_t(1u << b);
      for (int d = 0; d < rank; ++d)
        if (type.getDimSize(d) % int64_t(shardsOf(l.dims[size_t(d)], axes)))
          return;
      Strategy s;
      s.choice = choice;
      s.results.push_back(l);
      if (param)
        s.parameterBytes = localBytes(arg, l, axes);
      out.push_back(std::move(s));
      return;
    }
    choice[a] = -1;
    if (axes[a].size == 1) {
      rec(a + 1);
    } else if (axes[a].batch) {
      // Data is split over the batch; parameters are replicated (ZeRO
      // shards them at the plan level).
      choice[a] = int8_t(batchDim0 ? 0 : -1);
      rec(a + 1);
    } else {
      for (int d = -1; d < rank; ++d) {
        choice[a] = int8_t(d);
        rec(a + 1);
      }
    }
    choice[a] = -1;
  };
  rec(0);
  return out;
}

void StrategyCosts::addFollower(Operation *follower, Strategy &s,
                                bool saved) const {
  // A unary elementwise op keeps its input's layout.
  const Layout &l = s.results.front();
  double flops = 0;
  if (auto c = dyn_cast<CostOpInterface>(follower))
    flops = c.getFlops();
  Value in = follower->getOperand(0), out = follower->getResult(0);
  double bytes = localBytes(in, l, axes) + localBytes(out, l, axes);
  double local = flops / shardsOf(l.splitAxes(), axes);
  s.time += 3 * (cost::rooflineTime(local, bytes, dtype, cluster.gpu) +
                 constants.kernelOverhead);
  if (saved && isFloatTensor(out))
    s.activationBytes += localBytes(out, l, axes);
}

double StrategyCosts::collective(cost::CollectiveKind kind, double bytes,
                                 size_t axis) const {
  return cost::collectiveCost(kind, bytes, axes[axis].group, cluster, constants)
      .time;
}

namespace {

/// The collective axis `a` needs to convert `from` into `to`, if any.
std::optional<cost::CollectiveKind> stepOf(const Layout &from, const Layout &to,
                                           size_t a) {
  uint8_t bit = uint8_t(1u << a);
  bool inTo = to.splitAxes() & bit;
  if (from.partial & bit)
    return inTo ? cost::CollectiveKind::ReduceScatter
                : cost::CollectiveKind::AllReduce;
  if (!(from.splitAxes() & bit))
    return std::nullopt; // replicated: a local slice
  size_t d = 0;
  while (!(from.dims[d] & bit))
    ++d;
  if (d < to.dims.size() && (to.dims[d] & bit))
    return std::nullopt;
  return inTo ? cost::CollectiveKind::AllToAll
              : cost::CollectiveKind::AllGather;
}

} // namespace

double StrategyCosts::reshard(const Layout &from, const Layout &to,
                              double bytes) const {
  double total = 0;
  uint8_t split = from.splitAxes();
  for (size_t a = 0; a < axes.size(); ++a) {
    std::optional<cost::CollectiveKind> kind = stepOf(from, to, a);
    if (!kind)
      continue;
    // The buffer the collective works on: the tensor split by every other
    // axis of the source.
    uint8_t others = uint8_t(split & ~(1u << a));
    total += collective(*kind, bytes / shardsOf(others, axes), a);
  }
  return total;
}

std::string describeReshard(const Layout &from, const Layout &to,
                            const std::vector<MeshAxis> &axes) {
  std::string out;
  for (size_t a = 0; a < axes.size(); ++a)
    if (std::optional<cost::CollectiveKind> kind = stepOf(from, to, a))
      out += (out.empty() ? "" : ", ") + std::string(cost::toString(*kind)) +
             "(" + axes[a].name + ")";
  return out;
}

} // namespace cleave::planner::detail
