//===- Run.cpp - Train a compiled program on local or launched ranks ------===//

#include "cleave/Execution/Run.h"
#include "cleave/Runtime/Runtime.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Process.h"
#include <algorithm>
#include <dlfcn.h>

using namespace mlir;
using namespace mlir::cleave;
using llvm::Error;
using llvm::Expected;
using llvm::Twine;

static Error runError(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

Expected<std::unique_ptr<TrainingData>>
TrainingData::open(const DataOptions &options) {
  std::unique_ptr<TrainingData> data(new TrainingData());
  if (!options.inputsPath.empty()) {
    auto s = makeTensorFileSource(options.inputsPath);
    if (!s)
      return s.takeError();
    data->batches = std::move(*s);
  } else if (!options.tokensPath.empty()) {
    if (options.tokenBytes != 2 && options.tokenBytes != 4)
      return runError("--token-bytes must be 2 or 4");
    data->tokens =
        cleave_token_file_open(options.tokensPath.c_str(), options.tokenBytes);
  } else {
    // Each byte of the text is a token over the text's own alphabet.
    bool present[256] = {};
    for (unsigned char c : options.text)
      present[c] = true;
    uint16_t id[256] = {};
    data->vocab = 0;
    for (int c = 0; c < 256; ++c)
      if (present[c])
        id[c] = data->vocab++;
    std::vector<uint16_t> ids;
    ids.reserve(options.text.size());
    for (unsigned char c : options.text)
      ids.push_back(id[c]);
    data->tokens = cleave_token_file_from_memory(ids.data(), ids.size(), 2);
  }
  if (options.inputsPath.empty() && !data->tokens)
    return runError(cleave_rt_error_message());
  return std::move(data);
}

TrainingData::~TrainingData() {
  batches.reset();
  cleave_token_file_close(tokens);
}

BatchSource &TrainingData::source(uint64_t seed, int64_t modelVocab) {
  if (tokens)
    batches = makeTokenSource(tokens, seed, modelVocab);
  return *batches;
}

//===----------------------------------------------------------------------===//
// Jobs
//===----------------------------------------------------------------------===//

/// Names of the functions some rank runs as the training step.
static std::vector<std::string> stepNames(const ProgramManifest &manifest) {
  if (manifest.pipeline)
    return manifest.pipeline->stages;
  return {"train_step"};
}

Expected<TrainJob> mlir::cleave::loadAotJob(llvm::StringRef path) {
  void *handle = dlopen(path.str().c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle)
    return runError(dlerror());
  auto manifestFn = reinterpret_cast<const char *(*)()>(
      dlsym(handle, "cleave_manifest_json"));
  if (!manifestFn)
    return runError(path + " is not a cleave AOT build (no "
                           "cleave_manifest_json)");
  Expected<ProgramManifest> manifest = ProgramManifest::fromJSON(manifestFn());
  if (!manifest)
    return manifest.takeError();
  TrainJob job;
  job.manifest = std::move(*manifest);
  for (const std::string &name : stepNames(job.manifest)) {
    std::string symbol = "cleave_entry_" + name;
    auto entry = reinterpret_cast<EntryFn>(dlsym(handle, symbol.c_str()));
    if (!entry)
      return runError(path +
                      " is not a cleave AOT build of a training step "
                      "(no " +
                      symbol + ")");
    job.entries[name] = entry;
  }
  return std::move(job);
}

Error mlir::cleave::checkJob(const TrainJob &job) {
  std::vector<const FunctionSpec *> stepFunctions =
      job.manifest.stepFunctions("train_step");
  if (stepFunctions.empty())
    return runError("the program has no @train_step");
  const std::optional<MeshSpec> &mesh = job.manifest.mesh;
  for (const FunctionSpec *f : stepFunctions)
    for (const BufferSpec &b : f->buffers) {
      if (b.role != BufferSpec::Role::Input || b.name == "lr" ||
          b.name == "step" || b.name == "seed")
        continue;
      BufferSpec global = b;
      if (mesh)
        global.shape = globalShape(b, *mesh);
      global.layout.clear();
      std::vector<char> scratch(std::max<int64_t>(global.numBytes(), 8));
      if (Error err = job.source->fill(global, 0, scratch.data()))
        return err;
    }
  return Error::success();
}

/// Ends the line that says how the step was compiled: the ranks and mesh.
static void endCompileLine(llvm::raw_ostream &log, const TrainJob &job,
                           int world) {
  if (job.manifest.mesh)
    log << " for " << world << " ranks on mesh ("
        << job.manifest.mesh->toString() << ")";
  log << "\n";
  log.flush();
}

/// The compiled step of `module` from `cache`, compiled into it first if it
/// is not there.
static Error compileCachedJob(ModuleOp module, const CompileOptions &options,
                              int world, TrainJob &job, llvm::raw_ostream &log,
                              const CompileCache &cache) {
  double start = cleave_rt_now();
  std::string key = CompileCache::key(module, options);
  std::optional<std::string> path = cache.lookup(key);
  bool hit = path.has_value();
  if (!hit) {
    Expected<std::string> inserted = cache.insert(key, module, options);
    if (!inserted)
      return inserted.takeError();
    path = *inserted;
  }
  Expected<TrainJob> loaded = loadAotJob(*path);
  if (!loaded)
    return runError("compile cache entry " + *path + ": " +
                    toString(loaded.takeError()) +
                    " (remove it, or set CLEAVE_COMPILE_CACHE=0)");
  job.manifest = std::move(loaded->manifest);
  job.entries = std::move(loaded->entries);
  double total = cleave_rt_now() - start;
  if (hit)
    log << "loaded the compiled step from the compile cache in "
        << llvm::format("%.2f", total) << " s";
  else
    log << "compiled in " << llvm::format("%.2f", total)
        << " s (into the compile cache)";
  log << " (" << key.substr(0, 12) << ")";
  endCompileLine(log, job, world);
  return Error::success();
}

Error mlir::cleave::compileJob(ModuleOp module, const CompileOptions &options,
                               int world, TrainJob &job, llvm::raw_ostream &log,
                               const CompileCache *cache) {
  if (cache && cache->getOptions().enabled)
    return compileCachedJob(module, options, world, job, log, *cache);
  double start = cleave_rt_now();
  auto compiled = JitProgram::compile(module, options);
  if (!compiled)
    return compiled.takeError();
  job.jit = std::move(*compiled);
  job.manifest = job.jit->getManifest();
  for (const std::string &name : stepNames(job.manifest)) {
    auto e = job.jit->lookup(name);
    if (!e)
      return e.takeError();
    job.entries[name] = *e;
  }
  // The JIT emits machine code on the first lookup.
  double total = cleave_rt_now() - start;
  const JitProgram::Stats &stats = job.jit->getStats();
  log << "compiled in " << llvm::format("%.2f", total) << " s (lowering "
      << llvm::format("%.2f", stats.loweringSeconds) << " s, LLVM IR "
      << llvm::format("%.2f", stats.codegenSeconds) << " s, machine code "
      << llvm::format("%.2f",
                      total - stats.loweringSeconds - stats.codegenSeconds)
      << " s)";
  endCompileLine(log, job, world);
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Ranks
//===----------------------------------------------------------------------===//

double StepTimes::steadyMedian() const {
  if (seconds.size() < 2)
    return 0;
  std::vector<double> rest(seconds.begin() + 1, seconds.end());
  size_t mid = rest.size() / 2;
  std::nth_element(rest.begin(), rest.begin() + mid, rest.end());
  double upper = rest[mid];
  if (rest.size() % 2)
    return upper;
  double lower = *std::max_element(rest.begin(), rest.begin() + mid);
  return (lower + upper) / 2;
}

/// Writes the losses (rank 0), with every rank's row for comparison.
static Error saveLosses(const std::vector<double> &losses, int world, int rank,
                        const std::string &path) {
  int64_t n = losses.size();
  std::vector<double> all(n * world);
  if (world > 1) {
    cleave_rt_all_gather(CLEAVE_WORLD_GROUP, CLEAVE_F64, losses.data(),
                         all.data(), n);
    if (cleave_rt_failed())
      return runError(cleave_rt_error_message());
  } else {
    all = losses;
  }
  if (rank != 0)
    return Error::success();
  cleave_tensor_writer *w = cleave_tensor_writer_create(path.c_str());
  int64_t shape[2] = {world, n};
  if (!w ||
      cleave_tensor_writer_add(w, "loss", CLEAVE_F64, 1, &n, losses.data()) ||
      cleave_tensor_writer_add(w, "loss_by_rank", CLEAVE_F64, 2, shape,
                               all.data()) ||
      cleave_tensor_writer_finish(w) != 0)
    return runError(cleave_rt_error_message());
  return Error::success();
}

/// The trainer of this rank, with its parameters initialized or loaded.
static Expected<std::unique_ptr<Trainer>>
setUpTrainer(TrainJob &job, const RunOptions &options, int rank) {
  if (Error err = defineCommunicators(job.manifest))
    return std::move(err);
  TrainerOptions trainerOptions;
  trainerOptions.learningRate = options.learningRate;
  trainerOptions.seed = options.seed;
  trainerOptions.mesh = job.manifest.mesh;
  trainerOptions.rank = rank;
  if (job.manifest.pipeline) {
    for (const FunctionSpec *f : job.manifest.stepFunctions("train_step"))
      trainerOptions.stages.push_back(*f);
    trainerOptions.pipelineAxis = job.manifest.pipeline->axis;
  }
  std::string name = job.manifest.entryFor("train_step", rank);
  auto trainer = Trainer::create(*job.manifest.lookup(name),
                                 job.entries.at(name), trainerOptions);
  if (!trainer)
    return trainer.takeError();
  Error loaded = options.paramsPath.empty()
                     ? (*trainer)->initParameters()
                     : (*trainer)->loadParameters(options.paramsPath);
  if (loaded)
    return std::move(loaded);
  if (rank == 0 && (*trainer)->stepCounter() > 0)
    llvm::outs() << "resuming after step " << (*trainer)->stepCounter()
                 << " (the step counter in " << options.paramsPath << ")\n";
  return trainer;
}

/// Rank 0's line for step `s` (0-based): the loss, then the first step's
/// time or the median of the steps after it.
static void logStep(int64_t s, double loss, const StepTimes &times,
                    const RunOptions &options, bool tty) {
  bool log = (s + 1) % std::max<int64_t>(options.logEvery, 1) == 0 || s == 0 ||
             s + 1 == options.steps;
  if (!tty && !log)
    return;
  llvm::outs() << (tty ? "\r" : "") << "step "
               << llvm::format("%5lld", (long long)(s + 1)) << "/"
               << options.steps << "  loss " << llvm::format("%.4f", loss)
               << "  ";
  if (s == 0)
    llvm::outs() << llvm::format("%.1f", 1000.0 * times.first())
                 << " ms (first step)";
  else
    llvm::outs() << llvm::format("%.1f", 1000.0 * times.steadyMedian())
                 << " ms/step";
  if (!tty || log)
    llvm::outs() << "\n";
  llvm::outs().flush();
}

/// One rank: connect, set up the trainer, train, save. Errors are printed
/// here (forked ranks have no one else to tell).
static int runRank(TrainJob &job, const RunOptions &options) {
  auto fail = [&](const Twine &message) {
    llvm::outs().flush();
    llvm::errs() << options.programName << ": error: " << message << "\n";
    return 1;
  };
  cleave_rt_options_t rtOptions;
  cleave_rt_default_options(&rtOptions);
  rtOptions.backend = options.backend == "cuda" ? "cuda" : "cpu";
  if (!options.tracePath.empty()) // keep the calls of the traced steps
    ::setenv("CLEAVE_FLIGHT_RECORDER_SIZE", "65536", /*overwrite=*/0);
  if (cleave_rt_init(&rtOptions) != 0)
    return fail(cleave_rt_error_message());
  int rank = cleave_rt_rank(), world = cleave_rt_world_size();
  // The training program's memory (parameters, gradients, optimizer state,
  // activations, temporaries) is counted by the runtime's allocator, from a
  // peak reset here.
  cleave_rt_reset_peak_memory();
  auto trainer = setUpTrainer(job, options, rank);
  if (!trainer)
    return fail(toString(trainer.takeError()));

  bool tty = rank == 0 && llvm::sys::Process::StandardOutIsDisplayed();
  std::vector<double> losses;
  StepTimes times;
  std::vector<std::pair<double, double>> spans;
  for (int64_t s = 0; s < options.steps; ++s) {
    double start = cleave_rt_now();
    Expected<double> loss = (*trainer)->runStep(s, *job.source);
    if (!loss)
      return fail("rank " + Twine(rank) + ": " + toString(loss.takeError()));
    spans.push_back({start, cleave_rt_now()});
    times.seconds.push_back(spans.back().second - start);
    losses.push_back(*loss);
    if (rank == 0)
      logStep(s, *loss, times, options, tty);
  }
  if (rank == 0 && options.steps > 1)
    llvm::outs() << "step time: first step "
                 << llvm::format("%.1f", 1000.0 * times.first())
                 << " ms (warm-up), then median "
                 << llvm::format("%.1f", 1000.0 * times.steadyMedian())
                 << " ms/step over " << options.steps - 1 << " steps\n";
  if (options.steps > 0) {
    int64_t peak = 0;
    cleave_rt_memory_stats(nullptr, &peak);
    double mine[1] = {double(peak)}, worst[1] = {double(peak)};
    if (world > 1)
      cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F64, CLEAVE_MAX, mine,
                           worst, 1);
    if (rank == 0 && !cleave_rt_failed())
      llvm::outs() << "peak memory: "
                   << llvm::format("%.1f", worst[0] / (1 << 20))
                   << " MiB per rank for training (largest over ranks; the "
                      "most bytes of parameters, gradients, optimizer state, "
                      "activations and temporaries live at once)\n";
  }
  if (!options.savePath.empty()) {
    if (Error err =
            (*trainer)->saveParameters(options.savePath, options.saveState))
      return fail(toString(std::move(err)));
    if (rank == 0)
      llvm::outs() << "saved parameters to " << options.savePath << "\n";
  }
  if (!options.lossesPath.empty())
    if (Error err = saveLosses(losses, world, rank, options.lossesPath))
      return fail(toString(std::move(err)));
  if (!options.tracePath.empty())
    if (Error err = writeMeasuredTrace(options.tracePath, rank, world, spans))
      return fail(toString(std::move(err)));
  trainer->reset();
  cleave_rt_finalize();
  llvm::outs().flush();
  return 0;
}

namespace {
struct ForkedRank {
  TrainJob *job;
  const RunOptions *options;
};
} // namespace

static int runForkedRank(void *arg) {
  auto *rank = static_cast<ForkedRank *>(arg);
  return runRank(*rank->job, *rank->options);
}

int mlir::cleave::runTrainJob(TrainJob &job, const RunOptions &options) {
  if (options.localRanks <= 1)
    return runRank(job, options);
  ForkedRank rank{&job, &options};
  cleave_launch_options_t o{};
  o.nprocs = options.localRanks;
  o.prefix_output = 1;
  o.body = runForkedRank;
  o.body_arg = &rank;
  int rc = cleave_launch(&o);
  if (rc != 0 && cleave_rt_failed())
    llvm::errs() << options.programName
                 << ": error: " << cleave_rt_error_message() << "\n";
  return rc;
}
