//===- LoweringUtils.h - Helpers for lowering cleave ops --------*- C++ -*-===//
//
// Private to lib/Conversion. Every lowering computes in f32 (f64 for f64
// tensors): narrower inputs are widened when read and results narrowed when
// written, so bf16/f16 programs accumulate in f32 like cuBLAS and PyTorch.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_CONVERSION_LOWERINGUTILS_H
#define CLEAVE_LIB_CONVERSION_LOWERINGUTILS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::cleave {

/// The body of an elementwise generic: scalars in compute precision in,
/// the result in compute precision out.
using ScalarFn = llvm::function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// f64 for f64, otherwise f32.
FloatType computeTypeFor(Type elementType);
/// Widens `v` to `type` (or narrows) if their float widths differ.
Value convertFloat(OpBuilder &b, Location loc, Value v, Type type);
/// A scalar float constant.
Value floatConst(OpBuilder &b, Location loc, Type type, double value);
/// `tensor.empty` of `type`.
Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type);
/// A tensor of `type` filled with `value`.
Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                   double value);
/// Element type of a tensor value.
Type elementTypeOf(Value v);
RankedTensorType tensorTypeOf(Value v);

/// The global sequence position (an index) of local row `row` (an index) of
/// a device's block of `rows` rows. `block` is the block's index (an index,
/// null when the sequence is whole: the position is `row`). Contiguous
/// blocks: `block * rows + row`. With `balanced` = n (the load-balanced
/// context-parallel layout, cleave.mesh's balanced_axes), the rows are
/// chunks `block` and `2n-1-block` of `rows / 2` rows each.
Value sequencePosition(OpBuilder &b, Location loc, Value row, Value block,
                       int64_t rows, std::optional<int64_t> balanced);
/// The index held by the i64 scalar tensor `block`, or null for null.
Value blockIndex(OpBuilder &b, Location loc, Value block);

/// A linalg.generic over `outType`'s shape. Each input is indexed by
/// `inputMaps` (identity if empty). The body receives the inputs converted
/// to compute precision, and its result is stored in `outType`'s element type.
Value buildGeneric(OpBuilder &b, Location loc, RankedTensorType outType,
                   ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                   ScalarFn body);
/// buildGeneric with identity maps for same-shape inputs and empty maps for
/// rank-0 inputs (scalars such as a learning rate).
Value buildElementwise(OpBuilder &b, Location loc, RankedTensorType outType,
                       ValueRange inputs, ScalarFn body);

/// Reduces over `dims` of the iteration space `iterShape` into a
/// compute-precision tensor of `iterShape` without `dims`. Each input is
/// indexed by its map (identity if `inputMaps` is empty); `map` turns the
/// inputs' scalars into the value to fold (default: the first input).
/// Floating-point reassociation is allowed, so the loops vectorize.
enum class ReduceKind { Sum, Max };
Value buildReduction(OpBuilder &b, Location loc, ValueRange inputs,
                     ArrayRef<AffineMap> inputMaps, ArrayRef<int64_t> iterShape,
                     ArrayRef<int64_t> dims, ReduceKind kind,
                     ScalarFn map = nullptr);
/// Single-input form: reduces `input` over `dims`.
Value buildReduction(OpBuilder &b, Location loc, Value input,
                     ArrayRef<int64_t> dims, ReduceKind kind,
                     ScalarFn map = nullptr);

/// Affine map from a rank-`rank` iteration space that drops `dims`.
AffineMap dropDimsMap(MLIRContext *ctx, int64_t rank, ArrayRef<int64_t> dims);

/// Reshapes a contiguous tensor to `shape` (a view after bufferization).
Value reshapeTensor(OpBuilder &b, Location loc, Value v,
                    ArrayRef<int64_t> shape);
/// Permutes dimensions with linalg.transpose.
Value transposeTensor(OpBuilder &b, Location loc, Value v,
                      ArrayRef<int64_t> perm);
/// C = op(A) op(B) for rank-3 [batch, rows, cols] tensors or rank-2
/// matrices, as a linalg named op (lowered later to a runtime GEMM call).
Value buildMatmul(OpBuilder &b, Location loc, Value lhs, Value rhs,
                  bool transposeLhs, bool transposeRhs, Type resultElement);

/// C += op(A) op(B) into `init` (not both transposed): the GEMM accumulates
/// (beta = 1) after cleave-linalg-to-runtime.
Value buildMatmulInto(OpBuilder &b, Location loc, Value lhs, Value rhs,
                      bool transposeLhs, bool transposeRhs, Value init);
/// Adds the patterns of each lowering file.
void populateElementwiseLoweringPatterns(RewritePatternSet &patterns);
void populateShapeLoweringPatterns(RewritePatternSet &patterns);
void populateNormLoweringPatterns(RewritePatternSet &patterns);
void populateNNLoweringPatterns(RewritePatternSet &patterns);
void populateMoELoweringPatterns(RewritePatternSet &patterns);
/// `attentionTile` > 0: tiled online-softmax (flash) attention with query
/// and key tiles of that many rows; 0: the full probabilities materialised.
void populateAttentionLoweringPatterns(RewritePatternSet &patterns,
                                       int64_t attentionTile);

} // namespace mlir::cleave

#endif // CLEAVE_LIB_CONVERSION_LOWERINGUTILS_H
