//===- Manifest.cpp - What a compiled function expects --------------------===//
//
// The manifest itself and its JSON form: no MLIR (the bundle runner links
// it); reading it from a module is ManifestExtract.cpp.
//
//===----------------------------------------------------------------------===//

#include "cleave/Execution/Manifest.h"
#include "cleave/Runtime/DTypeTable.h"
#include "cleave/Runtime/Runtime.h"

#include <nlohmann/json.hpp>

using namespace mlir;
using namespace mlir::cleave;
using nlohmann::json;

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

const std::vector<std::string> *PipelineSpec::stagesOf(StringRef step) const {
  if (step == "train_step")
    return &stages;
  auto it = entries.find(step.str());
  return it == entries.end() ? nullptr : &it->second;
}

std::string ProgramManifest::entryFor(StringRef step, int64_t rank) const {
  const std::vector<std::string> *stages =
      pipeline ? pipeline->stagesOf(step) : nullptr;
  if (!stages || !mesh)
    return step.str();
  int64_t stage = mesh->coordinates(rank)[pipeline->axis];
  return (*stages)[stage];
}

std::vector<const FunctionSpec *>
ProgramManifest::stepFunctions(StringRef step) const {
  std::vector<const FunctionSpec *> found;
  const std::vector<std::string> *stages =
      pipeline ? pipeline->stagesOf(step) : nullptr;
  if (!stages) {
    if (const FunctionSpec *f = lookup(step))
      found.push_back(f);
    return found;
  }
  for (const std::string &name : *stages)
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

std::string ProgramManifest::toJSON() const {
  json funcs = json::array();
  for (const FunctionSpec &f : functions) {
    json buffers = json::array();
    for (const BufferSpec &b : f.buffers) {
      json o = {
          {"role", stringifyRole(b.role).str()},
          {"name", b.name},
          {"shape", b.shape},
          {"dtype", std::string(::cleave::rt::lookupDType(b.dtype)->name)}};
      if (b.role == BufferSpec::Role::Param) {
        o["init"] = b.init;
        o["scale"] = b.initScale;
      }
      if (b.isSplit())
        o["layout"] = b.layout;
      if (b.idLimit)
        o["id_limit"] = b.idLimit;
      if (b.ignoreIndex)
        o["ignore_index"] = *b.ignoreIndex;
      buffers.push_back(std::move(o));
    }
    funcs.push_back({{"name", f.name}, {"buffers", std::move(buffers)}});
  }
  json root = {{"format", "cleave-manifest"},
               {"version", 1},
               {"functions", std::move(funcs)}};
  if (mesh) {
    root["mesh"] = {{"axes", mesh->axes}, {"shape", mesh->shape}};
    root["groups"] = groups;
  }
  if (pipeline) {
    root["pipeline"] = {{"axis", pipeline->axis}, {"stages", pipeline->stages}};
    if (!pipeline->entries.empty())
      root["pipeline"]["entries"] = pipeline->entries;
  }
  return root.dump();
}

namespace {

/// The string field `key` of `o`, or null.
const std::string *stringField(const json &o, const char *key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get_ptr<const std::string *>()
                                          : nullptr;
}

/// The array field `key` of `o`, or null.
const json *arrayField(const json &o, const char *key) {
  auto it = o.find(key);
  return it != o.end() && it->is_array() ? &*it : nullptr;
}

/// Reads [[int, ...], ...].
bool readNested(const json &array, std::vector<std::vector<int64_t>> &out) {
  for (const json &inner : array) {
    if (!inner.is_array())
      return false;
    std::vector<int64_t> row;
    for (const json &v : inner) {
      if (!v.is_number_integer())
        return false;
      row.push_back(v.get<int64_t>());
    }
    out.push_back(std::move(row));
  }
  return true;
}

llvm::Error manifestError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "manifest: " + msg);
}

/// Reads one entry of a function's "buffers"; `where` names it.
llvm::Expected<BufferSpec> readBuffer(const json &bo, const std::string &bw) {
  if (!bo.is_object())
    return manifestError(bw + ": not an object");
  BufferSpec b;
  const std::string *role = stringField(bo, "role");
  const std::string *dtype = stringField(bo, "dtype");
  const std::string *name = stringField(bo, "name");
  const json *shape = arrayField(bo, "shape");
  if (!role || !dtype || !shape || !name)
    return manifestError(bw + ": needs 'role', 'name', 'shape' and 'dtype'");
  b.name = *name;
  bool roleOk = false;
  for (auto r : {BufferSpec::Role::Param, BufferSpec::Role::State,
                 BufferSpec::Role::Input, BufferSpec::Role::Output})
    if (*role == stringifyRole(r)) {
      b.role = r;
      roleOk = true;
    }
  if (!roleOk)
    return manifestError(bw + ".role: unknown role '" + *role + "'");
  const ::cleave::rt::DTypeInfo *info = ::cleave::rt::lookupDTypeByName(*dtype);
  if (!info)
    return manifestError(bw + ".dtype: unknown element type '" + *dtype + "'");
  b.dtype = info->code;
  for (const json &d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return manifestError(bw + ".shape: dimensions are non-negative integers");
    b.shape.push_back(d.get<int64_t>());
  }
  auto init = bo.find("init");
  if (init != bo.end() && init->is_number_integer())
    b.init = init->get<int32_t>();
  auto scale = bo.find("scale");
  if (scale != bo.end() && scale->is_number())
    b.initScale = scale->get<double>();
  if (const json *layout = arrayField(bo, "layout"))
    if (!readNested(*layout, b.layout))
      return manifestError(bw +
                           ".layout: a list of axis-index lists per dimension");
  auto idLimit = bo.find("id_limit");
  if (idLimit != bo.end() && idLimit->is_number_integer())
    b.idLimit = idLimit->get<int64_t>();
  auto ignore = bo.find("ignore_index");
  if (ignore != bo.end() && ignore->is_number_integer())
    b.ignoreIndex = ignore->get<int64_t>();
  return b;
}

/// Reads "mesh", "groups" and "pipeline" of `root` into `m`.
llvm::Error readMesh(const json &root, ProgramManifest &m) {
  auto mesh = root.find("mesh");
  if (mesh != root.end() && mesh->is_object()) {
    const json *axes = arrayField(*mesh, "axes");
    const json *shape = arrayField(*mesh, "shape");
    if (!axes || !shape || axes->size() != shape->size())
      return manifestError("mesh: needs 'axes' and 'shape' of the same length");
    MeshSpec spec;
    for (size_t i = 0; i < axes->size(); ++i) {
      const json &a = (*axes)[i], &s = (*shape)[i];
      if (!a.is_string() || !s.is_number_integer() || s.get<int64_t>() <= 0)
        return manifestError("mesh: axes are names, sizes positive integers");
      spec.axes.push_back(a.get<std::string>());
      spec.shape.push_back(s.get<int64_t>());
    }
    m.mesh = std::move(spec);
    if (const json *groups = arrayField(root, "groups"))
      if (!readNested(*groups, m.groups))
        return manifestError("groups: a list of axis-index lists");
  }
  auto pipeline = root.find("pipeline");
  if (pipeline == root.end() || !pipeline->is_object())
    return llvm::Error::success();
  auto axis = pipeline->find("axis");
  const json *stages = arrayField(*pipeline, "stages");
  if (!m.mesh || axis == pipeline->end() || !axis->is_number_integer() ||
      !stages || axis->get<int64_t>() < 0 ||
      axis->get<int64_t>() >= int64_t(m.mesh->axes.size()) ||
      int64_t(stages->size()) != m.mesh->shape[axis->get<int64_t>()])
    return manifestError("pipeline: needs a mesh, 'axis' (a mesh axis index) "
                         "and one name in 'stages' per coordinate of that "
                         "axis");
  PipelineSpec spec;
  spec.axis = axis->get<int64_t>();
  auto readStages = [&](const json &list, std::vector<std::string> &out) {
    if (!list.is_array() || list.size() != stages->size())
      return false;
    for (const json &name : list) {
      if (!name.is_string() || !m.lookup(name.get<std::string>()))
        return false;
      out.push_back(name.get<std::string>());
    }
    return true;
  };
  if (!readStages(*stages, spec.stages))
    return manifestError("pipeline.stages: names of functions of the manifest");
  auto entries = pipeline->find("entries");
  if (entries != pipeline->end()) {
    if (!entries->is_object())
      return manifestError("pipeline.entries: an object of stage lists");
    for (auto [step, list] : entries->items())
      if (!readStages(list, spec.entries[step]))
        return manifestError("pipeline.entries." + step +
                             ": one name of a function of the manifest per "
                             "pipeline coordinate");
  }
  m.pipeline = std::move(spec);
  return llvm::Error::success();
}

} // namespace

llvm::Expected<ProgramManifest> ProgramManifest::fromJSON(StringRef text) {
  json root = json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                          /*allow_exceptions=*/false);
  if (root.is_discarded())
    return manifestError("not valid JSON");
  const std::string *format =
      root.is_object() ? stringField(root, "format") : nullptr;
  if (!format || *format != "cleave-manifest")
    return manifestError("not a cleave manifest (field 'format')");
  const json *funcs = arrayField(root, "functions");
  if (!funcs)
    return manifestError("missing array 'functions'");
  ProgramManifest m;
  for (size_t fi = 0; fi < funcs->size(); ++fi) {
    const json &fo = (*funcs)[fi];
    std::string where = "functions[" + std::to_string(fi) + "]";
    const std::string *name =
        fo.is_object() ? stringField(fo, "name") : nullptr;
    const json *buffers = fo.is_object() ? arrayField(fo, "buffers") : nullptr;
    if (!name || !buffers)
      return manifestError(where + ": needs 'name' and 'buffers'");
    FunctionSpec f;
    f.name = *name;
    for (size_t bi = 0; bi < buffers->size(); ++bi) {
      llvm::Expected<BufferSpec> b = readBuffer(
          (*buffers)[bi], where + ".buffers[" + std::to_string(bi) + "]");
      if (!b)
        return b.takeError();
      f.buffers.push_back(std::move(*b));
    }
    m.functions.push_back(std::move(f));
  }
  if (llvm::Error err = readMesh(root, m))
    return std::move(err);
  return m;
}
