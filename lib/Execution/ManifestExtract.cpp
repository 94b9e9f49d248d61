//===- ManifestExtract.cpp - A manifest from a module's signatures --------===//

#include "cleave/Conversion/RuntimeDType.h"
#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Execution/Manifest.h"
#include "cleave/Runtime/Runtime.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::cleave;

/// Fills `spec` with the shape and element type of `type`.
static LogicalResult describeType(Operation *where, Type type,
                                  const std::string &what, BufferSpec &spec) {
  auto shaped = dyn_cast<RankedTensorType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return where->emitError() << what << " has type " << type
                              << "; compiled functions take tensors with "
                                 "static shapes";
  std::optional<int32_t> dtype = runtimeDTypeCode(shaped.getElementType());
  if (!dtype)
    return where->emitError()
           << what << " has element type " << shaped.getElementType()
           << ", which hosts cannot allocate (" << runtimeDTypeNames() << ")";
  spec.shape.assign(shaped.getShape().begin(), shaped.getShape().end());
  spec.dtype = *dtype;
  return success();
}

/// Fills `spec.layout` from a `cleave.layout` attribute (if any).
static LogicalResult describeLayout(func::FuncOp func, ShardingAttr layout,
                                    const std::string &what, BufferSpec &spec) {
  if (!layout)
    return success();
  if (!layout.getPartialAxes().empty())
    return func.emitError() << what << " is a pending sum (" << layout
                            << "); hosts read whole or split values only";
  MeshOp mesh = lookupMesh(func, layout.getMesh());
  if (!mesh)
    return func.emitError()
           << what << " refers to unknown mesh " << layout.getMesh();
  for (unsigned d = 0, e = layout.getRank(); d < e; ++d) {
    std::vector<int64_t> axes;
    for (StringRef axis : layout.getDimAxes(d))
      axes.push_back(*mesh.getAxisIndex(axis));
    spec.layout.push_back(std::move(axes));
  }
  return success();
}

/// The valid values of an integer input: the tightest class or vocabulary
/// bound among the ops that read it (through data movement), and the
/// ignore_index when every bounded use ignores the same label.
static void describeIdBounds(BlockArgument arg, BufferSpec &spec) {
  if (!isa<IntegerType>(getElementTypeOrSelf(arg.getType())))
    return;
  bool allIgnore = true;
  std::optional<int64_t> ignore;
  auto bound = [&](int64_t limit, std::optional<int64_t> ignores) {
    spec.idLimit = spec.idLimit ? std::min(spec.idLimit, limit) : limit;
    if (!ignores || (ignore && *ignore != *ignores))
      allIgnore = false;
    ignore = ignores;
  };
  SmallVector<Value> worklist = {arg};
  llvm::SmallPtrSet<Operation *, 8> seen;
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (!seen.insert(user).second)
        continue;
      if (auto ce = dyn_cast<CrossEntropyOp>(user)) {
        if (use.getOperandNumber() == 1)
          bound(ce.getLogits().getType().getShape().back(),
                ce.getIgnoreIndex());
      } else if (auto ce = dyn_cast<CrossEntropyGradOp>(user)) {
        if (use.getOperandNumber() == 1)
          bound(ce.getLogits().getType().getShape().back(),
                ce.getIgnoreIndex());
      } else if (auto e = dyn_cast<EmbeddingOp>(user)) {
        // A vocabulary block's table does not give the whole vocabulary.
        if (use.getOperandNumber() == 1 && !e.getBlock())
          bound(e.getTable().getType().getDimSize(0), std::nullopt);
      } else if (isa<ReshapeOp, TransposeOp, BroadcastOp, SliceOp, ConcatOp,
                     ShardOp, AllGatherOp, AllToAllOp, CollectivePermuteOp,
                     AllGatherStartOp, AllToAllStartOp,
                     CollectivePermuteStartOp, WaitOp>(user)) {
        // (A start passes the ids on to its wait.)
        llvm::append_range(worklist, user->getResults());
      }
    }
  }
  if (spec.idLimit && allIgnore)
    spec.ignoreIndex = ignore;
}

static FailureOr<FunctionSpec> describeFunction(func::FuncOp func) {
  FunctionSpec fs;
  fs.name = func.getName().str();
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    BufferSpec spec;
    std::string what = "argument #" + std::to_string(i) + " of @" + fs.name;
    auto role = [&](StringRef attr) {
      return func.getArgAttrOfType<StringAttr>(i, attr);
    };
    if (auto name = role(CleaveDialect::kParamAttrName)) {
      spec.role = BufferSpec::Role::Param;
      spec.name = name.str();
      spec.init = CLEAVE_INIT_ZEROS;
      if (auto init = func.getArgAttrOfType<InitAttr>(
              i, CleaveDialect::kInitAttrName)) {
        spec.init = static_cast<int32_t>(init.getKind());
        spec.initScale = init.getScaleValue();
      }
    } else if (auto name = role(CleaveDialect::kStateAttrName)) {
      spec.role = BufferSpec::Role::State;
      spec.name = name.str();
    } else if (auto name = role(CleaveDialect::kInputAttrName)) {
      spec.role = BufferSpec::Role::Input;
      spec.name = name.str();
      describeIdBounds(func.getArgument(i), spec);
    } else {
      return func.emitError()
             << what << " has no role: mark it cleave.param, cleave.state "
             << "or cleave.input";
    }
    if (failed(describeType(func, func.getArgumentTypes()[i], what, spec)) ||
        failed(describeLayout(func,
                              func.getArgAttrOfType<ShardingAttr>(
                                  i, CleaveDialect::kLayoutAttrName),
                              what, spec)))
      return failure();
    fs.buffers.push_back(std::move(spec));
  }
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    BufferSpec spec;
    spec.role = BufferSpec::Role::Output;
    auto name =
        func.getResultAttrOfType<StringAttr>(i, CleaveDialect::kOutputAttrName);
    spec.name = name ? name.str() : "result" + std::to_string(i);
    std::string what = "result #" + std::to_string(i) + " of @" + fs.name;
    if (failed(describeType(func, func.getResultTypes()[i], what, spec)) ||
        failed(describeLayout(func,
                              func.getResultAttrOfType<ShardingAttr>(
                                  i, CleaveDialect::kLayoutAttrName),
                              what, spec)))
      return failure();
    fs.buffers.push_back(std::move(spec));
  }
  return fs;
}

FailureOr<ProgramManifest> mlir::cleave::extractManifest(ModuleOp module) {
  ProgramManifest manifest;
  bool perDevice = false;
  module.walk([&](func::FuncOp func) {
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      perDevice |= bool(func.getArgAttr(i, CleaveDialect::kLayoutAttrName));
  });
  if (perDevice) {
    SmallVector<MeshOp> meshes(module.getOps<MeshOp>());
    if (meshes.size() != 1)
      return module.emitError() << "a per-device program needs exactly one "
                                   "cleave.mesh, found "
                                << meshes.size();
    MeshSpec mesh;
    for (Attribute name : meshes[0].getAxisNames())
      mesh.axes.push_back(cast<StringAttr>(name).getValue().str());
    llvm::append_range(mesh.shape, meshes[0].getShape());
    manifest.mesh = std::move(mesh);
  }
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || func.isPrivate())
      continue;
    FailureOr<FunctionSpec> fs = describeFunction(func);
    if (failed(fs))
      return failure();
    manifest.functions.push_back(std::move(*fs));
  }
  if (failed(extractPipeline(module, manifest)))
    return failure();
  return manifest;
}

LogicalResult mlir::cleave::extractPipeline(ModuleOp module,
                                            ProgramManifest &manifest) {
  auto dict =
      module->getAttrOfType<DictionaryAttr>(CleaveDialect::kPipelineAttrName);
  if (!dict)
    return success();
  if (!manifest.mesh)
    return module.emitError() << "is pipelined but has no per-device mesh";
  auto axis = dict.getAs<StringAttr>("axis");
  auto it = llvm::find(manifest.mesh->axes, axis.getValue());
  if (it == manifest.mesh->axes.end())
    return module.emitError() << "pipeline axis '" << axis.getValue()
                              << "' is not an axis of the mesh";
  PipelineSpec spec;
  spec.axis = it - manifest.mesh->axes.begin();
  auto readStages = [&](ArrayAttr list,
                        std::vector<std::string> &out) -> LogicalResult {
    for (Attribute stage : list) {
      StringRef name = cast<FlatSymbolRefAttr>(stage).getValue();
      if (!manifest.lookup(name))
        return module.emitError() << "pipeline stage function @" << name
                                  << " is missing or not public";
      out.push_back(name.str());
    }
    if (int64_t(out.size()) != manifest.mesh->shape[spec.axis])
      return module.emitError()
             << "the pipeline has " << out.size()
             << " stage functions but the mesh axis '" << axis.getValue()
             << "' has " << manifest.mesh->shape[spec.axis] << " coordinates";
    return success();
  };
  if (failed(readStages(dict.getAs<ArrayAttr>("stages"), spec.stages)))
    return failure();
  if (auto entries = dict.getAs<DictionaryAttr>("entries"))
    for (NamedAttribute entry : entries)
      if (failed(readStages(cast<ArrayAttr>(entry.getValue()),
                            spec.entries[entry.getName().str()])))
        return failure();
  manifest.pipeline = std::move(spec);
  return success();
}

LogicalResult mlir::cleave::extractGroups(ModuleOp module,
                                          ProgramManifest &manifest) {
  auto groups =
      module->getAttrOfType<ArrayAttr>(CleaveDialect::kGroupsAttrName);
  if (!groups)
    return success();
  if (!manifest.mesh)
    return module.emitError() << "has communicator groups but no mesh";
  manifest.groups.clear();
  for (Attribute group : groups) {
    std::vector<int64_t> axes;
    for (Attribute axis : cast<ArrayAttr>(group)) {
      StringRef name = cast<StringAttr>(axis).getValue();
      auto it = llvm::find(manifest.mesh->axes, name);
      if (it == manifest.mesh->axes.end())
        return module.emitError()
               << "group axis '" << name << "' is not an axis of the mesh";
      axes.push_back(it - manifest.mesh->axes.begin());
    }
    manifest.groups.push_back(std::move(axes));
  }
  return success();
}
