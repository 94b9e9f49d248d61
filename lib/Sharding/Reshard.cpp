//===- Reshard.cpp - Collectives that change a tensor's sharding ----------===//

#include "cleave/Sharding/Reshard.h"
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

/// Step 1: pending sums.
static void planPartials(Layout &cur, ShardingAttr to,
                         ArrayRef<StringRef> pending,
                         SmallVectorImpl<ReshardStep> &steps) {
  Axes reduce;
  for (StringRef p : pending) {
    bool scattered = false;
    for (unsigned d = 0, e = cur.dims.size(); d < e && !scattered; ++d) {
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
      Axes slice(next.begin(), at);
      if (llvm::any_of(slice, [&](StringRef a) {
            return cur.uses(a) || llvm::is_contained(pending, a);
          }))
        continue;
      if (!slice.empty()) {
        steps.push_back({ReshardStep::Kind::Shard, slice, int64_t(d), -1, 0});
        llvm::append_range(have, slice);
      }
      int64_t before = cur.localBytes();
      have.push_back(p);
      steps.push_back({ReshardStep::Kind::ReduceScatter,
                       {p},
                       int64_t(d),
                       -1,
                       ringShare(before, cur.mesh.getAxisSize(p))});
      scattered = true;
    }
    if (!scattered)
      reduce.push_back(p);
  }
  if (reduce.empty())
    return;
  int64_t n = cur.mesh.getGroupSize(reduce);
  steps.push_back({ReshardStep::Kind::AllReduce, reduce, -1, -1,
                   2 * ringShare(cur.localBytes(), n)});
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
      steps.push_back({ReshardStep::Kind::AllToAll,
                       {axis},
                       int64_t(j),
                       int64_t(i),
                       ringShare(cur.localBytes(), n)});
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
    steps.push_back({ReshardStep::Kind::Shard, add, int64_t(d), -1, 0});
    llvm::append_range(have, add);
    any = true;
  }
  return any;
}

/// Step 2c: gathers the trailing axes of the first dimension that must lose
/// some.
static bool planGather(Layout &cur, ShardingAttr to,
                       SmallVectorImpl<ReshardStep> &steps) {
  for (unsigned d = 0, e = cur.dims.size(); d < e; ++d) {
    Axes target = dimAxes(to, d);
    Axes &have = cur.dims[d];
    if (isPrefix(have, target))
      continue;
    Axes drop;
    while (!have.empty() && !isPrefix(have, target)) {
      drop.insert(drop.begin(), have.back());
      have.pop_back();
    }
    int64_t n = cur.mesh.getGroupSize(drop);
    steps.push_back({ReshardStep::Kind::AllGather, drop, int64_t(d), -1,
                     ringShare(cur.localBytes(), n)});
    return true;
  }
  return false;
}

FailureOr<SmallVector<ReshardStep>>
mlir::cleave::planReshard(RankedTensorType global, ShardingAttr from,
                          ShardingAttr to, MeshOp mesh, std::string &why) {
  SmallVector<StringRef> fromPartial = from.getPartialAxes();
  SmallVector<StringRef> toPartial = to.getPartialAxes();
  for (StringRef p : toPartial)
    if (!llvm::is_contained(fromPartial, p)) {
      why = "a replicated or split value cannot become a pending sum over '" +
            p.str() + "'";
      return failure();
    }
  Layout cur{{}, global, mesh};
  for (unsigned d = 0, e = from.getRank(); d < e; ++d)
    cur.dims.push_back(dimAxes(from, d));
  SmallVector<StringRef> pending;
  for (StringRef p : fromPartial)
    if (!llvm::is_contained(toPartial, p))
      pending.push_back(p);

  SmallVector<ReshardStep> steps;
  planPartials(cur, to, pending, steps);
  auto done = [&] {
    for (unsigned d = 0, e = cur.dims.size(); d < e; ++d)
      if (!llvm::equal(cur.dims[d], dimAxes(to, d)))
        return false;
    return true;
  };
  while (!done()) {
    if (planMove(cur, to, steps))
      continue;
    if (planSlices(cur, to, steps))
      continue;
    if (!planGather(cur, to, steps)) {
      why = "no step makes progress (internal error)";
      return failure();
    }
  }
  return steps;
}

/// The local type of `global` under per-dimension `dims`.
static RankedTensorType localType(RankedTensorType global, ArrayRef<Axes> dims,
                                  MeshOp mesh) {
  SmallVector<int64_t> shape(global.getShape());
  for (auto [d, axes] : llvm::enumerate(dims))
    shape[d] /= mesh.getGroupSize(axes);
  return RankedTensorType::get(shape, global.getElementType());
}

Value mlir::cleave::emitReshard(OpBuilder &b, Location loc, Value local,
                                RankedTensorType global, ShardingAttr from,
                                ArrayRef<ReshardStep> steps, MeshOp mesh) {
  SmallVector<Axes> dims;
  for (unsigned d = 0, e = from.getRank(); d < e; ++d)
    dims.push_back(dimAxes(from, d));
  StringRef meshName = mesh.getSymName();
  for (const ReshardStep &step : steps) {
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
      local = b.create<ReduceScatterOp>(loc, localType(global, dims, mesh),
                                        local, meshName, axes, step.dim,
                                        ReductionKind::Sum);
      continue;
    case ReshardStep::Kind::Shard:
      llvm::append_range(dims[step.dim], step.axes);
      if (!noData)
        local = b.create<ShardOp>(loc, localType(global, dims, mesh), local,
                                  meshName, axes, step.dim);
      continue;
    case ReshardStep::Kind::AllGather:
      dims[step.dim].resize(dims[step.dim].size() - step.axes.size());
      if (!noData)
        local = b.create<AllGatherOp>(loc, localType(global, dims, mesh), local,
                                      meshName, axes, step.dim);
      continue;
    case ReshardStep::Kind::AllToAll:
      dims[step.concatDim].pop_back();
      dims[step.dim].push_back(step.axes.front());
      if (!noData)
        local = b.create<AllToAllOp>(loc, localType(global, dims, mesh), local,
                                     meshName, axes, step.dim, step.concatDim);
      continue;
    }
  }
  return local;
}
