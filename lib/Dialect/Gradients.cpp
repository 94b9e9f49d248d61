//===- Gradients.cpp - The VJP rule of every differentiable op ------------===//
//
// Each rule builds the operand gradients from the result gradient with cleave
// ops, so the backward program is ordinary cleave IR: it shards, costs and
// lowers like the forward program. Ops whose backward pass needs more than a
// few primitive ops have `_grad` companions that recompute what they need.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/CleaveOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// Small helpers over an OpBuilder at one location.
struct Grad {
  OpBuilder &b;
  Location loc;

  Value splat(Value like, double v) {
    auto type = cast<RankedTensorType>(like.getType());
    auto elem = cast<FloatType>(type.getElementType());
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, b.getFloatAttr(elem, v).getValue()));
  }
  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x, y); }
  Value div(Value x, Value y) { return b.create<DivOp>(loc, x, y); }
  Value neg(Value x) { return b.create<NegOp>(loc, x); }
  Value scale(Value x, double v) { return mul(x, splat(x, v)); }
  /// Swaps the last two dimensions.
  Value transposeLast2(Value x) {
    int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
    SmallVector<int64_t> perm;
    for (int64_t d = 0; d < rank; ++d)
      perm.push_back(d);
    std::swap(perm[rank - 1], perm[rank - 2]);
    return b.create<TransposeOp>(loc, x, b.getDenseI64ArrayAttr(perm));
  }
  Value matmul(Value x, Value y, bool tx, bool ty) {
    return b.create<MatmulOp>(loc, x, y, tx ? b.getUnitAttr() : UnitAttr(),
                              ty ? b.getUnitAttr() : UnitAttr(), UnitAttr());
  }
};

Grad grad(OpBuilder &b, Operation *op) { return Grad{b, op->getLoc()}; }

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  dxs.append({dys[0], dys[0]});
  return success();
}

LogicalResult SubOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  dxs.append({dys[0], grad(b, *this).neg(dys[0])});
  return success();
}

LogicalResult MulOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  Grad g = grad(b, *this);
  dxs.append({g.mul(dys[0], getRhs()), g.mul(dys[0], getLhs())});
  return success();
}

LogicalResult DivOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  Grad g = grad(b, *this);
  // y = a / b: da = dy / b, db = -dy * a / b^2 = -dy * y / b.
  Value da = g.div(dys[0], getRhs());
  dxs.append({da, g.neg(g.mul(da, getResult()))});
  return success();
}

LogicalResult MaxOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  Grad g = grad(b, *this);
  // The gradient goes to lhs where lhs > rhs, to rhs elsewhere (ties: rhs).
  Value da = b.create<ReluGradOp>(getLoc(), g.sub(getLhs(), getRhs()), dys[0]);
  dxs.append({da, g.sub(dys[0], da)});
  return success();
}

LogicalResult MinOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  Grad g = grad(b, *this);
  Value da = b.create<ReluGradOp>(getLoc(), g.sub(getRhs(), getLhs()), dys[0]);
  dxs.append({da, g.sub(dys[0], da)});
  return success();
}

LogicalResult PowOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  Grad g = grad(b, *this);
  Value a = getLhs(), e = getRhs(), dy = dys[0];
  Value powMinusOne = b.create<PowOp>(getLoc(), a, g.sub(e, g.splat(e, 1.0)));
  Value da = g.mul(dy, g.mul(e, powMinusOne));
  Value de = g.mul(dy, g.mul(getResult(), b.create<LogOp>(getLoc(), a)));
  dxs.append({da, de});
  return success();
}

LogicalResult NegOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  dxs.push_back(grad(b, *this).neg(dys[0]));
  return success();
}

LogicalResult ExpOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  dxs.push_back(grad(b, *this).mul(dys[0], getResult()));
  return success();
}

LogicalResult LogOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  dxs.push_back(grad(b, *this).div(dys[0], getInput()));
  return success();
}

LogicalResult SqrtOp::buildVJP(OpBuilder &b, ValueRange dys,
                               SmallVectorImpl<Value> &dxs) {
  Grad g = grad(b, *this);
  dxs.push_back(g.div(g.scale(dys[0], 0.5), getResult()));
  return success();
}

LogicalResult RsqrtOp::buildVJP(OpBuilder &b, ValueRange dys,
                                SmallVectorImpl<Value> &dxs) {
  Grad g = grad(b, *this);
  // y = x^-1/2: dx = -1/2 dy y^3.
  Value y = getResult();
  dxs.push_back(g.mul(g.scale(dys[0], -0.5), g.mul(y, g.mul(y, y))));
  return success();
}

LogicalResult TanhOp::buildVJP(OpBuilder &b, ValueRange dys,
                               SmallVectorImpl<Value> &dxs) {
  Grad g = grad(b, *this);
  Value y = getResult();
  dxs.push_back(g.mul(dys[0], g.sub(g.splat(y, 1.0), g.mul(y, y))));
  return success();
}

LogicalResult SigmoidOp::buildVJP(OpBuilder &b, ValueRange dys,
                                  SmallVectorImpl<Value> &dxs) {
  Grad g = grad(b, *this);
  Value y = getResult();
  dxs.push_back(g.mul(dys[0], g.mul(y, g.sub(g.splat(y, 1.0), y))));
  return success();
}

LogicalResult ReluOp::buildVJP(OpBuilder &b, ValueRange dys,
                               SmallVectorImpl<Value> &dxs) {
  dxs.push_back(b.create<ReluGradOp>(getLoc(), getInput(), dys[0]));
  return success();
}

LogicalResult SiluOp::buildVJP(OpBuilder &b, ValueRange dys,
                               SmallVectorImpl<Value> &dxs) {
  dxs.push_back(b.create<SiluGradOp>(getLoc(), getInput(), dys[0]));
  return success();
}

LogicalResult GeluOp::buildVJP(OpBuilder &b, ValueRange dys,
                               SmallVectorImpl<Value> &dxs) {
  dxs.push_back(
      b.create<GeluGradOp>(getLoc(), getInput(), dys[0], getApproximate()));
  return success();
}

LogicalResult CastOp::buildVJP(OpBuilder &b, ValueRange dys,
                               SmallVectorImpl<Value> &dxs) {
  dxs.push_back(b.create<CastOp>(getLoc(), getInput().getType(), dys[0]));
  return success();
}

LogicalResult ShardingConstraintOp::buildVJP(OpBuilder &b, ValueRange dys,
                                             SmallVectorImpl<Value> &dxs) {
  dxs.push_back(dys[0]);
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and data movement
//===----------------------------------------------------------------------===//

/// Broadcasts the gradient of a reduction back over the reduced dims.
static Value unreduce(OpBuilder &b, Location loc, Value dy,
                      RankedTensorType inputType, ArrayRef<int64_t> dims) {
  SmallVector<int64_t> kept;
  for (int64_t d = 0, e = inputType.getRank(); d < e; ++d)
    if (!llvm::is_contained(dims, d))
      kept.push_back(d);
  auto type = inputType.clone(inputType.getShape());
  return b.create<BroadcastOp>(loc, type, dy, kept);
}

LogicalResult ReduceSumOp::buildVJP(OpBuilder &b, ValueRange dys,
                                    SmallVectorImpl<Value> &dxs) {
  dxs.push_back(unreduce(b, getLoc(), dys[0], getInput().getType(), getDims()));
  return success();
}

LogicalResult ReduceMeanOp::buildVJP(OpBuilder &b, ValueRange dys,
                                     SmallVectorImpl<Value> &dxs) {
  auto type = getInput().getType();
  double count = 1;
  for (int64_t d : getDims())
    count *= type.getDimSize(d);
  Value dx = unreduce(b, getLoc(), dys[0], type, getDims());
  dxs.push_back(grad(b, *this).scale(dx, 1.0 / count));
  return success();
}

LogicalResult BroadcastOp::buildVJP(OpBuilder &b, ValueRange dys,
                                    SmallVectorImpl<Value> &dxs) {
  SmallVector<int64_t> added;
  for (int64_t d = 0, e = getType().getRank(); d < e; ++d)
    if (!llvm::is_contained(getDims(), d))
      added.push_back(d);
  if (added.empty()) {
    dxs.push_back(dys[0]);
    return success();
  }
  dxs.push_back(
      b.create<ReduceSumOp>(getLoc(), dys[0], b.getDenseI64ArrayAttr(added)));
  return success();
}

LogicalResult ReshapeOp::buildVJP(OpBuilder &b, ValueRange dys,
                                  SmallVectorImpl<Value> &dxs) {
  dxs.push_back(b.create<ReshapeOp>(getLoc(), getInput().getType(), dys[0]));
  return success();
}

LogicalResult TransposeOp::buildVJP(OpBuilder &b, ValueRange dys,
                                    SmallVectorImpl<Value> &dxs) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  dxs.push_back(
      b.create<TransposeOp>(getLoc(), dys[0], b.getDenseI64ArrayAttr(inverse)));
  return success();
}

LogicalResult SliceOp::buildVJP(OpBuilder &b, ValueRange dys,
                                SmallVectorImpl<Value> &dxs) {
  auto in = getInput().getType();
  SmallVector<int64_t> low, high, interior;
  for (int64_t d = 0, e = in.getRank(); d < e; ++d) {
    int64_t size = getSizes()[d], stride = getStrides()[d];
    int64_t end =
        size > 0 ? getOffsets()[d] + (size - 1) * stride + 1 : getOffsets()[d];
    low.push_back(size > 0 ? getOffsets()[d] : 0);
    high.push_back(in.getDimSize(d) - (size > 0 ? end : 0));
    interior.push_back(stride - 1);
  }
  dxs.push_back(b.create<PadOp>(getLoc(), dys[0], b.getDenseI64ArrayAttr(low),
                                b.getDenseI64ArrayAttr(high),
                                b.getDenseI64ArrayAttr(interior),
                                b.getF64FloatAttr(0.0)));
  return success();
}

LogicalResult PadOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  auto in = getInput().getType();
  SmallVector<int64_t> strides;
  for (int64_t i : getInterior())
    strides.push_back(i + 1);
  dxs.push_back(
      b.create<SliceOp>(getLoc(), dys[0], getLow(), in.getShape(), strides));
  return success();
}

LogicalResult ConcatOp::buildVJP(OpBuilder &b, ValueRange dys,
                                 SmallVectorImpl<Value> &dxs) {
  int64_t dim = getDim(), offset = 0;
  auto outType = getType();
  for (Value input : getInputs()) {
    auto type = cast<RankedTensorType>(input.getType());
    SmallVector<int64_t> offsets(type.getRank(), 0), strides(type.getRank(), 1);
    offsets[dim] = offset;
    dxs.push_back(
        b.create<SliceOp>(getLoc(), dys[0], offsets, type.getShape(), strides));
    offset += type.getDimSize(dim);
  }
  (void)outType;
  return success();
}

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildVJP(OpBuilder &b, ValueRange dys,
                                 SmallVectorImpl<Value> &dxs) {
  Grad g = grad(b, *this);
  Value a = getLhs(), w = getRhs(), dc = dys[0];
  if (getReduceBatch()) {
    // C = sum_b A_b^T B_b: dA_b = B_b dC^T and dB_b = A_b dC, with dC
    // shared by every batch.
    dxs.append({g.matmul(w, dc, false, true), g.matmul(a, dc, false, false)});
    return success();
  }
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  auto aType = getLhs().getType();
  bool sharedRhs = getRhs().getType().getRank() == 2 && aType.getRank() > 2;
  // With A' = op(A), B' = op(B): dA' = dC B'^T and dB' = A'^T dC.
  Value da;
  if (!ta)
    da = g.matmul(dc, w, false, !tb);
  else if (!sharedRhs)
    da = g.matmul(w, dc, tb, true);
  else
    da = g.transposeLast2(g.matmul(dc, w, false, !tb));
  Value db;
  if (!sharedRhs) {
    db = tb ? g.matmul(dc, a, true, ta) : g.matmul(a, dc, !ta, false);
  } else {
    // The weight is shared by every batch: contract over batch and rows at
    // once (reduce_batch). Not flattening them keeps a sequence split
    // (context parallelism) a partial sum instead of a gather.
    Value rows = ta ? g.transposeLast2(a) : a;
    Value x = tb ? dc : rows, y = tb ? rows : dc;
    db = b.create<MatmulOp>(getLoc(), x, y, b.getUnitAttr(), UnitAttr(),
                            b.getUnitAttr());
  }
  dxs.append({da, db});
  return success();
}

//===----------------------------------------------------------------------===//
// Layers with companion gradient ops
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::buildVJP(OpBuilder &b, ValueRange dys,
                                  SmallVectorImpl<Value> &dxs) {
  dxs.push_back(
      b.create<SoftmaxGradOp>(getLoc(), getResult(), dys[0], getDimAttr()));
  return success();
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &b, ValueRange dys,
                                    SmallVectorImpl<Value> &dxs) {
  auto op = b.create<LayerNormGradOp>(getLoc(), getInput(), getGamma(), dys[0],
                                      getEpsilonAttr());
  dxs.append(op->result_begin(), op->result_end());
  return success();
}

LogicalResult RMSNormOp::buildVJP(OpBuilder &b, ValueRange dys,
                                  SmallVectorImpl<Value> &dxs) {
  auto op = b.create<RMSNormGradOp>(getLoc(), getInput(), getGamma(), dys[0],
                                    getEpsilonAttr());
  dxs.append(op->result_begin(), op->result_end());
  return success();
}

LogicalResult EmbeddingOp::buildVJP(OpBuilder &b, ValueRange dys,
                                    SmallVectorImpl<Value> &dxs) {
  dxs.push_back(b.create<EmbeddingGradOp>(getLoc(), getTable().getType(),
                                          getIds(), dys[0], getBlock(),
                                          getPaddingIdxAttr()));
  dxs.push_back(Value());
  if (getBlock())
    dxs.push_back(Value());
  return success();
}

LogicalResult RotaryOp::buildVJP(OpBuilder &b, ValueRange dys,
                                 SmallVectorImpl<Value> &dxs) {
  // A rotation's transpose is the rotation by the opposite angle.
  dxs.push_back(b.create<RotaryOp>(getLoc(), dys[0], getBlock(), getTheta(),
                                   getInterleaved(), !getInverse(),
                                   getBalancedAttr()));
  if (getBlock())
    dxs.push_back(Value());
  return success();
}

LogicalResult AttentionOp::buildVJP(OpBuilder &b, ValueRange dys,
                                    SmallVectorImpl<Value> &dxs) {
  auto op = b.create<AttentionGradOp>(
      getLoc(), getQuery(), getKey(), getValue(), dys[0], getQueryBlock(),
      getCausal(), getScaleAttr(), getBalancedAttr());
  dxs.append(op->result_begin(), op->result_end());
  if (getQueryBlock())
    dxs.push_back(Value());
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &b, ValueRange dys,
                                       SmallVectorImpl<Value> &dxs) {
  dxs.push_back(b.create<CrossEntropyGradOp>(getLoc(), getLogits(), getLabels(),
                                             dys[0], getCount(),
                                             getIgnoreIndexAttr()));
  dxs.push_back(Value());
  if (getCount())
    dxs.push_back(Value());
  return success();
}

LogicalResult DropoutOp::buildVJP(OpBuilder &b, ValueRange dys,
                                  SmallVectorImpl<Value> &dxs) {
  // The mask is a pure function of (seed, stream, index): applying the same
  // op to the gradient multiplies it by the same mask and scale.
  dxs.push_back(b.create<DropoutOp>(getLoc(), dys[0].getType(), dys[0],
                                    getSeed(), getBlocks(), getRateAttr(),
                                    getStreamAttr(), getGlobalShapeAttr()));
  dxs.append(1 + getBlocks().size(), Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

LogicalResult MoEAuxLossOp::buildVJP(OpBuilder &b, ValueRange dys,
                                     SmallVectorImpl<Value> &dxs) {
  dxs.push_back(b.create<MoEAuxLossGradOp>(getLoc(), getLogits(), dys[0],
                                           getTopKAttr(), getSigmoidAttr()));
  return success();
}

LogicalResult MoECombineOp::buildVJP(OpBuilder &b, ValueRange dys,
                                     SmallVectorImpl<Value> &dxs) {
  dxs.push_back(b.create<MoEWeightsGradOp>(getLoc(), dys[0], getExperts()));
  dxs.push_back(b.create<MoEDispatchOp>(getLoc(), dys[0], getWeights()));
  return success();
}

LogicalResult MoEDispatchOp::buildVJP(OpBuilder &b, ValueRange dys,
                                      SmallVectorImpl<Value> &dxs) {
  // The weights are the router's one-hot choice, piecewise constant in the
  // logits: no gradient flows to them.
  dxs.push_back(b.create<MoECombineOp>(getLoc(), getWeights(), dys[0]));
  dxs.push_back(Value());
  return success();
}

LogicalResult MoERouterOp::buildVJP(OpBuilder &b, ValueRange dys,
                                    SmallVectorImpl<Value> &dxs) {
  // Only `combine` carries gates; `dispatch` is piecewise constant.
  dxs.push_back(b.create<MoERouterGradOp>(
      getLoc(), getLogits(), getDispatch(), dys[0], getTopKAttr(),
      getSigmoidAttr(), getNormalizeAttr()));
  return success();
}
