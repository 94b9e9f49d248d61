//===- ElementwiseLowering.cpp - Elementwise cleave ops to linalg ---------===//
//
// Each elementwise op becomes one linalg.generic whose body computes the op
// on scalars in f32 (f64 for f64 tensors). Elementwise fusion later merges
// chains of them into single loops.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// Scalar helpers in compute precision.
struct Scalar {
  OpBuilder &b;
  Location loc;
  Value c(Value like, double v) {
    return floatConst(b, loc, like.getType(), v);
  }
  Value add(Value x, Value y) { return b.create<arith::AddFOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<arith::SubFOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<arith::MulFOp>(loc, x, y); }
  Value div(Value x, Value y) { return b.create<arith::DivFOp>(loc, x, y); }
  Value exp(Value x) { return b.create<math::ExpOp>(loc, x); }
  Value tanh(Value x) { return b.create<math::TanhOp>(loc, x); }
  Value sigmoid(Value x) {
    return div(c(x, 1.0), add(c(x, 1.0), exp(b.create<arith::NegFOp>(loc, x))));
  }
  /// select(x > 0, a, 0)
  Value positiveOr0(Value x, Value a) {
    Value pos =
        b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, x, c(x, 0.0));
    return b.create<arith::SelectOp>(loc, pos, a, c(a, 0.0));
  }
};

/// The scalar function of an elementwise op; specialized per op below.
template <typename OpTy>
Value scalarOf(OpTy op, Scalar &s, ValueRange a);

#define CLEAVE_SCALAR(OpTy, expr)                                              \
  template <>                                                                  \
  Value scalarOf<OpTy>(OpTy op, Scalar & s, ValueRange a) {                    \
    (void)op;                                                                  \
    return expr;                                                               \
  }

CLEAVE_SCALAR(AddOp, s.add(a[0], a[1]))
CLEAVE_SCALAR(SubOp, s.sub(a[0], a[1]))
CLEAVE_SCALAR(MulOp, s.mul(a[0], a[1]))
CLEAVE_SCALAR(DivOp, s.div(a[0], a[1]))
CLEAVE_SCALAR(MaxOp, s.b.create<arith::MaximumFOp>(s.loc, a[0], a[1]))
CLEAVE_SCALAR(MinOp, s.b.create<arith::MinimumFOp>(s.loc, a[0], a[1]))
CLEAVE_SCALAR(PowOp, s.b.create<math::PowFOp>(s.loc, a[0], a[1]))
CLEAVE_SCALAR(NegOp, s.b.create<arith::NegFOp>(s.loc, a[0]))
CLEAVE_SCALAR(ExpOp, s.exp(a[0]))
CLEAVE_SCALAR(LogOp, s.b.create<math::LogOp>(s.loc, a[0]))
CLEAVE_SCALAR(SqrtOp, s.b.create<math::SqrtOp>(s.loc, a[0]))
CLEAVE_SCALAR(RsqrtOp,
              s.div(s.c(a[0], 1.0), s.b.create<math::SqrtOp>(s.loc, a[0])))
CLEAVE_SCALAR(TanhOp, s.tanh(a[0]))
CLEAVE_SCALAR(SigmoidOp, s.sigmoid(a[0]))
CLEAVE_SCALAR(ReluOp, s.positiveOr0(a[0], a[0]))
CLEAVE_SCALAR(ReluGradOp, s.positiveOr0(a[0], a[1]))
CLEAVE_SCALAR(SiluOp, s.mul(a[0], s.sigmoid(a[0])))
CLEAVE_SCALAR(CastOp, a[0])
#undef CLEAVE_SCALAR

template <>
Value scalarOf<SiluGradOp>(SiluGradOp, Scalar &s, ValueRange a) {
  // d/dx x sig(x) = sig(x) (1 + x (1 - sig(x)))
  Value x = a[0], sig = s.sigmoid(x);
  Value inner = s.add(s.c(x, 1.0), s.mul(x, s.sub(s.c(x, 1.0), sig)));
  return s.mul(a[1], s.mul(sig, inner));
}

constexpr double kSqrt2OverPi = 0.7978845608028654; // sqrt(2/pi)
constexpr double kInvSqrt2 = 0.7071067811865476;    // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1/sqrt(2 pi)

Value gelu(Scalar &s, Value x, GeluApproximation approx) {
  Value half = s.c(x, 0.5), one = s.c(x, 1.0);
  if (approx == GeluApproximation::Tanh) {
    Value cube = s.mul(x, s.mul(x, x));
    Value inner =
        s.mul(s.c(x, kSqrt2OverPi), s.add(x, s.mul(s.c(x, 0.044715), cube)));
    return s.mul(s.mul(half, x), s.add(one, s.tanh(inner)));
  }
  Value erf = s.b.create<math::ErfOp>(s.loc, s.mul(x, s.c(x, kInvSqrt2)));
  return s.mul(s.mul(half, x), s.add(one, erf));
}

Value geluGrad(Scalar &s, Value x, Value dy, GeluApproximation approx) {
  Value half = s.c(x, 0.5), one = s.c(x, 1.0);
  if (approx == GeluApproximation::Tanh) {
    Value x2 = s.mul(x, x);
    Value inner = s.mul(s.c(x, kSqrt2OverPi),
                        s.add(x, s.mul(s.c(x, 0.044715), s.mul(x2, x))));
    Value t = s.tanh(inner);
    Value dinner = s.mul(s.c(x, kSqrt2OverPi),
                         s.add(one, s.mul(s.c(x, 3 * 0.044715), x2)));
    Value sech2 = s.sub(one, s.mul(t, t));
    Value d = s.add(s.mul(half, s.add(one, t)),
                    s.mul(s.mul(half, x), s.mul(sech2, dinner)));
    return s.mul(dy, d);
  }
  Value cdf = s.mul(half, s.add(one, s.b.create<math::ErfOp>(
                                         s.loc, s.mul(x, s.c(x, kInvSqrt2)))));
  Value pdf =
      s.mul(s.c(x, kInvSqrt2Pi), s.exp(s.mul(s.c(x, -0.5), s.mul(x, x))));
  return s.mul(dy, s.add(cdf, s.mul(x, pdf)));
}

template <>
Value scalarOf<GeluOp>(GeluOp op, Scalar &s, ValueRange a) {
  return gelu(s, a[0], op.getApproximate());
}

template <>
Value scalarOf<GeluGradOp>(GeluGradOp op, Scalar &s, ValueRange a) {
  return geluGrad(s, a[0], a[1], op.getApproximate());
}

template <typename OpTy>
struct ElementwiseLowering : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Value result =
        buildElementwise(rewriter, op.getLoc(), type, op->getOperands(),
                         [&](OpBuilder &b, Location loc, ValueRange args) {
                           Scalar s{b, loc};
                           return scalarOf<OpTy>(op, s, args);
                         });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct ConstantLowering : OpRewritePattern<ConstantOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConstantOp op,
                                PatternRewriter &rewriter) const override {
    auto value = dyn_cast<TypedAttr>(op.getValue());
    if (!value)
      return rewriter.notifyMatchFailure(op, "constant is not a typed attr");
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, value);
    return success();
  }
};

/// On one device a sharding constraint is the identity.
struct ShardingConstraintLowering : OpRewritePattern<ShardingConstraintOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ShardingConstraintOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, op.getInput());
    return success();
  }
};

} // namespace

void mlir::cleave::populateElementwiseLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<ElementwiseLowering<AddOp>, ElementwiseLowering<SubOp>,
               ElementwiseLowering<MulOp>, ElementwiseLowering<DivOp>,
               ElementwiseLowering<MaxOp>, ElementwiseLowering<MinOp>,
               ElementwiseLowering<PowOp>, ElementwiseLowering<NegOp>,
               ElementwiseLowering<ExpOp>, ElementwiseLowering<LogOp>,
               ElementwiseLowering<SqrtOp>, ElementwiseLowering<RsqrtOp>,
               ElementwiseLowering<TanhOp>, ElementwiseLowering<SigmoidOp>,
               ElementwiseLowering<ReluOp>, ElementwiseLowering<ReluGradOp>,
               ElementwiseLowering<SiluOp>, ElementwiseLowering<SiluGradOp>,
               ElementwiseLowering<GeluOp>, ElementwiseLowering<GeluGradOp>,
               ElementwiseLowering<CastOp>, ConstantLowering,
               ShardingConstraintLowering>(patterns.getContext());
}
