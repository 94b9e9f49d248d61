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

/// Propagation for a caller that walks the program in order, deciding
/// annotations as it goes, and asks before each decision what the
/// annotations so far imply there (named plans). Instead of propagating the
/// whole function again per decision, it keeps what is known and visits, in
/// program order, only the ops before the decision point and the ops next
/// to a tensor that became known: a walk of any number of decisions costs
/// time linear in the size of the function.
class IncrementalPropagation {
public:
  /// Starts from the annotations `func` has.
  IncrementalPropagation(func::FuncOp func, MeshOp mesh);
  ~IncrementalPropagation();

  /// Adds a user annotation on `v` (as an argument attribute would be); it
  /// replaces what propagation derived for `v` so far, if anything.
  void annotate(Value v, ShardingAttr sharding);
  /// Propagates through the ops before `op` (an op with a sharding rule, in
  /// program order) what is not propagated yet; `op` and the ops after it
  /// wait for a later call. Fails (with a diagnostic) on contradicting
  /// annotations.
  LogicalResult propagateBefore(Operation *op);
  /// Propagates through every op, then hints returned values with the
  /// sharding of the argument they update, as propagateShardings does.
  LogicalResult propagate();
  /// The sharding of `v` so far (replicated while nothing reached it).
  ShardingAttr shardingOf(Value v);

private:
  std::unique_ptr<detail::Propagator> impl;
};

} // namespace mlir::cleave

#endif // CLEAVE_SHARDING_PROPAGATION_H
