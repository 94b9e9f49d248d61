//===- Manifest.cpp - What a compiled function expects --------------------===//

#include "cleave/Execution/Manifest.h"
#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Runtime/Runtime.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::cleave;

int64_t BufferSpec::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t BufferSpec::numBytes() const {
  return numElements() * cleave_rt_dtype_size(dtype);
}

int64_t FunctionSpec::find(BufferSpec::Role role, StringRef name) const {
  for (auto [i, b] : llvm::enumerate(buffers))
    if (b.role == role && b.name == name)
      return i;
  return -1;
}

const FunctionSpec *ProgramManifest::lookup(StringRef name) const {
  for (const FunctionSpec &f : functions)
    if (f.name == name)
      return &f;
  return nullptr;
}

std::string ProgramManifest::entryFor(StringRef step, int64_t rank) const {
  if (!pipeline || !mesh)
    return step.str();
  int64_t stage = mesh->coordinates(rank)[pipeline->axis];
  return pipeline->stages[stage];
}

std::vector<const FunctionSpec *>
ProgramManifest::stepFunctions(StringRef step) const {
  std::vector<const FunctionSpec *> found;
  if (!pipeline) {
    if (const FunctionSpec *f = lookup(step))
      found.push_back(f);
    return found;
  }
  for (const std::string &name : pipeline->stages)
    if (const FunctionSpec *f = lookup(name))
      found.push_back(f);
  return found;
}

bool BufferSpec::isSplit() const {
  return llvm::any_of(layout, [](const auto &axes) { return !axes.empty(); });
}

int64_t MeshSpec::numDevices() const {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

std::vector<int64_t> MeshSpec::coordinates(int64_t rank) const {
  std::vector<int64_t> coords(shape.size());
  for (int64_t a = int64_t(shape.size()) - 1; a >= 0; --a) {
    coords[a] = rank % shape[a];
    rank /= shape[a];
  }
  return coords;
}

std::string MeshSpec::toString() const {
  std::string text;
  for (size_t a = 0; a < axes.size(); ++a)
    text += (a ? ", " : "") + axes[a] + "=" + std::to_string(shape[a]);
  return text;
}

std::vector<int64_t> mlir::cleave::globalShape(const BufferSpec &buffer,
                                               const MeshSpec &mesh) {
  std::vector<int64_t> shape = buffer.shape;
  for (size_t d = 0; d < buffer.layout.size() && d < shape.size(); ++d)
    for (int64_t axis : buffer.layout[d])
      shape[d] *= mesh.shape[axis];
  return shape;
}

StringRef mlir::cleave::stringifyRole(BufferSpec::Role role) {
  switch (role) {
  case BufferSpec::Role::Param:
    return "param";
  case BufferSpec::Role::State:
    return "state";
  case BufferSpec::Role::Input:
    return "input";
  case BufferSpec::Role::Output:
    return "output";
  }
  return "?";
}

static std::optional<int32_t> dtypeOf(Type type) {
  if (type.isF32())
    return CLEAVE_F32;
  if (type.isF64())
    return CLEAVE_F64;
  if (type.isBF16())
    return CLEAVE_BF16;
  if (type.isF16())
    return CLEAVE_F16;
  if (type.isInteger(32))
    return CLEAVE_I32;
  if (type.isInteger(64))
    return CLEAVE_I64;
  return std::nullopt;
}

static const char *dtypeName(int32_t dtype) {
  switch (dtype) {
  case CLEAVE_F32:
    return "f32";
  case CLEAVE_F64:
    return "f64";
  case CLEAVE_BF16:
    return "bf16";
  case CLEAVE_F16:
    return "f16";
  case CLEAVE_I32:
    return "i32";
  case CLEAVE_I64:
    return "i64";
  }
  return "?";
}

/// Fills `spec` with the shape and element type of `type`.
static LogicalResult describeType(Operation *where, Type type,
                                  const std::string &what, BufferSpec &spec) {
  auto shaped = dyn_cast<RankedTensorType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return where->emitError() << what << " has type " << type
                              << "; compiled functions take tensors with "
                                 "static shapes";
  std::optional<int32_t> dtype = dtypeOf(shaped.getElementType());
  if (!dtype)
    return where->emitError() << what << " has element type "
                              << shaped.getElementType()
                              << ", which hosts cannot allocate (f32, f64, "
                                 "bf16, f16, i32 or i64)";
  spec.shape.assign(shaped.getShape().begin(), shaped.getShape().end());
  spec.dtype = *dtype;
  return success();
}

/// Fills `spec.layout` from a `cleave.layout` attribute (if any).
static LogicalResult describeLayout(func::FuncOp func, ShardingAttr layout,
                                    const std::string &what,
                                    BufferSpec &spec) {
  if (!layout)
    return success();
  if (!layout.getPartialAxes().empty())
    return func.emitError() << what << " is a pending sum (" << layout
                            << "); hosts read whole or split values only";
  MeshOp mesh = lookupMesh(func, layout.getMesh());
  if (!mesh)
    return func.emitError() << what << " refers to unknown mesh "
                            << layout.getMesh();
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
                     ShardOp, AllGatherOp, AllToAllOp, CollectivePermuteOp>(
                     user)) {
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
        failed(describeLayout(func, func.getArgAttrOfType<ShardingAttr>(
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
        failed(describeLayout(func, func.getResultAttrOfType<ShardingAttr>(
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
  for (Attribute stage : dict.getAs<ArrayAttr>("stages")) {
    StringRef name = cast<FlatSymbolRefAttr>(stage).getValue();
    if (!manifest.lookup(name))
      return module.emitError() << "pipeline stage function @" << name
                                << " is missing or not public";
    spec.stages.push_back(name.str());
  }
  if (int64_t(spec.stages.size()) != manifest.mesh->shape[spec.axis])
    return module.emitError()
           << "the pipeline has " << spec.stages.size()
           << " stage functions but the mesh axis '" << axis.getValue()
           << "' has " << manifest.mesh->shape[spec.axis] << " coordinates";
  manifest.pipeline = std::move(spec);
  return success();
}

LogicalResult mlir::cleave::extractGroups(ModuleOp module,
                                         ProgramManifest &manifest) {
  auto groups = module->getAttrOfType<ArrayAttr>(CleaveDialect::kGroupsAttrName);
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
        return module.emitError() << "group axis '" << name
                                  << "' is not an axis of the mesh";
      axes.push_back(it - manifest.mesh->axes.begin());
    }
    manifest.groups.push_back(std::move(axes));
  }
  return success();
}

static llvm::json::Array toJSONArray(const std::vector<std::vector<int64_t>> &v) {
  llvm::json::Array out;
  for (const auto &inner : v)
    out.push_back(llvm::json::Array(inner));
  return out;
}

llvm::json::Value ProgramManifest::toJSON() const {
  llvm::json::Array funcs;
  for (const FunctionSpec &f : functions) {
    llvm::json::Array buffers;
    for (const BufferSpec &b : f.buffers) {
      llvm::json::Object o{{"role", stringifyRole(b.role)},
                           {"name", b.name},
                           {"shape", llvm::json::Array(b.shape)},
                           {"dtype", dtypeName(b.dtype)}};
      if (b.role == BufferSpec::Role::Param) {
        o["init"] = b.init;
        o["scale"] = b.initScale;
      }
      if (b.isSplit())
        o["layout"] = toJSONArray(b.layout);
      if (b.idLimit)
        o["id_limit"] = b.idLimit;
      if (b.ignoreIndex)
        o["ignore_index"] = *b.ignoreIndex;
      buffers.push_back(std::move(o));
    }
    funcs.push_back(llvm::json::Object{
        {"name", f.name}, {"buffers", std::move(buffers)}});
  }
  llvm::json::Object root{{"format", "cleave-manifest"},
                          {"version", 1},
                          {"functions", std::move(funcs)}};
  if (mesh) {
    root["mesh"] = llvm::json::Object{{"axes", llvm::json::Array(mesh->axes)},
                                      {"shape", llvm::json::Array(mesh->shape)}};
    root["groups"] = toJSONArray(groups);
  }
  if (pipeline)
    root["pipeline"] =
        llvm::json::Object{{"axis", pipeline->axis},
                           {"stages", llvm::json::Array(pipeline->stages)}};
  return root;
}

/// Reads [[int, ...], ...].
static bool readNested(const llvm::json::Array &array,
                       std::vector<std::vector<int64_t>> &out) {
  for (const llvm::json::Value &inner : array) {
    const llvm::json::Array *values = inner.getAsArray();
    if (!values)
      return false;
    std::vector<int64_t> row;
    for (const llvm::json::Value &v : *values) {
      if (!v.getAsInteger())
        return false;
      row.push_back(*v.getAsInteger());
    }
    out.push_back(std::move(row));
  }
  return true;
}

llvm::Expected<ProgramManifest> ProgramManifest::fromJSON(StringRef text) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return parsed.takeError();
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "manifest: " + msg);
  };
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root || root->getString("format") != "cleave-manifest")
    return fail("not a cleave manifest (field 'format')");
  const llvm::json::Array *funcs = root->getArray("functions");
  if (!funcs)
    return fail("missing array 'functions'");
  ProgramManifest m;
  for (auto [fi, fv] : llvm::enumerate(*funcs)) {
    const llvm::json::Object *fo = fv.getAsObject();
    std::string where = "functions[" + std::to_string(fi) + "]";
    if (!fo || !fo->getString("name") || !fo->getArray("buffers"))
      return fail(where + ": needs 'name' and 'buffers'");
    FunctionSpec f;
    f.name = fo->getString("name")->str();
    for (auto [bi, bv] : llvm::enumerate(*fo->getArray("buffers"))) {
      const llvm::json::Object *bo = bv.getAsObject();
      std::string bw = where + ".buffers[" + std::to_string(bi) + "]";
      if (!bo)
        return fail(bw + ": not an object");
      BufferSpec b;
      std::optional<StringRef> role = bo->getString("role");
      std::optional<StringRef> dtype = bo->getString("dtype");
      const llvm::json::Array *shape = bo->getArray("shape");
      if (!role || !dtype || !shape || !bo->getString("name"))
        return fail(bw + ": needs 'role', 'name', 'shape' and 'dtype'");
      b.name = bo->getString("name")->str();
      bool roleOk = false;
      for (auto r : {BufferSpec::Role::Param, BufferSpec::Role::State,
                     BufferSpec::Role::Input, BufferSpec::Role::Output})
        if (*role == stringifyRole(r)) {
          b.role = r;
          roleOk = true;
        }
      if (!roleOk)
        return fail(bw + ".role: unknown role '" + *role + "'");
      bool dtypeOk = false;
      for (int32_t d = CLEAVE_F32; d <= CLEAVE_I64; ++d)
        if (*dtype == dtypeName(d)) {
          b.dtype = d;
          dtypeOk = true;
        }
      if (!dtypeOk)
        return fail(bw + ".dtype: unknown element type '" + *dtype + "'");
      for (const llvm::json::Value &d : *shape) {
        std::optional<int64_t> v = d.getAsInteger();
        if (!v || *v < 0)
          return fail(bw + ".shape: dimensions are non-negative integers");
        b.shape.push_back(*v);
      }
      b.init = bo->getInteger("init").value_or(0);
      b.initScale = bo->getNumber("scale").value_or(0.0);
      if (const llvm::json::Array *layout = bo->getArray("layout"))
        if (!readNested(*layout, b.layout))
          return fail(bw + ".layout: a list of axis-index lists per dimension");
      b.idLimit = bo->getInteger("id_limit").value_or(0);
      if (std::optional<int64_t> ignore = bo->getInteger("ignore_index"))
        b.ignoreIndex = *ignore;
      f.buffers.push_back(std::move(b));
    }
    m.functions.push_back(std::move(f));
  }
  if (const llvm::json::Object *mesh = root->getObject("mesh")) {
    const llvm::json::Array *axes = mesh->getArray("axes");
    const llvm::json::Array *shape = mesh->getArray("shape");
    if (!axes || !shape || axes->size() != shape->size())
      return fail("mesh: needs 'axes' and 'shape' of the same length");
    MeshSpec spec;
    for (auto [a, s] : llvm::zip(*axes, *shape)) {
      if (!a.getAsString() || !s.getAsInteger() || *s.getAsInteger() <= 0)
        return fail("mesh: axes are names, sizes positive integers");
      spec.axes.push_back(a.getAsString()->str());
      spec.shape.push_back(*s.getAsInteger());
    }
    m.mesh = std::move(spec);
    if (const llvm::json::Array *groups = root->getArray("groups"))
      if (!readNested(*groups, m.groups))
        return fail("groups: a list of axis-index lists");
  }
  if (const llvm::json::Object *pipeline = root->getObject("pipeline")) {
    std::optional<int64_t> axis = pipeline->getInteger("axis");
    const llvm::json::Array *stages = pipeline->getArray("stages");
    if (!m.mesh || !axis || !stages || *axis < 0 ||
        *axis >= int64_t(m.mesh->axes.size()) ||
        int64_t(stages->size()) != m.mesh->shape[*axis])
      return fail("pipeline: needs a mesh, 'axis' (a mesh axis index) and "
                  "one name in 'stages' per coordinate of that axis");
    PipelineSpec spec;
    spec.axis = *axis;
    for (const llvm::json::Value &name : *stages) {
      if (!name.getAsString() || !m.lookup(*name.getAsString()))
        return fail("pipeline.stages: names of functions of the manifest");
      spec.stages.push_back(name.getAsString()->str());
    }
    m.pipeline = std::move(spec);
  }
  return m;
}
