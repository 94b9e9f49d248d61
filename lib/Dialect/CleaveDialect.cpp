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
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include <limits>

using namespace mlir;
using namespace mlir::cleave;

#include "cleave/Dialect/CleaveDialect.cpp.inc"
#include "cleave/Dialect/CleaveEnums.cpp.inc"
#include "cleave/Dialect/CleaveInterfaces.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "cleave/Dialect/CleaveTypes.cpp.inc"

void CleaveDialect::initialize() {
  // Defined across the op-definition shards (see lib/Dialect/CMakeLists.txt).
  registerCleaveDialectOperations(this);
  registerAttributes();
  addTypes<
#define GET_TYPEDEF_LIST
#include "cleave/Dialect/CleaveTypes.cpp.inc"
      >();
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

/// Verifies `cleave.shardings` on an op: one sharding per result.
static LogicalResult verifyResultShardings(Operation *op, Attribute value) {
  auto array = dyn_cast<ArrayAttr>(value);
  if (!array)
    return op->emitOpError() << "'" << CleaveDialect::kShardingsAttrName
                             << "' must be an array of #cleave.sharding";
  if (array.size() != op->getNumResults())
    return op->emitOpError()
           << "'" << CleaveDialect::kShardingsAttrName << "' has "
           << array.size() << " entries but the op has " << op->getNumResults()
           << " results";
  for (auto [i, sharding] : llvm::enumerate(array))
    if (failed(verifyValueSharding(op, sharding, op->getResult(i).getType(),
                                   "result #" + std::to_string(i))))
      return failure();
  return success();
}

/// Checks one entry of a `cleave.plan` dictionary.
static LogicalResult verifyPlanEntry(Operation *op, NamedAttribute entry) {
  StringRef key = entry.getName().getValue();
  auto fail = [&](const Twine &what) {
    return op->emitOpError() << "'" << CleaveDialect::kPlanAttrName
                             << "' entry '" << key << "' " << what;
  };
  auto integer = [&](int64_t lo, int64_t hi) -> LogicalResult {
    auto value = dyn_cast<IntegerAttr>(entry.getValue());
    if (!value || value.getInt() < lo || value.getInt() > hi)
      return fail("must be an integer in [" + Twine(lo) + ", " + Twine(hi) +
                  "], got " + llvm::formatv("{0}", entry.getValue()).str());
    return success();
  };
  auto oneOf = [&](ArrayRef<StringRef> choices) -> LogicalResult {
    auto value = dyn_cast<StringAttr>(entry.getValue());
    if (!value || !llvm::is_contained(choices, value.getValue()))
      return fail("must be one of \"" + llvm::join(choices, "\", \"") +
                  "\", got " + llvm::formatv("{0}", entry.getValue()).str());
    return success();
  };
  if (key == "zero")
    return integer(0, 3);
  if (key == "micro_batch" || key == "num_micro_batches" ||
      key == "virtual_stages")
    return integer(1, std::numeric_limits<int32_t>::max());
  if (key == "recompute")
    return oneOf({"none", "selective", "full"});
  if (key == "recompute_per_stage") {
    auto kinds = dyn_cast<ArrayAttr>(entry.getValue());
    bool ok =
        kinds && !kinds.empty() && llvm::all_of(kinds, [](Attribute kind) {
          auto name = dyn_cast<StringAttr>(kind);
          return name && llvm::is_contained({"none", "selective", "full"},
                                            name.getValue());
        });
    if (!ok)
      return fail("must be a non-empty array of \"none\", \"selective\" "
                  "or \"full\" (one per pipeline rank), got " +
                  llvm::formatv("{0}", entry.getValue()).str());
    return success();
  }
  if (key == "schedule")
    return oneOf({"gpipe", "1f1b", "interleaved", "zb-h1"});
  return fail("is unknown (known: zero, recompute, recompute_per_stage, "
              "micro_batch, "
              "num_micro_batches, schedule, virtual_stages)");
}

/// Whether `value` is a non-empty array of function symbols.
static bool isStageList(Attribute value) {
  auto stages = dyn_cast_or_null<ArrayAttr>(value);
  return stages && !stages.empty() &&
         llvm::all_of(stages, llvm::IsaPred<FlatSymbolRefAttr>);
}

/// Checks `cleave.pipeline = {axis = "pp", stages = [@f0, @f1]}`, with
/// optionally `entries = {eval_step = [@e0, @e1]}` for further pipelined
/// steps.
static LogicalResult verifyPipeline(Operation *op, Attribute value) {
  auto dict = dyn_cast<DictionaryAttr>(value);
  auto axis = dict ? dict.getAs<StringAttr>("axis") : StringAttr();
  Attribute entries = dict ? dict.get("entries") : Attribute();
  auto more = dyn_cast_or_null<DictionaryAttr>(entries);
  bool ok = axis && dict && isStageList(dict.get("stages")) &&
            dict.size() == (entries ? 3u : 2u) && (!entries || more) &&
            (!more || llvm::all_of(more, [](NamedAttribute entry) {
              return isStageList(entry.getValue());
            }));
  if (!ok)
    return op->emitOpError()
           << "'" << CleaveDialect::kPipelineAttrName
           << "' must be {axis = \"<mesh axis>\", stages = [@f, ...]} with "
              "at least one stage function, and optionally entries = "
              "{<step> = [@f, ...]}, got "
           << value;
  return success();
}

/// Checks `cleave.groups = [["dp"], ["dp", "tp"], ...]`.
static LogicalResult verifyGroups(Operation *op, Attribute value) {
  auto groups = dyn_cast<ArrayAttr>(value);
  bool ok = groups && llvm::all_of(groups, [](Attribute group) {
              auto axes = dyn_cast<ArrayAttr>(group);
              return axes && !axes.empty() &&
                     llvm::all_of(axes, llvm::IsaPred<StringAttr>);
            });
  if (!ok)
    return op->emitOpError() << "'" << CleaveDialect::kGroupsAttrName
                             << "' must be an array of non-empty arrays of "
                                "mesh axis names, got "
                             << value;
  return success();
}

LogicalResult CleaveDialect::verifyOperationAttribute(Operation *op,
                                                      NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  bool isModule = isa<ModuleOp>(op);
  auto moduleOnly = [&]() -> LogicalResult {
    if (isModule)
      return success();
    return op->emitOpError() << "'" << name << "' belongs on a builtin.module";
  };
  if (name == kModelAttrName) {
    if (!isModule || !isa<StringAttr>(value))
      return op->emitOpError() << "'" << kModelAttrName
                               << "' must be a string on a builtin.module";
    return success();
  }
  if (name == kShardingsAttrName)
    return verifyResultShardings(op, value);
  if (name == kStageAttrName) {
    auto stage = dyn_cast<IntegerAttr>(value);
    if (!stage || stage.getInt() < 0)
      return op->emitOpError()
             << "'" << kStageAttrName
             << "' must be a non-negative integer, got " << value;
    return success();
  }
  if (name == kPlanAttrName) {
    if (failed(moduleOnly()))
      return failure();
    auto dict = dyn_cast<DictionaryAttr>(value);
    if (!dict)
      return op->emitOpError()
             << "'" << kPlanAttrName << "' must be a dictionary, got " << value;
    for (NamedAttribute entry : dict)
      if (failed(verifyPlanEntry(op, entry)))
        return failure();
    return success();
  }
  if (name == kPipelineAttrName)
    return failure(failed(moduleOnly()) || failed(verifyPipeline(op, value)));
  if (name == kGroupsAttrName)
    return failure(failed(moduleOnly()) || failed(verifyGroups(op, value)));
  return op->emitOpError() << "has unknown cleave attribute '" << name
                           << "' (ops may carry '" << kShardingsAttrName
                           << "' and '" << kStageAttrName << "', modules '"
                           << kModelAttrName << "', '" << kPlanAttrName
                           << "', '" << kPipelineAttrName << "' and '"
                           << kGroupsAttrName << "'; arguments carry '"
                           << kParamAttrName << "', '" << kInputAttrName
                           << "', '" << kInitAttrName << "', '"
                           << kShardingAttrName << "')";
}

/// Verifies `cleave.layout`: a sharding of the same rank as the tensor it
/// describes, when that is still a tensor (lowering turns it into a buffer).
static LogicalResult verifyLayout(Operation *op, Attribute attr, Type type,
                                  StringRef what) {
  auto sharding = dyn_cast<ShardingAttr>(attr);
  if (!sharding)
    return op->emitOpError()
           << "'" << CleaveDialect::kLayoutAttrName << "' on " << what
           << " must be a #cleave.sharding, got " << attr;
  auto shaped = dyn_cast<ShapedType>(type);
  if (shaped && shaped.hasRank() && shaped.getRank() != sharding.getRank())
    return op->emitOpError()
           << "'" << CleaveDialect::kLayoutAttrName << "' on " << what
           << " has " << sharding.getRank()
           << " dimensions but the value has rank " << shaped.getRank();
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
  if (name == kLayoutAttrName)
    return verifyLayout(op, attr.getValue(), type, what);
  // `cleave.output` moves to arguments when results become out-parameters.
  if (name == kParamAttrName || name == kInputAttrName ||
      name == kStateAttrName || name == kOutputAttrName) {
    auto str = dyn_cast<StringAttr>(attr.getValue());
    if (!str || str.getValue().empty())
      return op->emitOpError()
             << "'" << name << "' on " << what << " must be a non-empty string";
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
      return op->emitOpError()
             << "'" << name << "' on " << what << " must be a #cleave.init";
    if (!func.getArgAttr(argIndex, kParamAttrName) &&
        !func.getArgAttr(argIndex, kStateAttrName))
      return op->emitOpError()
             << what << " has '" << name << "' but is not a parameter (no '"
             << kParamAttrName << "' or '" << kStateAttrName << "')";
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
  if (attr.getName() == kLayoutAttrName)
    return verifyLayout(
        op, attr.getValue(),
        cast<FunctionOpInterface>(op).getResultTypes()[resultIndex], what);
  if (attr.getName() != kShardingAttrName)
    return op->emitOpError() << what << " has unknown cleave attribute '"
                             << attr.getName().getValue() << "'";
  // Only function-like ops have result attributes.
  auto func = cast<FunctionOpInterface>(op);
  return verifyValueSharding(op, attr.getValue(),
                             func.getResultTypes()[resultIndex], what);
}
