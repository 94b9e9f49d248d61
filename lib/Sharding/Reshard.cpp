//===- Reshard.cpp - Collectives that change a tensor's sharding ----------===//

#include "cleave/Sharding/Reshard.h"
#include "cleave/Dialect/LocalOp.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::cleave;

using Axes = SmallVector<StringRef, 2>;

std::string ReshardStep::toString() const {
  std::string axesText = "[" + llvm::join(axes, ", ") + "]";
  switch (kind) {
  case Kind::AllReduce:
    return "all_reduce " + axesText;
  case Kind::ReduceScatter:
    return "reduce_scatter " + axesText + " dim " + std::to_string(dim);
  case Kind::AllGather:
    return "all_gather " + axesText + " dim " + std::to_string(dim);
  case Kind::AllToAll:
    return "all_to_all " + axesText + " split_dim " + std::to_string(dim) +
           " concat_dim " + std::to_string(concatDim);
  case Kind::Shard:
    return "shard " + axesText + " dim " + std::to_string(dim);
  }
  return "";
}

namespace {
/// The layout while the plan is being built.
struct Layout {
  SmallVector<Axes> dims;
  RankedTensorType global;
  mutable MeshOp mesh;

  int64_t localBytes() const {
    int64_t n = global.getElementTypeBitWidth() / 8;
    for (auto [d, axes] : llvm::enumerate(dims))
      n *= global.getDimSize(d) / mesh.getGroupSize(axes);
    return n;
  }
  bool uses(StringRef axis) const {
    return llvm::any_of(
        dims, [&](const Axes &a) { return llvm::is_contained(a, axis); });
  }
};
} // namespace

static bool isPrefix(ArrayRef<StringRef> prefix, ArrayRef<StringRef> of) {
  return prefix.size() <= of.size() &&
         llvm::equal(prefix, of.take_front(prefix.size()));
}

static Axes dimAxes(ShardingAttr s, unsigned d) {
  SmallVector<StringRef> axes = s.getDimAxes(d);
  return Axes(axes.begin(), axes.end());
}

/// (n - 1) / n of `bytes`: what each device sends in a ring collective.
static int64_t ringShare(int64_t bytes, int64_t n) {
  return n <= 1 ? 0 : bytes / n * (n - 1);
}

/// A collective step over a group of `n` devices on a buffer of `buffer`
/// bytes (see ReshardStep::bufferBytes).
static ReshardStep collective(ReshardStep::Kind kind, ArrayRef<StringRef> axes,
                              int64_t dim, int64_t concatDim, int64_t buffer,
                              int64_t n) {
  int64_t sent = ringShare(buffer, n);
  if (kind == ReshardStep::Kind::AllReduce)
    sent *= 2;
  return {kind, Axes(axes.begin(), axes.end()), dim, concatDim, sent, buffer};
}

static ReshardStep slice(ArrayRef<StringRef> axes, int64_t dim) {
  return {
      ReshardStep::Kind::Shard, Axes(axes.begin(), axes.end()), dim, -1, 0, 0};
}

/// Step 1: pending sums; a reduce-scatter where the target splits a
/// dimension by the axis next, unless `scatter` is false (then one
/// all-reduce over all of them). Returns whether any axis was scattered.
static bool planPartials(Layout &cur, ShardingAttr to,
                         ArrayRef<StringRef> pending, bool scatter,
                         SmallVectorImpl<ReshardStep> &steps) {
  Axes reduce;
  bool any = false;
  for (StringRef p : pending) {
    bool scattered = false;
    for (unsigned d = 0, e = cur.dims.size(); d < e && scatter && !scattered;
         ++d) {
      Axes target = dimAxes(to, d);
      Axes &have = cur.dims[d];
      if (!isPrefix(have, target) || cur.uses(p))
        continue;
      // The axes the dimension takes before `p` are sliced first (a block
      // of a pending sum is the pending sum of the block), so the scatter
      // moves only the target's share.
      ArrayRef<StringRef> next = ArrayRef(target).drop_front(have.size());
      const StringRef *at = llvm::find(next, p);
      if (at == next.end())
        continue;
      Axes sliced(next.begin(), at);
      if (llvm::any_of(sliced, [&](StringRef a) {
            return cur.uses(a) || llvm::is_contained(pending, a);
          }))
        continue;
      if (!sliced.empty()) {
        steps.push_back(slice(sliced, d));
        llvm::append_range(have, sliced);
      }
      int64_t before = cur.localBytes();
      have.push_back(p);
      steps.push_back(collective(ReshardStep::Kind::ReduceScatter, {p}, d, -1,
                                 before, cur.mesh.getAxisSize(p)));
      scattered = any = true;
    }
    if (!scattered)
      reduce.push_back(p);
  }
  if (!reduce.empty())
    steps.push_back(collective(ReshardStep::Kind::AllReduce, reduce, -1, -1,
                               cur.localBytes(),
                               cur.mesh.getGroupSize(reduce)));
  return any;
}

/// Step 2a: one all-to-all, if some axis can move between dimensions.
static bool planMove(Layout &cur, ShardingAttr to,
                     SmallVectorImpl<ReshardStep> &steps) {
  for (unsigned i = 0, e = cur.dims.size(); i < e; ++i) {
    Axes &from = cur.dims[i];
    if (from.empty() || isPrefix(from, dimAxes(to, i)))
      continue;
    StringRef axis = from.back();
    for (unsigned j = 0; j < e; ++j) {
      Axes target = dimAxes(to, j);
      Axes &into = cur.dims[j];
      if (j == i || !isPrefix(into, target) || into.size() == target.size() ||
          target[into.size()] != axis)
        continue;
      int64_t n = cur.mesh.getAxisSize(axis);
      if ((cur.global.getDimSize(j) / cur.mesh.getGroupSize(into)) % n != 0)
        continue;
      steps.push_back(collective(ReshardStep::Kind::AllToAll, {axis}, j, i,
                                 cur.localBytes(), n));
      from.pop_back();
      into.push_back(axis);
      return true;
    }
  }
  return false;
}

/// Step 2b: local slices for every axis a dimension needs next and that no
/// dimension holds.
static bool planSlices(Layout &cur, ShardingAttr to,
                       SmallVectorImpl<ReshardStep> &steps) {
  bool any = false;
  for (unsigned d = 0, e = cur.dims.size(); d < e; ++d) {
    Axes target = dimAxes(to, d);
    Axes &have = cur.dims[d];
    if (!isPrefix(have, target))
      continue;
    Axes add;
    for (size_t k = have.size(); k < target.size() && !cur.uses(target[k]); ++k)
      add.push_back(target[k]);
    if (add.empty())
      continue;
    steps.push_back(slice(add, d));
    llvm::append_range(have, add);
    any = true;
  }
  return any;
}

/// The dimensions that must lose some trailing axes.
static SmallVector<unsigned> gatherDims(const Layout &cur, ShardingAttr to) {
  SmallVector<unsigned> dims;
  for (unsigned d = 0, e = cur.dims.size(); d < e; ++d)
    if (!isPrefix(cur.dims[d], dimAxes(to, d)))
      dims.push_back(d);
  return dims;
}

/// Step 2c: gathers on dimension `d` all the trailing axes it must lose, in
/// one collective, or only the last one if `oneAxis`. Returns false if
/// `oneAxis` is set and there is only one axis to gather (no new choice).
static bool planGather(Layout &cur, ShardingAttr to, unsigned d, bool oneAxis,
                       SmallVectorImpl<ReshardStep> &steps) {
  Axes target = dimAxes(to, d);
  Axes &have = cur.dims[d];
  Axes drop;
  while (!have.empty() && !isPrefix(have, target) &&
         (!oneAxis || drop.empty())) {
    drop.insert(drop.begin(), have.back());
    have.pop_back();
  }
  if (oneAxis && isPrefix(have, target))
    return false;
  steps.push_back(collective(ReshardStep::Kind::AllGather, drop, d, -1,
                             cur.localBytes(), cur.mesh.getGroupSize(drop)));
  return true;
}

namespace {
/// Depth-first over the choices of step 2c, the greedy choice first.
struct CandidateSearch {
  ShardingAttr to;
  unsigned limit;
  SmallVector<SmallVector<ReshardStep>> found;

  bool done(const Layout &cur) const {
    for (unsigned d = 0, e = cur.dims.size(); d < e; ++d)
      if (!llvm::equal(cur.dims[d], dimAxes(to, d)))
        return false;
    return true;
  }

  void extend(Layout cur, SmallVector<ReshardStep> steps) {
    while (!done(cur)) {
      if (planMove(cur, to, steps) || planSlices(cur, to, steps))
        continue;
      SmallVector<unsigned> dims = gatherDims(cur, to);
      if (dims.empty())
        return; // no progress: not a candidate
      for (unsigned d : dims)
        for (bool oneAxis : {false, true}) {
          if (found.size() >= limit)
            return;
          Layout next = cur;
          SmallVector<ReshardStep> more = steps;
          if (planGather(next, to, d, oneAxis, more))
            extend(std::move(next), std::move(more));
        }
      return;
    }
    found.push_back(std::move(steps));
  }
};
} // namespace

double mlir::cleave::reshardStepBytes(const ReshardStep &step) {
  return double(step.bytesSent);
}

double mlir::cleave::reshardCost(ArrayRef<ReshardStep> steps,
                                 ReshardStepCost cost) {
  double total = 0;
  for (const ReshardStep &step : steps)
    total += cost(step);
  return total;
}

FailureOr<SmallVector<SmallVector<ReshardStep>>>
mlir::cleave::planReshardCandidates(RankedTensorType global, ShardingAttr from,
                                    ShardingAttr to, MeshOp mesh,
                                    std::string &why, unsigned limit) {
  SmallVector<StringRef> fromPartial = from.getPartialAxes();
  SmallVector<StringRef> toPartial = to.getPartialAxes();
  for (StringRef p : toPartial)
    if (!llvm::is_contained(fromPartial, p)) {
      why = "a replicated or split value cannot become a pending sum over '" +
            p.str() + "'";
      return failure();
    }
  Layout start{{}, global, mesh};
  for (unsigned d = 0, e = from.getRank(); d < e; ++d)
    start.dims.push_back(dimAxes(from, d));
  SmallVector<StringRef> pending;
  for (StringRef p : fromPartial)
    if (!llvm::is_contained(toPartial, p))
      pending.push_back(p);

  CandidateSearch search{to, std::max(limit, 1u), {}};
  // Scattering pending sums first; reducing them all is the other choice,
  // worth a look only where something was scattered.
  for (bool scatter : {true, false}) {
    Layout cur = start;
    SmallVector<ReshardStep> steps;
    bool scattered = planPartials(cur, to, pending, scatter, steps);
    search.extend(std::move(cur), std::move(steps));
    if (!scattered)
      break;
  }
  if (search.found.empty()) {
    why = "no step makes progress (internal error)";
    return failure();
  }
  return std::move(search.found);
}

FailureOr<SmallVector<ReshardStep>>
mlir::cleave::planReshard(RankedTensorType global, ShardingAttr from,
                          ShardingAttr to, MeshOp mesh, std::string &why,
                          ReshardStepCost cost) {
  auto candidates = planReshardCandidates(global, from, to, mesh, why);
  if (failed(candidates))
    return failure();
  // A relative margin keeps the earlier (greedier) sequence when rounding
  // alone separates two prices.
  size_t best = 0;
  double bestCost = reshardCost((*candidates)[0], cost);
  for (size_t i = 1, e = candidates->size(); i < e; ++i) {
    double c = reshardCost((*candidates)[i], cost);
    if (c < bestCost * (1 - 1e-9)) {
      best = i;
      bestCost = c;
    }
  }
  return std::move((*candidates)[best]);
}

/// The local type of `global` under per-dimension `dims`.
static RankedTensorType localType(RankedTensorType global, ArrayRef<Axes> dims,
                                  MeshOp mesh) {
  SmallVector<int64_t> shape(global.getShape());
  for (auto [d, axes] : llvm::enumerate(dims))
    shape[d] /= mesh.getGroupSize(axes);
  return RankedTensorType::get(shape, global.getElementType());
}

/// The size of the balanced axis leading a dimension split over `axes`
/// (cleave.mesh's balanced_axes), or 0 when its blocks are contiguous.
static int64_t balancedBlocks(ArrayRef<StringRef> axes, MeshOp mesh) {
  if (axes.empty() || !mesh.isBalancedAxis(axes.front()))
    return 0;
  return mesh.getAxisSize(axes.front());
}

Value mlir::cleave::emitReshard(OpBuilder &b, Location loc, Value local,
                                RankedTensorType global, ShardingAttr from,
                                ArrayRef<ReshardStep> steps, MeshOp mesh) {
  SmallVector<Axes> dims;
  for (unsigned d = 0, e = from.getRank(); d < e; ++d)
    dims.push_back(dimAxes(from, d));
  StringRef meshName = mesh.getSymName();
  // A dimension whose layout turns load-balanced is whole here: permute it
  // into the balanced order before it is split (contiguously in that order);
  // one that stops being balanced is whole after the step: back.
  auto balance = [&](unsigned d, const Axes &before, const Axes &after) {
    int64_t n = balancedBlocks(after, mesh);
    if (n && !balancedBlocks(before, mesh))
      local = buildBalancedPermutation(b, loc, local, d, n, /*inverse=*/false);
  };
  auto unbalance = [&](unsigned d, const Axes &before, const Axes &after) {
    int64_t n = balancedBlocks(before, mesh);
    if (n && !balancedBlocks(after, mesh))
      local = buildBalancedPermutation(b, loc, local, d, n, /*inverse=*/true);
  };
  for (const ReshardStep &step : steps) {
    // The axes of the dimensions the step changes, before it (an all-reduce
    // changes none).
    Axes before, concatBefore;
    if (step.kind != ReshardStep::Kind::AllReduce)
      before = dims[step.dim];
    if (step.kind == ReshardStep::Kind::AllToAll)
      concatBefore = dims[step.concatDim];
    ArrayAttr axes = b.getStrArrayAttr(step.axes);
    // Moving data over axes of size 1 moves nothing: the layout changes,
    // the local value does not. (Sums over them stay: a pipeline finds its
    // micro-batch boundary at the sum over 'mb', even of one micro-batch.)
    bool noData = mesh.getGroupSize(step.axes) == 1 &&
                  step.kind != ReshardStep::Kind::AllReduce &&
                  step.kind != ReshardStep::Kind::ReduceScatter;
    switch (step.kind) {
    case ReshardStep::Kind::AllReduce:
      local = b.create<AllReduceOp>(loc, local, meshName, axes);
      continue;
    case ReshardStep::Kind::ReduceScatter:
      llvm::append_range(dims[step.dim], step.axes);
      balance(step.dim, before, dims[step.dim]);
      local = b.create<ReduceScatterOp>(loc, localType(global, dims, mesh),
                                        local, meshName, axes, step.dim,
                                        ReductionKind::Sum);
      continue;
    case ReshardStep::Kind::Shard:
      llvm::append_range(dims[step.dim], step.axes);
      balance(step.dim, before, dims[step.dim]);
      if (!noData)
        local = b.create<ShardOp>(loc, localType(global, dims, mesh), local,
                                  meshName, axes, step.dim);
      continue;
    case ReshardStep::Kind::AllGather:
      dims[step.dim].resize(dims[step.dim].size() - step.axes.size());
      if (!noData)
        local = b.create<AllGatherOp>(loc, localType(global, dims, mesh), local,
                                      meshName, axes, step.dim);
      unbalance(step.dim, before, dims[step.dim]);
      continue;
    case ReshardStep::Kind::AllToAll:
      dims[step.concatDim].pop_back();
      dims[step.dim].push_back(step.axes.front());
      balance(step.dim, before, dims[step.dim]);
      if (!noData)
        local = b.create<AllToAllOp>(loc, localType(global, dims, mesh), local,
                                     meshName, axes, step.dim, step.concatDim);
      unbalance(step.concatDim, concatBefore, dims[step.concatDim]);
      continue;
    }
  }
  return local;
}
