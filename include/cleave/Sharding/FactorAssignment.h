//===- FactorAssignment.h - Mesh axes for the factors of an op --*- C++ -*-===//
//
// Propagation and partitioning see an op only through its sharding rule
// (ShardingRule.h): the shardings its tensors have or need are statements
// about which mesh axes split each factor. This file turns known tensor
// shardings into a factor -> axes assignment (first come, first served, in
// the order the caller gives) and an assignment back into tensor shardings.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_FACTORASSIGNMENT_H
#define CLEAVE_SHARDING_FACTORASSIGNMENT_H

#include "cleave/Dialect/LocalOp.h"

namespace mlir::cleave {

/// A tensor of an op whose sharding is known.
struct KnownSharding {
  ShardingAttr sharding;
  /// A result (else an operand) of the op, and its number.
  bool isResult = false;
  unsigned index = 0;
  /// Written by the user (an argument annotation or a sharding constraint),
  /// not derived by propagation. Two user annotations that contradict each
  /// other at one op are an error.
  bool isUser = false;
  /// Where the annotation was written, for diagnostics.
  std::optional<Location> annotatedAt;
};

/// How factor assignment treats reduction factors.
enum class ReductionPolicy {
  /// Any axes proposed by an operand (propagation).
  Free,
  /// Only axes that every result lacking the factor has as partial axes
  /// (partitioning, where the results' shardings are already fixed).
  MatchResultPartials,
};

/// Assigns mesh axes to the factors of `rule` (the rule of `op`). Each known
/// tensor in turn proposes, for every split dimension, its axes to the
/// dimension's factors (major factor first); a proposal is taken unless the
/// factor already has axes, one of the axes is taken, the factor must not be
/// split, or the factor size is not divisible. A user annotation that
/// refines an earlier one (adds axes to the same split) replaces it. When
/// two user annotations disagree, the earlier wins and, if `warn`, a warning
/// on `op` names both (the partitioner reshards the other operand).
FactorAxes assignFactors(Operation *op, const ShardingRule &rule, MeshOp mesh,
                         llvm::ArrayRef<KnownSharding> known,
                         ReductionPolicy policy, bool warn = false);

/// The sharding of a tensor whose factors are `tensor` under `axes`: each
/// dimension is split by its factors' axes, major first. With
/// `withPartial`, the axes of `rule`'s reduction factors that the tensor
/// lacks become partial axes (the op's results).
ShardingAttr shardingFromFactors(MeshOp mesh, const ShardingRule &rule,
                                 const TensorFactors &tensor,
                                 const FactorAxes &axes, bool withPartial);

/// `global` divided by the blocks of `sharding` (the per-device type).
RankedTensorType getLocalType(RankedTensorType global, ShardingAttr sharding,
                              MeshOp mesh);

/// The same sharding without partial axes.
ShardingAttr withoutPartial(ShardingAttr sharding);

/// The single cleave.mesh of the module around `op`, or an error naming
/// the problem (none, or several without a way to choose).
FailureOr<MeshOp> getModuleMesh(Operation *op);

} // namespace mlir::cleave

#endif // CLEAVE_SHARDING_FACTORASSIGNMENT_H
