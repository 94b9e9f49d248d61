//===- AttentionLowering.cpp - attention and its gradient -----------------===//
//
// Two lowerings (-cleave-lower-to-linalg's `attention-tile`):
//
// * tiled (FlashAttentionLowering.cpp, the default of both pipelines):
//   online softmax over query and key tiles, memory linear in the sequence;
// * materialised (here, attention-tile=0): batched
//   GEMMs (runtime calls after bufferization) and fused generics over the
//   full [B*H, S, Skv] probabilities:
//
//   Q', K', V' = [B*Hq, S, D] views (GQA expands K, V heads in the same copy)
//   P = softmax(mask(Q' K'^T * scale));  O = P V'
//
//   The gradient recomputes P, then dV = P^T dO, dP = dO V'^T,
//   dS = P (dP - rowsum(dP P)) scale, dQ = dS K', dK = dS^T Q', and sums
//   dK, dV over the query heads that share a key/value head.
//
//===----------------------------------------------------------------------===//

#include "AttentionUtils.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::cleave;

AttnShape mlir::cleave::attentionShapeOf(Value q, Value k, Value v) {
  auto qt = tensorTypeOf(q), kt = tensorTypeOf(k), vt = tensorTypeOf(v);
  return {qt.getDimSize(0), qt.getDimSize(1), kt.getDimSize(1),
          qt.getDimSize(2), kt.getDimSize(2), qt.getDimSize(3),
          vt.getDimSize(3)};
}

static AffineExpr dim(MLIRContext *ctx, unsigned i) {
  return getAffineDimExpr(i, ctx);
}

Value mlir::cleave::toHeadMajor(OpBuilder &b, Location loc, Value x, int64_t hq,
                                int64_t groups) {
  MLIRContext *ctx = b.getContext();
  auto t = tensorTypeOf(x);
  int64_t batch = t.getDimSize(0), len = t.getDimSize(1), d = t.getDimSize(3);
  int64_t heads = hq / groups;
  auto outType =
      RankedTensorType::get({batch, heads, groups, len, d}, t.getElementType());
  // out[b, h, g, l, e] = x[b, l, h, e]: query head h * groups + g reads
  // key/value head h.
  AffineMap map = AffineMap::get(
      5, 0, {dim(ctx, 0), dim(ctx, 3), dim(ctx, 1), dim(ctx, 4)}, ctx);
  Value out =
      buildGeneric(b, loc, outType, x, {map},
                   [](OpBuilder &, Location, ValueRange a) { return a[0]; });
  return reshapeTensor(b, loc, out, {batch * hq, len, d});
}

Value mlir::cleave::layoutBehindBarrier(OpBuilder &b, Location loc, Value x,
                                        function_ref<Value(Value)> layout) {
  auto barrier = x.getDefiningOp<OptimizationBarrierOp>();
  if (!barrier)
    return layout(x);
  return b.create<OptimizationBarrierOp>(loc, layout(barrier.getInput()));
}

Value mlir::cleave::fromHeadMajor(OpBuilder &b, Location loc, Value x,
                                  int64_t batch, int64_t hq) {
  auto t = tensorTypeOf(x);
  int64_t len = t.getDimSize(1), d = t.getDimSize(2);
  Value v = reshapeTensor(b, loc, x, {batch, hq, len, d});
  return transposeTensor(b, loc, v, {0, 2, 1, 3});
}

Value mlir::cleave::sumGroups(OpBuilder &b, Location loc, Value x,
                              const AttnShape &a, Type elem) {
  auto t = tensorTypeOf(x);
  int64_t len = t.getDimSize(1), d = t.getDimSize(2), g = a.groups();
  if (g == 1) {
    Value v = reshapeTensor(b, loc, x, {a.b, a.hq, len, d});
    return transposeTensor(b, loc, v, {0, 2, 1, 3});
  }
  Value v = reshapeTensor(b, loc, x, {a.b, a.hkv, g, len, d});
  Value sum = buildReduction(b, loc, v, {2}, ReduceKind::Sum);
  auto type = RankedTensorType::get({a.b, a.hkv, len, d}, elem);
  Value cast = buildElementwise(
      b, loc, type, sum,
      [](OpBuilder &, Location, ValueRange s) { return s[0]; });
  return transposeTensor(b, loc, cast, {0, 2, 1, 3});
}

namespace {

/// P = softmax(mask(scores * scale)) over the last dim of [BH, S, Skv].
/// With `queryBlock` (an i64 scalar tensor `b`), query row `i` is at its
/// global position (a device's block of a split sequence, `balanced` as
/// the op's: sequencePosition).
Value probabilities(OpBuilder &b, Location loc, Value scores, double scale,
                    bool causal, Value queryBlock = {},
                    std::optional<int64_t> balanced = std::nullopt) {
  MLIRContext *ctx = b.getContext();
  auto t = tensorTypeOf(scores);
  auto masked = [=](OpBuilder &nb, Location l, Value x) -> Value {
    Value v =
        nb.create<arith::MulFOp>(l, x, floatConst(nb, l, x.getType(), scale));
    if (!causal)
      return v;
    Value i = nb.create<linalg::IndexOp>(l, 1);
    Value j = nb.create<linalg::IndexOp>(l, 2);
    i = sequencePosition(nb, l, i, blockIndex(nb, l, queryBlock),
                         t.getDimSize(1), balanced);
    Value future = nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::ugt, j, i);
    return nb.create<arith::SelectOp>(
        l, future,
        floatConst(nb, l, x.getType(),
                   -std::numeric_limits<double>::infinity()),
        v);
  };
  Value max = buildReduction(b, loc, scores, {2}, ReduceKind::Max,
                             [&](OpBuilder &nb, Location l, ValueRange a) {
                               return masked(nb, l, a[0]);
                             });
  AffineMap full = AffineMap::getMultiDimIdentityMap(3, ctx);
  AffineMap row = dropDimsMap(ctx, 3, {2});
  auto f32 = t.clone(computeTypeFor(t.getElementType()));
  Value e = buildGeneric(b, loc, f32, {scores, max}, {full, row},
                         [&](OpBuilder &nb, Location l, ValueRange a) {
                           Value v = masked(nb, l, a[0]);
                           Value d = nb.create<arith::SubFOp>(l, v, a[1]);
                           return nb.create<math::ExpOp>(l, d).getResult();
                         });
  Value sum = buildReduction(b, loc, e, {2}, ReduceKind::Sum);
  return buildGeneric(
      b, loc, t, {e, sum}, {full, row},
      [](OpBuilder &nb, Location l, ValueRange a) {
        return nb.create<arith::DivFOp>(l, a[0], a[1]).getResult();
      });
}

struct AttentionLowering : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    AttnShape a = attentionShapeOf(op.getQuery(), op.getKey(), op.getValue());
    Type elem = op.getType().getElementType();
    auto heads = [&](Value x, int64_t groups) {
      return layoutBehindBarrier(rewriter, loc, x, [&](Value y) {
        return toHeadMajor(rewriter, loc, y, a.hq, groups);
      });
    };
    Value q = heads(op.getQuery(), 1);
    Value k = heads(op.getKey(), a.groups());
    Value v = heads(op.getValue(), a.groups());
    Value scores = buildMatmul(rewriter, loc, q, k, false, true, elem);
    Value p =
        probabilities(rewriter, loc, scores, op.getScaleOrDefault(),
                      op.getCausal(), op.getQueryBlock(), op.getBalanced());
    Value out = buildMatmul(rewriter, loc, p, v, false, false, elem);
    rewriter.replaceOp(op, fromHeadMajor(rewriter, loc, out, a.b, a.hq));
    return success();
  }
};

struct AttentionGradLowering : OpRewritePattern<AttentionGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    AttnShape a = attentionShapeOf(op.getQuery(), op.getKey(), op.getValue());
    Type elem = op.getQuery().getType().getElementType();
    double scale = op.getScaleOrDefault();
    Value q = toHeadMajor(rewriter, loc, op.getQuery(), a.hq, 1);
    Value k = toHeadMajor(rewriter, loc, op.getKey(), a.hq, a.groups());
    Value v = toHeadMajor(rewriter, loc, op.getValue(), a.hq, a.groups());
    Value dO = toHeadMajor(rewriter, loc, op.getGrad(), a.hq, 1);
    Value scores = buildMatmul(rewriter, loc, q, k, false, true, elem);
    Value p = probabilities(rewriter, loc, scores, scale, op.getCausal(),
                            op.getQueryBlock(), op.getBalanced());
    Value dV = buildMatmul(rewriter, loc, p, dO, true, false, elem);
    Value dP = buildMatmul(rewriter, loc, dO, v, false, true, elem);
    auto pt = tensorTypeOf(p);
    Value rowDot = buildReduction(
        rewriter, loc, {dP, p}, {}, pt.getShape(), {2}, ReduceKind::Sum,
        [](OpBuilder &b, Location l, ValueRange s) {
          return b.create<arith::MulFOp>(l, s[0], s[1]).getResult();
        });
    AffineMap full = AffineMap::getMultiDimIdentityMap(3, ctx);
    AffineMap row = dropDimsMap(ctx, 3, {2});
    Value dS = buildGeneric(
        rewriter, loc, pt, {p, dP, rowDot}, {full, full, row},
        [&](OpBuilder &b, Location l, ValueRange s) {
          Value diff = b.create<arith::SubFOp>(l, s[1], s[2]);
          Value r = b.create<arith::MulFOp>(l, s[0], diff);
          return b
              .create<arith::MulFOp>(l, r, floatConst(b, l, r.getType(), scale))
              .getResult();
        });
    Value dQ = buildMatmul(rewriter, loc, dS, k, false, false, elem);
    Value dK = buildMatmul(rewriter, loc, dS, q, true, false, elem);
    rewriter.replaceOp(op, {fromHeadMajor(rewriter, loc, dQ, a.b, a.hq),
                            sumGroups(rewriter, loc, dK, a, elem),
                            sumGroups(rewriter, loc, dV, a, elem)});
    return success();
  }
};

} // namespace

void mlir::cleave::populateAttentionLoweringPatterns(
    RewritePatternSet &patterns, int64_t attentionTile) {
  if (attentionTile > 0)
    return populateFlashAttentionPatterns(patterns, attentionTile);
  patterns.add<AttentionLowering, AttentionGradLowering>(patterns.getContext());
}
