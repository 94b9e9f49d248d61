//===- CleaveDialect.cpp - Dialect registration and attribute hooks -------===//
//
// Registers ops and attributes, and verifies the discardable `cleave.*`
// attributes that passes and users attach to functions, arguments and ops.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/CleaveOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::cleave;

#include "cleave/Dialect/CleaveDialect.cpp.inc"
#include "cleave/Dialect/CleaveEnums.cpp.inc"
#include "cleave/Dialect/CleaveInterfaces.cpp.inc"


void CleaveDialect::initialize() {
  // Defined across the op-definition shards (see lib/Dialect/CMakeLists.txt).
  registerCleaveDialectOperations(this);
  registerAttributes();
}

Operation *CleaveDialect::materializeConstant(OpBuilder &builder,
                                              Attribute value, Type type,
                                              Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, type, elements);
}

//===----------------------------------------------------------------------===//
// Discardable attributes
//===----------------------------------------------------------------------===//

/// Verifies a `cleave.sharding` attribute attached to a value of `type` that
/// lives under `anchor`.
static LogicalResult verifyValueSharding(Operation *anchor, Attribute attr,
                                         Type type, StringRef what) {
  auto sharding = dyn_cast<ShardingAttr>(attr);
  if (!sharding)
    return anchor->emitOpError()
           << "'" << CleaveDialect::kShardingAttrName << "' on " << what
           << " must be a #cleave.sharding, got " << attr;
  MeshOp mesh = lookupMesh(anchor, sharding.getMesh());
  if (!mesh)
    return anchor->emitOpError()
           << what << " is sharded on unknown mesh " << sharding.getMesh();
  return verifySharding(
      sharding, type, mesh, [&] { return anchor->emitOpError(); }, what);
}

LogicalResult CleaveDialect::verifyOperationAttribute(Operation *op,
                                                      NamedAttribute attr) {
  if (attr.getName() == kModelAttrName) {
    if (!isa<ModuleOp>(op) || !isa<StringAttr>(attr.getValue()))
      return op->emitOpError() << "'" << kModelAttrName
                               << "' must be a string on a builtin.module";
    return success();
  }
  if (attr.getName() != kShardingsAttrName)
    return op->emitOpError() << "has unknown cleave attribute '"
                             << attr.getName().getValue()
                             << "' (ops may carry '" << kShardingsAttrName
                             << "', modules '" << kModelAttrName
                             << "'; arguments carry '" << kParamAttrName
                             << "', '" << kInputAttrName << "', '"
                             << kInitAttrName << "', '" << kShardingAttrName
                             << "')";
  auto array = dyn_cast<ArrayAttr>(attr.getValue());
  if (!array)
    return op->emitOpError() << "'" << kShardingsAttrName
                             << "' must be an array of #cleave.sharding";
  if (array.size() != op->getNumResults())
    return op->emitOpError()
           << "'" << kShardingsAttrName << "' has " << array.size()
           << " entries but the op has " << op->getNumResults() << " results";
  for (auto [i, sharding] : llvm::enumerate(array))
    if (failed(verifyValueSharding(op, sharding, op->getResult(i).getType(),
                                   "result #" + std::to_string(i))))
      return failure();
  return success();
}

LogicalResult CleaveDialect::verifyRegionArgAttribute(Operation *op,
                                                      unsigned regionIndex,
                                                      unsigned argIndex,
                                                      NamedAttribute attr) {
  std::string what = "argument #" + std::to_string(argIndex);
  // Argument attributes are a function-op concept: the function's argument
  // types hold even for declarations without a body.
  auto func = cast<FunctionOpInterface>(op);
  Type type = func.getArgumentTypes()[argIndex];
  StringRef name = attr.getName().getValue();
  if (name == kShardingAttrName)
    return verifyValueSharding(op, attr.getValue(), type, what);
  // `cleave.output` moves to arguments when results become out-parameters.
  if (name == kParamAttrName || name == kInputAttrName ||
      name == kStateAttrName || name == kOutputAttrName) {
    auto str = dyn_cast<StringAttr>(attr.getValue());
    if (!str || str.getValue().empty())
      return op->emitOpError() << "'" << name << "' on " << what
                               << " must be a non-empty string";
    // Tensors before bufferization, memrefs after, pointers once lowered
    // to LLVM; a builtin scalar is a mistake.
    auto shaped = dyn_cast<ShapedType>(type);
    bool builtin = type.getDialect().getNamespace() == "builtin";
    if (builtin && (!shaped || !shaped.hasRank()))
      return op->emitOpError() << what << " is marked '" << name
                               << "' but is not a ranked tensor";
    return success();
  }
  if (name == kInitAttrName) {
    if (!isa<InitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' on " << what
                               << " must be a #cleave.init";
    if (!func.getArgAttr(argIndex, kParamAttrName) &&
        !func.getArgAttr(argIndex, kStateAttrName))
      return op->emitOpError() << what << " has '" << name
                               << "' but is not a parameter (no '"
                               << kParamAttrName << "' or '" << kStateAttrName
                               << "')";
    return success();
  }
  return op->emitOpError() << what << " has unknown cleave attribute '" << name
                           << "'";
}

LogicalResult CleaveDialect::verifyRegionResultAttribute(Operation *op,
                                                         unsigned regionIndex,
                                                         unsigned resultIndex,
                                                         NamedAttribute attr) {
  std::string what = "result #" + std::to_string(resultIndex);
  if (attr.getName() == kOutputAttrName) {
    auto str = dyn_cast<StringAttr>(attr.getValue());
    if (!str || str.getValue().empty())
      return op->emitOpError() << "'" << kOutputAttrName << "' on " << what
                               << " must be a non-empty string";
    return success();
  }
  if (attr.getName() != kShardingAttrName)
    return op->emitOpError() << what << " has unknown cleave attribute '"
                             << attr.getName().getValue() << "'";
  // Only function-like ops have result attributes.
  auto func = cast<FunctionOpInterface>(op);
  return verifyValueSharding(op, attr.getValue(),
                             func.getResultTypes()[resultIndex], what);
}
