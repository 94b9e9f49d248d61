//===- NormLowering.cpp - softmax, norms, cross-entropy -------------------===//
//
// Row-wise ops: statistics are reduced into f32 tensors over the normalized
// dimension, then one elementwise generic reads the input and the broadcast
// statistics. Gradients recompute the statistics from the forward input.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// Scalar arithmetic shorthands inside generic bodies.
struct S {
  OpBuilder &b;
  Location l;
  Value add(Value x, Value y) { return b.create<arith::AddFOp>(l, x, y); }
  Value sub(Value x, Value y) { return b.create<arith::SubFOp>(l, x, y); }
  Value mul(Value x, Value y) { return b.create<arith::MulFOp>(l, x, y); }
  Value div(Value x, Value y) { return b.create<arith::DivFOp>(l, x, y); }
  Value exp(Value x) { return b.create<math::ExpOp>(l, x); }
  Value c(Value like, double v) { return floatConst(b, l, like.getType(), v); }
  Value rsqrt(Value x) { return div(c(x, 1.0), b.create<math::SqrtOp>(l, x)); }
};

/// Maps of a row-wise op over a rank-`rank` space normalized along `dim`.
struct RowMaps {
  RowMaps(MLIRContext *ctx, int64_t rank, int64_t dim)
      : full(AffineMap::getMultiDimIdentityMap(rank, ctx)),
        row(dropDimsMap(ctx, rank, {dim})),
        vec(AffineMap::get(rank, 0, getAffineDimExpr(dim, ctx))) {}
  AffineMap full, row, vec;
};

struct SoftmaxLowering : OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = op.getType();
    int64_t dim = op.getDim();
    RowMaps m(rewriter.getContext(), type.getRank(), dim);
    Value x = op.getInput();
    Value max = buildReduction(rewriter, loc, x, {dim}, ReduceKind::Max);
    auto f32Type = type.clone(computeTypeFor(type.getElementType()));
    Value e = buildGeneric(rewriter, loc, f32Type, {x, max}, {m.full, m.row},
                           [](OpBuilder &b, Location l, ValueRange a) {
                             S s{b, l};
                             return s.exp(s.sub(a[0], a[1]));
                           });
    Value sum = buildReduction(rewriter, loc, e, {dim}, ReduceKind::Sum);
    rewriter.replaceOp(
        op, buildGeneric(rewriter, loc, type, {e, sum}, {m.full, m.row},
                         [](OpBuilder &b, Location l, ValueRange a) {
                           return S{b, l}.div(a[0], a[1]);
                         }));
    return success();
  }
};

struct SoftmaxGradLowering : OpRewritePattern<SoftmaxGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = op.getType();
    int64_t dim = op.getDim();
    RowMaps m(rewriter.getContext(), type.getRank(), dim);
    Value y = op.getOutput(), dy = op.getGrad();
    Value dot = buildReduction(rewriter, loc, {y, dy}, {}, type.getShape(),
                               {dim}, ReduceKind::Sum,
                               [](OpBuilder &b, Location l, ValueRange a) {
                                 return S{b, l}.mul(a[0], a[1]);
                               });
    rewriter.replaceOp(op,
                       buildGeneric(rewriter, loc, type, {y, dy, dot},
                                    {m.full, m.full, m.row},
                                    [](OpBuilder &b, Location l, ValueRange a) {
                                      S s{b, l};
                                      return s.mul(a[0], s.sub(a[1], a[2]));
                                    }));
    return success();
  }
};

/// Row statistics of a norm: (mean, rstd) for layer norm, (-, rstd) for RMS.
struct NormStats {
  Value mean, rstd;
};

NormStats normStats(OpBuilder &b, Location loc, Value x, double eps,
                    bool centered) {
  auto type = tensorTypeOf(x);
  int64_t rank = type.getRank(), h = type.getDimSize(rank - 1);
  RowMaps m(b.getContext(), rank, rank - 1);
  NormStats st;
  Value meanSq;
  if (centered) {
    Value sum = buildReduction(b, loc, x, {rank - 1}, ReduceKind::Sum);
    st.mean = buildElementwise(b, loc, tensorTypeOf(sum), sum,
                               [&](OpBuilder &nb, Location l, ValueRange a) {
                                 S s{nb, l};
                                 return s.mul(a[0], s.c(a[0], 1.0 / h));
                               });
    meanSq = buildReduction(b, loc, {x, st.mean}, {m.full, m.row},
                            type.getShape(), {rank - 1}, ReduceKind::Sum,
                            [](OpBuilder &nb, Location l, ValueRange a) {
                              S s{nb, l};
                              Value d = s.sub(a[0], a[1]);
                              return s.mul(d, d);
                            });
  } else {
    meanSq = buildReduction(b, loc, x, {rank - 1}, ReduceKind::Sum,
                            [](OpBuilder &nb, Location l, ValueRange a) {
                              return S{nb, l}.mul(a[0], a[0]);
                            });
  }
  st.rstd = buildElementwise(b, loc, tensorTypeOf(meanSq), meanSq,
                             [&](OpBuilder &nb, Location l, ValueRange a) {
                               S s{nb, l};
                               Value var = s.mul(a[0], s.c(a[0], 1.0 / h));
                               return s.rsqrt(s.add(var, s.c(a[0], eps)));
                             });
  return st;
}

struct LayerNormLowering : OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = op.getType();
    int64_t rank = type.getRank();
    RowMaps m(rewriter.getContext(), rank, rank - 1);
    NormStats st = normStats(rewriter, loc, op.getInput(),
                             op.getEpsilon().convertToDouble(), true);
    rewriter.replaceOp(
        op, buildGeneric(
                rewriter, loc, type,
                {op.getInput(), st.mean, st.rstd, op.getGamma(), op.getBeta()},
                {m.full, m.row, m.row, m.vec, m.vec},
                [](OpBuilder &b, Location l, ValueRange a) {
                  S s{b, l};
                  Value xhat = s.mul(s.sub(a[0], a[1]), a[2]);
                  return s.add(s.mul(xhat, a[3]), a[4]);
                }));
    return success();
  }
};

struct RMSNormLowering : OpRewritePattern<RMSNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RMSNormOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = op.getType();
    int64_t rank = type.getRank();
    RowMaps m(rewriter.getContext(), rank, rank - 1);
    NormStats st = normStats(rewriter, loc, op.getInput(),
                             op.getEpsilon().convertToDouble(), false);
    rewriter.replaceOp(op,
                       buildGeneric(rewriter, loc, type,
                                    {op.getInput(), st.rstd, op.getGamma()},
                                    {m.full, m.row, m.vec},
                                    [](OpBuilder &b, Location l, ValueRange a) {
                                      S s{b, l};
                                      return s.mul(s.mul(a[0], a[1]), a[2]);
                                    }));
    return success();
  }
};

/// dx, dgamma (and dbeta) of layer norm (centered) or RMS norm.
void lowerNormGrad(PatternRewriter &rewriter, Operation *op, Value x,
                   Value gamma, Value dy, double eps, bool centered) {
  Location loc = op->getLoc();
  auto type = tensorTypeOf(x);
  int64_t rank = type.getRank(), h = type.getDimSize(rank - 1);
  RowMaps m(rewriter.getContext(), rank, rank - 1);
  NormStats st = normStats(rewriter, loc, x, eps, centered);
  Value mean = centered ? st.mean : st.rstd; // unused placeholder for RMS
  auto xhat = [centered](S &s, Value xv, Value meanv, Value rstd) {
    return centered ? s.mul(s.sub(xv, meanv), rstd) : s.mul(xv, rstd);
  };
  SmallVector<int64_t> rows;
  for (int64_t d = 0; d < rank - 1; ++d)
    rows.push_back(d);
  // dgamma = sum_rows(dy * xhat)
  Value dgamma = buildReduction(rewriter, loc, {dy, x, mean, st.rstd},
                                {m.full, m.full, m.row, m.row}, type.getShape(),
                                rows, ReduceKind::Sum,
                                [&](OpBuilder &b, Location l, ValueRange a) {
                                  S s{b, l};
                                  return s.mul(a[0], xhat(s, a[1], a[2], a[3]));
                                });
  // Row means of dxhat and dxhat * xhat, with dxhat = dy * gamma.
  Value sumD = buildReduction(rewriter, loc, {dy, gamma}, {m.full, m.vec},
                              type.getShape(), {rank - 1}, ReduceKind::Sum,
                              [](OpBuilder &b, Location l, ValueRange a) {
                                return S{b, l}.mul(a[0], a[1]);
                              });
  Value sumDX = buildReduction(
      rewriter, loc, {dy, gamma, x, mean, st.rstd},
      {m.full, m.vec, m.full, m.row, m.row}, type.getShape(), {rank - 1},
      ReduceKind::Sum, [&](OpBuilder &b, Location l, ValueRange a) {
        S s{b, l};
        return s.mul(s.mul(a[0], a[1]), xhat(s, a[2], a[3], a[4]));
      });
  double invH = 1.0 / h;
  Value dx = buildGeneric(
      rewriter, loc, type, {dy, gamma, x, mean, st.rstd, sumD, sumDX},
      {m.full, m.vec, m.full, m.row, m.row, m.row, m.row},
      [&](OpBuilder &b, Location l, ValueRange a) {
        S s{b, l};
        Value dxhat = s.mul(a[0], a[1]);
        Value xh = xhat(s, a[2], a[3], a[4]);
        Value r = s.sub(dxhat, s.mul(xh, s.mul(a[6], s.c(a[6], invH))));
        if (centered)
          r = s.sub(r, s.mul(a[5], s.c(a[5], invH)));
        return s.mul(a[4], r);
      });
  auto gammaType = tensorTypeOf(gamma);
  auto copyTo = [&](Value v) {
    return buildElementwise(
        rewriter, loc, gammaType, v,
        [](OpBuilder &, Location, ValueRange a) { return a[0]; });
  };
  SmallVector<Value> results = {dx, copyTo(dgamma)};
  if (centered)
    results.push_back(
        copyTo(buildReduction(rewriter, loc, dy, rows, ReduceKind::Sum)));
  rewriter.replaceOp(op, results);
}

struct LayerNormGradLowering : OpRewritePattern<LayerNormGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormGradOp op,
                                PatternRewriter &rewriter) const override {
    lowerNormGrad(rewriter, op, op.getInput(), op.getGamma(), op.getGrad(),
                  op.getEpsilon().convertToDouble(), true);
    return success();
  }
};

struct RMSNormGradLowering : OpRewritePattern<RMSNormGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RMSNormGradOp op,
                                PatternRewriter &rewriter) const override {
    lowerNormGrad(rewriter, op, op.getInput(), op.getGamma(), op.getGrad(),
                  op.getEpsilon().convertToDouble(), false);
    return success();
  }
};

/// Flattens logits to [N, V] and labels to [N]; returns the row-wise
/// log-sum-exp in f32.
struct FlatLogits {
  Value logits, labels, lse;
  int64_t n, v;
};

FlatLogits flattenLogits(OpBuilder &b, Location loc, Value logits,
                         Value labels) {
  auto type = tensorTypeOf(logits);
  FlatLogits f;
  f.v = type.getShape().back();
  f.n = type.getNumElements() / f.v;
  f.logits = reshapeTensor(b, loc, logits, {f.n, f.v});
  f.labels = reshapeTensor(b, loc, labels, {f.n});
  RowMaps m(b.getContext(), 2, 1);
  Value max = buildReduction(b, loc, f.logits, {1}, ReduceKind::Max);
  Value sum = buildReduction(b, loc, {f.logits, max}, {m.full, m.row},
                             {f.n, f.v}, {1}, ReduceKind::Sum,
                             [](OpBuilder &nb, Location l, ValueRange a) {
                               S s{nb, l};
                               return s.exp(s.sub(a[0], a[1]));
                             });
  f.lse =
      buildElementwise(b, loc, tensorTypeOf(sum), {sum, max},
                       [](OpBuilder &nb, Location l, ValueRange a) {
                         S s{nb, l};
                         return s.add(nb.create<math::LogOp>(l, a[0]), a[1]);
                       });
  return f;
}

/// logits[n, clamp(label[n])] for every row.
Value pickLabels(OpBuilder &b, Location loc, const FlatLogits &f) {
  auto type =
      RankedTensorType::get({f.n}, computeTypeFor(elementTypeOf(f.logits)));
  Value logits = f.logits;
  int64_t v = f.v;
  return buildGeneric(
      b, loc, type, f.labels,
      {AffineMap::getMultiDimIdentityMap(1, b.getContext())},
      [&](OpBuilder &nb, Location l, ValueRange a) {
        Value idx = nb.create<arith::IndexCastOp>(l, nb.getIndexType(), a[0]);
        Value zero = nb.create<arith::ConstantIndexOp>(l, 0);
        Value last = nb.create<arith::ConstantIndexOp>(l, v - 1);
        idx = nb.create<arith::MinSIOp>(
            l, nb.create<arith::MaxSIOp>(l, idx, zero), last);
        Value row = nb.create<linalg::IndexOp>(l, 0);
        Value x = nb.create<tensor::ExtractOp>(l, logits, ValueRange{row, idx});
        return convertFloat(nb, l, x, computeTypeFor(x.getType()));
      });
}

/// `value` where `label` is not `ignore`, else 0 (inside a generic).
Value unlessIgnored(OpBuilder &b, Location l, Value label, int64_t ignore,
                    Value value) {
  Value ignored =
      b.create<arith::ConstantOp>(l, b.getIntegerAttr(label.getType(), ignore));
  Value kept =
      b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne, label, ignored);
  return b.create<arith::SelectOp>(l, kept, value,
                                   floatConst(b, l, value.getType(), 0.0));
}

/// The number of labels of `labels` (any shape) that are not `ignore`, as
/// an f32 scalar tensor.
Value countKept(OpBuilder &b, Location loc, Value labels, int64_t ignore) {
  auto type = tensorTypeOf(labels);
  Value flat = reshapeTensor(b, loc, labels, {type.getNumElements()});
  auto flatType =
      RankedTensorType::get({type.getNumElements()}, b.getF32Type());
  Value kept = buildElementwise(
      b, loc, flatType, flat, [&](OpBuilder &nb, Location l, ValueRange a) {
        return unlessIgnored(nb, l, a[0], ignore,
                             floatConst(nb, l, nb.getF32Type(), 1.0));
      });
  return buildReduction(b, loc, kept, {0}, ReduceKind::Sum);
}

/// The denominator of a cross-entropy with `ignore_index`: the `count`
/// operand (a float scalar tensor), or the number of kept labels (f32).
Value ignoringDenominator(OpBuilder &b, Location loc, Value count, Value labels,
                          int64_t ignore) {
  return count ? count : countKept(b, loc, labels, ignore);
}

struct CrossEntropyLowering : OpRewritePattern<CrossEntropyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CrossEntropyOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    FlatLogits f = flattenLogits(rewriter, loc, op.getLogits(), op.getLabels());
    Value picked = pickLabels(rewriter, loc, f);
    std::optional<int64_t> ignore = op.getIgnoreIndex();
    // Ignored rows add zero.
    Value total = buildReduction(
        rewriter, loc, {f.lse, picked, f.labels}, {}, {f.n}, {0},
        ReduceKind::Sum, [&](OpBuilder &b, Location l, ValueRange a) {
          Value loss = S{b, l}.sub(a[0], a[1]);
          if (!ignore)
            return loss;
          return unlessIgnored(b, l, a[2], *ignore, loss);
        });
    if (!ignore) {
      double invN = 1.0 / f.n;
      rewriter.replaceOp(
          op, buildElementwise(rewriter, loc, op.getType(), total,
                               [&](OpBuilder &b, Location l, ValueRange a) {
                                 S s{b, l};
                                 return s.mul(a[0], s.c(a[0], invN));
                               }));
      return success();
    }
    Value count =
        ignoringDenominator(rewriter, loc, op.getCount(), f.labels, *ignore);
    rewriter.replaceOp(
        op, buildElementwise(rewriter, loc, op.getType(), {total, count},
                             [&](OpBuilder &b, Location l, ValueRange a) {
                               S s{b, l};
                               return s.div(a[0], convertFloat(b, l, a[1],
                                                               a[0].getType()));
                             }));
    return success();
  }
};

struct CrossEntropyGradLowering : OpRewritePattern<CrossEntropyGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CrossEntropyGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    FlatLogits f = flattenLogits(rewriter, loc, op.getLogits(), op.getLabels());
    RowMaps m(ctx, 2, 1);
    auto flatType = RankedTensorType::get({f.n, f.v}, elementTypeOf(f.logits));
    std::optional<int64_t> ignore = op.getIgnoreIndex();
    // Every row's gradient is multiplied by dloss / N, or with ignored labels
    // by dloss / count (a scalar computed first; zero on the ignored rows).
    Value scale = op.getGrad();
    if (ignore) {
      Value count =
          ignoringDenominator(rewriter, loc, op.getCount(), f.labels, *ignore);
      scale = buildElementwise(
          rewriter, loc, RankedTensorType::get({}, rewriter.getF32Type()),
          {scale, count}, [](OpBuilder &b, Location l, ValueRange a) {
            S s{b, l};
            return s.div(convertFloat(b, l, a[0], b.getF32Type()),
                         convertFloat(b, l, a[1], b.getF32Type()));
          });
    }
    double invN = 1.0 / f.n;
    Value grad = buildGeneric(
        rewriter, loc, flatType, {f.logits, f.lse, f.labels, scale},
        {m.full, m.row, m.row, AffineMap::get(2, 0, ctx)},
        [&](OpBuilder &b, Location l, ValueRange a) {
          S s{b, l};
          Value p = s.exp(s.sub(a[0], a[1]));
          Value col = b.create<linalg::IndexOp>(l, 1);
          Value label = b.create<arith::IndexCastOp>(l, b.getIndexType(), a[2]);
          Value hit =
              b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, col, label);
          Value onehot =
              b.create<arith::SelectOp>(l, hit, s.c(p, 1.0), s.c(p, 0.0));
          Value factor = convertFloat(b, l, a[3], p.getType());
          if (!ignore)
            return s.mul(s.sub(p, onehot), s.mul(factor, s.c(p, invN)));
          return unlessIgnored(b, l, a[2], *ignore,
                               s.mul(s.sub(p, onehot), factor));
        });
    rewriter.replaceOp(
        op, reshapeTensor(rewriter, loc, grad, op.getType().getShape()));
    return success();
  }
};

struct LabelCountLowering : OpRewritePattern<LabelCountOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LabelCountOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value count = countKept(rewriter, loc, op.getLabels(), op.getIgnoreIndex());
    rewriter.replaceOp(op, buildElementwise(rewriter, loc, op.getType(), count,
                                            [](OpBuilder &b, Location l,
                                               ValueRange a) { return a[0]; }));
    return success();
  }
};

} // namespace

void mlir::cleave::populateNormLoweringPatterns(RewritePatternSet &patterns) {
  patterns
      .add<SoftmaxLowering, SoftmaxGradLowering, LayerNormLowering,
           RMSNormLowering, LayerNormGradLowering, RMSNormGradLowering,
           CrossEntropyLowering, CrossEntropyGradLowering, LabelCountLowering>(
          patterns.getContext());
}
