//===- ShapeLowering.cpp - Data movement, reductions, embeddings ----------===//

#include "LoweringUtils.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// Converts a compute-precision tensor to `type`'s element type.
Value toElementType(OpBuilder &b, Location loc, Value v,
                    RankedTensorType type) {
  if (elementTypeOf(v) == type.getElementType())
    return v;
  return buildElementwise(
      b, loc, type, v,
      [](OpBuilder &, Location, ValueRange a) { return a[0]; });
}

template <typename OpTy, ReduceKind kind, bool mean>
struct ReduceLowering : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value sum =
        buildReduction(rewriter, loc, op.getInput(), op.getDims(), kind);
    double count = 1;
    for (int64_t d : op.getDims())
      count *= op.getInput().getType().getDimSize(d);
    auto type = cast<RankedTensorType>(op.getType());
    Value result = buildElementwise(
        rewriter, loc, type, sum, [&](OpBuilder &b, Location l, ValueRange a) {
          return mean ? b.create<arith::MulFOp>(
                             l, a[0],
                             floatConst(b, l, a[0].getType(), 1.0 / count))
                            .getResult()
                      : a[0];
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct ReshapeLowering : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, reshapeTensor(rewriter, op.getLoc(), op.getInput(),
                                         op.getType().getShape()));
    return success();
  }
};

struct TransposeLowering : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, transposeTensor(rewriter, op.getLoc(), op.getInput(),
                                           op.getPermutation()));
    return success();
  }
};

struct BroadcastLowering : OpRewritePattern<BroadcastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BroadcastOp op,
                                PatternRewriter &rewriter) const override {
    MLIRContext *ctx = rewriter.getContext();
    int64_t rank = op.getType().getRank();
    SmallVector<AffineExpr> exprs;
    for (int64_t d : op.getDims())
      exprs.push_back(getAffineDimExpr(d, ctx));
    AffineMap map = AffineMap::get(rank, 0, exprs, ctx);
    rewriter.replaceOp(
        op,
        buildGeneric(rewriter, op.getLoc(), op.getType(), op.getInput(), {map},
                     [](OpBuilder &, Location, ValueRange a) { return a[0]; }));
    return success();
  }
};

struct SliceLowering : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SliceOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(
        op, op.getType(), op.getInput(), ValueRange{}, ValueRange{},
        ValueRange{}, op.getOffsets(), op.getSizes(), op.getStrides());
    return success();
  }
};

/// Inserts `source` into `dest` at `offsets` with `strides`.
Value insertInto(OpBuilder &b, Location loc, Value source, Value dest,
                 ArrayRef<int64_t> offsets, ArrayRef<int64_t> strides) {
  return b.create<tensor::InsertSliceOp>(
      loc, source, dest, ValueRange{}, ValueRange{}, ValueRange{}, offsets,
      tensorTypeOf(source).getShape(), strides);
}

struct ConcatLowering : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t rank = op.getType().getRank(), dim = op.getDim();
    Value result = emptyTensor(rewriter, loc, op.getType());
    SmallVector<int64_t> offsets(rank, 0), strides(rank, 1);
    for (Value input : op.getInputs()) {
      result = insertInto(rewriter, loc, input, result, offsets, strides);
      offsets[dim] += tensorTypeOf(input).getDimSize(dim);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct PadLowering : OpRewritePattern<PadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PadOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value filled = filledTensor(rewriter, loc, op.getType(),
                                op.getValue().convertToDouble());
    SmallVector<int64_t> strides;
    for (int64_t i : op.getInterior())
      strides.push_back(i + 1);
    rewriter.replaceOp(op, insertInto(rewriter, loc, op.getInput(), filled,
                                      op.getLow(), strides));
    return success();
  }
};

/// Reads an integer id as a clamped index into [0, limit).
Value idToIndex(OpBuilder &b, Location loc, Value id, int64_t limit) {
  Value index = b.create<arith::IndexCastOp>(loc, b.getIndexType(), id);
  Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
  Value last = b.create<arith::ConstantIndexOp>(loc, limit - 1);
  index = b.create<arith::MaxSIOp>(loc, index, zero);
  return b.create<arith::MinSIOp>(loc, index, last);
}

/// The first id of a vocabulary block: block * rows (an i64 scalar), or
/// null for a whole table.
static Value blockStart(OpBuilder &b, Location loc, Value block, int64_t rows) {
  if (!block)
    return Value();
  Value index = b.create<tensor::ExtractOp>(loc, block, ValueRange{});
  return b.create<arith::MulIOp>(loc, index,
                                 b.create<arith::ConstantIntOp>(loc, rows, 64));
}

/// An id relative to the block starting at `start` (if any), and whether it
/// falls in [0, rows).
static std::pair<Value, Value> idInBlock(OpBuilder &b, Location loc, Value id,
                                         Value start, int64_t rows) {
  if (!start)
    return {id, Value()};
  Value wide = id.getType() == b.getI64Type()
                   ? id
                   : b.create<arith::ExtSIOp>(loc, b.getI64Type(), id);
  Value rel = b.create<arith::SubIOp>(loc, wide, start);
  Value lo =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, rel,
                              b.create<arith::ConstantIntOp>(loc, 0, 64));
  Value hi =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, rel,
                              b.create<arith::ConstantIntOp>(loc, rows, 64));
  return {rel, b.create<arith::AndIOp>(loc, lo, hi)};
}

struct EmbeddingLowering : OpRewritePattern<EmbeddingOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(EmbeddingOp op,
                                PatternRewriter &rewriter) const override {
    MLIRContext *ctx = rewriter.getContext();
    auto type = op.getType();
    int64_t rank = type.getRank();
    Value table = op.getTable();
    int64_t vocab = op.getTable().getType().getDimSize(0);
    AffineMap idsMap = dropDimsMap(ctx, rank, {rank - 1});
    Value start = blockStart(rewriter, op.getLoc(), op.getBlock(), vocab);
    rewriter.replaceOp(
        op, buildGeneric(
                rewriter, op.getLoc(), type, op.getIds(), {idsMap},
                [&](OpBuilder &b, Location loc, ValueRange a) {
                  auto [id, inside] = idInBlock(b, loc, a[0], start, vocab);
                  Value row = idToIndex(b, loc, id, vocab);
                  Value col = b.create<linalg::IndexOp>(loc, rank - 1);
                  Value v = b.create<tensor::ExtractOp>(loc, table,
                                                        ValueRange{row, col});
                  v = convertFloat(b, loc, v, computeTypeFor(v.getType()));
                  if (!inside)
                    return v;
                  return b
                      .create<arith::SelectOp>(
                          loc, inside, v, floatConst(b, loc, v.getType(), 0.0))
                      .getResult();
                }));
    return success();
  }
};

/// Scatter-add of gradient rows, one token at a time (in place after
/// bufferization).
struct EmbeddingGradLowering : OpRewritePattern<EmbeddingGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(EmbeddingGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto resultType = op.getType();
    int64_t vocab = resultType.getDimSize(0), h = resultType.getDimSize(1);
    int64_t n = op.getIds().getType().getNumElements();
    FloatType ct = computeTypeFor(resultType.getElementType());
    Value ids = reshapeTensor(rewriter, loc, op.getIds(), {n});
    Value grad = reshapeTensor(rewriter, loc, op.getGrad(), {n, h});
    Value acc =
        filledTensor(rewriter, loc, RankedTensorType::get({vocab, h}, ct), 0.0);
    Value lb = rewriter.create<arith::ConstantIndexOp>(loc, 0);
    Value ub = rewriter.create<arith::ConstantIndexOp>(loc, n);
    Value one = rewriter.create<arith::ConstantIndexOp>(loc, 1);
    Value start = blockStart(rewriter, loc, op.getBlock(), vocab);
    // Adds gradient row i into accumulator row `row`; where `keep` (an i1,
    // if given) is false the row adds zeros.
    auto addRow = [&](OpBuilder &b, Location l, Value i, Value row,
                      Value accumulator, Value keep = Value()) -> Value {
      auto rowType = RankedTensorType::get({h}, ct);
      auto gradRowType = RankedTensorType::get(
          {h}, cast<RankedTensorType>(grad.getType()).getElementType());
      SmallVector<OpFoldResult> gOffsets = {i, b.getIndexAttr(0)};
      SmallVector<OpFoldResult> aOffsets = {row, b.getIndexAttr(0)};
      SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(h)};
      SmallVector<OpFoldResult> strides = {b.getIndexAttr(1),
                                           b.getIndexAttr(1)};
      Value g = b.create<tensor::ExtractSliceOp>(l, gradRowType, grad, gOffsets,
                                                 sizes, strides);
      Value a = b.create<tensor::ExtractSliceOp>(l, rowType, accumulator,
                                                 aOffsets, sizes, strides);
      Value sum = buildElementwise(
          b, l, rowType, ValueRange{a, g},
          [&](OpBuilder &nb, Location nl, ValueRange s) {
            Value add = s[1];
            if (keep)
              add = nb.create<arith::SelectOp>(
                  nl, keep, add, floatConst(nb, nl, add.getType(), 0.0));
            return nb.create<arith::AddFOp>(nl, s[0], add).getResult();
          });
      return b.create<tensor::InsertSliceOp>(l, sum, accumulator, aOffsets,
                                             sizes, strides);
    };
    auto loop = rewriter.create<scf::ForOp>(
        loc, lb, ub, one, ValueRange{acc},
        [&](OpBuilder &b, Location l, Value i, ValueRange iter) {
          Value id = b.create<tensor::ExtractOp>(l, ids, ValueRange{i});
          auto [rel, inside] = idInBlock(b, l, id, start, vocab);
          Value row = idToIndex(b, l, rel, vocab);
          // The padding id adds zeros (a select, not a branch, so that the
          // loop maps to a GPU kernel); ids of other vocabulary blocks are
          // skipped.
          Value notPad;
          if (std::optional<int64_t> padding = op.getPaddingIdx()) {
            Value pad = b.create<arith::ConstantOp>(
                l, b.getIntegerAttr(id.getType(), *padding));
            notPad =
                b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne, id, pad);
          }
          if (!inside) {
            b.create<scf::YieldOp>(l, addRow(b, l, i, row, iter[0], notPad));
            return;
          }
          Value take =
              notPad ? b.create<arith::AndIOp>(l, inside, notPad).getResult()
                     : inside;
          auto skip = b.create<scf::IfOp>(
              l, take,
              [&](OpBuilder &tb, Location tl) {
                tb.create<scf::YieldOp>(tl, addRow(tb, tl, i, row, iter[0]));
              },
              [&](OpBuilder &eb, Location el) {
                eb.create<scf::YieldOp>(el, iter[0]);
              });
          b.create<scf::YieldOp>(l, skip.getResult(0));
        });
    rewriter.replaceOp(
        op, toElementType(rewriter, loc, loop.getResult(0), resultType));
    return success();
  }
};

} // namespace

void mlir::cleave::populateShapeLoweringPatterns(RewritePatternSet &patterns) {
  patterns
      .add<ReduceLowering<ReduceSumOp, ReduceKind::Sum, false>,
           ReduceLowering<ReduceMeanOp, ReduceKind::Sum, true>,
           ReduceLowering<ReduceMaxOp, ReduceKind::Max, false>, ReshapeLowering,
           TransposeLowering, BroadcastLowering, SliceLowering, ConcatLowering,
           PadLowering, EmbeddingLowering, EmbeddingGradLowering>(
          patterns.getContext());
}
