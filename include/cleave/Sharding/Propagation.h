//===- Propagation.h - Complete partial sharding annotations ----*- C++ -*-===//
//
// Sharding propagation over one function (the policy is documented with the
// cleave-propagate-sharding pass). Named plans and the planner call it to
// see what their annotations imply before writing more of them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_PROPAGATION_H
#define CLEAVE_SHARDING_PROPAGATION_H

#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <memory>

namespace mlir::cleave {

/// The sharding every tensor of `func` gets from its current annotations,
/// without changing the IR. Fails (with a diagnostic) on contradicting
/// annotations.
FailureOr<llvm::DenseMap<Value, ShardingAttr>>
propagateShardings(func::FuncOp func, MeshOp mesh);

/// Propagates and records the result as attributes (`cleave.shardings` on
/// ops, `cleave.sharding` on arguments and results).
LogicalResult propagateAndRecord(func::FuncOp func, MeshOp mesh);

namespace detail {
class Propagator;
} // namespace detail

/// Propagation for a caller that decides annotations one at a time and asks,
/// before each decision, what the ones so far imply (named plans). Instead
/// of propagating the whole function again per decision, it keeps what is
/// known and revisits only the ops next to a tensor that became known, in
/// program order: a sequence of decisions costs time linear in the size of
/// the function. An op whose own annotation is still to be decided can be
/// held back, so that nothing flows through it before the decision.
class IncrementalPropagation {
public:
  /// Starts from the annotations `func` has; call `propagate` before asking.
  IncrementalPropagation(func::FuncOp func, MeshOp mesh);
  ~IncrementalPropagation();

  /// Propagation neither reads nor writes the tensors of `op` through its
  /// rule until `release(op)`.
  void hold(Operation *op);
  void release(Operation *op);
  /// Adds a user annotation on `v` (as an argument attribute would be); it
  /// replaces what propagation derived for `v` so far, if anything.
  void annotate(Value v, ShardingAttr sharding);
  /// Propagates what changed since the last call. Fails (with a diagnostic)
  /// on contradicting annotations.
  LogicalResult propagate();
  /// The sharding of `v` so far (replicated while nothing reached it).
  ShardingAttr shardingOf(Value v);

private:
  std::unique_ptr<detail::Propagator> impl;
};

} // namespace mlir::cleave

#endif // CLEAVE_SHARDING_PROPAGATION_H
