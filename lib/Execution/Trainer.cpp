//===- Trainer.cpp - Drive a compiled training step -----------------------===//

#include "cleave/Execution/Trainer.h"
#include "cleave/Execution/Layout.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include <cmath>
#include <cstring>
#include <limits>

using namespace mlir;
using namespace mlir::cleave;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

static std::string shapeString(llvm::ArrayRef<int64_t> shape) {
  return "[" +
         llvm::join(llvm::map_range(
                        shape, [](int64_t d) { return std::to_string(d); }),
                    ", ") +
         "]";
}

BatchSource::~BatchSource() = default;

//===----------------------------------------------------------------------===//
// Token batches
//===----------------------------------------------------------------------===//

namespace {

class TokenSource final : public BatchSource {
public:
  TokenSource(cleave_token_file *file, uint64_t seed, int64_t vocab,
              int64_t firstRow)
      : file(file), seed(seed), vocab(vocab), firstRow(firstRow) {}

  llvm::Error fill(const BufferSpec &spec, int64_t step, void *data) override {
    bool isTokens = spec.name == "tokens", isTargets = spec.name == "targets";
    if (!isTokens && !isTargets)
      return makeError("token data provides the inputs 'tokens' and "
                       "'targets'; the program also needs '" +
                       spec.name + "'");
    if (spec.shape.size() != 2 || spec.dtype != CLEAVE_I32)
      return makeError("input '" + spec.name +
                       "' must be [batch, seq] i32, "
                       "got " +
                       shapeString(spec.shape));
    int64_t rows = spec.shape[0], seq = spec.shape[1];
    if (step != cachedStep) {
      inputs.resize(rows * seq);
      targets.resize(rows * seq);
      if (cleave_token_file_batch(file, seed, step, firstRow, rows, seq, vocab,
                                  inputs.data(), targets.data()) != 0)
        return makeError(cleave_rt_error_message());
      cachedStep = step;
    }
    const std::vector<int32_t> &src = isTokens ? inputs : targets;
    std::memcpy(data, src.data(), src.size() * sizeof(int32_t));
    return llvm::Error::success();
  }

private:
  cleave_token_file *file;
  uint64_t seed;
  int64_t vocab, firstRow;
  int64_t cachedStep = -1;
  std::vector<int32_t> inputs, targets;
};

/// The position of element `flat` of a tensor of `shape`, as "[i, j]".
static std::string positionString(llvm::ArrayRef<int64_t> shape, int64_t flat) {
  std::vector<int64_t> index(shape.size());
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    index[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return shapeString(index);
}

/// Fails, naming the step and the position, when an id or label of step
/// `step` is outside what the program reads it for (BufferSpec::idLimit):
/// a wrong label would otherwise give a wrong loss silently.
static llvm::Error checkIds(const BufferSpec &spec, int64_t step,
                            const char *bytes) {
  if (!spec.idLimit || (spec.dtype != CLEAVE_I32 && spec.dtype != CLEAVE_I64))
    return llvm::Error::success();
  for (int64_t i = 0, n = spec.numElements(); i < n; ++i) {
    int64_t value;
    if (spec.dtype == CLEAVE_I32) {
      int32_t v;
      std::memcpy(&v, bytes + 4 * i, 4);
      value = v;
    } else {
      std::memcpy(&value, bytes + 8 * i, 8);
    }
    if ((value >= 0 && value < spec.idLimit) || value == spec.ignoreIndex)
      continue;
    std::string allowed = "[0, " + std::to_string(spec.idLimit) + ")";
    if (spec.ignoreIndex)
      allowed += " or the ignore_index " + std::to_string(*spec.ignoreIndex);
    else
      allowed += " (no ignore_index)";
    return makeError(
        "inputs file tensor '" + spec.name + "', batch " +
        std::to_string(step) + " (step " + std::to_string(step + 1) +
        "), position " + positionString(spec.shape, i) + ": " +
        std::to_string(value) +
        " is not a valid id or label: the program needs " + allowed);
  }
  return llvm::Error::success();
}

class TensorFileSource final : public BatchSource {
public:
  explicit TensorFileSource(cleave_tensor_file *file) : file(file) {}
  ~TensorFileSource() override { cleave_tensor_file_close(file); }

  llvm::Error fill(const BufferSpec &spec, int64_t step, void *data) override {
    auto it = cache.find(spec.name);
    if (it == cache.end()) {
      int32_t dtype;
      int64_t rank, shape[8];
      if (cleave_tensor_file_info(file, spec.name.c_str(), &dtype, &rank,
                                  shape) != 0)
        return makeError("the inputs file has no tensor '" + spec.name + "'");
      std::vector<int64_t> dims(shape, shape + rank);
      std::vector<int64_t> expected = spec.shape;
      expected.insert(expected.begin(), rank > 0 ? dims[0] : 0);
      if (dtype != spec.dtype || dims != expected)
        return makeError("inputs file tensor '" + spec.name + "' has shape " +
                         shapeString(dims) + "; the program needs [steps] + " +
                         shapeString(spec.shape) + " of the same type");
      std::vector<char> bytes(spec.numBytes() * dims[0]);
      if (cleave_tensor_file_read(file, spec.name.c_str(), bytes.data(),
                                  bytes.size()) != 0)
        return makeError(cleave_rt_error_message());
      it = cache.emplace(spec.name, Cached{dims[0], std::move(bytes)}).first;
    }
    if (step >= it->second.steps)
      return makeError("the inputs file holds " +
                       std::to_string(it->second.steps) + " steps of '" +
                       spec.name + "'; step " + std::to_string(step + 1) +
                       " was requested");
    const char *bytes = it->second.bytes.data() + step * spec.numBytes();
    if (llvm::Error err = checkIds(spec, step, bytes))
      return err;
    std::memcpy(data, bytes, spec.numBytes());
    return llvm::Error::success();
  }

private:
  struct Cached {
    int64_t steps;
    std::vector<char> bytes;
  };
  cleave_tensor_file *file;
  std::map<std::string, Cached> cache;
};

} // namespace

std::unique_ptr<BatchSource>
mlir::cleave::makeTokenSource(cleave_token_file *file, uint64_t seed,
                              int64_t vocab, int64_t firstRow) {
  return std::make_unique<TokenSource>(file, seed, vocab, firstRow);
}

llvm::Expected<std::unique_ptr<BatchSource>>
mlir::cleave::makeTensorFileSource(llvm::StringRef path) {
  cleave_tensor_file *file = cleave_tensor_file_open(path.str().c_str());
  if (!file)
    return makeError(cleave_rt_error_message());
  return std::make_unique<TensorFileSource>(file);
}

//===----------------------------------------------------------------------===//
// Trainer
//===----------------------------------------------------------------------===//

Trainer::Trainer(const FunctionSpec &spec, EntryFn entry,
                 TrainerOptions options)
    : spec(spec), entry(entry), options(options) {}

Trainer::~Trainer() {
  for (void *b : buffers)
    cleave_rt_free(b);
  for (void *b : evalBuffers)
    cleave_rt_free(b);
}

llvm::Expected<std::unique_ptr<Trainer>>
Trainer::create(const FunctionSpec &spec, EntryFn entry,
                TrainerOptions options) {
  std::unique_ptr<Trainer> t(new Trainer(spec, entry, options));
  for (const BufferSpec &b : spec.buffers) {
    int64_t bytes = std::max<int64_t>(b.numBytes(), 1);
    void *p = cleave_rt_alloc(bytes);
    if (!p)
      return makeError("cannot allocate " + std::to_string(bytes) +
                       " bytes for buffer '" + b.name + "'");
    std::memset(p, 0, bytes);
    t->buffers.push_back(p);
  }
  for (const BufferSpec &b : spec.buffers) {
    int64_t target = -1;
    if (b.role == BufferSpec::Role::Output) {
      target = spec.find(BufferSpec::Role::Param, b.name);
      if (target < 0)
        target = spec.find(BufferSpec::Role::State, b.name);
      if (b.name == "loss")
        t->lossIndex = t->feedsBack.size();
      if (b.name == "grad_norm_sq")
        t->normIndex = t->feedsBack.size();
    }
    t->feedsBack.push_back(target);
  }
  if (t->lossIndex < 0)
    return makeError("@" + spec.name + " has no output named 'loss'");
  t->scale = options.lossScaling.initScale;
  t->hasUpdateInput = spec.find(BufferSpec::Role::Input, "update") >= 0;
  return std::move(t);
}

llvm::Error mlir::cleave::defineCommunicators(const ProgramManifest &manifest) {
  if (!manifest.mesh)
    return llvm::Error::success();
  const MeshSpec &mesh = *manifest.mesh;
  int64_t world = cleave_rt_world_size();
  if (mesh.numDevices() != world)
    return makeError(
        "rank " + std::to_string(cleave_rt_rank()) + ": the program's mesh (" +
        mesh.toString() + ") has " + std::to_string(mesh.numDevices()) +
        " devices but the job has " + std::to_string(world) + " ranks");
  std::vector<const char *> names;
  for (const std::string &axis : mesh.axes)
    names.push_back(axis.c_str());
  if (cleave_rt_define_mesh(mesh.shape.size(), mesh.shape.data(),
                            names.data()) != 0)
    return makeError(cleave_rt_error_message());
  for (auto [id, axes] : llvm::enumerate(manifest.groups))
    if (cleave_rt_define_group(id, axes.size(), axes.data()) != 0)
      return makeError(cleave_rt_error_message());
  return llvm::Error::success();
}

llvm::Error Trainer::fromGlobal(int64_t index,
                                llvm::function_ref<llvm::Error(void *)> fill) {
  return fromGlobal(spec.buffers[index], buffer(index), fill);
}

llvm::Error Trainer::fromGlobal(const BufferSpec &b, void *dst,
                                llvm::function_ref<llvm::Error(void *)> fill) {
  if (!options.mesh || !b.isSplit())
    return fill(dst);
  std::vector<int64_t> shape = globalShape(b, *options.mesh);
  int64_t elements = 1;
  for (int64_t d : shape)
    elements *= d;
  int64_t elementBytes = cleave_rt_dtype_size(b.dtype);
  std::vector<char> global(elements * elementBytes);
  if (llvm::Error err = fill(global.data()))
    return err;
  copyBlock(global.data(), shape, dst, blockOf(b, *options.mesh, options.rank),
            elementBytes, /*intoBlock=*/true);
  return llvm::Error::success();
}

llvm::Error Trainer::fillInput(const BufferSpec &b, void *dst, int64_t batch,
                               BatchSource &source) {
  return fromGlobal(b, dst, [&](void *data) {
    if (!options.mesh || !b.isSplit())
      return source.fill(b, batch, data);
    BufferSpec global = b;
    global.shape = globalShape(b, *options.mesh);
    global.layout.clear();
    return source.fill(global, batch, data);
  });
}

llvm::Expected<std::vector<char>> Trainer::gatherGlobal(int64_t index) const {
  const BufferSpec &b = spec.buffers[index];
  if (!options.mesh || !b.isSplit()) {
    auto *p = static_cast<const char *>(buffer(index));
    return std::vector<char>(p, p + b.numBytes());
  }
  const MeshSpec &mesh = *options.mesh;
  int64_t devices = mesh.numDevices();
  std::vector<char> blocks(b.numBytes() * devices);
  cleave_rt_all_gather(CLEAVE_WORLD_GROUP, b.dtype, buffer(index),
                       blocks.data(), b.numElements());
  if (cleave_rt_failed())
    return makeError("gathering '" + b.name +
                     "': " + cleave_rt_error_message());
  std::vector<int64_t> shape = globalShape(b, mesh);
  int64_t elementBytes = cleave_rt_dtype_size(b.dtype);
  std::vector<char> global(b.numBytes() * devices);
  for (int64_t r = 0; r < devices; ++r)
    copyBlock(global.data(), shape, blocks.data() + r * b.numBytes(),
              blockOf(b, mesh, r), elementBytes, /*intoBlock=*/false);
  return global;
}

llvm::Expected<std::vector<char>>
Trainer::gatherFromStage(const BufferSpec &b, int64_t stage) const {
  const MeshSpec &mesh = *options.mesh;
  int64_t devices = mesh.numDevices();
  int64_t mine = spec.find(b.role, b.name);
  bool here = mesh.coordinates(options.rank)[options.pipelineAxis] == stage &&
              mine >= 0;
  std::vector<char> zeros(here ? 0 : b.numBytes());
  const void *local = here ? buffer(mine) : zeros.data();
  std::vector<char> blocks(b.numBytes() * devices);
  cleave_rt_all_gather(CLEAVE_WORLD_GROUP, b.dtype, local, blocks.data(),
                       b.numElements());
  if (cleave_rt_failed())
    return makeError("rank " + llvm::Twine(options.rank) + ": gathering '" +
                     b.name + "' from pipeline stage " + llvm::Twine(stage) +
                     ": " + cleave_rt_error_message());
  std::vector<int64_t> shape = globalShape(b, mesh);
  int64_t elementBytes = cleave_rt_dtype_size(b.dtype);
  std::vector<char> global(b.numBytes() * devices);
  for (int64_t r = 0; r < devices; ++r)
    if (mesh.coordinates(r)[options.pipelineAxis] == stage)
      copyBlock(global.data(), shape, blocks.data() + r * b.numBytes(),
                blockOf(b, mesh, r), elementBytes, /*intoBlock=*/false);
  int64_t bytes = elementBytes;
  for (int64_t d : shape)
    bytes *= d;
  global.resize(bytes);
  return global;
}

llvm::Expected<std::vector<std::pair<BufferSpec, std::vector<char>>>>
Trainer::gatherSaved(bool withState) const {
  std::vector<std::pair<BufferSpec, std::vector<char>>> saved;
  auto wanted = [&](const BufferSpec &b) {
    return b.role == BufferSpec::Role::Param ||
           (withState && b.role == BufferSpec::Role::State);
  };
  if (options.stages.empty() || !options.mesh) {
    for (auto [i, b] : llvm::enumerate(spec.buffers)) {
      if (!wanted(b))
        continue;
      llvm::Expected<std::vector<char>> global = gatherGlobal(i);
      if (!global)
        return global.takeError();
      saved.emplace_back(b, std::move(*global));
    }
    return saved;
  }
  // Every rank walks every stage's tensors in the same order.
  for (auto [stage, fs] : llvm::enumerate(options.stages))
    for (const BufferSpec &b : fs.buffers) {
      if (!wanted(b))
        continue;
      llvm::Expected<std::vector<char>> global = gatherFromStage(b, stage);
      if (!global)
        return global.takeError();
      saved.emplace_back(b, std::move(*global));
    }
  return saved;
}

llvm::Error Trainer::initParameters() {
  for (auto [i, b] : llvm::enumerate(spec.buffers)) {
    if (b.role == BufferSpec::Role::State)
      std::memset(buffer(i), 0, b.numBytes());
    if (b.role != BufferSpec::Role::Param)
      continue;
    int64_t count = options.mesh ? [&] {
      int64_t n = 1;
      for (int64_t d : globalShape(b, *options.mesh))
        n *= d;
      return n;
    }()
                                 : b.numElements();
    llvm::Error err = fromGlobal(i, [&](void *data) -> llvm::Error {
      if (cleave_rt_fill(b.dtype, data, count, b.init, b.initScale,
                         options.seed, cleave_rt_hash_name(b.name.c_str()),
                         0) != 0)
        return makeError("initializing parameter '" + b.name +
                         "': " + cleave_rt_error_message());
      return llvm::Error::success();
    });
    if (err)
      return err;
  }
  return llvm::Error::success();
}

llvm::Error Trainer::loadStepCounter(cleave_tensor_file *file,
                                     llvm::StringSet<> &known) {
  firstStep = stepsRun = 0;
  int32_t dtype;
  int64_t rank, shape[8];
  if (cleave_tensor_file_info(file, kStepCounterName, &dtype, &rank, shape))
    return llvm::Error::success();
  known.insert(kStepCounterName);
  int64_t value = -1;
  if (dtype != CLEAVE_I64 || rank != 0 ||
      cleave_tensor_file_read(file, kStepCounterName, &value, 8) != 0 ||
      value < 0)
    return makeError(llvm::Twine("'") + kStepCounterName +
                     "' (the step counter) must be a scalar I64 >= 0");
  firstStep = value;
  return llvm::Error::success();
}

llvm::Error Trainer::loadScalerState(cleave_tensor_file *file,
                                     llvm::StringSet<> &known) {
  scale = options.lossScaling.initScale;
  goodSteps = skipped = 0;
  struct Entry {
    const char *name;
    int32_t dtype;
    void *value;
  } entries[] = {{kLossScaleName, CLEAVE_F64, &scale},
                 {kGoodStepsName, CLEAVE_I64, &goodSteps},
                 {kSkippedStepsName, CLEAVE_I64, &skipped}};
  for (const Entry &e : entries) {
    int32_t dtype;
    int64_t rank, shape[8];
    if (cleave_tensor_file_info(file, e.name, &dtype, &rank, shape))
      continue;
    known.insert(e.name);
    if (dtype != e.dtype || rank != 0 ||
        cleave_tensor_file_read(file, e.name, e.value, 8) != 0)
      return makeError(llvm::Twine("'") + e.name + "' (the loss scaler's " +
                       "state) must be a scalar " +
                       (e.dtype == CLEAVE_F64 ? "F64" : "I64"));
  }
  if (!(scale > 0) || !std::isfinite(scale) || goodSteps < 0 || skipped < 0 ||
      skipped > firstStep)
    return makeError(llvm::Twine("the loss scaler's state is not valid: "
                                 "scale ") +
                     std::to_string(scale) + ", " + llvm::Twine(goodSteps) +
                     " good steps, " + llvm::Twine(skipped) + " skipped of " +
                     llvm::Twine(firstStep));
  return llvm::Error::success();
}

llvm::Error Trainer::loadParameters(llvm::StringRef path) {
  cleave_tensor_file *file = cleave_tensor_file_open(path.str().c_str());
  if (!file)
    return makeError(cleave_rt_error_message());
  auto close = llvm::make_scope_exit([&] { cleave_tensor_file_close(file); });
  std::vector<std::string> problems;
  llvm::StringSet<> known;
  if (llvm::Error err = loadStepCounter(file, known))
    problems.push_back(llvm::toString(std::move(err)));
  else if (llvm::Error err = loadScalerState(file, known))
    problems.push_back(llvm::toString(std::move(err)));
  for (auto [i, b] : llvm::enumerate(spec.buffers)) {
    bool param = b.role == BufferSpec::Role::Param;
    if (!param && b.role != BufferSpec::Role::State)
      continue;
    known.insert(b.name);
    int32_t dtype;
    int64_t rank, shape[8];
    if (cleave_tensor_file_info(file, b.name.c_str(), &dtype, &rank, shape)) {
      if (param)
        problems.push_back("missing parameter '" + b.name + "'");
      else
        std::memset(buffer(i), 0, b.numBytes());
      continue;
    }
    std::vector<int64_t> dims(shape, shape + rank);
    std::vector<int64_t> global =
        options.mesh ? globalShape(b, *options.mesh) : b.shape;
    if (dims != global || dtype != b.dtype) {
      problems.push_back("'" + b.name + "' has shape " + shapeString(dims) +
                         " in the file but " + shapeString(global) +
                         " in the model");
      continue;
    }
    int64_t bytes = cleave_rt_dtype_size(dtype);
    for (int64_t d : dims)
      bytes *= d;
    llvm::Error err = fromGlobal(i, [&](void *data) -> llvm::Error {
      if (cleave_tensor_file_read(file, b.name.c_str(), data, bytes) != 0)
        return makeError(cleave_rt_error_message());
      return llvm::Error::success();
    });
    if (err)
      problems.push_back(llvm::toString(std::move(err)));
  }
  // In a pipeline, the other stages hold the rest of the model.
  for (const FunctionSpec &stage : options.stages)
    for (const BufferSpec &b : stage.buffers)
      if (b.role == BufferSpec::Role::Param ||
          b.role == BufferSpec::Role::State)
        known.insert(b.name);
  for (int64_t i = 0, e = cleave_tensor_file_count(file); i < e; ++i) {
    std::string name = cleave_tensor_file_name(file, i);
    if (!known.contains(name))
      problems.push_back("the file has '" + name +
                         "', which the model does not have");
  }
  if (!problems.empty())
    return makeError(path + " does not match the model:\n  " +
                     llvm::join(problems, "\n  "));
  return llvm::Error::success();
}

llvm::Error Trainer::saveParameters(llvm::StringRef path,
                                    bool withState) const {
  // Every rank gathers (a collective); rank 0 writes.
  auto globals = gatherSaved(withState);
  if (!globals)
    return globals.takeError();
  if (options.rank != 0)
    return llvm::Error::success();
  cleave_tensor_writer *w = cleave_tensor_writer_create(path.str().c_str());
  if (!w)
    return makeError(cleave_rt_error_message());
  for (auto &[b, data] : *globals) {
    std::vector<int64_t> shape =
        options.mesh ? globalShape(b, *options.mesh) : b.shape;
    if (cleave_tensor_writer_add(w, b.name.c_str(), b.dtype, shape.size(),
                                 shape.data(), data.data()) != 0) {
      cleave_tensor_writer_abort(w);
      return makeError(cleave_rt_error_message());
    }
  }
  int64_t counter = stepCounter();
  if (withState && cleave_tensor_writer_add(w, kStepCounterName, CLEAVE_I64, 0,
                                            nullptr, &counter) != 0) {
    cleave_tensor_writer_abort(w);
    return makeError(cleave_rt_error_message());
  }
  // The scaler's state, also for the skipped steps of --on-nan skip.
  if (withState && (scalesLoss() || skipped > 0) &&
      (cleave_tensor_writer_add(w, kLossScaleName, CLEAVE_F64, 0, nullptr,
                                &scale) != 0 ||
       cleave_tensor_writer_add(w, kGoodStepsName, CLEAVE_I64, 0, nullptr,
                                &goodSteps) != 0 ||
       cleave_tensor_writer_add(w, kSkippedStepsName, CLEAVE_I64, 0, nullptr,
                                &skipped) != 0)) {
    cleave_tensor_writer_abort(w);
    return makeError(cleave_rt_error_message());
  }
  if (cleave_tensor_writer_finish(w) != 0)
    return makeError(cleave_rt_error_message());
  return llvm::Error::success();
}

/// The loss of a function's buffer at `p`: f64 or f32.
static double readLoss(const BufferSpec &b, const void *p) {
  return b.dtype == CLEAVE_F64 ? *static_cast<const double *>(p)
                               : *static_cast<const float *>(p);
}

/// splitmix64: a well-mixed per-step seed for dropout.
static uint64_t mixSeed(uint64_t seed, int64_t step) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(step + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

llvm::Expected<double> Trainer::runStep(int64_t index, BatchSource &source) {
  int64_t step = firstStep + index;
  for (auto [i, b] : llvm::enumerate(spec.buffers)) {
    if (b.role != BufferSpec::Role::Input)
      continue;
    if (b.name == "lr")
      *static_cast<float *>(buffer(i)) = options.learningRate;
    else if (b.name == "step")
      // Without loss scaling, `step` is AdamW's update count too: the steps
      // --on-nan skipped are not counted. (The loss scaler's step has its
      // own `update` input, and its schedule counts every step.)
      *static_cast<float *>(buffer(i)) = static_cast<float>(
          (hasUpdateInput || scalesLoss() ? step : step - skipped) + 1);
    else if (b.name == "update")
      *static_cast<float *>(buffer(i)) = static_cast<float>(step - skipped + 1);
    else if (b.name == "loss_scale")
      *static_cast<float *>(buffer(i)) = static_cast<float>(scale);
    else if (b.name == "seed")
      *static_cast<uint64_t *>(buffer(i)) = mixSeed(options.seed, step);
    else if (llvm::Error err = fillInput(b, buffer(i), step, source))
      return std::move(err);
  }
  if (!entry)
    return makeError("the training step is not compiled yet");
  entry(buffers.data());
  if (cleave_rt_failed())
    return makeError(llvm::Twine("step ") + llvm::Twine(step + 1) +
                     " failed: " + cleave_rt_error_message());
  if (options.faultNanStep == step + 1)
    poisonStep();
  double loss = readLoss(spec.buffers[lossIndex], buffer(lossIndex));
  bool scaling = scalesLoss();
  if (!std::isfinite(loss) && !scaling && !options.skipNonFinite)
    return makeError(llvm::Twine("the loss is ") +
                     (std::isnan(loss) ? "NaN" : "infinite") + " at step " +
                     llvm::Twine(step + 1) +
                     "; parameters keep their values from before the step");
  // The outputs become the next step's parameters and state, unless the
  // loss scaler or --on-nan skip skips the step on every rank.
  nonFiniteLast = skippedLast = false;
  if (scaling || options.skipNonFinite) {
    llvm::Expected<bool> overflow = gradientsOverflowed(loss);
    if (!overflow)
      return overflow.takeError();
    // The loss scaler's overflows are its own business (skip, back off).
    nonFiniteLast = *overflow && !scaling;
    if (scaling)
      updateScale(*overflow);
    else if (*overflow)
      ++skipped;
    if (*overflow) {
      skippedLast = true;
      stepsRun = index + 1;
      return loss;
    }
  }
  for (auto [out, arg] : llvm::enumerate(feedsBack))
    if (arg >= 0)
      std::swap(buffers[out], buffers[arg]);
  stepsRun = index + 1;
  return loss;
}

void Trainer::poisonStep() {
  double nan = std::numeric_limits<double>::quiet_NaN();
  auto poison = [&](const BufferSpec &b, void *p) {
    if (b.dtype == CLEAVE_F64)
      *static_cast<double *>(p) = nan;
    else if (b.dtype == CLEAVE_F32)
      *static_cast<float *>(p) = float(nan);
  };
  poison(spec.buffers[lossIndex], buffer(lossIndex));
  for (auto [out, arg] : llvm::enumerate(feedsBack))
    if (arg >= 0 && spec.buffers[arg].role == BufferSpec::Role::Param &&
        spec.buffers[out].numElements() > 0) {
      poison(spec.buffers[out], buffer(out));
      break;
    }
}

void Trainer::skipStep() {
  ++stepsRun;
  ++skipped;
  skippedLast = nonFiniteLast = false;
}

llvm::Expected<bool> Trainer::gradientsOverflowed(double loss) const {
  // The norm is complete on the ranks that hold it (every rank of an SPMD
  // program; in a pipeline, the stage that sums the last partial): one
  // scalar reduction over the world makes every rank take the same
  // decision.
  double norm = normIndex >= 0
                    ? readLoss(spec.buffers[normIndex], buffer(normIndex))
                    : 0.0;
  double mine[1] = {!std::isfinite(loss) || !std::isfinite(norm) ? 1.0 : 0.0};
  double any[1] = {mine[0]};
  if (options.mesh && options.mesh->numDevices() > 1) {
    cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F64, CLEAVE_MAX, mine, any,
                         1);
    if (cleave_rt_failed())
      return makeError("rank " + llvm::Twine(options.rank) +
                       ": the check for a non-finite loss failed: " +
                       cleave_rt_error_message());
  }
  return any[0] != 0.0;
}

bool Trainer::scalesLoss() const {
  auto scales = [](const FunctionSpec &f) {
    return f.find(BufferSpec::Role::Input, "loss_scale") >= 0;
  };
  // In a pipeline every stage's rank takes part in the overflow check.
  return scales(spec) || llvm::any_of(options.stages, scales);
}

void Trainer::updateScale(bool overflow) {
  // torch.cuda.amp.GradScaler.update.
  const LossScalingOptions &o = options.lossScaling;
  skippedLast = overflow;
  if (overflow) {
    ++skipped;
    scale *= o.backoffFactor;
    goodSteps = 0;
    return;
  }
  if (++goodSteps >= o.growthInterval) {
    scale *= o.growthFactor;
    goodSteps = 0;
  }
}

llvm::Expected<double> Trainer::evaluate(const FunctionSpec &evalSpec,
                                         EntryFn evalEntry, BatchSource &source,
                                         int64_t batches) {
  if (evalBuffers.empty())
    for (const BufferSpec &b : evalSpec.buffers) {
      void *p = nullptr;
      if (b.role != BufferSpec::Role::Param) {
        p = cleave_rt_alloc(std::max<int64_t>(b.numBytes(), 1));
        if (!p)
          return makeError("cannot allocate the evaluation buffer '" + b.name +
                           "'");
        std::memset(p, 0, std::max<int64_t>(b.numBytes(), 1));
      }
      evalBuffers.push_back(p);
    }
  // The parameters are the training step's current buffers (outputs are
  // swapped in after every step), laid out alike.
  std::vector<void *> args(evalBuffers);
  int64_t lossAt = -1;
  for (auto [i, b] : llvm::enumerate(evalSpec.buffers)) {
    if (b.role == BufferSpec::Role::Output && lossAt < 0)
      lossAt = i;
    if (b.role != BufferSpec::Role::Param)
      continue;
    int64_t mine = spec.find(BufferSpec::Role::Param, b.name);
    if (mine < 0)
      return makeError("@" + evalSpec.name + " reads parameter '" + b.name +
                       "', which the training step does not have");
    const BufferSpec &t = spec.buffers[mine];
    if (t.shape != b.shape || t.dtype != b.dtype || t.layout != b.layout)
      return makeError("@" + evalSpec.name + "'s parameter '" + b.name +
                       "' is " + shapeString(b.shape) +
                       " on this rank, laid "
                       "out unlike the training step's (" +
                       shapeString(t.shape) + ")");
    args[i] = buffers[mine];
  }
  if (lossAt < 0 || evalSpec.buffers[lossAt].numElements() != 1 ||
      (evalSpec.buffers[lossAt].dtype != CLEAVE_F32 &&
       evalSpec.buffers[lossAt].dtype != CLEAVE_F64))
    return makeError("@" + evalSpec.name +
                     "'s first result must be the "
                     "loss, an f32 or f64 scalar");
  double sum = 0;
  for (int64_t k = 0; k < batches; ++k) {
    for (auto [i, b] : llvm::enumerate(evalSpec.buffers)) {
      if (b.role != BufferSpec::Role::Input)
        continue;
      if (b.name == "seed") // no dropout in evaluation: any seed
        *static_cast<uint64_t *>(args[i]) = mixSeed(options.seed, k);
      else if (llvm::Error err = fillInput(b, args[i], k, source))
        return std::move(err);
    }
    evalEntry(args.data());
    if (cleave_rt_failed())
      return makeError(llvm::Twine("evaluating validation batch ") +
                       llvm::Twine(k + 1) +
                       " failed: " + cleave_rt_error_message());
    double loss = readLoss(evalSpec.buffers[lossAt], args[lossAt]);
    if (!std::isfinite(loss))
      return makeError(llvm::Twine("the validation loss of batch ") +
                       llvm::Twine(k + 1) + " is " +
                       (std::isnan(loss) ? "NaN" : "infinite") +
                       " after step " + llvm::Twine(stepCounter()));
    sum += loss;
  }
  return batches > 0 ? sum / batches : 0.0;
}

const void *Trainer::parameter(llvm::StringRef name) const {
  int64_t i = spec.find(BufferSpec::Role::Param, name);
  return i < 0 ? nullptr : buffers[i];
}

int64_t Trainer::numParameterElements() const {
  int64_t n = 0;
  for (const BufferSpec &b : spec.buffers)
    if (b.role == BufferSpec::Role::Param)
      n += b.numElements();
  return n;
}
