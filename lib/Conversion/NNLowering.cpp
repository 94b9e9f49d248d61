//===- NNLowering.cpp - matmul, rotary, dropout, optimizer updates --------===//

#include "LoweringUtils.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// Collapses the leading `n` dimensions of `v` into one.
Value collapseLeading(OpBuilder &b, Location loc, Value v, int64_t n) {
  auto type = tensorTypeOf(v);
  SmallVector<int64_t> shape = {1};
  for (int64_t d = 0; d < n; ++d)
    shape[0] *= type.getDimSize(d);
  for (int64_t d = n; d < type.getRank(); ++d)
    shape.push_back(type.getDimSize(d));
  return reshapeTensor(b, loc, v, shape);
}

struct MatmulLowering : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = op.getType();
    Value lhs = op.getLhs(), rhs = op.getRhs();
    bool ta = op.getTransposeLhs(), tb = op.getTransposeRhs();
    int64_t rank = type.getRank();
    Type elem = type.getElementType();
    Value result;
    if (rank == 2 && op.getReduceBatch()) {
      // Summed batches: one GEMM over the rows of every batch.
      int64_t r = op.getLhs().getType().getRank();
      Value a = collapseLeading(rewriter, loc, lhs, r - 1);
      Value b = collapseLeading(rewriter, loc, rhs, r - 1);
      result = buildMatmul(rewriter, loc, a, b, ta, tb, elem);
    } else if (rank == 2) {
      result = buildMatmul(rewriter, loc, lhs, rhs, ta, tb, elem);
    } else if (op.getRhs().getType().getRank() == 2) {
      // A weight shared by every batch: one big GEMM over all rows.
      if (ta) {
        SmallVector<int64_t> perm;
        for (int64_t d = 0; d < rank; ++d)
          perm.push_back(d);
        std::swap(perm[rank - 1], perm[rank - 2]);
        lhs = transposeTensor(rewriter, loc, lhs, perm);
      }
      Value flat = collapseLeading(rewriter, loc, lhs, rank - 1);
      result = buildMatmul(rewriter, loc, flat, rhs, false, tb, elem);
    } else {
      Value a = collapseLeading(rewriter, loc, lhs, rank - 2);
      Value b = collapseLeading(rewriter, loc, rhs, rank - 2);
      result = buildMatmul(rewriter, loc, a, b, ta, tb, elem);
    }
    rewriter.replaceOp(op,
                       reshapeTensor(rewriter, loc, result, type.getShape()));
    return success();
  }
};

struct RotaryLowering : OpRewritePattern<RotaryOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RotaryOp op,
                                PatternRewriter &rewriter) const override {
    auto type = op.getType();
    Value x = op.getInput();
    int64_t dimD = type.getDimSize(3), half = dimD / 2;
    double theta = op.getTheta().convertToDouble();
    bool interleaved = op.getInterleaved(), inverse = op.getInverse();
    Value result = buildElementwise(
        rewriter, op.getLoc(), type, x,
        [&](OpBuilder &b, Location l, ValueRange a) {
          Type ct = a[0].getType();
          auto idx = [&](int64_t v) {
            return b.create<arith::ConstantIndexOp>(l, v).getResult();
          };
          Value s = b.create<linalg::IndexOp>(l, 1);
          Value d = b.create<linalg::IndexOp>(l, 3);
          // A block of a split sequence: row s is at its global position.
          Value pos = sequencePosition(b, l, s, blockIndex(b, l, op.getBlock()),
                                       type.getDimSize(1), op.getBalanced());
          // Pair index i, partner element, and the sign of the partner term.
          Value pair, partner, first;
          if (interleaved) {
            pair = b.create<arith::DivUIOp>(l, d, idx(2));
            Value rem = b.create<arith::RemUIOp>(l, d, idx(2));
            first = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, rem,
                                            idx(0));
            partner = b.create<arith::SelectOp>(
                l, first, b.create<arith::AddIOp>(l, d, idx(1)),
                b.create<arith::SubIOp>(l, d, idx(1)));
          } else {
            first = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, d,
                                            idx(half));
            pair = b.create<arith::SelectOp>(
                l, first, d, b.create<arith::SubIOp>(l, d, idx(half)));
            partner = b.create<arith::SelectOp>(
                l, first, b.create<arith::AddIOp>(l, d, idx(half)),
                b.create<arith::SubIOp>(l, d, idx(half)));
          }
          auto toFloat = [&](Value index) {
            Value i64 = b.create<arith::IndexCastOp>(l, b.getI64Type(), index);
            return b.create<arith::SIToFPOp>(l, ct, i64).getResult();
          };
          // inv_freq = 1 / theta^(2i / D), angle = s * inv_freq (in f32,
          // as the PyTorch references compute it).
          Value exponent = b.create<arith::DivFOp>(
              l,
              b.create<arith::MulFOp>(l, toFloat(pair),
                                      floatConst(b, l, ct, 2.0)),
              floatConst(b, l, ct, static_cast<double>(dimD)));
          Value invFreq = b.create<arith::DivFOp>(
              l, floatConst(b, l, ct, 1.0),
              b.create<math::PowFOp>(l, floatConst(b, l, ct, theta), exponent));
          Value angle = b.create<arith::MulFOp>(l, toFloat(pos), invFreq);
          Value cos = b.create<math::CosOp>(l, angle);
          Value sin = b.create<math::SinOp>(l, angle);
          if (inverse)
            sin = b.create<arith::NegFOp>(l, sin);
          Value bIdx = b.create<linalg::IndexOp>(l, 0);
          Value nIdx = b.create<linalg::IndexOp>(l, 2);
          Value other =
              convertFloat(b, l,
                           b.create<tensor::ExtractOp>(
                               l, x, ValueRange{bIdx, s, nIdx, partner}),
                           ct);
          // out = x cos - partner sin (first of a pair), x cos + partner sin.
          Value term = b.create<arith::MulFOp>(l, other, sin);
          Value signed_ = b.create<arith::SelectOp>(
              l, first, b.create<arith::NegFOp>(l, term), term);
          return b
              .create<arith::AddFOp>(l, b.create<arith::MulFOp>(l, a[0], cos),
                                     signed_)
              .getResult();
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Philox-4x32-10 (Salmon et al. 2011), first output word, on i32 values.
Value philoxFirstWord(OpBuilder &b, Location l, Value c0, Value c1, Value c2,
                      Value c3, Value k0, Value k1) {
  auto i32 = [&](uint32_t v) {
    return b.create<arith::ConstantIntOp>(l, static_cast<int32_t>(v), 32)
        .getResult();
  };
  Value m0 = i32(0xD2511F53u), m1 = i32(0xCD9E8D57u);
  Value w0 = i32(0x9E3779B9u), w1 = i32(0xBB67AE85u);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 = b.create<arith::AddIOp>(l, k0, w0);
      k1 = b.create<arith::AddIOp>(l, k1, w1);
    }
    auto p0 = b.create<arith::MulUIExtendedOp>(l, m0, c0);
    auto p1 = b.create<arith::MulUIExtendedOp>(l, m1, c2);
    Value n0 = b.create<arith::XOrIOp>(
        l, b.create<arith::XOrIOp>(l, p1.getHigh(), c1), k0);
    Value n2 = b.create<arith::XOrIOp>(
        l, b.create<arith::XOrIOp>(l, p0.getHigh(), c3), k1);
    c0 = n0;
    c1 = p1.getLow();
    c2 = n2;
    c3 = p0.getLow();
  }
  return c0;
}

struct DropoutLowering : OpRewritePattern<DropoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DropoutOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = op.getType();
    double rate = op.getRate().convertToDouble();
    uint64_t stream = static_cast<uint64_t>(op.getStream());
    Value seed =
        rewriter.create<tensor::ExtractOp>(loc, op.getSeed(), ValueRange{});
    Value k0 =
        rewriter.create<arith::TruncIOp>(loc, rewriter.getI32Type(), seed);
    Value k1 = rewriter.create<arith::TruncIOp>(
        loc, rewriter.getI32Type(),
        rewriter.create<arith::ShRUIOp>(
            loc, seed, rewriter.create<arith::ConstantIntOp>(loc, 32, 64)));
    // On a block of a sharded tensor, the counter is the element's index in
    // the whole tensor: block index times local size, plus the local index.
    ArrayRef<int64_t> shape = type.getShape();
    if (auto global = op.getGlobalShape())
      shape = *global;
    SmallVector<Value> starts;
    for (auto [d, block] : llvm::enumerate(op.getBlocks()))
      starts.push_back(rewriter.create<arith::MulIOp>(
          loc, rewriter.create<tensor::ExtractOp>(loc, block, ValueRange{}),
          rewriter.create<arith::ConstantIntOp>(loc, type.getDimSize(d), 64)));
    Value result = buildElementwise(
        rewriter, loc, type, op.getInput(),
        [&](OpBuilder &b, Location l, ValueRange a) {
          // Global linear index of the element: the counter.
          Value index = b.create<arith::ConstantIntOp>(l, 0, 64);
          for (int64_t d = 0, e = shape.size(); d < e; ++d) {
            Value i = b.create<arith::IndexCastOp>(
                l, b.getI64Type(), b.create<linalg::IndexOp>(l, d));
            if (!starts.empty())
              i = b.create<arith::AddIOp>(l, i, starts[d]);
            index = b.create<arith::AddIOp>(
                l,
                b.create<arith::MulIOp>(
                    l, index, b.create<arith::ConstantIntOp>(l, shape[d], 64)),
                i);
          }
          Value lo = b.create<arith::TruncIOp>(l, b.getI32Type(), index);
          Value hi = b.create<arith::TruncIOp>(
              l, b.getI32Type(),
              b.create<arith::ShRUIOp>(
                  l, index, b.create<arith::ConstantIntOp>(l, 32, 64)));
          Value s0 = b.create<arith::ConstantIntOp>(
              l, static_cast<int32_t>(stream & 0xffffffffu), 32);
          Value s1 = b.create<arith::ConstantIntOp>(
              l, static_cast<int32_t>(stream >> 32), 32);
          Value word = philoxFirstWord(b, l, lo, hi, s0, s1, k0, k1);
          // u = (word >> 8) * 2^-24 in [0, 1); keep when u >= rate.
          Value top = b.create<arith::ShRUIOp>(
              l, word, b.create<arith::ConstantIntOp>(l, 8, 32));
          Type ct = a[0].getType();
          Value u =
              b.create<arith::MulFOp>(l, b.create<arith::UIToFPOp>(l, ct, top),
                                      floatConst(b, l, ct, 1.0 / 16777216.0));
          Value keep = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGE, u,
                                               floatConst(b, l, ct, rate));
          Value scaled = b.create<arith::MulFOp>(
              l, a[0], floatConst(b, l, ct, 1.0 / (1.0 - rate)));
          return b
              .create<arith::SelectOp>(l, keep, scaled,
                                       floatConst(b, l, ct, 0.0))
              .getResult();
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Reads a 0-d tensor as an f64 scalar.
Value scalarF64(OpBuilder &b, Location loc, Value tensor) {
  Value v = b.create<tensor::ExtractOp>(loc, tensor, ValueRange{});
  return convertFloat(b, loc, v, b.getF64Type());
}

struct SGDLowering : OpRewritePattern<SGDOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SGDOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value lr = scalarF64(rewriter, loc, op.getLr());
    double wd = op.getWeightDecay().convertToDouble();
    rewriter.replaceOp(
        op,
        buildElementwise(
            rewriter, loc, op.getType(), {op.getParam(), op.getGrad()},
            [&](OpBuilder &b, Location l, ValueRange a) {
              Type ct = a[0].getType();
              Value g = convertFloat(b, l, a[1], ct);
              if (wd != 0.0)
                g = b.create<arith::AddFOp>(
                    l, g,
                    b.create<arith::MulFOp>(l, a[0], floatConst(b, l, ct, wd)));
              Value step =
                  b.create<arith::MulFOp>(l, convertFloat(b, l, lr, ct), g);
              return b.create<arith::SubFOp>(l, a[0], step).getResult();
            }));
    return success();
  }
};

/// torch.optim.AdamW's single-tensor update, with the scalar factors (bias
/// corrections, step size) computed in f64 as Python computes them.
struct AdamWLowering : OpRewritePattern<AdamWOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AdamWOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    OpBuilder &b = rewriter;
    double b1 = op.getBeta1().convertToDouble();
    double b2 = op.getBeta2().convertToDouble();
    double eps = op.getEpsilon().convertToDouble();
    double wd = op.getWeightDecay().convertToDouble();
    Value lr = scalarF64(b, loc, op.getLr());
    Value t = scalarF64(b, loc, op.getStep());
    auto f64 = [&](double v) { return floatConst(b, loc, b.getF64Type(), v); };
    Value one = f64(1.0);
    Value bc1 = b.create<arith::SubFOp>(
        loc, one, b.create<math::PowFOp>(loc, f64(b1), t));
    Value bc2 = b.create<arith::SubFOp>(
        loc, one, b.create<math::PowFOp>(loc, f64(b2), t));
    Value stepSize = b.create<arith::DivFOp>(loc, lr, bc1);
    Value bc2Sqrt = b.create<math::SqrtOp>(loc, bc2);
    Value decay = b.create<arith::SubFOp>(
        loc, one, b.create<arith::MulFOp>(loc, lr, f64(wd)));

    auto pType = cast<RankedTensorType>(op.getNewParam().getType());
    auto mType = cast<RankedTensorType>(op.getNewExpAvg().getType());
    int64_t rank = pType.getRank();
    auto id = AffineMap::getMultiDimIdentityMap(rank, ctx);
    SmallVector<Value> inits = {emptyTensor(b, loc, pType),
                                emptyTensor(b, loc, mType),
                                emptyTensor(b, loc, mType)};
    auto generic = b.create<linalg::GenericOp>(
        loc, TypeRange{pType, mType, mType},
        ValueRange{op.getParam(), op.getGrad(), op.getExpAvg(),
                   op.getExpAvgSq()},
        inits, SmallVector<AffineMap>(7, id),
        SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Type ct = computeTypeFor(pType.getElementType());
          auto c = [&](Value v) { return convertFloat(nb, l, v, ct); };
          auto k = [&](double v) { return floatConst(nb, l, ct, v); };
          Value p = c(a[0]), g = c(a[1]), m = c(a[2]), v = c(a[3]);
          p = nb.create<arith::MulFOp>(l, p, c(decay));
          m = nb.create<arith::AddFOp>(
              l, nb.create<arith::MulFOp>(l, m, k(b1)),
              nb.create<arith::MulFOp>(l, g, k(1.0 - b1)));
          v = nb.create<arith::AddFOp>(
              l, nb.create<arith::MulFOp>(l, v, k(b2)),
              nb.create<arith::MulFOp>(l, nb.create<arith::MulFOp>(l, g, g),
                                       k(1.0 - b2)));
          Value denom = nb.create<arith::AddFOp>(
              l,
              nb.create<arith::DivFOp>(l, nb.create<math::SqrtOp>(l, v),
                                       c(bc2Sqrt)),
              k(eps));
          Value upd = nb.create<arith::MulFOp>(
              l, nb.create<arith::DivFOp>(l, m, denom), c(stepSize));
          p = nb.create<arith::SubFOp>(l, p, upd);
          nb.create<linalg::YieldOp>(
              l, ValueRange{convertFloat(nb, l, p, pType.getElementType()),
                            convertFloat(nb, l, m, mType.getElementType()),
                            convertFloat(nb, l, v, mType.getElementType())});
        });
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};

/// The schedule in f64 scalar arithmetic (LRScheduleOp's description).
struct LRScheduleLowering : OpRewritePattern<LRScheduleOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LRScheduleOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    auto f64 = [&](double v) { return floatConst(b, loc, b.getF64Type(), v); };
    Value lr = scalarF64(b, loc, op.getLr());
    Value t = scalarF64(b, loc, op.getStep());
    double warmup = op.getWarmupSteps(), decaySteps = op.getDecaySteps();
    double minLr = op.getMinLr().convertToDouble();
    Value rate = lr;
    if (op.getDecay() != LRDecay::Constant) {
      // p = clamp((t - W) / (D - W), 0, 1); 1 when D == W.
      Value p = f64(1.0);
      if (decaySteps > warmup)
        p = b.create<arith::MinimumFOp>(
            loc, f64(1.0),
            b.create<arith::MaximumFOp>(
                loc, f64(0.0),
                b.create<arith::DivFOp>(
                    loc, b.create<arith::SubFOp>(loc, t, f64(warmup)),
                    f64(decaySteps - warmup))));
      Value coeff =
          op.getDecay() == LRDecay::Cosine
              ? b.create<arith::MulFOp>(
                     loc, f64(0.5),
                     b.create<arith::AddFOp>(
                         loc, f64(1.0),
                         b.create<math::CosOp>(
                             loc, b.create<arith::MulFOp>(loc, f64(M_PI), p))))
                    .getResult()
              : b.create<arith::SubFOp>(loc, f64(1.0), p).getResult();
      rate = b.create<arith::AddFOp>(
          loc, f64(minLr),
          b.create<arith::MulFOp>(
              loc, coeff, b.create<arith::SubFOp>(loc, lr, f64(minLr))));
    }
    if (warmup > 0) {
      Value warm = b.create<arith::DivFOp>(
          loc, b.create<arith::MulFOp>(loc, lr, t), f64(warmup));
      Value warming = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLE, t,
                                              f64(warmup));
      rate = b.create<arith::SelectOp>(loc, warming, warm, rate);
    }
    Value r = convertFloat(b, loc, rate, b.getF32Type());
    rewriter.replaceOpWithNewOp<tensor::FromElementsOp>(op, op.getType(),
                                                        ValueRange{r});
    return success();
  }
};

} // namespace

void mlir::cleave::populateNNLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<MatmulLowering, RotaryLowering, DropoutLowering, SGDLowering,
               AdamWLowering, LRScheduleLowering>(patterns.getContext());
}
