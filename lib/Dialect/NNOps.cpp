//===- NNOps.cpp - matmul, norms, softmax, attention, losses --------------===//

#include "OpUtils.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/IR/Builders.h"
#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

static constexpr int64_t kNoDim = ShardingRule::kNoDim;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

namespace {
/// The dimensions of a (possibly transposed, possibly batched) matmul.
struct MatmulDims {
  int64_t batchRank, m, n, k, batch;
};
} // namespace

static MatmulDims getMatmulDims(RankedTensorType lhs, RankedTensorType rhs,
                                bool transposeLhs, bool transposeRhs) {
  int64_t r = lhs.getRank();
  MatmulDims dims;
  dims.batchRank = r - 2;
  dims.m = lhs.getDimSize(transposeLhs ? r - 1 : r - 2);
  dims.k = lhs.getDimSize(transposeLhs ? r - 2 : r - 1);
  int64_t rr = rhs.getRank();
  dims.n = rhs.getDimSize(transposeRhs ? rr - 2 : rr - 1);
  dims.batch = productOf(lhs.getShape().take_front(r - 2));
  return dims;
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto lhs = tensorType(adaptor.getLhs()), rhs = tensorType(adaptor.getRhs());
  bool tl = adaptor.getTransposeLhs(), tr = adaptor.getTransposeRhs();
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return inferError(loc, "'cleave.matmul' op operands need rank >= 2, got "
                           "lhs rank " +
                               Twine(lhs.getRank()) + " and rhs rank " +
                               Twine(rhs.getRank()));
  if (lhs.getElementType() != rhs.getElementType())
    return inferError(loc, "'cleave.matmul' op lhs and rhs element types "
                           "differ; insert a cleave.cast");
  int64_t r = lhs.getRank(), rr = rhs.getRank();
  if (rr != 2 && rr != r)
    return inferError(loc, "'cleave.matmul' op rhs must be a matrix or have "
                           "the lhs rank " +
                               Twine(r) + ", got rank " + Twine(rr));
  if (rr == r &&
      lhs.getShape().take_front(r - 2) != rhs.getShape().take_front(r - 2))
    return inferError(loc, "'cleave.matmul' op batch dimensions differ: lhs " +
                               formatShape(lhs.getShape().take_front(r - 2)) +
                               " vs rhs " +
                               formatShape(rhs.getShape().take_front(r - 2)));
  if (adaptor.getReduceBatch() && (!tl || tr || rr != r || r < 3))
    return inferError(loc, "'cleave.matmul' op reduce_batch needs "
                           "transpose_lhs, an untransposed rhs and batch "
                           "dimensions on both operands");
  MatmulDims d = getMatmulDims(lhs, rhs, tl, tr);
  int64_t rhsK = rhs.getDimSize(tr ? rr - 1 : rr - 2);
  if (d.k != rhsK)
    return inferError(loc, "'cleave.matmul' op contracting dimension "
                           "mismatch: lhs dim " +
                               Twine(tl ? r - 2 : r - 1) + " has size " +
                               Twine(d.k) + " but rhs dim " +
                               Twine(tr ? rr - 1 : rr - 2) + " has size " +
                               Twine(rhsK));
  SmallVector<int64_t> shape;
  if (!adaptor.getReduceBatch())
    shape.append(lhs.getShape().take_front(r - 2).begin(),
                 lhs.getShape().take_front(r - 2).end());
  shape.push_back(d.m);
  shape.push_back(d.n);
  inferred.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

ShardingRule MatmulOp::getShardingRule() {
  ShardingRule rule(*this);
  auto lhs = getLhs().getType(), rhs = getRhs().getType();
  bool tl = getTransposeLhs(), tr = getTransposeRhs();
  int64_t r = lhs.getRank(), rr = rhs.getRank();
  bool batchedRhs = rr == r;
  // Summed batch dimensions (reduce_batch) are reductions, absent from the
  // matrix result.
  bool reduce = getReduceBatch();
  int64_t out = reduce ? 0 : r - 2;
  for (int64_t b = 0; b < r - 2; ++b)
    rule.addFactor({b, batchedRhs ? b : kNoDim}, {reduce ? kNoDim : b},
                   lhs.getDimSize(b),
                   reduce ? FactorKind::Reduction : FactorKind::PassThrough);
  MatmulDims d = getMatmulDims(lhs, rhs, tl, tr);
  rule.addFactor({tl ? r - 1 : r - 2, kNoDim}, {out}, d.m);
  rule.addFactor({kNoDim, tr ? rr - 2 : rr - 1}, {out + 1}, d.n);
  rule.addFactor({tl ? r - 2 : r - 1, tr ? rr - 1 : rr - 2}, {kNoDim}, d.k,
                 FactorKind::Reduction);
  return rule;
}

OpWork MatmulOp::getWork(const OpShapes &s) {
  const TensorShape &lhs = s.operands[0], &rhs = s.operands[1];
  bool tl = getTransposeLhs(), tr = getTransposeRhs();
  double m = double(lhs.dim(tl ? -1 : -2)), k = double(lhs.dim(tl ? -2 : -1));
  double n = double(rhs.dim(tr ? -2 : -1)), batch = 1;
  for (int64_t d = 0; d + 2 < lhs.rank(); ++d)
    batch *= double(lhs.dims[size_t(d)]);
  OpWork w = streamingWork(s, 0, /*fusable=*/false);
  w.kind = WorkKind::Gemm;
  w.gemmFlops = 2 * batch * m * n * k;
  // One weight matrix shared by every batch: a single GEMM over all rows;
  // summed batches: a single GEMM over all of their rows.
  if (rhs.rank() == 2 && !tl)
    w.gemm = {batch * m, n, k, 1};
  else if (getReduceBatch())
    w.gemm = {m, n, batch * k, 1};
  else
    w.gemm = {m, n, k, batch};
  return w;
}

//===----------------------------------------------------------------------===//
// Row-wise ops: softmax and norms
//===----------------------------------------------------------------------===//

namespace {
/// How a tensor of a row-wise op relates to the op's main shape.
enum class Role { None, Full, Row };
} // namespace

/// Adds the factors of a row-wise op: tensors with Role::Full have `shape`;
/// tensors with Role::Row are vectors of `shape[normDim]`. `normDim` needs
/// replication; the other dimensions are `otherKind`.
static void addRowwiseFactors(ShardingRule &rule, ArrayRef<int64_t> shape,
                              int64_t normDim, ArrayRef<Role> operands,
                              ArrayRef<Role> results, FactorKind otherKind) {
  for (int64_t d = 0, e = shape.size(); d < e; ++d) {
    bool norm = d == normDim;
    auto dimFor = [&](Role role) {
      if (role == Role::Full)
        return d;
      return role == Role::Row && norm ? int64_t(0) : kNoDim;
    };
    SmallVector<int64_t> od, rd;
    for (Role role : operands)
      od.push_back(dimFor(role));
    for (Role role : results)
      rd.push_back(dimFor(role));
    rule.addFactor(od, rd, shape[d],
                   norm ? FactorKind::NeedReplication : otherKind);
  }
}

static LogicalResult verifySoftmaxDim(Operation *op, int64_t dim,
                                      int64_t rank) {
  if (dim < 0 || dim >= rank)
    return op->emitOpError()
           << "dim " << dim << " is out of range for an operand of rank "
           << rank;
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return verifySoftmaxDim(*this, getDim(), getType().getRank());
}

ShardingRule SoftmaxOp::getShardingRule() {
  ShardingRule rule(*this);
  addRowwiseFactors(rule, getType().getShape(), getDim(), {Role::Full},
                    {Role::Full}, FactorKind::PassThrough);
  return rule;
}

OpWork SoftmaxOp::getWork(const OpShapes &s) {
  return streamingWork(s, 5 * s.results[0].elements(), /*fusable=*/false);
}

LogicalResult SoftmaxGradOp::verify() {
  return verifySoftmaxDim(*this, getDim(), getType().getRank());
}

ShardingRule SoftmaxGradOp::getShardingRule() {
  ShardingRule rule(*this);
  addRowwiseFactors(rule, getType().getShape(), getDim(),
                    {Role::Full, Role::Full}, {Role::Full},
                    FactorKind::PassThrough);
  return rule;
}

OpWork SoftmaxGradOp::getWork(const OpShapes &s) {
  return streamingWork(s, 4 * s.results[0].elements(), /*fusable=*/false);
}

/// Checks `x` of rank >= 1 and the `[H]` weight vectors of a norm.
static LogicalResult
verifyNormOperands(std::optional<Location> loc, StringRef name,
                   RankedTensorType x,
                   ArrayRef<std::pair<StringRef, Value>> vectors) {
  if (x.getRank() < 1)
    return inferError(loc,
                      "'cleave." + name + "' op input must have rank >= 1");
  int64_t h = x.getDimSize(x.getRank() - 1);
  for (auto [what, value] : vectors) {
    auto type = tensorType(value);
    if (type.getRank() != 1 || type.getDimSize(0) != h)
      return inferError(loc, "'cleave." + name + "' op " + what +
                                 " must have shape [" + Twine(h) +
                                 "] (the last input dimension), got " +
                                 formatShape(type.getShape()));
    if (type.getElementType() != x.getElementType())
      return inferError(loc, "'cleave." + name + "' op " + what +
                                 " element type differs from the input's");
  }
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto x = tensorType(adaptor.getInput());
  if (failed(verifyNormOperands(
          loc, "layer_norm", x,
          {{"gamma", adaptor.getGamma()}, {"beta", adaptor.getBeta()}})))
    return failure();
  inferred.push_back(x);
  return success();
}

ShardingRule LayerNormOp::getShardingRule() {
  ShardingRule rule(*this);
  ArrayRef<int64_t> shape = getType().getShape();
  addRowwiseFactors(rule, shape, shape.size() - 1,
                    {Role::Full, Role::Row, Role::Row}, {Role::Full},
                    FactorKind::PassThrough);
  return rule;
}

OpWork LayerNormOp::getWork(const OpShapes &s) {
  return streamingWork(s, 8 * s.results[0].elements(), /*fusable=*/false);
}

LogicalResult
LayerNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  auto x = tensorType(adaptor.getInput());
  if (failed(verifyNormOperands(loc, "layer_norm_grad", x,
                                {{"gamma", adaptor.getGamma()}})))
    return failure();
  if (adaptor.getGrad().getType() != x)
    return inferError(loc, "'cleave.layer_norm_grad' op grad type must equal "
                           "the input type");
  Type gamma = adaptor.getGamma().getType();
  inferred.append({x, gamma, gamma});
  return success();
}

ShardingRule LayerNormGradOp::getShardingRule() {
  ShardingRule rule(*this);
  ArrayRef<int64_t> shape = getInput().getType().getShape();
  // Rows not in the weight gradients are summed over: reduction factors.
  addRowwiseFactors(rule, shape, shape.size() - 1,
                    {Role::Full, Role::Row, Role::Full},
                    {Role::Full, Role::Row, Role::Row}, FactorKind::Reduction);
  return rule;
}

OpWork LayerNormGradOp::getWork(const OpShapes &s) {
  return streamingWork(s, 12 * s.operands[0].elements(), /*fusable=*/false);
}

LogicalResult RMSNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto x = tensorType(adaptor.getInput());
  if (failed(verifyNormOperands(loc, "rms_norm", x,
                                {{"gamma", adaptor.getGamma()}})))
    return failure();
  inferred.push_back(x);
  return success();
}

ShardingRule RMSNormOp::getShardingRule() {
  ShardingRule rule(*this);
  ArrayRef<int64_t> shape = getType().getShape();
  addRowwiseFactors(rule, shape, shape.size() - 1, {Role::Full, Role::Row},
                    {Role::Full}, FactorKind::PassThrough);
  return rule;
}

OpWork RMSNormOp::getWork(const OpShapes &s) {
  return streamingWork(s, 5 * s.results[0].elements(), /*fusable=*/false);
}

LogicalResult RMSNormGradOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  auto x = tensorType(adaptor.getInput());
  if (failed(verifyNormOperands(loc, "rms_norm_grad", x,
                                {{"gamma", adaptor.getGamma()}})))
    return failure();
  if (adaptor.getGrad().getType() != x)
    return inferError(loc, "'cleave.rms_norm_grad' op grad type must equal "
                           "the input type");
  inferred.append({x, adaptor.getGamma().getType()});
  return success();
}

ShardingRule RMSNormGradOp::getShardingRule() {
  ShardingRule rule(*this);
  ArrayRef<int64_t> shape = getInput().getType().getShape();
  addRowwiseFactors(rule, shape, shape.size() - 1,
                    {Role::Full, Role::Row, Role::Full},
                    {Role::Full, Role::Row}, FactorKind::Reduction);
  return rule;
}

OpWork RMSNormGradOp::getWork(const OpShapes &s) {
  return streamingWork(s, 8 * s.operands[0].elements(), /*fusable=*/false);
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto table = tensorType(adaptor.getTable());
  auto ids = tensorType(adaptor.getIds());
  if (table.getRank() != 2)
    return inferError(loc, "'cleave.embedding' op table must be [V, H], got "
                           "shape " +
                               formatShape(table.getShape()));
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  inferred.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

ShardingRule EmbeddingOp::getShardingRule() {
  ShardingRule rule(*this);
  auto ids = getIds().getType();
  int64_t r = ids.getRank();
  for (int64_t d = 0; d < r; ++d)
    rule.addFactor({kNoDim, d}, {d}, ids.getDimSize(d));
  auto table = getTable().getType();
  rule.addFactor({1, kNoDim}, {r}, table.getDimSize(1));
  rule.addFactor({0, kNoDim}, {kNoDim}, table.getDimSize(0),
                 FactorKind::Reduction);
  return rule;
}

OpWork EmbeddingOp::getWork(const OpShapes &s) {
  // A gather: reads the ids and the rows it looks up, not the whole table.
  OpWork w = streamingWork(s, 0, /*fusable=*/false);
  const TensorShape &table = s.operands[0], &result = s.results[0];
  w.bytesRead += result.elements() * table.elementBytes - table.bytes();
  return w;
}

/// `padding_idx` is an id of the whole vocabulary: in `[0, rows)` when the
/// table is whole (no `block`), non-negative otherwise.
static LogicalResult verifyPaddingIdx(Operation *op,
                                      std::optional<int64_t> paddingIdx,
                                      int64_t rows, bool block) {
  if (!paddingIdx)
    return success();
  if (*paddingIdx < 0 || (!block && *paddingIdx >= rows))
    return op->emitOpError() << "padding_idx " << *paddingIdx
                             << " is not a row of the " << rows << "-row table";
  return success();
}

LogicalResult EmbeddingOp::verify() {
  return verifyPaddingIdx(*this, getPaddingIdx(),
                          getTable().getType().getDimSize(0),
                          static_cast<bool>(getBlock()));
}

LogicalResult EmbeddingGradOp::verify() {
  auto ids = getIds().getType();
  auto grad = getGrad().getType();
  auto result = getType();
  if (result.getRank() != 2)
    return emitOpError() << "result must be [V, H], got shape "
                         << formatShape(result.getShape());
  SmallVector<int64_t> expected(ids.getShape());
  expected.push_back(result.getDimSize(1));
  if (grad.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "grad must have shape " << formatShape(expected)
                         << " (ids shape + [H]), got "
                         << formatShape(grad.getShape());
  if (grad.getElementType() != result.getElementType())
    return emitOpError() << "grad element type " << grad.getElementType()
                         << " differs from result element type "
                         << result.getElementType();
  return verifyPaddingIdx(*this, getPaddingIdx(), result.getDimSize(0),
                          static_cast<bool>(getBlock()));
}

ShardingRule EmbeddingGradOp::getShardingRule() {
  ShardingRule rule(*this);
  auto ids = getIds().getType();
  int64_t r = ids.getRank();
  for (int64_t d = 0; d < r; ++d)
    rule.addFactor({d, d}, {kNoDim}, ids.getDimSize(d), FactorKind::Reduction);
  rule.addFactor({kNoDim, r}, {1}, getType().getDimSize(1));
  rule.addFactor({kNoDim, kNoDim}, {0}, getType().getDimSize(0));
  return rule;
}

OpWork EmbeddingGradOp::getWork(const OpShapes &s) {
  // One add per gradient element into its row of the f32 gradient buffer
  // (read, modify, write 4 bytes); the buffer is zeroed once per step with
  // the other gradients, not per use.
  const TensorShape &grad = s.operands[1];
  OpWork w = streamingWork(s, grad.elements(), /*fusable=*/false);
  w.bytesWritten = 4 * grad.elements();
  w.bytesRead = s.operandBytes() + 4 * grad.elements();
  for (const TensorShape &t : llvm::drop_begin(s.operands, 2))
    w.bytesRead -= t.bytes(); // the block index
  return w;
}

//===----------------------------------------------------------------------===//
// RotaryOp
//===----------------------------------------------------------------------===//

LogicalResult RotaryOp::verify() {
  auto type = getType();
  if (type.getRank() != 4)
    return emitOpError() << "input must be [B, S, N, D], got shape "
                         << formatShape(type.getShape());
  if (type.getDimSize(3) % 2 != 0)
    return emitOpError() << "head dimension D = " << type.getDimSize(3)
                         << " must be even";
  if (!(getTheta().convertToDouble() > 0.0))
    return emitOpError() << "theta must be positive";
  if (getBalanced() && (!getBlock() || type.getDimSize(1) % 2 != 0))
    return emitOpError() << "balanced = " << *getBalanced()
                         << " needs a block and an even sequence length, got "
                         << type.getDimSize(1);
  return success();
}

ShardingRule RotaryOp::getShardingRule() {
  ShardingRule rule(*this);
  ArrayRef<int64_t> shape = getType().getShape();
  // The block operand (a scalar) has no factor.
  auto dims = [&](int64_t d) {
    SmallVector<int64_t> operandDims = {d};
    if (getBlock())
      operandDims.push_back(kNoDim);
    return operandDims;
  };
  rule.addFactor(dims(0), {0}, shape[0]);
  rule.addFactor(dims(1), {1}, shape[1]);
  rule.addFactor(dims(2), {2}, shape[2]);
  rule.addFactor(dims(3), {3}, shape[3], FactorKind::NeedReplication);
  return rule;
}

OpWork RotaryOp::getWork(const OpShapes &s) {
  return streamingWork(s, 3 * s.results[0].elements(), /*fusable=*/false);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

static LogicalResult verifyAttentionOperands(std::optional<Location> loc,
                                             StringRef name, RankedTensorType q,
                                             RankedTensorType k,
                                             RankedTensorType v, bool causal,
                                             bool queryBlock,
                                             std::optional<int64_t> balanced) {
  auto fail = [&](const Twine &msg) {
    return inferError(loc, "'cleave." + name + "' op " + msg);
  };
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return fail("q, k and v must be [B, S, H, D], got shapes " +
                formatShape(q.getShape()) + ", " + formatShape(k.getShape()) +
                " and " + formatShape(v.getShape()));
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return fail("q, k and v must have the same element type");
  if (k.getDimSize(0) != q.getDimSize(0) || v.getDimSize(0) != q.getDimSize(0))
    return fail("batch sizes differ: q " + Twine(q.getDimSize(0)) + ", k " +
                Twine(k.getDimSize(0)) + ", v " + Twine(v.getDimSize(0)));
  if (k.getDimSize(1) != v.getDimSize(1))
    return fail("k and v sequence lengths differ: " + Twine(k.getDimSize(1)) +
                " vs " + Twine(v.getDimSize(1)));
  if (k.getDimSize(2) != v.getDimSize(2))
    return fail("k and v head counts differ: " + Twine(k.getDimSize(2)) +
                " vs " + Twine(v.getDimSize(2)));
  if (q.getDimSize(2) % k.getDimSize(2) != 0)
    return fail("query heads (" + Twine(q.getDimSize(2)) +
                ") must be a multiple of key/value heads (" +
                Twine(k.getDimSize(2)) + ")");
  if (q.getDimSize(3) != k.getDimSize(3))
    return fail("q and k head dimensions differ: " + Twine(q.getDimSize(3)) +
                " vs " + Twine(k.getDimSize(3)));
  if (causal && !queryBlock && q.getDimSize(1) != k.getDimSize(1))
    return fail("causal attention needs equal query and key lengths, got " +
                Twine(q.getDimSize(1)) + " and " + Twine(k.getDimSize(1)));
  if (queryBlock && k.getDimSize(1) % q.getDimSize(1) != 0)
    return fail("with query_block, the query length (" +
                Twine(q.getDimSize(1)) + ") must divide the key length (" +
                Twine(k.getDimSize(1)) + ")");
  if (balanced && (!queryBlock || q.getDimSize(1) % 2 != 0 ||
                   *balanced * q.getDimSize(1) != k.getDimSize(1)))
    return fail("balanced = " + Twine(*balanced) +
                " needs query_block and an even query length (" +
                Twine(q.getDimSize(1)) + ") that is the key length (" +
                Twine(k.getDimSize(1)) + ") / " + Twine(*balanced));
  return success();
}

static RankedTensorType attentionResultType(RankedTensorType q,
                                            RankedTensorType v) {
  return RankedTensorType::get(
      {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2), v.getDimSize(3)},
      q.getElementType());
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto q = tensorType(adaptor.getQuery()), k = tensorType(adaptor.getKey()),
       v = tensorType(adaptor.getValue());
  if (failed(verifyAttentionOperands(
          loc, "attention", q, k, v, adaptor.getCausal(),
          bool(adaptor.getQueryBlock()), adaptor.getBalanced())))
    return failure();
  inferred.push_back(attentionResultType(q, v));
  return success();
}

namespace {
/// Which attention dimension a tensor carries in each of its four dims.
enum AttnDim { B, S, Skv, Hkv, G, D, Dv, None };
} // namespace

/// Adds the attention factors for tensors laid out as given: each entry lists
/// the factor kinds of dims 0..3 of one tensor (`S`/`Skv` for dim 1; dim 2 is
/// (Hkv, G) for query-shaped tensors and Hkv for key-shaped ones).
static void addAttentionFactors(ShardingRule &rule, RankedTensorType q,
                                RankedTensorType k, RankedTensorType v,
                                ArrayRef<char> operandShapes,
                                ArrayRef<char> resultShapes) {
  // Shapes: 'q' query-like [B,S,(Hkv,G),D], 'k' [B,Skv,Hkv,D],
  //         'v' [B,Skv,Hkv,Dv], 'o' [B,S,(Hkv,G),Dv].
  int64_t groups = q.getDimSize(2) / k.getDimSize(2);
  auto dimOf = [](char shape, AttnDim f) -> int64_t {
    if (shape == 'n') // the query_block scalar
      return kNoDim;
    bool queryLike = shape == 'q' || shape == 'o';
    switch (f) {
    case B:
      return 0;
    case S:
      return queryLike ? 1 : kNoDim;
    case Skv:
      return queryLike ? kNoDim : 1;
    case Hkv:
      return 2;
    case G:
      return queryLike ? 2 : kNoDim;
    case D:
      return shape == 'q' || shape == 'k' ? 3 : kNoDim;
    case Dv:
      return shape == 'v' || shape == 'o' ? 3 : kNoDim;
    case None:
      break;
    }
    return kNoDim;
  };
  // A factor absent from some result is summed over there (reduction) unless
  // it must not be split at all.
  auto add = [&](AttnDim f, int64_t size, bool splittable) {
    SmallVector<int64_t> od, rd;
    for (char s : operandShapes)
      od.push_back(dimOf(s, f));
    bool inAllResults = true;
    for (char s : resultShapes) {
      rd.push_back(dimOf(s, f));
      inAllResults &= rd.back() != kNoDim;
    }
    FactorKind kind = !splittable    ? FactorKind::NeedReplication
                      : inAllResults ? FactorKind::PassThrough
                                     : FactorKind::Reduction;
    rule.addFactor(od, rd, size, kind);
  };
  add(B, q.getDimSize(0), true);
  add(S, q.getDimSize(1), true);
  add(Skv, k.getDimSize(1), false);
  add(Hkv, k.getDimSize(2), true);
  if (groups > 1)
    add(G, groups, true);
  add(D, q.getDimSize(3), false);
  add(Dv, v.getDimSize(3), true);
}

ShardingRule AttentionOp::getShardingRule() {
  ShardingRule rule(*this);
  SmallVector<char> operands = {'q', 'k', 'v'};
  if (getQueryBlock())
    operands.push_back('n');
  addAttentionFactors(rule, getQuery().getType(), getKey().getType(),
                      getValue().getType(), operands, {'o'});
  return rule;
}

/// Fused attention on q [B, S, Hq, D], k [B, Skv, Hkv, D], v [B, Skv, Hkv,
/// Dv]: q k^T and p v, 2 flops per multiply-add. Causal masking is not
/// discounted, as in the published MFU formulas; the backward kernel
/// recomputes q k^T, then dV, dP, dQ, dK: five score-sized matmuls.
static OpWork attentionWork(const OpShapes &s, bool causal, bool backward) {
  const TensorShape &q = s.operands[0], &k = s.operands[1], &v = s.operands[2];
  AttentionWork a;
  a.batch = double(q.dim(0));
  a.seqQ = double(q.dim(1));
  a.heads = double(q.dim(2));
  a.headDim = double(q.dim(3));
  a.seqKV = double(k.dim(1));
  a.valueDim = double(v.dim(3));
  a.causal = causal;
  a.backward = backward;
  double forward =
      2 * a.batch * a.heads * a.seqQ * a.seqKV * (a.headDim + a.valueDim);
  OpWork w = streamingWork(s, 0, /*fusable=*/false);
  w.kind = WorkKind::Attention;
  w.attentionFlops = backward ? 2.5 * forward : forward;
  w.attention = a;
  return w;
}

OpWork AttentionOp::getWork(const OpShapes &s) {
  return attentionWork(s, getCausal(), /*backward=*/false);
}

double AttentionOp::getScaleOrDefault() {
  if (auto scale = getScale())
    return scale->convertToDouble();
  return 1.0 /
         std::sqrt(static_cast<double>(getQuery().getType().getDimSize(3)));
}

LogicalResult
AttentionGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  auto q = tensorType(adaptor.getQuery()), k = tensorType(adaptor.getKey()),
       v = tensorType(adaptor.getValue());
  if (failed(verifyAttentionOperands(
          loc, "attention_grad", q, k, v, adaptor.getCausal(),
          bool(adaptor.getQueryBlock()), adaptor.getBalanced())))
    return failure();
  RankedTensorType out = attentionResultType(q, v);
  if (adaptor.getGrad().getType() != out)
    return inferError(
        loc, "'cleave.attention_grad' op grad must have the "
             "forward result type " +
                 formatShape(out.getShape()) + ", got " +
                 formatShape(tensorType(adaptor.getGrad()).getShape()));
  inferred.append({q, k, v});
  return success();
}

ShardingRule AttentionGradOp::getShardingRule() {
  ShardingRule rule(*this);
  SmallVector<char> operands = {'q', 'k', 'v', 'o'};
  if (getQueryBlock())
    operands.push_back('n');
  addAttentionFactors(rule, getQuery().getType(), getKey().getType(),
                      getValue().getType(), operands, {'q', 'k', 'v'});
  return rule;
}

OpWork AttentionGradOp::getWork(const OpShapes &s) {
  return attentionWork(s, getCausal(), /*backward=*/true);
}

double AttentionGradOp::getScaleOrDefault() {
  if (auto scale = getScale())
    return scale->convertToDouble();
  return 1.0 /
         std::sqrt(static_cast<double>(getQuery().getType().getDimSize(3)));
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

static LogicalResult verifyLogitsLabels(std::optional<Location> loc,
                                        StringRef name, RankedTensorType logits,
                                        RankedTensorType labels) {
  if (logits.getRank() < 1 || labels.getRank() != logits.getRank() - 1 ||
      labels.getShape() != logits.getShape().drop_back())
    return inferError(loc, "'cleave." + name + "' op labels must have shape " +
                               formatShape(logits.getShape().drop_back()) +
                               " (logits shape without the class dimension), "
                               "got " +
                               formatShape(labels.getShape()));
  return success();
}

LogicalResult
CrossEntropyOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                 Adaptor adaptor,
                                 SmallVectorImpl<Type> &inferred) {
  auto logits = tensorType(adaptor.getLogits());
  if (failed(verifyLogitsLabels(loc, "cross_entropy", logits,
                                tensorType(adaptor.getLabels()))))
    return failure();
  Type elem = logits.getElementType().isF64() ? Type(Float64Type::get(ctx))
                                              : Type(Float32Type::get(ctx));
  inferred.push_back(RankedTensorType::get({}, elem));
  return success();
}

/// The checks shared by cross_entropy and its gradient: `count` only with
/// `ignore_index`.
static LogicalResult verifyIgnoreIndex(Operation *op, Value count,
                                       std::optional<int64_t> ignoreIndex) {
  if (count && !ignoreIndex)
    return op->emitOpError()
           << "has a count operand but no ignore_index: without ignored "
              "labels the denominator is the number of labels";
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  return verifyIgnoreIndex(*this, getCount(), getIgnoreIndex());
}

/// Row factors shared by logits, labels (and, for the gradient, its
/// result); the class factor needs replication. Other operands are scalars.
static ShardingRule crossEntropyRule(Operation *op, RankedTensorType logits,
                                     bool gradient) {
  ShardingRule rule(op);
  int64_t r = logits.getRank();
  SmallVector<int64_t> dims(op->getNumOperands(), kNoDim);
  for (int64_t d = 0; d + 1 < r; ++d) {
    dims[0] = dims[1] = d;
    if (gradient)
      rule.addFactor(dims, {d}, logits.getDimSize(d));
    else
      rule.addFactor(dims, {kNoDim}, logits.getDimSize(d),
                     FactorKind::Reduction);
  }
  dims[0] = r - 1;
  dims[1] = kNoDim;
  rule.addFactor(dims, {gradient ? r - 1 : kNoDim}, logits.getDimSize(r - 1),
                 FactorKind::NeedReplication);
  return rule;
}

ShardingRule CrossEntropyOp::getShardingRule() {
  return crossEntropyRule(*this, getLogits().getType(), /*gradient=*/false);
}

/// The passes of a numerically stable softmax cross entropy over the logits
/// (Megatron's vocabulary-parallel one, which the cost model is calibrated
/// against): cast to f32 (read the input type, write 4), max (read 4),
/// subtract (read 4, write 4), exp (read 4, write 4), sum (read 4),
/// normalize into the saved softmax (read 4, write 4).
static constexpr double kCrossEntropyReadsF32 = 20, kCrossEntropyWritesF32 = 16;

OpWork CrossEntropyOp::getWork(const OpShapes &s) {
  const TensorShape &logits = s.operands[0];
  OpWork w = streamingWork(s, 4 * logits.elements(), /*fusable=*/false);
  w.bytesRead += kCrossEntropyReadsF32 * logits.elements();
  w.bytesWritten += kCrossEntropyWritesF32 * logits.elements();
  return w;
}

LogicalResult
CrossEntropyGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                     Adaptor adaptor,
                                     SmallVectorImpl<Type> &inferred) {
  auto logits = tensorType(adaptor.getLogits());
  if (failed(verifyLogitsLabels(loc, "cross_entropy_grad", logits,
                                tensorType(adaptor.getLabels()))))
    return failure();
  inferred.push_back(logits);
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  return verifyIgnoreIndex(*this, getCount(), getIgnoreIndex());
}

ShardingRule CrossEntropyGradOp::getShardingRule() {
  return crossEntropyRule(*this, getLogits().getType(), /*gradient=*/true);
}

OpWork CrossEntropyGradOp::getWork(const OpShapes &s) {
  // Scales the saved f32 softmax by the loss gradient (read 4, write 4) and
  // casts it back (read 4, write the logits' type); the labels and scalars
  // are read once.
  const TensorShape &logits = s.operands[0];
  OpWork w = streamingWork(s, 4 * logits.elements(), /*fusable=*/false);
  w.bytesRead += 8 * logits.elements() - logits.bytes();
  w.bytesWritten += 4 * logits.elements();
  return w;
}

OpWork LabelCountOp::getWork(const OpShapes &s) {
  return streamingWork(s, s.operands[0].elements(), /*fusable=*/false);
}

ShardingRule LabelCountOp::getShardingRule() {
  ShardingRule rule(*this);
  auto labels = getLabels().getType();
  for (int64_t d = 0, e = labels.getRank(); d < e; ++d)
    rule.addFactor({d}, {kNoDim}, labels.getDimSize(d), FactorKind::Reduction);
  return rule;
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  double rate = adaptor.getRate().convertToDouble();
  if (!(rate >= 0.0 && rate < 1.0))
    return inferError(loc, "'cleave.dropout' op rate must be in [0, 1), got " +
                               std::to_string(rate));
  inferred.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult DropoutOp::verify() {
  auto type = getType();
  std::optional<ArrayRef<int64_t>> global = getGlobalShape();
  if (getBlocks().empty() && !global)
    return success();
  if (!global || static_cast<int64_t>(getBlocks().size()) != type.getRank() ||
      static_cast<int64_t>(global->size()) != type.getRank())
    return emitOpError() << "a block of a sharded tensor needs one block "
                            "index per dimension and global_shape of rank "
                         << type.getRank();
  for (auto [d, size] : llvm::enumerate(*global))
    if (size <= 0 || size % type.getDimSize(d) != 0)
      return emitOpError() << "global_shape " << formatShape(*global)
                           << " is not a whole number of blocks of "
                           << formatShape(type.getShape()) << " in dimension "
                           << d;
  return success();
}

ShardingRule DropoutOp::getShardingRule() {
  return ShardingRule::getElementwise(*this);
}
