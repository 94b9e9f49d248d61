//===- FlashAttentionLowering.cpp - tiled online-softmax attention --------===//
//
// cleave.attention and cleave.attention_grad as flash attention 2 computes
// them, with query and key tiles of `tile` rows and batched GEMMs over all
// B*Hq heads at once (runtime calls after bufferization):
//
//   for each query tile i:                       (scf.for over tensors)
//     m = -inf, l = 0, acc = 0                   [BH, Tq], [BH, Tq, Dv]
//     for each key tile j that a query of tile i sees (causal: j up to
//     the diagonal, from the global row `query_block * S + row`):
//       s = Q_i K_j^T; m' = max(m, rowmax(mask(s * scale)))
//       p = exp(mask(s * scale) - m'); l = l e^(m - m') + rowsum(p)
//       acc = acc e^(m - m') + p V_j;  m = m'
//     O_i = acc / l
//
// The key tiles of a query tile run in two loops: first those below the
// diagonal without padded keys (no mask), then the diagonal and the padding.
//
// The gradient takes no saved statistics (the op's operands are q, k, v and
// dO): per query tile it first runs the loop above for O_i and the
// log-sum-exp L_i = m + log l, then D_i = rowsum(dO_i * O_i) and, per key
// tile, P = exp(mask(s * scale) - L_i), dV_j += P^T dO_i,
// dP = dO_i V_j^T, dS = P (dP - D_i) scale, dQ_i += dS K_j, dK_j += dS^T Q_i.
// GQA: K and V are expanded to the query heads (as in the materialised
// lowering), and dK, dV summed over each group at the end.
//
// Nothing is S x Skv: per step the largest temporaries are the [BH, Tq, Tk]
// tiles, and the rest ([BH, S, D] copies of Q, K, V, O, dO and the
// gradients) grows linearly in S. Sequences that are not a multiple of the
// tile are zero-padded; padded keys are masked, padded query rows dropped.
//
//===----------------------------------------------------------------------===//

#include "AttentionUtils.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// What the tile loops of one attention op share.
struct Tiling {
  AttnShape a;
  int64_t tq, tk; ///< rows of a query tile and of a key tile
  int64_t sp, kp; ///< query and key lengths padded to whole tiles
  double scale;
  bool causal;
  Type elem;
  Value rowBase; ///< index: the global position of query row 0
  Value block;   ///< index: the query block of a balanced layout, else null
  std::optional<int64_t> balanced; ///< the balanced layout's block count
  int64_t bh() const { return a.b * a.hq; }
  /// The global position of query row `row`: `rowBase + row`, or in the
  /// balanced layout sequencePosition's (positions grow with the row in
  /// both, so a tile's first and last rows bound the others').
  Value queryPosition(OpBuilder &b, Location l, Value row) const {
    if (block)
      return sequencePosition(b, l, row, block, a.s, balanced);
    return b.create<arith::AddIOp>(l, rowBase, row);
  }
  int64_t numQ() const { return sp / tq; }
  int64_t numK() const { return kp / tk; }
  RankedTensorType rowType() const {
    return RankedTensorType::get({bh(), tq}, computeTypeFor(elem));
  }
  RankedTensorType tileType(int64_t cols) const {
    return RankedTensorType::get({bh(), tq, cols}, elem);
  }
};

Value indexConst(OpBuilder &b, Location loc, int64_t v) {
  return b.create<arith::ConstantIndexOp>(loc, v);
}

Tiling makeTiling(OpBuilder &b, Location loc, const AttnShape &a, int64_t tile,
                  double scale, bool causal, Type elem, Value queryBlock,
                  std::optional<int64_t> balanced) {
  Tiling t{a,
           std::min(tile, a.s),
           std::min(tile, a.skv),
           0,
           0,
           scale,
           causal,
           elem,
           Value(),
           Value(),
           balanced};
  t.sp = llvm::divideCeil(a.s, t.tq) * t.tq;
  t.kp = llvm::divideCeil(a.skv, t.tk) * t.tk;
  t.rowBase = indexConst(b, loc, 0);
  if (queryBlock && causal) {
    Value block = blockIndex(b, loc, queryBlock);
    if (balanced)
      t.block = block;
    else
      t.rowBase = b.create<arith::MulIOp>(loc, block, indexConst(b, loc, a.s));
  }
  return t;
}

/// `x` [BH, L, D] zero-padded to [BH, len, D].
Value padRows(OpBuilder &b, Location loc, Value x, int64_t len) {
  auto type = tensorTypeOf(x);
  if (type.getDimSize(1) == len)
    return x;
  auto padded = RankedTensorType::get(
      {type.getDimSize(0), len, type.getDimSize(2)}, type.getElementType());
  SmallVector<OpFoldResult> zeros(3, b.getIndexAttr(0)),
      ones(3, b.getIndexAttr(1));
  SmallVector<OpFoldResult> sizes;
  for (int64_t d : type.getShape())
    sizes.push_back(b.getIndexAttr(d));
  return b.create<tensor::InsertSliceOp>(
      loc, x, filledTensor(b, loc, padded, 0.0), zeros, sizes, ones);
}

/// Rows [off, off + rows) of `x` [BH, L, D].
Value rowsOf(OpBuilder &b, Location loc, Value x, OpFoldResult off,
             int64_t rows) {
  auto type = tensorTypeOf(x);
  SmallVector<OpFoldResult> offsets = {b.getIndexAttr(0), off,
                                       b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(type.getDimSize(0)),
                                     b.getIndexAttr(rows),
                                     b.getIndexAttr(type.getDimSize(2))};
  SmallVector<OpFoldResult> ones(3, b.getIndexAttr(1));
  return b.create<tensor::ExtractSliceOp>(loc, x, offsets, sizes, ones);
}

/// `dest` with rows [off, off + rows of `tile`) replaced by `tile`.
Value insertRows(OpBuilder &b, Location loc, Value tile, Value dest,
                 Value off) {
  auto type = tensorTypeOf(tile);
  SmallVector<OpFoldResult> offsets = {b.getIndexAttr(0), off,
                                       b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes;
  for (int64_t d : type.getShape())
    sizes.push_back(b.getIndexAttr(d));
  SmallVector<OpFoldResult> ones(3, b.getIndexAttr(1));
  return b.create<tensor::InsertSliceOp>(loc, tile, dest, offsets, sizes, ones);
}

/// Whether some key tile needs a mask (causal, or padded keys).
bool needsMask(const Tiling &t) { return t.causal || t.kp != t.a.skv; }

/// In the body of a generic over a [BH, Tq, Tk] tile at query row `qOff`
/// and key row `kOff`: the scaled score `x`, or, if the tile is `masked`,
/// -inf where the key is in the query's future (causal) or padding.
Value maskedScore(OpBuilder &b, Location l, const Tiling &t, Value x,
                  Value qOff, Value kOff, bool masked) {
  Value v =
      b.create<arith::MulFOp>(l, x, floatConst(b, l, x.getType(), t.scale));
  bool paddedKeys = t.kp != t.a.skv;
  if (!masked || !needsMask(t))
    return v;
  Value key = b.create<arith::AddIOp>(l, kOff, b.create<linalg::IndexOp>(l, 2));
  Value hide;
  if (t.causal) {
    Value row = b.create<linalg::IndexOp>(l, 1);
    Value query =
        t.block ? t.queryPosition(b, l, b.create<arith::AddIOp>(l, qOff, row))
                : b.create<arith::AddIOp>(l, t.queryPosition(b, l, qOff), row);
    hide = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ugt, key, query);
  }
  if (paddedKeys) {
    Value pad = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::uge, key,
                                        indexConst(b, l, t.a.skv));
    hide = hide ? b.create<arith::OrIOp>(l, hide, pad).getResult() : pad;
  }
  Value minusInf =
      floatConst(b, l, x.getType(), -std::numeric_limits<double>::infinity());
  return b.create<arith::SelectOp>(l, hide, minusInf, v);
}

/// The number of key tiles that the query tile at row `qOff` sees.
Value keyTileBound(OpBuilder &b, Location loc, const Tiling &t, Value qOff) {
  Value all = indexConst(b, loc, t.numK());
  if (!t.causal)
    return all;
  // One past the position of the tile's last row.
  Value end;
  if (t.block) {
    Value last =
        b.create<arith::AddIOp>(loc, qOff, indexConst(b, loc, t.tq - 1));
    end = b.create<arith::AddIOp>(loc, t.queryPosition(b, loc, last),
                                  indexConst(b, loc, 1));
  } else {
    end = b.create<arith::AddIOp>(loc,
                                  b.create<arith::AddIOp>(loc, t.rowBase, qOff),
                                  indexConst(b, loc, t.tq));
  }
  Value tiles =
      b.create<arith::CeilDivUIOp>(loc, end, indexConst(b, loc, t.tk));
  return b.create<arith::MinUIOp>(loc, tiles, all);
}

/// The key tiles [0, result) that no query row of the tile at `qOff` needs
/// masked: below the diagonal (causal) and without padded keys; at most
/// `bound`.
Value unmaskedTileBound(OpBuilder &b, Location loc, const Tiling &t, Value qOff,
                        Value bound) {
  Value n = bound;
  if (t.causal) {
    // Tile j is fully visible when its last key precedes the first row.
    Value first = b.create<arith::AddIOp>(loc, t.queryPosition(b, loc, qOff),
                                          indexConst(b, loc, 1));
    Value tiles =
        b.create<arith::DivUIOp>(loc, first, indexConst(b, loc, t.tk));
    n = b.create<arith::MinUIOp>(loc, n, tiles);
  }
  if (t.kp != t.a.skv)
    n = b.create<arith::MinUIOp>(loc, n, indexConst(b, loc, t.numK() - 1));
  return n;
}

/// Builds one key tile's iteration: `j` the tile, `args` the carried values,
/// `masked` whether the scores need the mask.
using KeyTileBody =
    function_ref<void(OpBuilder &, Location, Value, ValueRange, bool)>;

/// Runs `body` over the key tiles that the query tile at `qOff` sees: the
/// unmasked ones first, in a loop without the mask's index arithmetic,
/// then the rest (the diagonal, the padding) with it.
SmallVector<Value> keyTileLoops(OpBuilder &b, Location loc, const Tiling &t,
                                Value qOff, ValueRange inits,
                                KeyTileBody body) {
  Value zero = indexConst(b, loc, 0), one = indexConst(b, loc, 1);
  auto loop = [&](Value from, Value to, ValueRange carried, bool masked) {
    return b.create<scf::ForOp>(
        loc, from, to, one, carried,
        [&](OpBuilder &nb, Location l, Value j, ValueRange args) {
          body(nb, l, j, args, masked);
        });
  };
  // A single key tile is always seen (a query sees at least key 0), so its
  // one iteration has constant bounds: the loop folds away, and the
  // gradient's recomputed scores can be the forward's (CSE), even when the
  // query positions are only known at run time (a context-parallel block).
  if (t.numK() == 1)
    return SmallVector<Value>(
        loop(zero, one, inits, needsMask(t)).getResults());
  Value bound = keyTileBound(b, loc, t, qOff);
  if (!needsMask(t))
    return SmallVector<Value>(loop(zero, bound, inits, false).getResults());
  Value split = unmaskedTileBound(b, loc, t, qOff, bound);
  auto unmasked = loop(zero, split, inits, false);
  return SmallVector<Value>(
      loop(split, bound, unmasked.getResults(), true).getResults());
}

/// `dest` overwritten in place with `body(inputs..., dest)` elementwise
/// (the inputs indexed by `maps` from `dest`'s iteration space), so that a
/// loop-carried tensor keeps its buffer.
Value updateInPlace(OpBuilder &b, Location loc, Value dest, ValueRange inputs,
                    ArrayRef<AffineMap> maps, ScalarFn body) {
  auto type = tensorTypeOf(dest);
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineMap> all(maps);
  all.push_back(AffineMap::getMultiDimIdentityMap(type.getRank(), ctx));
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  auto op = b.create<linalg::GenericOp>(
      loc, TypeRange{type}, inputs, ValueRange{dest}, all, iterators,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        SmallVector<Value> scalars;
        for (Value a : args)
          scalars.push_back(
              convertFloat(nb, l, a, computeTypeFor(a.getType())));
        Value r = body(nb, l, scalars);
        nb.create<linalg::YieldOp>(
            l, convertFloat(nb, l, r, type.getElementType()));
      });
  return op.getResult(0);
}

/// The running statistics of one query tile: row max `m`, row sum `l` (both
/// in compute precision) and the unnormalised output `acc`.
struct RowStats {
  Value m, l, acc;
};

/// The online-softmax loop of query tile `qT` (rows from `qOff`) over the key
/// tiles of `k` and `v` ([BH, Kp, D]).
RowStats forwardTile(OpBuilder &b, Location loc, const Tiling &t, Value qT,
                     Value k, Value v, Value qOff) {
  MLIRContext *ctx = b.getContext();
  RankedTensorType row = t.rowType(), accType = t.tileType(t.a.dv);
  Value m0 =
      filledTensor(b, loc, row, -std::numeric_limits<double>::infinity());
  Value l0 = filledTensor(b, loc, row, 0.0);
  Value acc0 = filledTensor(b, loc, accType, 0.0);
  AffineMap full = AffineMap::getMultiDimIdentityMap(3, ctx);
  AffineMap rowMap = dropDimsMap(ctx, 3, {2});
  auto body = [&](OpBuilder &nb, Location l, Value j, ValueRange args,
                  bool masked) {
    Value m = args[0], sum = args[1], acc = args[2];
    Value kOff = nb.create<arith::MulIOp>(l, j, indexConst(nb, l, t.tk));
    Value kT = rowsOf(nb, l, k, kOff, t.tk), vT = rowsOf(nb, l, v, kOff, t.tk);
    Value s = buildMatmul(nb, l, qT, kT, false, true, t.elem);
    Value mNew = buildReduction(
        nb, l, {s, m}, {full, rowMap}, {t.bh(), t.tq, t.tk}, {2},
        ReduceKind::Max, [&](OpBuilder &bb, Location ll, ValueRange x) {
          Value sc = maskedScore(bb, ll, t, x[0], qOff, kOff, masked);
          return bb.create<arith::MaximumFOp>(ll, sc, x[1]).getResult();
        });
    Value p = buildGeneric(nb, l, t.tileType(t.tk), {s, mNew}, {full, rowMap},
                           [&](OpBuilder &bb, Location ll, ValueRange x) {
                             Value sc = maskedScore(bb, ll, t, x[0], qOff, kOff,
                                                    masked);
                             Value d = bb.create<arith::SubFOp>(ll, sc, x[1]);
                             return bb.create<math::ExpOp>(ll, d).getResult();
                           });
    auto rescale = [](OpBuilder &bb, Location ll, Value mOld, Value mNew) {
      return bb
          .create<math::ExpOp>(ll, bb.create<arith::SubFOp>(ll, mOld, mNew))
          .getResult();
    };
    // The loop-carried tensors are updated in place (the old max last).
    AffineMap same = AffineMap::getMultiDimIdentityMap(2, ctx);
    Value rowSum = buildReduction(nb, l, p, {2}, ReduceKind::Sum);
    Value sumNew = updateInPlace(
        nb, l, sum, {m, mNew, rowSum}, {same, same, same},
        [&](OpBuilder &bb, Location ll, ValueRange x) {
          Value kept =
              bb.create<arith::MulFOp>(ll, x[3], rescale(bb, ll, x[0], x[1]));
          return bb.create<arith::AddFOp>(ll, kept, x[2]).getResult();
        });
    Value scaled = updateInPlace(
        nb, l, acc, {m, mNew}, {rowMap, rowMap},
        [&](OpBuilder &bb, Location ll, ValueRange x) {
          return bb.create<arith::MulFOp>(ll, x[2], rescale(bb, ll, x[0], x[1]))
              .getResult();
        });
    Value accNew = buildMatmulInto(nb, l, p, vT, false, false, scaled);
    Value mCopy = nb.create<linalg::CopyOp>(l, mNew, m).getResult(0);
    nb.create<scf::YieldOp>(l, ValueRange{mCopy, sumNew, accNew});
  };
  SmallVector<Value> r =
      keyTileLoops(b, loc, t, qOff, ValueRange{m0, l0, acc0}, body);
  return {r[0], r[1], r[2]};
}

/// O = acc / l of a finished query tile.
Value normalise(OpBuilder &b, Location loc, const Tiling &t,
                const RowStats &st) {
  MLIRContext *ctx = b.getContext();
  return buildGeneric(
      b, loc, t.tileType(t.a.dv), {st.acc, st.l},
      {AffineMap::getMultiDimIdentityMap(3, ctx), dropDimsMap(ctx, 3, {2})},
      [](OpBuilder &bb, Location l, ValueRange x) {
        return bb.create<arith::DivFOp>(l, x[0], x[1]).getResult();
      });
}

/// Q, K, V (and dO) in head-major layout, padded to whole tiles (a
/// recomputed attention's barriers moved onto the copies).
struct Operands {
  Value q, k, v;
};

Operands headMajor(OpBuilder &b, Location loc, const Tiling &t, Value q,
                   Value k, Value v) {
  const AttnShape &a = t.a;
  auto heads = [&](Value x, int64_t groups, int64_t rows) {
    return layoutBehindBarrier(b, loc, x, [&](Value y) {
      return padRows(b, loc, toHeadMajor(b, loc, y, a.hq, groups), rows);
    });
  };
  return {heads(q, 1, t.sp), heads(k, a.groups(), t.kp),
          heads(v, a.groups(), t.kp)};
}

struct FlashAttentionLowering : OpRewritePattern<AttentionOp> {
  FlashAttentionLowering(MLIRContext *ctx, int64_t tile)
      : OpRewritePattern(ctx), tile(tile) {}

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    AttnShape a = attentionShapeOf(op.getQuery(), op.getKey(), op.getValue());
    Tiling t = makeTiling(rewriter, loc, a, tile, op.getScaleOrDefault(),
                          op.getCausal(), op.getType().getElementType(),
                          op.getQueryBlock(), op.getBalanced());
    Operands x =
        headMajor(rewriter, loc, t, op.getQuery(), op.getKey(), op.getValue());
    auto outType = RankedTensorType::get({t.bh(), t.sp, a.dv}, t.elem);
    auto body = [&](OpBuilder &b, Location l, Value i, ValueRange args) {
      Value qOff = b.create<arith::MulIOp>(l, i, indexConst(b, l, t.tq));
      Value qT = rowsOf(b, l, x.q, qOff, t.tq);
      RowStats st = forwardTile(b, l, t, qT, x.k, x.v, qOff);
      Value o = insertRows(b, l, normalise(b, l, t, st), args[0], qOff);
      b.create<scf::YieldOp>(l, o);
    };
    auto loop = rewriter.create<scf::ForOp>(
        loc, indexConst(rewriter, loc, 0), indexConst(rewriter, loc, t.numQ()),
        indexConst(rewriter, loc, 1),
        ValueRange{emptyTensor(rewriter, loc, outType)}, body);
    Value out =
        rowsOf(rewriter, loc, loop.getResult(0), rewriter.getIndexAttr(0), a.s);
    rewriter.replaceOp(op, fromHeadMajor(rewriter, loc, out, a.b, a.hq));
    return success();
  }

  int64_t tile;
};

/// One query tile's backward pass over its key tiles. `lse` is its
/// log-sum-exp [BH, Tq], `delta` rowsum(dO * O). Returns dQ of the tile and
/// the updated dK, dV.
SmallVector<Value> backwardTile(OpBuilder &b, Location loc, const Tiling &t,
                                const Operands &x, Value qT, Value dOT,
                                Value lse, Value delta, Value qOff, Value dK,
                                Value dV) {
  MLIRContext *ctx = b.getContext();
  AffineMap full = AffineMap::getMultiDimIdentityMap(3, ctx);
  AffineMap rowMap = dropDimsMap(ctx, 3, {2});
  Value dQ0 = filledTensor(b, loc, t.tileType(t.a.d), 0.0);
  auto body = [&](OpBuilder &nb, Location l, Value j, ValueRange args,
                  bool masked) {
    Value kOff = nb.create<arith::MulIOp>(l, j, indexConst(nb, l, t.tk));
    Value kT = rowsOf(nb, l, x.k, kOff, t.tk);
    Value vT = rowsOf(nb, l, x.v, kOff, t.tk);
    Value s = buildMatmul(nb, l, qT, kT, false, true, t.elem);
    Value p = buildGeneric(nb, l, t.tileType(t.tk), {s, lse}, {full, rowMap},
                           [&](OpBuilder &bb, Location ll, ValueRange v) {
                             Value sc = maskedScore(bb, ll, t, v[0], qOff, kOff,
                                                    masked);
                             Value d = bb.create<arith::SubFOp>(ll, sc, v[1]);
                             return bb.create<math::ExpOp>(ll, d).getResult();
                           });
    Value dVt = buildMatmulInto(nb, l, p, dOT, true, false,
                                rowsOf(nb, l, args[2], kOff, t.tk));
    Value dP = buildMatmul(nb, l, dOT, vT, false, true, t.elem);
    Value dS = buildGeneric(
        nb, l, t.tileType(t.tk), {p, dP, delta}, {full, full, rowMap},
        [&](OpBuilder &bb, Location ll, ValueRange v) {
          Value diff = bb.create<arith::SubFOp>(ll, v[1], v[2]);
          Value r = bb.create<arith::MulFOp>(ll, v[0], diff);
          return bb
              .create<arith::MulFOp>(ll, r,
                                     floatConst(bb, ll, r.getType(), t.scale))
              .getResult();
        });
    Value dQ = buildMatmulInto(nb, l, dS, kT, false, false, args[0]);
    Value dKt = buildMatmulInto(nb, l, dS, qT, true, false,
                                rowsOf(nb, l, args[1], kOff, t.tk));
    nb.create<scf::YieldOp>(
        l, ValueRange{dQ, insertRows(nb, l, dKt, args[1], kOff),
                      insertRows(nb, l, dVt, args[2], kOff)});
  };
  return keyTileLoops(b, loc, t, qOff, ValueRange{dQ0, dK, dV}, body);
}

struct FlashAttentionGradLowering : OpRewritePattern<AttentionGradOp> {
  FlashAttentionGradLowering(MLIRContext *ctx, int64_t tile)
      : OpRewritePattern(ctx), tile(tile) {}

  LogicalResult matchAndRewrite(AttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    AttnShape a = attentionShapeOf(op.getQuery(), op.getKey(), op.getValue());
    Tiling t =
        makeTiling(rewriter, loc, a, tile, op.getScaleOrDefault(),
                   op.getCausal(), op.getQuery().getType().getElementType(),
                   op.getQueryBlock(), op.getBalanced());
    Operands x =
        headMajor(rewriter, loc, t, op.getQuery(), op.getKey(), op.getValue());
    Value dO = padRows(rewriter, loc,
                       toHeadMajor(rewriter, loc, op.getGrad(), a.hq, 1), t.sp);
    auto gradType = [&](int64_t rows, int64_t d) {
      return RankedTensorType::get({t.bh(), rows, d}, t.elem);
    };
    SmallVector<Value> inits = {
        emptyTensor(rewriter, loc, gradType(t.sp, a.d)),
        filledTensor(rewriter, loc, gradType(t.kp, a.d), 0.0),
        filledTensor(rewriter, loc, gradType(t.kp, a.dv), 0.0)};
    auto body = [&](OpBuilder &b, Location l, Value i, ValueRange args) {
      Value qOff = b.create<arith::MulIOp>(l, i, indexConst(b, l, t.tq));
      Value qT = rowsOf(b, l, x.q, qOff, t.tq);
      Value dOT = rowsOf(b, l, dO, qOff, t.tq);
      RowStats st = forwardTile(b, l, t, qT, x.k, x.v, qOff);
      Value lse = buildElementwise(
          b, l, t.rowType(), {st.m, st.l},
          [](OpBuilder &bb, Location ll, ValueRange v) {
            Value log = bb.create<math::LogOp>(ll, v[1]);
            return bb.create<arith::AddFOp>(ll, v[0], log).getResult();
          });
      Value o = normalise(b, l, t, st);
      Value delta = buildReduction(
          b, l, {dOT, o}, {}, {t.bh(), t.tq, a.dv}, {2}, ReduceKind::Sum,
          [](OpBuilder &bb, Location ll, ValueRange v) {
            return bb.create<arith::MulFOp>(ll, v[0], v[1]).getResult();
          });
      SmallVector<Value> g =
          backwardTile(b, l, t, x, qT, dOT, lse, delta, qOff, args[1], args[2]);
      b.create<scf::YieldOp>(
          l, ValueRange{insertRows(b, l, g[0], args[0], qOff), g[1], g[2]});
    };
    auto loop = rewriter.create<scf::ForOp>(
        loc, indexConst(rewriter, loc, 0), indexConst(rewriter, loc, t.numQ()),
        indexConst(rewriter, loc, 1), inits, body);
    OpFoldResult zero = rewriter.getIndexAttr(0);
    Value dQ = rowsOf(rewriter, loc, loop.getResult(0), zero, a.s);
    Value dK = rowsOf(rewriter, loc, loop.getResult(1), zero, a.skv);
    Value dV = rowsOf(rewriter, loc, loop.getResult(2), zero, a.skv);
    rewriter.replaceOp(op, {fromHeadMajor(rewriter, loc, dQ, a.b, a.hq),
                            sumGroups(rewriter, loc, dK, a, t.elem),
                            sumGroups(rewriter, loc, dV, a, t.elem)});
    return success();
  }

  int64_t tile;
};

} // namespace

void mlir::cleave::populateFlashAttentionPatterns(RewritePatternSet &patterns,
                                                  int64_t tile) {
  patterns.add<FlashAttentionLowering, FlashAttentionGradLowering>(
      patterns.getContext(), tile);
}
