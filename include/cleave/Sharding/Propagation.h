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

namespace mlir::cleave {

/// The sharding every tensor of `func` gets from its current annotations,
/// without changing the IR. Fails (with a diagnostic) on contradicting
/// annotations.
FailureOr<llvm::DenseMap<Value, ShardingAttr>>
propagateShardings(func::FuncOp func, MeshOp mesh);

/// Propagates and records the result as attributes (`cleave.shardings` on
/// ops, `cleave.sharding` on arguments and results).
LogicalResult propagateAndRecord(func::FuncOp func, MeshOp mesh);

} // namespace mlir::cleave

#endif // CLEAVE_SHARDING_PROPAGATION_H
