//===- CollectiveOps.cpp - Per-device communication ops -------------------===//
//
// Every check that needs the mesh (axis names, group sizes, shapes that
// depend on them) runs in verifySymbolUses, after the module's symbols exist.
//
//===----------------------------------------------------------------------===//

#include "OpUtils.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::cleave;

/// Looks up the mesh and checks `axes`; returns the group size.
static FailureOr<int64_t> verifyGroup(Operation *op, FlatSymbolRefAttr meshRef,
                                      ArrayAttr axes,
                                      SymbolTableCollection &symbolTables) {
  MeshOp mesh = lookupMesh(op, meshRef, &symbolTables);
  if (!mesh)
    return op->emitOpError() << "refers to unknown mesh " << meshRef;
  if (axes.empty())
    return op->emitOpError() << "needs at least one mesh axis";
  llvm::StringSet<> seen;
  for (Attribute attr : axes) {
    StringRef axis = cast<StringAttr>(attr).getValue();
    if (!mesh.getAxisIndex(axis))
      return op->emitOpError()
             << "uses unknown axis '" << axis << "' of mesh " << meshRef;
    if (!seen.insert(axis).second)
      return op->emitOpError() << "names axis '" << axis << "' twice";
  }
  SmallVector<StringRef> names;
  for (Attribute attr : axes)
    names.push_back(cast<StringAttr>(attr).getValue());
  return mesh.getGroupSize(names);
}

static LogicalResult verifyDim(Operation *op, StringRef what, int64_t dim,
                               int64_t rank) {
  if (dim < 0 || dim >= rank)
    return op->emitOpError()
           << what << " " << dim << " is out of range for an operand of rank "
           << rank;
  return success();
}

/// Checks that `result` is `input` with dimension d scaled by mul[d]/div[d].
static LogicalResult
verifyScaledShape(Operation *op, RankedTensorType input,
                  RankedTensorType result,
                  ArrayRef<std::pair<int64_t, int64_t>>
                      scale /*(dim, factor>0 mul, <0 div)*/) {
  if (input.getElementType() != result.getElementType())
    return op->emitOpError()
           << "result element type " << result.getElementType()
           << " differs from operand element type " << input.getElementType();
  SmallVector<int64_t> expected(input.getShape());
  for (auto [dim, factor] : scale) {
    if (factor < 0) {
      if (expected[dim] % -factor != 0)
        return op->emitOpError()
               << "operand dimension " << dim << " has size " << expected[dim]
               << ", which is not divisible by the group size " << -factor;
      expected[dim] /= -factor;
    } else {
      expected[dim] *= factor;
    }
  }
  if (result.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError()
           << "result shape should be " << formatShape(expected) << " but is "
           << formatShape(result.getShape());
  return success();
}

static SmallVector<StringRef> axisNames(ArrayAttr axes) {
  SmallVector<StringRef> names;
  for (Attribute attr : axes)
    names.push_back(cast<StringAttr>(attr).getValue());
  return names;
}

#define CLEAVE_AXIS_NAMES(OpClass)                                             \
  SmallVector<StringRef> OpClass::getAxisNames() {                             \
    return axisNames(getAxes());                                               \
  }
CLEAVE_AXIS_NAMES(AllReduceOp)
CLEAVE_AXIS_NAMES(AllGatherOp)
CLEAVE_AXIS_NAMES(ReduceScatterOp)
CLEAVE_AXIS_NAMES(AllToAllOp)
CLEAVE_AXIS_NAMES(CollectivePermuteOp)
CLEAVE_AXIS_NAMES(SendOp)
CLEAVE_AXIS_NAMES(RecvOp)
CLEAVE_AXIS_NAMES(AllReduceStartOp)
CLEAVE_AXIS_NAMES(AllGatherStartOp)
CLEAVE_AXIS_NAMES(ReduceScatterStartOp)
CLEAVE_AXIS_NAMES(AllToAllStartOp)
CLEAVE_AXIS_NAMES(CollectivePermuteStartOp)
CLEAVE_AXIS_NAMES(SendStartOp)
CLEAVE_AXIS_NAMES(RecvStartOp)
CLEAVE_AXIS_NAMES(AxisIndexOp)
CLEAVE_AXIS_NAMES(ShardOp)
#undef CLEAVE_AXIS_NAMES

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyGroup(*this, getMeshAttr(), getAxes(), tables);
}

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  auto input = cast<RankedTensorType>(getInput().getType());
  if (failed(n) || failed(verifyDim(*this, "dim", getDim(), input.getRank())))
    return failure();
  return verifyScaledShape(*this, input, cast<RankedTensorType>(getType()),
                           {{getDim(), *n}});
}

LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  auto input = cast<RankedTensorType>(getInput().getType());
  if (failed(n) || failed(verifyDim(*this, "dim", getDim(), input.getRank())))
    return failure();
  return verifyScaledShape(*this, input, cast<RankedTensorType>(getType()),
                           {{getDim(), -*n}});
}

/// all_to_all and its start: the result moves a factor of the group size
/// from `split` to `concat`.
static LogicalResult verifyAllToAll(Operation *op, FlatSymbolRefAttr mesh,
                                    ArrayAttr axes, Type input, Type result,
                                    int64_t split, int64_t concat,
                                    SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(op, mesh, axes, tables);
  auto in = cast<RankedTensorType>(input);
  if (failed(n) || failed(verifyDim(op, "split_dim", split, in.getRank())) ||
      failed(verifyDim(op, "concat_dim", concat, in.getRank())))
    return failure();
  return verifyScaledShape(op, in, cast<RankedTensorType>(result),
                           {{split, -*n}, {concat, *n}});
}

LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyAllToAll(*this, getMeshAttr(), getAxes(), getInput().getType(),
                        getType(), getSplitDim(), getConcatDim(), tables);
}

/// (source, target) pairs of a flat `pairs` attribute.
static SmallVector<std::pair<int64_t, int64_t>>
sourceTargetPairs(ArrayRef<int64_t> flat) {
  SmallVector<std::pair<int64_t, int64_t>> pairs;
  for (size_t i = 0; i + 1 < flat.size(); i += 2)
    pairs.emplace_back(flat[i], flat[i + 1]);
  return pairs;
}

/// collective_permute and its start: pairs of group members, unique sources
/// and unique targets.
static LogicalResult verifyPermute(Operation *op, FlatSymbolRefAttr mesh,
                                   ArrayAttr axes, ArrayRef<int64_t> flat,
                                   SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(op, mesh, axes, tables);
  if (failed(n))
    return failure();
  if (flat.size() % 2 != 0)
    return op->emitOpError() << "pairs must hold (source, target) pairs";
  llvm::SmallSet<int64_t, 8> sources, targets;
  for (auto [src, dst] : sourceTargetPairs(flat)) {
    for (int64_t index : {src, dst})
      if (index < 0 || index >= *n)
        return op->emitOpError()
               << "pair " << src << " -> " << dst << " is outside the group of "
               << *n << " devices";
    if (!sources.insert(src).second)
      return op->emitOpError() << "device " << src << " is a source twice";
    if (!targets.insert(dst).second)
      return op->emitOpError() << "device " << dst << " is a target twice";
  }
  return success();
}

SmallVector<std::pair<int64_t, int64_t>>
CollectivePermuteOp::getSourceTargetPairs() {
  return sourceTargetPairs(getPairs());
}

LogicalResult
CollectivePermuteOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyPermute(*this, getMeshAttr(), getAxes(), getPairs(), tables);
}

static LogicalResult verifyPeer(Operation *op, int64_t peer, int64_t n) {
  if (peer < 0 || peer >= n)
    return op->emitOpError()
           << "peer " << peer << " is outside the group of " << n << " devices";
  return success();
}

LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  return failure(failed(n) || failed(verifyPeer(*this, getPeer(), *n)));
}

LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  return failure(failed(n) || failed(verifyPeer(*this, getPeer(), *n)));
}

LogicalResult AxisIndexOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyGroup(*this, getMeshAttr(), getAxes(), tables);
}

LogicalResult ShardOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  auto input = cast<RankedTensorType>(getInput().getType());
  if (failed(n) || failed(verifyDim(*this, "dim", getDim(), input.getRank())))
    return failure();
  return verifyScaledShape(*this, input, cast<RankedTensorType>(getType()),
                           {{getDim(), -*n}});
}

namespace {

/// shard(broadcast(x)) along a dimension the broadcast added ->
/// broadcast(x) at the shard's shape: every block of it is the same.
struct ShardOfBroadcast final : OpRewritePattern<ShardOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ShardOp shard,
                                PatternRewriter &rewriter) const override {
    auto broadcast = shard.getInput().getDefiningOp<BroadcastOp>();
    if (!broadcast || llvm::is_contained(broadcast.getDims(), shard.getDim()))
      return failure();
    auto local = rewriter.create<BroadcastOp>(
        broadcast.getLoc(), shard.getType(), broadcast.getInput(),
        broadcast.getDimsAttr());
    local->setDiscardableAttrs(broadcast->getDiscardableAttrDictionary());
    rewriter.replaceOp(shard, local.getResult());
    if (broadcast->use_empty())
      rewriter.eraseOp(broadcast);
    return success();
  }
};

/// shard(all_reduce(x)) over the same group, the all-reduce used by the
/// shard alone -> reduce_scatter(x): each device needs only its block of
/// the reduction, so it receives only that (half the bytes of a ring
/// all-reduce). ZeRO-1's gradient, reduced in full and then cut to the
/// device's block of the optimizer state, becomes the reduce-scatter of
/// Megatron's distributed optimizer.
struct ShardOfAllReduce final : OpRewritePattern<ShardOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ShardOp shard,
                                PatternRewriter &rewriter) const override {
    auto reduce = shard.getInput().getDefiningOp<AllReduceOp>();
    if (!reduce || !reduce->hasOneUse() ||
        reduce.getMeshAttr() != shard.getMeshAttr() ||
        reduce.getAxes() != shard.getAxes())
      return failure();
    auto scatter = rewriter.create<ReduceScatterOp>(
        reduce.getLoc(), shard.getType(), reduce.getInput(),
        reduce.getMeshAttr(), reduce.getAxes(), shard.getDimAttr(),
        reduce.getReductionAttr());
    scatter->setDiscardableAttrs(reduce->getDiscardableAttrDictionary());
    rewriter.replaceOp(shard, scatter.getResult());
    rewriter.eraseOp(reduce);
    return success();
  }
};

} // namespace

void ShardOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                          MLIRContext *context) {
  patterns.add<ShardOfBroadcast, ShardOfAllReduce>(context);
}

//===----------------------------------------------------------------------===//
// Start / wait
//===----------------------------------------------------------------------===//

/// The request of a start op is waited exactly once, in the start's block;
/// a request with a value type produces that tensor.
static LogicalResult verifyRequestUses(Operation *op, Value request,
                                       bool hasValue) {
  auto type = cast<RequestType>(request.getType());
  if (hasValue != bool(type.getValueType()))
    return op->emitOpError()
           << (hasValue ? "request must name the tensor its wait produces, "
                          "e.g. !cleave.request<tensor<...>>"
                        : "request of a send produces nothing: its type is "
                          "!cleave.request");
  if (type.getValueType() && !isa<RankedTensorType>(type.getValueType()))
    return op->emitOpError() << "request value type " << type.getValueType()
                             << " is not a ranked tensor";
  int64_t uses = std::distance(request.use_begin(), request.use_end());
  if (uses == 0)
    return op->emitOpError()
           << "request is never waited (each start needs one cleave.wait)";
  if (uses > 1)
    return op->emitOpError() << "request is used " << uses
                             << " times; it must be waited exactly once";
  Operation *user = *request.user_begin();
  if (!isa<WaitOp>(user))
    return op->emitOpError() << "request is used by '" << user->getName()
                             << "', not by a cleave.wait";
  if (user->getBlock() != op->getBlock())
    return op->emitOpError() << "request is waited in another block than "
                                "the one it starts in";
  return success();
}

#define CLEAVE_START_OP(OpClass, HasValue)                                     \
  WaitOp OpClass::getWait() {                                                  \
    return getRequest().hasOneUse()                                            \
               ? dyn_cast<WaitOp>(*getRequest().user_begin())                  \
               : WaitOp();                                                     \
  }                                                                            \
  LogicalResult OpClass::verify() {                                            \
    return verifyRequestUses(*this, getRequest(), HasValue);                   \
  }
CLEAVE_START_OP(AllReduceStartOp, true)
CLEAVE_START_OP(AllGatherStartOp, true)
CLEAVE_START_OP(ReduceScatterStartOp, true)
CLEAVE_START_OP(AllToAllStartOp, true)
CLEAVE_START_OP(CollectivePermuteStartOp, true)
CLEAVE_START_OP(SendStartOp, false)
CLEAVE_START_OP(RecvStartOp, true)
#undef CLEAVE_START_OP

static RankedTensorType requestTensor(Operation *op) {
  return cast<RankedTensorType>(
      cast<RequestType>(op->getResult(0).getType()).getValueType());
}

LogicalResult
AllReduceStartOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (failed(verifyGroup(*this, getMeshAttr(), getAxes(), tables)))
    return failure();
  return verifyScaledShape(*this, getInput().getType(), requestTensor(*this),
                           {});
}

LogicalResult
AllGatherStartOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  auto input = cast<RankedTensorType>(getInput().getType());
  if (failed(n) || failed(verifyDim(*this, "dim", getDim(), input.getRank())))
    return failure();
  return verifyScaledShape(*this, input, requestTensor(*this),
                           {{getDim(), *n}});
}

LogicalResult
ReduceScatterStartOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  auto input = cast<RankedTensorType>(getInput().getType());
  if (failed(n) || failed(verifyDim(*this, "dim", getDim(), input.getRank())))
    return failure();
  return verifyScaledShape(*this, input, requestTensor(*this),
                           {{getDim(), -*n}});
}

LogicalResult AllToAllStartOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyAllToAll(*this, getMeshAttr(), getAxes(), getInput().getType(),
                        requestTensor(*this), getSplitDim(), getConcatDim(),
                        tables);
}

SmallVector<std::pair<int64_t, int64_t>>
CollectivePermuteStartOp::getSourceTargetPairs() {
  return sourceTargetPairs(getPairs());
}

LogicalResult
CollectivePermuteStartOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (failed(
          verifyPermute(*this, getMeshAttr(), getAxes(), getPairs(), tables)))
    return failure();
  if (getInput().getType() != requestTensor(*this))
    return emitOpError() << "request type " << getRequest().getType()
                         << " should carry the operand type "
                         << getInput().getType();
  return success();
}

LogicalResult SendStartOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  return failure(failed(n) || failed(verifyPeer(*this, getPeer(), *n)));
}

LogicalResult RecvStartOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  return failure(failed(n) || failed(verifyPeer(*this, getPeer(), *n)));
}

Operation *WaitOp::getStart() {
  Operation *def = getRequest().getDefiningOp();
  return isa_and_nonnull<AllReduceStartOp, AllGatherStartOp,
                         ReduceScatterStartOp, AllToAllStartOp,
                         CollectivePermuteStartOp, SendStartOp, RecvStartOp>(
             def)
             ? def
             : nullptr;
}

LogicalResult WaitOp::verify() {
  if (!getStart())
    return emitOpError() << "waits for a request that no cleave.*_start op "
                            "defines (a wait without a start)";
  Type value = getRequest().getType().getValueType();
  Type result = getResult() ? getResult().getType() : Type();
  if (value != result) {
    if (!value)
      return emitOpError() << "waits for a send, which produces no result";
    return emitOpError() << "result type should be " << value << " but is "
                         << (result ? result : Type());
  }
  return success();
}
