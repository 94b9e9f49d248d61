//===- CleaveOps.h - Ops of the cleave dialect ------------------*- C++ -*-===//

#ifndef CLEAVE_DIALECT_CLEAVEOPS_H
#define CLEAVE_DIALECT_CLEAVEOPS_H

#include "cleave/Dialect/CleaveDialect.h"
#include "cleave/Dialect/OpWork.h"
#include "cleave/Dialect/ShardingRule.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::cleave {
/// The side-effect resource that orders communication (see CleaveOps.td).
struct CommResource : public SideEffects::Resource::Base<CommResource> {
  llvm::StringRef getName() final { return "cleave.comm"; }
};

/// A per-token op that sequence parallelism splits by sequence (see
/// Cleave_SequenceParallel in CleaveOps.td).
template <typename ConcreteType>
class SequenceParallel
    : public mlir::OpTrait::TraitBase<ConcreteType, SequenceParallel> {};
} // namespace mlir::cleave

#include "cleave/Dialect/CleaveInterfaces.h.inc"

#define GET_OP_CLASSES
#include "cleave/Dialect/CleaveOps.h.inc"

namespace mlir::cleave {

/// Finds the `cleave.mesh` named `name` visible from `from`, or null.
MeshOp lookupMesh(Operation *from, FlatSymbolRefAttr name,
                  SymbolTableCollection *symbolTables = nullptr);

/// Checks `sharding` against its mesh and a tensor of type `type`: rank,
/// known axes, no axis used twice, divisible dimensions. Errors go to
/// `emitError` and name `what` (e.g. "argument #2").
LogicalResult verifySharding(ShardingAttr sharding, Type type, MeshOp mesh,
                             llvm::function_ref<InFlightDiagnostic()> emitError,
                             llvm::StringRef what);

} // namespace mlir::cleave

#endif // CLEAVE_DIALECT_CLEAVEOPS_H
