//===- MoELowering.cpp - Mixture-of-experts ops to linalg -----------------===//
//
// The router's top-k and slot order are counts, not sorts: a selection's
// rank is the number of experts that beat it (higher logit, or equal logit
// and lower index) and its slot is the number of earlier selections of the
// same expert in the group (lower rank, or equal rank and earlier token).
// Both are parallel reductions, deterministic by construction and the same
// on every device. Dispatch and combine are the dense one-hot einsums.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {

AffineMap mapOf(MLIRContext *ctx, unsigned rank, ArrayRef<unsigned> dims) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d : dims)
    exprs.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(rank, 0, exprs, ctx);
}

/// Float value of loop index `dim` of the enclosing linalg.generic.
Value indexAsFloat(OpBuilder &b, Location l, unsigned dim, Type ct) {
  Value i = b.create<linalg::IndexOp>(l, dim);
  Value i64 = b.create<arith::IndexCastOp>(l, b.getI64Type(), i);
  return b.create<arith::SIToFPOp>(l, ct, i64);
}

Value select(OpBuilder &b, Location l, Value cond, Value x, Value y) {
  return b.create<arith::SelectOp>(l, cond, x, y);
}
Value lt(OpBuilder &b, Location l, Value x, Value y) {
  return b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OLT, x, y);
}
Value eq(OpBuilder &b, Location l, Value x, Value y) {
  return b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OEQ, x, y);
}
Value mul(OpBuilder &b, Location l, Value x, Value y) {
  return b.create<arith::MulFOp>(l, x, y);
}
Value sub(OpBuilder &b, Location l, Value x, Value y) {
  return b.create<arith::SubFOp>(l, x, y);
}
Value div(OpBuilder &b, Location l, Value x, Value y) {
  return b.create<arith::DivFOp>(l, x, y);
}
Value orI(OpBuilder &b, Location l, Value x, Value y) {
  return b.create<arith::OrIOp>(l, x, y);
}
Value andI(OpBuilder &b, Location l, Value x, Value y) {
  return b.create<arith::AndIOp>(l, x, y);
}

/// The computations over `[G, S, E]` logits shared by the router, the
/// balance loss and their gradients; tensors in compute precision.
struct Routing {
  OpBuilder &b;
  Location loc;
  Value logits;
  int64_t topK;
  bool sigmoid;

  MLIRContext *ctx() { return b.getContext(); }
  ArrayRef<int64_t> shape() { return tensorTypeOf(logits).getShape(); }
  Type ct() { return computeTypeFor(elementTypeOf(logits)); }
  RankedTensorType computeType(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, ct());
  }
  Value k(OpBuilder &nb, Location l) {
    return floatConst(nb, l, ct(), double(topK));
  }

  /// rank[g, s, e]: how many experts beat `e` for token `s`.
  Value ranks() {
    ArrayRef<int64_t> s = shape();
    return buildReduction(
        b, loc, {logits, logits},
        {mapOf(ctx(), 4, {0, 1, 2}), mapOf(ctx(), 4, {0, 1, 3})},
        {s[0], s[1], s[2], s[2]}, {3}, ReduceKind::Sum,
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value other = indexAsFloat(nb, l, 3, ct());
          Value self = indexAsFloat(nb, l, 2, ct());
          Value beats =
              orI(nb, l, lt(nb, l, a[0], a[1]),
                  andI(nb, l, eq(nb, l, a[0], a[1]), lt(nb, l, other, self)));
          return select(nb, l, beats, floatConst(nb, l, ct(), 1),
                        floatConst(nb, l, ct(), 0));
        });
  }

  /// `v` where `rank < top_k`, else 0 (rank and v at [g, s, e]).
  Value selected(OpBuilder &nb, Location l, Value rank, Value v) {
    return select(nb, l, lt(nb, l, rank, k(nb, l)), v,
                  floatConst(nb, l, ct(), 0));
  }

  /// Sum over `dim` of the [G, S, E] `inputs` mapped by `fn`.
  Value sumOver(ValueRange inputs, int64_t dim, ScalarFn fn) {
    return buildReduction(b, loc, inputs, {}, shape(), {dim}, ReduceKind::Sum,
                          fn);
  }

  /// An elementwise [G, S, E] computation; `rowInputs` are [G, S].
  Value perElement(ValueRange inputs, ValueRange rowInputs, ScalarFn fn) {
    SmallVector<Value> all(inputs);
    SmallVector<AffineMap> maps(inputs.size(), mapOf(ctx(), 3, {0, 1, 2}));
    for (Value r : rowInputs) {
      all.push_back(r);
      maps.push_back(mapOf(ctx(), 3, {0, 1}));
    }
    return buildGeneric(b, loc, computeType(shape()), all, maps, fn);
  }

  /// Softmax over E, or the sigmoid.
  Value scores() {
    if (sigmoid)
      return perElement(
          {logits}, {}, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
            Value one = floatConst(nb, l, ct(), 1);
            Value e =
                nb.create<math::ExpOp>(l, nb.create<arith::NegFOp>(l, a[0]));
            return div(nb, l, one, nb.create<arith::AddFOp>(l, one, e));
          });
    Value max = buildReduction(b, loc, logits, {2}, ReduceKind::Max);
    Value exps = perElement(
        {logits}, {max}, [&](OpBuilder &nb, Location l, ValueRange a) {
          return nb.create<math::ExpOp>(l, sub(nb, l, a[0], a[1]));
        });
    Value sum = sumOver({exps}, 2, nullptr);
    return perElement({exps}, {sum},
                      [&](OpBuilder &nb, Location l, ValueRange a) {
                        return div(nb, l, a[0], a[1]);
                      });
  }

  /// The balance loss's probabilities: the softmax, or the sigmoid scores
  /// normalized per token.
  Value probabilities(Value scores) {
    if (!sigmoid)
      return scores;
    Value sum = sumOver({scores}, 2, nullptr);
    return perElement({scores}, {sum},
                      [&](OpBuilder &nb, Location l, ValueRange a) {
                        return div(nb, l, a[0], a[1]);
                      });
  }

  /// Back through `probabilities` and `scores`: the logits' gradient from
  /// the gradient `dp` of what `normalizedSigmoid` says the probabilities
  /// are (normalized sigmoid, or plain scores when false).
  Value backThroughScores(Value scores, Value dp, bool normalizedSigmoid) {
    auto dot = [&](Value x, Value y) {
      return sumOver({x, y}, 2, [&](OpBuilder &nb, Location l, ValueRange a) {
        return mul(nb, l, a[0], a[1]);
      });
    };
    if (!sigmoid) {
      Value t = dot(dp, scores);
      return perElement({scores, dp}, {t},
                        [&](OpBuilder &nb, Location l, ValueRange a) {
                          return mul(nb, l, a[0], sub(nb, l, a[1], a[2]));
                        });
    }
    Value ds = dp;
    if (normalizedSigmoid) {
      Value total = sumOver({scores}, 2, nullptr);
      Value t = dot(dp, scores);
      ds = perElement({dp}, {total, t},
                      [&](OpBuilder &nb, Location l, ValueRange a) {
                        return sub(nb, l, div(nb, l, a[0], a[1]),
                                   div(nb, l, a[2], mul(nb, l, a[1], a[1])));
                      });
    }
    return perElement(
        {scores, ds}, {}, [&](OpBuilder &nb, Location l, ValueRange a) {
          Value one = floatConst(nb, l, ct(), 1);
          return mul(nb, l, a[1], mul(nb, l, a[0], sub(nb, l, one, a[0])));
        });
  }

  /// E / (S * S * top_k): the balance loss is this times sum_e count * mass.
  double auxScale() {
    ArrayRef<int64_t> s = shape();
    return double(s[2]) / (double(s[1]) * double(s[1]) * double(topK));
  }

  /// count[g, e]: selections of expert e in group g (before drops).
  Value counts(Value rank) {
    return sumOver({rank}, 1, [&](OpBuilder &nb, Location l, ValueRange a) {
      return selected(nb, l, a[0], floatConst(nb, l, ct(), 1));
    });
  }
};

/// The routing of an op with `logits`, `top_k` and `sigmoid`.
template <typename OpT>
Routing routingOf(OpT op, OpBuilder &b) {
  return Routing{b, op.getLoc(), op.getLogits(), int64_t(op.getTopK()),
                 op.getSigmoid()};
}

/// Narrows a compute-precision tensor to `type`'s element type.
Value narrowTo(OpBuilder &b, Location loc, Value v, RankedTensorType type) {
  if (elementTypeOf(v) == type.getElementType())
    return v;
  return buildElementwise(
      b, loc, type, {v},
      [](OpBuilder &, Location, ValueRange a) { return a[0]; });
}

struct MoERouterLowering : OpRewritePattern<MoERouterOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MoERouterOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Routing r = routingOf(op, rewriter);
    ArrayRef<int64_t> s = r.shape();
    MLIRContext *ctx = rewriter.getContext();
    Value rank = r.ranks();
    Value scores = r.scores();
    Value total = r.sumOver({rank, scores}, 2,
                            [&](OpBuilder &nb, Location l, ValueRange a) {
                              return r.selected(nb, l, a[0], a[1]);
                            });
    // slot[g, s, e]: earlier selections of e in the group.
    Value slot = buildReduction(
        rewriter, loc, {rank, rank},
        {mapOf(ctx, 4, {0, 1, 2}), mapOf(ctx, 4, {0, 3, 2})},
        {s[0], s[1], s[2], s[1]}, {3}, ReduceKind::Sum,
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value other = indexAsFloat(nb, l, 3, r.ct());
          Value self = indexAsFloat(nb, l, 1, r.ct());
          Value earlier =
              orI(nb, l, lt(nb, l, a[1], a[0]),
                  andI(nb, l, eq(nb, l, a[1], a[0]), lt(nb, l, other, self)));
          return r.selected(nb, l, a[1],
                            select(nb, l, earlier, floatConst(nb, l, r.ct(), 1),
                                   floatConst(nb, l, r.ct(), 0)));
        });
    auto outType = cast<RankedTensorType>(op.getCombine().getType());
    SmallVector<AffineMap> maps(3, mapOf(ctx, 4, {0, 1, 2}));
    maps.push_back(mapOf(ctx, 4, {0, 1}));
    bool normalize = op.getNormalize();
    auto build = [&](bool gates) {
      return buildGeneric(
          rewriter, loc, outType, {rank, slot, scores, total}, maps,
          [&](OpBuilder &nb, Location l, ValueRange a) {
            Value c = indexAsFloat(nb, l, 3, r.ct());
            Value keep =
                andI(nb, l, lt(nb, l, a[0], r.k(nb, l)), eq(nb, l, a[1], c));
            Value v = !gates      ? floatConst(nb, l, r.ct(), 1)
                      : normalize ? div(nb, l, a[2], a[3])
                                  : a[2];
            return select(nb, l, keep, v, floatConst(nb, l, r.ct(), 0));
          });
    };
    rewriter.replaceOp(op, {build(true), build(false)});
    return success();
  }
};

struct MoERouterGradLowering : OpRewritePattern<MoERouterGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MoERouterGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Routing r = routingOf(op, rewriter);
    auto dispatchType = tensorTypeOf(op.getDispatch());
    Value dgate =
        buildReduction(rewriter, loc, {op.getDispatch(), op.getGrad()}, {},
                       dispatchType.getShape(), {3}, ReduceKind::Sum,
                       [](OpBuilder &nb, Location l, ValueRange a) {
                         return mul(nb, l, a[0], a[1]);
                       });
    Value rank = r.ranks();
    Value scores = r.scores();
    Value ds;
    if (op.getNormalize()) {
      auto selSum = [&](bool withGrad) {
        return r.sumOver({rank, scores, dgate}, 2,
                         [&](OpBuilder &nb, Location l, ValueRange a) {
                           Value v = withGrad ? mul(nb, l, a[1], a[2]) : a[1];
                           return r.selected(nb, l, a[0], v);
                         });
      };
      Value total = selSum(false), dot = selSum(true);
      ds = r.perElement({rank, dgate}, {total, dot},
                        [&](OpBuilder &nb, Location l, ValueRange a) {
                          Value v =
                              sub(nb, l, div(nb, l, a[1], a[2]),
                                  div(nb, l, a[3], mul(nb, l, a[2], a[2])));
                          return r.selected(nb, l, a[0], v);
                        });
    } else {
      ds = r.perElement({rank, dgate}, {},
                        [&](OpBuilder &nb, Location l, ValueRange a) {
                          return r.selected(nb, l, a[0], a[1]);
                        });
    }
    Value dlogits =
        r.backThroughScores(scores, ds, /*normalizedSigmoid=*/false);
    rewriter.replaceOp(op, narrowTo(rewriter, loc, dlogits, op.getType()));
    return success();
  }
};

struct MoEAuxLossLowering : OpRewritePattern<MoEAuxLossOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MoEAuxLossOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Routing r = routingOf(op, rewriter);
    ArrayRef<int64_t> s = r.shape();
    Value count = r.counts(r.ranks());
    Value probs = r.probabilities(r.scores());
    Value mass = r.sumOver({probs}, 1, nullptr);
    double scale = r.auxScale();
    Value loss = buildReduction(rewriter, loc, {count, mass}, {}, {s[0], s[2]},
                                {0, 1}, ReduceKind::Sum,
                                [&](OpBuilder &nb, Location l, ValueRange a) {
                                  return mul(nb, l, mul(nb, l, a[0], a[1]),
                                             floatConst(nb, l, r.ct(), scale));
                                });
    rewriter.replaceOp(op, narrowTo(rewriter, loc, loss, op.getType()));
    return success();
  }
};

struct MoEAuxLossGradLowering : OpRewritePattern<MoEAuxLossGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MoEAuxLossGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Routing r = routingOf(op, rewriter);
    ArrayRef<int64_t> s = r.shape();
    MLIRContext *ctx = rewriter.getContext();
    Value count = r.counts(r.ranks());
    Value scores = r.scores();
    double scale = r.auxScale();
    // dprob[g, s, e] = dloss * E * count[g, e] / (S * S * top_k).
    Value dprob = buildGeneric(
        rewriter, loc, r.computeType(s), {count, op.getGrad()},
        {mapOf(ctx, 3, {0, 2}), AffineMap::get(3, 0, ctx)},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          return mul(nb, l, mul(nb, l, a[0], convertFloat(nb, l, a[1], r.ct())),
                     floatConst(nb, l, r.ct(), scale));
        });
    Value dlogits =
        r.backThroughScores(scores, dprob, /*normalizedSigmoid=*/true);
    rewriter.replaceOp(op, narrowTo(rewriter, loc, dlogits, op.getType()));
    return success();
  }
};

/// A dense one-hot contraction: `result` = sum over `reduced` of the
/// product of `lhs` and `rhs`, indexed by their maps over `iterShape`.
Value contract(OpBuilder &b, Location loc, Value lhs, AffineMap lhsMap,
               Value rhs, AffineMap rhsMap, ArrayRef<int64_t> iterShape,
               ArrayRef<int64_t> reduced, RankedTensorType resultType) {
  Value sum = buildReduction(b, loc, {lhs, rhs}, {lhsMap, rhsMap}, iterShape,
                             reduced, ReduceKind::Sum,
                             [](OpBuilder &nb, Location l, ValueRange a) {
                               return mul(nb, l, a[0], a[1]);
                             });
  return narrowTo(b, loc, sum, resultType);
}

struct MoEDispatchLowering : OpRewritePattern<MoEDispatchOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MoEDispatchOp op,
                                PatternRewriter &rewriter) const override {
    // Iteration [E, G, C, H, S].
    MLIRContext *ctx = rewriter.getContext();
    ArrayRef<int64_t> r = op.getType().getShape();
    int64_t tokens = op.getInput().getType().getDimSize(1);
    rewriter.replaceOp(op, contract(rewriter, op.getLoc(), op.getWeights(),
                                    mapOf(ctx, 5, {1, 4, 0, 2}), op.getInput(),
                                    mapOf(ctx, 5, {1, 4, 3}),
                                    {r[0], r[1], r[2], r[3], tokens}, {4},
                                    op.getType()));
    return success();
  }
};

struct MoECombineLowering : OpRewritePattern<MoECombineOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MoECombineOp op,
                                PatternRewriter &rewriter) const override {
    // Iteration [G, S, H, E, C].
    MLIRContext *ctx = rewriter.getContext();
    ArrayRef<int64_t> w = op.getWeights().getType().getShape();
    int64_t hidden = op.getType().getDimSize(2);
    rewriter.replaceOp(
        op, contract(rewriter, op.getLoc(), op.getWeights(),
                     mapOf(ctx, 5, {0, 1, 3, 4}), op.getExperts(),
                     mapOf(ctx, 5, {3, 0, 4, 2}),
                     {w[0], w[1], hidden, w[2], w[3]}, {3, 4}, op.getType()));
    return success();
  }
};

struct MoEWeightsGradLowering : OpRewritePattern<MoEWeightsGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MoEWeightsGradOp op,
                                PatternRewriter &rewriter) const override {
    // Iteration [G, S, E, C, H].
    MLIRContext *ctx = rewriter.getContext();
    ArrayRef<int64_t> r = op.getType().getShape();
    int64_t hidden = op.getGrad().getType().getDimSize(2);
    rewriter.replaceOp(op, contract(rewriter, op.getLoc(), op.getGrad(),
                                    mapOf(ctx, 5, {0, 1, 4}), op.getExperts(),
                                    mapOf(ctx, 5, {2, 0, 3, 4}),
                                    {r[0], r[1], r[2], r[3], hidden}, {4},
                                    op.getType()));
    return success();
  }
};

} // namespace

void mlir::cleave::populateMoELoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<MoEAuxLossGradLowering, MoEAuxLossLowering, MoECombineLowering,
               MoEDispatchLowering, MoERouterGradLowering, MoERouterLowering,
               MoEWeightsGradLowering>(patterns.getContext());
}
