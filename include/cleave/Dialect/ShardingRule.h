//===- ShardingRule.h - Factor-based sharding rules -------------*- C++ -*-===//
//
// A sharding rule describes an op as an einsum over *factors*: every operand
// and result dimension is the product of one or more factors (major first),
// and a factor shared by several dimensions is one loop that runs over all of
// them. Splitting a factor across a mesh axis splits every dimension it
// appears in. The factor's kind says what a split means for the results that
// do not contain it:
//
//   * PassThrough:     every result contains it (batch, M, N of a matmul).
//   * Reduction:       results without it become partial sums over the axis
//                      (K of a matmul, the vocabulary of an embedding, the
//                      batch of a layer-norm weight gradient).
//   * NeedReplication: it must not be split (the softmax dimension).
//
// Propagation, search, partitioning and costing read only this structure, so
// they never need to know which op they handle.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_SHARDINGRULE_H
#define CLEAVE_DIALECT_SHARDINGRULE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"
#include <string>

namespace mlir::cleave {

enum class FactorKind : uint8_t { PassThrough, Reduction, NeedReplication };

/// Returns "pass-through", "reduction" or "need-replication".
llvm::StringRef stringifyFactorKind(FactorKind kind);

/// The factors of one tensor: for each dimension, its factor indices, major
/// first. A dimension with no factor has size 1.
using TensorFactors = llvm::SmallVector<llvm::SmallVector<int64_t, 2>>;

class ShardingRule {
public:
  /// Marks "this tensor has no dimension for the factor" in addFactor.
  static constexpr int64_t kNoDim = -1;

  ShardingRule() = default;
  /// An empty rule for `numOperands` operands and `numResults` results of the
  /// given ranks.
  ShardingRule(llvm::ArrayRef<int64_t> operandRanks,
               llvm::ArrayRef<int64_t> resultRanks);
  /// An empty rule shaped after the operand and result types of `op`
  /// (non-tensor values count as rank 0).
  explicit ShardingRule(Operation *op);

  /// Adds a factor of `size` and `kind` that occupies dimension
  /// `operandDims[i]` of operand i and `resultDims[j]` of result j (or
  /// kNoDim). A dimension that receives several factors is their product,
  /// in the order they were added (major first). Returns the factor index.
  int64_t addFactor(llvm::ArrayRef<int64_t> operandDims,
                    llvm::ArrayRef<int64_t> resultDims, int64_t size,
                    FactorKind kind = FactorKind::PassThrough);

  /// The rule of an elementwise op: one pass-through factor per dimension of
  /// the result, shared by every ranked operand of the same rank.
  static ShardingRule getElementwise(Operation *op);

  int64_t getNumFactors() const { return factorSizes.size(); }
  int64_t getFactorSize(int64_t f) const { return factorSizes[f]; }
  FactorKind getFactorKind(int64_t f) const { return factorKinds[f]; }
  llvm::ArrayRef<TensorFactors> getOperandFactors() const { return operands; }
  llvm::ArrayRef<TensorFactors> getResultFactors() const { return results; }
  const TensorFactors &getOperand(unsigned i) const { return operands[i]; }
  const TensorFactors &getResult(unsigned i) const { return results[i]; }

  /// Checks the rule against `op`: tensor counts and ranks agree, the
  /// product of a dimension's factor sizes is the dimension size, and every
  /// pass-through factor appears in every result. Emits an error on `op`.
  LogicalResult verify(Operation *op) const;

  /// The einsum-like form, e.g.
  /// `([i, k], [k, j]) -> ([i, j]) {i=8, j=16, k=32} reduction={k}`.
  /// Compound dimensions print as `(h, g)`.
  std::string toString() const;

private:
  llvm::SmallVector<int64_t> factorSizes;
  llvm::SmallVector<FactorKind> factorKinds;
  llvm::SmallVector<TensorFactors> operands;
  llvm::SmallVector<TensorFactors> results;
};

/// Number of elements of all ranked-tensor results of `op` (the default FLOP
/// count of elementwise ops).
double countResultElements(Operation *op);

class LocalOpContext;

/// The default ShardingRuleOpInterface::buildLocalOp: clones `op` with the
/// local operands and result types of `context` (see LocalOp.h).
LogicalResult buildLocalClone(Operation *op, OpBuilder &builder,
                              const LocalOpContext &context,
                              llvm::SmallVectorImpl<Value> &results);

} // namespace mlir::cleave

#endif // CLEAVE_DIALECT_SHARDINGRULE_H
