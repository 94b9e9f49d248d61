//===- LocalOp.h - What an op needs to build its per-device form -*- C++
//-*-===//
//
// The partitioner decides, for every op, which mesh axes split each factor of
// its sharding rule, reshards the operands accordingly and then asks the op
// for its per-device form (ShardingRuleOpInterface::buildLocalOp). Most ops
// are the same op on smaller tensors; the few whose meaning depends on global
// sizes or positions (a mean over a split dimension, a vocabulary block, the
// dropout counter) read them from this context.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_LOCALOP_H
#define CLEAVE_DIALECT_LOCALOP_H

#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Dialect/ShardingRule.h"

namespace mlir::cleave {

/// Mesh axes assigned to each factor of a sharding rule (major first).
using FactorAxes = llvm::SmallVector<llvm::SmallVector<llvm::StringRef, 2>>;

class LocalOpContext {
public:
  LocalOpContext(Operation *op, const ShardingRule &rule,
                 const FactorAxes &factorAxes, MeshOp mesh,
                 ValueRange localOperands, TypeRange localResultTypes)
      : op(op), rule(rule), factorAxes(factorAxes), mesh(mesh),
        operands(localOperands), resultTypes(localResultTypes) {}

  /// The global op being partitioned.
  Operation *getOp() const { return op; }
  const ShardingRule &getRule() const { return rule; }
  MeshOp getMesh() const { return mesh; }
  /// Operands already resharded to what the factors require, on local
  /// shapes, in the op's operand order.
  ValueRange getOperands() const { return operands; }
  /// Result types on local shapes.
  TypeRange getResultTypes() const { return resultTypes; }

  /// Mesh axes splitting factor `f` (empty: not split).
  llvm::ArrayRef<llvm::StringRef> getAxes(int64_t f) const {
    return factorAxes[f];
  }
  /// Number of blocks factor `f` is split into.
  int64_t getNumBlocks(int64_t f) const;
  /// Product of getNumBlocks over `factors` (how many devices share a mean
  /// over them).
  int64_t getNumBlocks(llvm::ArrayRef<int64_t> factors) const;

  /// The mesh axes splitting dimension `dim` of a tensor whose factors are
  /// `tensor` (the concatenation of its factors' axes, major first).
  llvm::SmallVector<llvm::StringRef> getDimAxes(const TensorFactors &tensor,
                                                unsigned dim) const;
  /// An i64 scalar: this device's block index along dimension `dim` of a
  /// tensor with factors `tensor` (a constant 0 if the dimension is whole).
  Value buildBlockIndex(OpBuilder &b, Location loc, const TensorFactors &tensor,
                        unsigned dim) const;
  /// `value * factor`, elementwise, as cleave ops.
  Value buildScaled(OpBuilder &b, Location loc, Value value,
                    double factor) const;
  /// The size `n` of the balanced axis (cleave.mesh's balanced_axes) that
  /// comes first on dimension `dim` of a tensor with factors `tensor`: the
  /// block then holds chunks `b` and `2n-1-b` of `2n`. None when the
  /// dimension is whole or its blocks are contiguous.
  std::optional<int64_t> getBalanced(const TensorFactors &tensor,
                                     unsigned dim) const;

private:
  Operation *op;
  const ShardingRule &rule;
  const FactorAxes &factorAxes;
  mutable MeshOp mesh;
  ValueRange operands;
  TypeRange resultTypes;
};

/// The load-balanced layout of context parallelism on dimension `dim` of a
/// whole tensor `value`, cut into `2n` chunks: with `inverse` false, the
/// natural order becomes the balanced one (chunks 0, 2n-1, 1, 2n-2, ...: a
/// contiguous split into `n` blocks then gives block `r` chunks `r` and
/// `2n-1-r`); with `inverse`, back. Static slices and one concat.
Value buildBalancedPermutation(OpBuilder &b, Location loc, Value value,
                               int64_t dim, int64_t n, bool inverse);

} // namespace mlir::cleave

#endif // CLEAVE_DIALECT_LOCALOP_H
