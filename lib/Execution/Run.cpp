//===- Run.cpp - Train a compiled program on local or launched ranks ------===//

#include "cleave/Execution/Run.h"
#include "cleave/Execution/Checkpoint.h"
#include "cleave/Runtime/Runtime.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Process.h"
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <limits>
#include <set>

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

std::vector<std::string>
mlir::cleave::stepEntryNames(const ProgramManifest &manifest) {
  std::vector<std::string> names;
  for (llvm::StringRef step :
       {llvm::StringRef("train_step"), llvm::StringRef(kEvalStepName)})
    for (const FunctionSpec *f : manifest.stepFunctions(step))
      names.push_back(f->name);
  if (names.empty()) // the caller names the missing step
    names.push_back("train_step");
  return names;
}

/// Fills input `b` of batch `step` from `source` in its global form, into
/// scratch memory: checks that the source can provide it.
static Error fillGlobal(BatchSource &source, const BufferSpec &b,
                        const std::optional<MeshSpec> &mesh, int64_t step) {
  BufferSpec global = b;
  if (mesh)
    global.shape = globalShape(b, *mesh);
  global.layout.clear();
  std::vector<char> scratch(std::max<int64_t>(global.numBytes(), 8));
  return source.fill(global, step, scratch.data());
}

Expected<TrainJob> mlir::cleave::loadAotJob(llvm::StringRef path) {
  // RTLD_LOCAL: a second step loaded later (a restart on fewer ranks)
  // must call its own functions, not this one's of the same names.
  void *handle = dlopen(path.str().c_str(), RTLD_NOW | RTLD_LOCAL);
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
  for (const std::string &name : stepEntryNames(job.manifest)) {
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
          b.name == "step" || b.name == "seed" || b.name == "update" ||
          b.name == "loss_scale")
        continue;
      if (Error err = fillGlobal(*job.source, b, mesh, 0))
        return err;
    }
  return Error::success();
}

Error mlir::cleave::checkValidation(const TrainJob &job, int64_t batches,
                                    const Twine &what) {
  std::vector<const FunctionSpec *> evals =
      job.manifest.stepFunctions(kEvalStepName);
  if (evals.empty())
    return runError(what + ": the program has no @" + kEvalStepName);
  const std::optional<MeshSpec> &mesh = job.manifest.mesh;
  for (const FunctionSpec *eval : evals)
    for (const BufferSpec &b : eval->buffers) {
      if (b.role != BufferSpec::Role::Input || b.name == "seed")
        continue;
      for (int64_t k = 0; k < batches; ++k)
        if (Error err = fillGlobal(*job.valSource, b, mesh, k))
          return runError(what + ": " + toString(std::move(err)));
    }
  return Error::success();
}

/// --save-step-times: rank 0's wall time of every step, as tensor
/// "step_seconds" [steps] (f64).
static Error saveStepTimes(const StepTimes &times, const std::string &path) {
  cleave_tensor_writer *w = cleave_tensor_writer_create(path.c_str());
  if (!w)
    return runError(cleave_rt_error_message());
  int64_t n = times.seconds.size();
  if (cleave_tensor_writer_add(w, "step_seconds", CLEAVE_F64, 1, &n,
                               times.seconds.data())) {
    cleave_tensor_writer_abort(w);
    return runError(cleave_rt_error_message());
  }
  if (cleave_tensor_writer_finish(w) != 0)
    return runError(cleave_rt_error_message());
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

/// The validation losses of a run and the steps after which they were
/// computed.
struct ValidationLosses {
  std::vector<double> losses;
  std::vector<int64_t> steps;
};

/// The loss scaler's record of a run: the scale each step used, and
/// whether it skipped the step (1) or not (0).
struct ScalerRecord {
  std::vector<double> scales, skipped;
};

/// Every rank's `mine` (n values), rank by rank.
static Expected<std::vector<double>> gatherRows(const std::vector<double> &mine,
                                                int world) {
  if (world == 1)
    return mine;
  std::vector<double> all(mine.size() * world);
  cleave_rt_all_gather(CLEAVE_WORLD_GROUP, CLEAVE_F64, mine.data(), all.data(),
                       mine.size());
  if (cleave_rt_failed())
    return runError(cleave_rt_error_message());
  return all;
}

/// Writes the losses (rank 0), with every rank's row for comparison, the
/// validation losses if there are any and the loss scaler's record (the
/// scale, and every rank's skipped steps) if it ran.
static Error saveLosses(const std::vector<double> &losses,
                        const ValidationLosses &val, const ScalerRecord &scaler,
                        int world, int rank, const std::string &path) {
  int64_t n = losses.size();
  Expected<std::vector<double>> all = gatherRows(losses, world);
  if (!all)
    return all.takeError();
  std::vector<double> allSkipped;
  if (!scaler.scales.empty()) {
    Expected<std::vector<double>> gathered = gatherRows(scaler.skipped, world);
    if (!gathered)
      return gathered.takeError();
    allSkipped = std::move(*gathered);
  }
  if (rank != 0)
    return Error::success();
  cleave_tensor_writer *w = cleave_tensor_writer_create(path.c_str());
  int64_t shape[2] = {world, n}, evaluations = val.losses.size();
  if (!w)
    return runError(cleave_rt_error_message());
  if (cleave_tensor_writer_add(w, "loss", CLEAVE_F64, 1, &n, losses.data()) ||
      cleave_tensor_writer_add(w, "loss_by_rank", CLEAVE_F64, 2, shape,
                               all->data()) ||
      (!scaler.scales.empty() &&
       (cleave_tensor_writer_add(w, "loss_scale", CLEAVE_F64, 1, &n,
                                 scaler.scales.data()) ||
        cleave_tensor_writer_add(w, "skipped_by_rank", CLEAVE_F64, 2, shape,
                                 allSkipped.data()))) ||
      (evaluations &&
       (cleave_tensor_writer_add(w, "val_loss", CLEAVE_F64, 1, &evaluations,
                                 val.losses.data()) ||
        cleave_tensor_writer_add(w, "val_step", CLEAVE_I64, 1, &evaluations,
                                 val.steps.data())))) {
    cleave_tensor_writer_abort(w);
    return runError(cleave_rt_error_message());
  }
  if (cleave_tensor_writer_finish(w) != 0)
    return runError(cleave_rt_error_message());
  return Error::success();
}

/// The largest `value` over the world's ranks (`value` alone on one).
static double maxOverRanks(double value) {
  double v[1] = {value};
  if (cleave_rt_world_size() > 1)
    cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F64, CLEAVE_MAX, v, v, 1);
  return v[0];
}

static std::string megabytes(int64_t bytes) {
  return llvm::formatv("{0:f1}", double(bytes) / 1e6).str();
}

/// Fault injection for tests: `variable`=RANK:STEP names a step of rank
/// RANK, on the first attempt only (CLEAVE_RESTART unset or 0); 0 when it
/// names none of this rank. CLEAVE_FAULT_KILL kills the rank (SIGKILL) once
/// its step counter reaches STEP (after its checkpoint write in flight and
/// its commit);
/// CLEAVE_FAULT_NAN makes the loss of step STEP NaN there
/// (TrainerOptions::faultNanStep).
static int64_t faultStep(const char *variable, int rank) {
  const char *fault = std::getenv(variable);
  const char *restart = std::getenv("CLEAVE_RESTART");
  if (!fault || (restart && std::atoi(restart) != 0))
    return 0;
  int faultRank = -1;
  long long step = 0;
  return std::sscanf(fault, "%d:%lld", &faultRank, &step) == 2 &&
                 faultRank == rank && step > 0
             ? step
             : 0;
}

/// The trainer of this rank, with its parameters initialized or loaded.
static Expected<std::unique_ptr<Trainer>>
setUpTrainer(TrainJob &job, const RunOptions &options, int rank) {
  if (Error err = defineCommunicators(job.manifest))
    return std::move(err);
  TrainerOptions trainerOptions;
  trainerOptions.learningRate = options.learningRate;
  trainerOptions.lossScaling = options.lossScaling;
  trainerOptions.seed = options.seed;
  trainerOptions.mesh = job.manifest.mesh;
  trainerOptions.rank = rank;
  trainerOptions.skipNonFinite = options.onNan != "stop";
  trainerOptions.faultNanStep = faultStep("CLEAVE_FAULT_NAN", rank);
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
  // Step folders that were never committed (a run killed mid-write) go
  // before this run writes any.
  if (rank == 0 && !options.checkpointDir.empty())
    removeUncommittedCheckpoints(options.checkpointDir);
  std::optional<std::string> checkpoint;
  // The ranks start loading together: data parallel replicas then read the
  // same blocks at the same time (the page cache reads them from the disk
  // once), and the time below is the reading's, not how much later one
  // rank got here than another (up to 0.45 s measured).
  if (options.resume && cleave_rt_world_size() > 1)
    cleave_rt_barrier(CLEAVE_WORLD_GROUP);
  double loadStart = cleave_rt_now();
  if (options.resume) {
    Expected<std::optional<std::string>> resumed =
        loadNewestCheckpoint(**trainer, options.checkpointDir, rank);
    if (!resumed)
      return resumed.takeError();
    checkpoint = *resumed;
  }
  Error loaded = checkpoint ? Error::success()
                 : options.paramsPath.empty()
                     ? (*trainer)->initParameters()
                     : (*trainer)->loadParameters(options.paramsPath);
  if (loaded)
    return std::move(loaded);
  // Every rank reads its blocks at once: the load took the slowest rank's
  // time.
  double loadSeconds = maxOverRanks(cleave_rt_now() - loadStart);
  if (rank == 0 && options.resume)
    llvm::outs() << (checkpoint
                         ? "resuming from " + *checkpoint + " (after step " +
                               std::to_string((*trainer)->stepCounter()) +
                               "): read " +
                               megabytes(checkpointBytes(*checkpoint)) +
                               " MB in " +
                               llvm::formatv("{0:f3}", loadSeconds).str() + " s"
                         : "no checkpoint in " + options.checkpointDir +
                               ": starting at step 0")
                 << "\n";
  if (checkpoint)
    return trainer;
  if (rank == 0 && (*trainer)->stepCounter() > 0)
    llvm::outs() << "resuming after step " << (*trainer)->stepCounter()
                 << " (the step counter in " << options.paramsPath << ")\n";
  return trainer;
}

/// The runtime's timeout (CLEAVE_TIMEOUT_MS), which also bounds how long a
/// checkpoint commit waits for the other ranks' shards.
static int64_t rtTimeoutMs() {
  const char *v = std::getenv("CLEAVE_TIMEOUT_MS");
  return v && std::atoll(v) > 0 ? std::atoll(v) : 300000;
}

/// Rank 0's line for step `s` (0-based): the loss, then the first step's
/// time or the median of the steps after it; after the first step also
/// tokens/s and, with a prediction, the predicted step and the measured
/// and predicted MFU.
static void logStep(int64_t s, double loss, const StepTimes &times,
                    const RunOptions &options, bool tty) {
  bool log = (s + 1) % std::max<int64_t>(options.logEvery, 1) == 0 || s == 0 ||
             s + 1 == options.steps;
  if (!tty && !log)
    return;
  llvm::raw_ostream &os = llvm::outs();
  os << (tty ? "\r" : "") << "step "
     << llvm::format("%5lld", (long long)(s + 1)) << "/" << options.steps
     << "  loss " << llvm::format("%.4f", loss) << "  ";
  double step = s == 0 ? times.first() : times.steadyMedian();
  const std::optional<StepPrediction> &p = options.prediction;
  if (s == 0 || step <= 0) {
    os << llvm::format("%.1f", 1000.0 * times.first()) << " ms (first step)";
  } else {
    os << llvm::format("%.1f", 1000.0 * step) << " ms/step";
    if (p)
      os << " (predicted " << llvm::format("%.1f", 1000.0 * p->stepSeconds)
         << ")";
    if (options.tokensPerStep > 0)
      os << "  " << llvm::format("%.0f", options.tokensPerStep / step)
         << " tokens/s";
    if (p)
      os << "  MFU "
         << llvm::format("%.2f", 100 * p->mfu * p->stepSeconds / step)
         << "% (predicted " << llvm::format("%.2f", 100 * p->mfu) << "%)";
  }
  if (!tty || log)
    os << "\n";
  else
    os << "\x1b[K"; // clear what a longer line left
  os.flush();
}

/// Evaluates after step `s` (0-based) if the options say so; rank 0
/// prints the mean validation loss. Every rank evaluates (a collective).
static Error maybeEvaluate(Trainer &trainer, TrainJob &job,
                           const RunOptions &options, int64_t s, int rank,
                           ValidationLosses &val) {
  if (!job.valSource)
    return Error::success();
  int64_t step = trainer.stepCounter();
  bool due = s + 1 == options.steps ||
             (options.evalEvery > 0 && step % options.evalEvery == 0);
  if (!due)
    return Error::success();
  std::string name = job.manifest.entryFor(kEvalStepName, rank);
  Expected<double> loss =
      trainer.evaluate(*job.manifest.lookup(name), job.entries.at(name),
                       *job.valSource, options.evalBatches);
  if (!loss)
    return loss.takeError();
  val.losses.push_back(*loss);
  val.steps.push_back(step);
  if (rank == 0) {
    llvm::outs() << "step " << llvm::format("%5lld", (long long)step)
                 << "  val loss " << llvm::format("%.4f", *loss) << " (mean of "
                 << options.evalBatches << " batch"
                 << (options.evalBatches == 1 ? "" : "es") << ")\n";
    llvm::outs().flush();
  }
  return Error::success();
}

/// --on-nan rollback: the steps (1-based) whose batch diverged, passed over
/// after going back, and how often the run went back to each checkpoint.
struct Rollbacks {
  std::set<int64_t> diverged;
  std::map<int64_t, int> toStep;
};

/// Runs the next step, or passes over its batch if it diverged before (the
/// loss is then NaN).
static Expected<double> runOrPassOver(Trainer &trainer, BatchSource &source,
                                      const Rollbacks &rollbacks) {
  if (!rollbacks.diverged.count(trainer.stepCounter() + 1))
    return trainer.runStep(trainer.stepCounter() - trainer.loadedStep(),
                           source);
  trainer.skipStep();
  return std::numeric_limits<double>::quiet_NaN();
}

/// Going back to a checkpoint whose next steps diverge every time gets
/// nowhere: after this many rollbacks to one checkpoint the run stops.
static constexpr int kMaxRollbacksToOneCheckpoint = 3;

/// After a step whose loss was not finite on some rank (every rank sees the
/// same, and skipped the update): --on-nan skip goes on; rollback loads the
/// newest committed checkpoint on every rank and passes over that step's
/// batch from there. Returns whether it went back.
static Expected<bool> onNonFinite(Trainer &trainer,
                                  std::optional<CheckpointWriter> &checkpoints,
                                  const RunOptions &options,
                                  Rollbacks &rollbacks, int rank) {
  int64_t step = trainer.stepCounter();
  if (options.onNan == "skip") {
    if (rank == 0)
      llvm::outs() << "step " << step
                   << ": the loss is NaN or infinite on some rank: its "
                      "update is dropped on every rank ("
                   << trainer.skippedSteps() << " skipped so far)\n";
    return false;
  }
  if (!checkpoints)
    return runError("--on-nan rollback: the loss of step " + Twine(step) +
                    " is NaN or infinite and no checkpoints are written");
  // The write in flight (rank 0: and its commit) ends first, so that every
  // rank sees the same newest checkpoint.
  if (Error err = checkpoints->finish())
    return std::move(err);
  if (cleave_rt_world_size() > 1)
    cleave_rt_barrier(CLEAVE_WORLD_GROUP);
  if (cleave_rt_failed())
    return runError(cleave_rt_error_message());
  double start = cleave_rt_now();
  Expected<std::optional<std::string>> latest =
      loadNewestCheckpoint(trainer, options.checkpointDir, rank);
  if (!latest)
    return latest.takeError();
  if (!*latest)
    return runError("--on-nan rollback: the loss of step " + Twine(step) +
                    " is NaN or infinite and " + options.checkpointDir +
                    " has no committed checkpoint to go back to");
  if (++rollbacks.toStep[trainer.stepCounter()] > kMaxRollbacksToOneCheckpoint)
    return runError("--on-nan rollback: the loss of step " + Twine(step) +
                    " is NaN or infinite after " +
                    Twine(kMaxRollbacksToOneCheckpoint) + " rollbacks to " +
                    **latest + ": stopping");
  rollbacks.diverged.insert(step);
  if (rank == 0)
    llvm::outs() << "step " << step
                 << ": the loss is NaN or infinite on some rank: rolled back "
                    "to "
                 << **latest << " (after step " << trainer.stepCounter()
                 << ", read in "
                 << llvm::format("%.3f", cleave_rt_now() - start)
                 << " s); batch " << step << " will be passed over\n";
  return true;
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
  // Keep the calls of the traced steps.
  if (!options.tracePath.empty() || !options.reportPath.empty())
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
  ValidationLosses val;
  ScalerRecord scaler;
  StepTimes times;
  std::optional<CheckpointWriter> checkpoints;
  if (options.checkpointEvery > 0)
    checkpoints.emplace(options.checkpointDir, rank, world,
                        options.keepCheckpoints, options.planText,
                        rtTimeoutMs());
  // A resumed run continues until the step counter reaches --steps.
  // (--params with a step counter runs --steps more steps.) `s` numbers
  // the steps of this run, from `first`, in the log.
  int64_t loaded = (*trainer)->stepCounter();
  int64_t first = options.resume ? loaded : 0;
  std::vector<std::pair<double, double>> spans;
  Rollbacks rollbacks;
  while ((*trainer)->stepCounter() - loaded + first < options.steps) {
    int64_t s = (*trainer)->stepCounter() - loaded + first;
    double start = cleave_rt_now();
    double scale = (*trainer)->lossScale();
    Expected<double> loss = runOrPassOver(**trainer, *job.source, rollbacks);
    if (!loss)
      return fail("rank " + Twine(rank) + ": " + toString(loss.takeError()));
    if (faultStep("CLEAVE_FAULT_KILL", rank) == (*trainer)->stepCounter()) {
      // Its checkpoint write in flight ends first, and rank 0 commits it
      // (which may take longer than this rank's steps on a loaded host),
      // so that a test knows which checkpoint the restart resumes from.
      if (checkpoints)
        llvm::consumeError(checkpoints->waitForCommit());
      std::raise(SIGKILL);
    }
    if ((*trainer)->lastStepNonFinite()) {
      Expected<bool> rolledBack =
          onNonFinite(**trainer, checkpoints, options, rollbacks, rank);
      if (!rolledBack)
        return fail("rank " + Twine(rank) + ": " +
                    toString(rolledBack.takeError()));
      if (*rolledBack) {
        // The records of the steps undone go; those steps run again.
        size_t kept = std::max<int64_t>((*trainer)->stepCounter() - loaded, 0);
        losses.resize(std::min(losses.size(), kept));
        scaler.scales.resize(std::min(scaler.scales.size(), kept));
        scaler.skipped.resize(std::min(scaler.skipped.size(), kept));
        continue;
      }
    }
    if (checkpoints && (*trainer)->stepCounter() % options.checkpointEvery == 0)
      if (Error err = checkpoints->save(**trainer))
        return fail(toString(std::move(err)));
    spans.push_back({start, cleave_rt_now()});
    times.seconds.push_back(spans.back().second - start);
    losses.push_back(*loss);
    if (rank == 0)
      logStep(s, *loss, times, options, tty);
    if ((*trainer)->scalesLoss()) {
      bool skippedStep = (*trainer)->lastStepSkipped();
      scaler.scales.push_back(scale);
      scaler.skipped.push_back(skippedStep);
      if (rank == 0 && skippedStep)
        llvm::outs() << "step " << (*trainer)->stepCounter()
                     << ": a gradient overflowed (inf or NaN) at loss scale "
                     << llvm::format("%g", scale)
                     << ": skipped on every rank; scale now "
                     << llvm::format("%g", (*trainer)->lossScale()) << "\n";
    }
    if (Error err = maybeEvaluate(**trainer, job, options, s, rank, val))
      return fail("rank " + Twine(rank) + ": " + toString(std::move(err)));
  }
  if (checkpoints) {
    if (Error err = checkpoints->finish())
      return fail(toString(std::move(err)));
    // The ranks write at once: all their bytes in the slowest one's time.
    double bytes[1] = {double(checkpoints->bytesWritten())};
    if (world > 1)
      cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F64, CLEAVE_SUM, bytes,
                           bytes, 1);
    double seconds = maxOverRanks(checkpoints->writeSeconds());
    if (rank == 0)
      llvm::outs() << "checkpoints: " << checkpoints->checkpointsWritten()
                   << " written, " << megabytes(int64_t(bytes[0]))
                   << " MB by all ranks in " << llvm::formatv("{0:f3}", seconds)
                   << " s of background writing; "
                   << llvm::format("%.1f",
                                   1000.0 * checkpoints->snapshotSeconds())
                   << " ms of snapshots on the training thread; newest "
                   << latestCheckpoint(options.checkpointDir).value_or("none")
                   << "\n";
  }
  if (rank == 0 && times.seconds.size() > 1)
    llvm::outs() << "step time: first step "
                 << llvm::format("%.1f", 1000.0 * times.first())
                 << " ms (warm-up), then median "
                 << llvm::format("%.1f", 1000.0 * times.steadyMedian())
                 << " ms/step over " << times.seconds.size() - 1 << " steps\n";
  if (!times.seconds.empty()) {
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
    if (Error err =
            saveLosses(losses, val, scaler, world, rank, options.lossesPath))
      return fail(toString(std::move(err)));
  if (!options.stepTimesPath.empty() && rank == 0)
    if (Error err = saveStepTimes(times, options.stepTimesPath))
      return fail(toString(std::move(err)));
  if (!options.tracePath.empty())
    if (Error err = writeMeasuredTrace(options.tracePath, rank, world, spans))
      return fail(toString(std::move(err)));
  if (!options.reportPath.empty()) {
    RunRecord record{losses, times.seconds, first, val.losses, val.steps};
    if (Error err = writeRunReport(options.reportPath, rank, world, spans,
                                   record, options, job.manifest))
      return fail(toString(std::move(err)));
  }
  // The snapshot's pinned host memory and the buffers go before the
  // backend does.
  checkpoints.reset();
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
  int restartRanks =
      options.restartRanks > 0 ? options.restartRanks : options.localRanks;
  if (options.maxRestarts > 0 && restartRanks != options.localRanks &&
      !options.jobForWorld) {
    llvm::errs() << options.programName << ": error: --restart-ranks "
                 << restartRanks << ": the step is compiled for "
                 << options.localRanks
                 << " ranks and cannot be compiled again here (an AOT "
                    "build or a bundle); restart on "
                 << options.localRanks << " ranks\n";
    return 1;
  }
  RunOptions attempt = options;
  // The step compiled for the restarts' world, when it is another.
  std::optional<TrainJob> restartJob;
  TrainJob *current = &job;
  for (int restart = 0;; ++restart) {
    // The ranks see which attempt they are (CLEAVE_RESTART, as torchrun's
    // TORCHELASTIC_RESTART_COUNT).
    ::setenv("CLEAVE_RESTART", std::to_string(restart).c_str(), 1);
    ForkedRank rank{current, &attempt};
    cleave_launch_options_t o{};
    o.nprocs = attempt.localRanks;
    o.prefix_output = 1;
    o.body = runForkedRank;
    o.body_arg = &rank;
    int rc = cleave_launch(&o);
    if (rc != 0 && cleave_rt_failed())
      llvm::errs() << options.programName
                   << ": error: " << cleave_rt_error_message() << "\n";
    if (rc == 0 || restart == options.maxRestarts ||
        options.checkpointDir.empty())
      return rc;
    std::optional<std::string> from = latestCheckpoint(options.checkpointDir);
    llvm::errs() << options.programName << ": the ranks failed (status " << rc
                 << "); restart " << restart + 1 << " of "
                 << options.maxRestarts << " from "
                 << from.value_or("step 0 (no checkpoint yet)") << " on "
                 << restartRanks << " ranks\n";
    llvm::errs().flush();
    if (restartRanks != attempt.localRanks) {
      // Fewer ranks: the step is compiled for them (its plan re-chosen);
      // loading the checkpoint reshards it.
      llvm::outs().flush();
      Expected<TrainJob> smaller =
          options.jobForWorld(restartRanks, attempt.planText);
      if (!smaller) {
        llvm::errs() << options.programName << ": error: restarting on "
                     << restartRanks
                     << " ranks: " << toString(smaller.takeError()) << "\n";
        return rc;
      }
      restartJob.emplace(std::move(*smaller));
      current = &*restartJob;
      attempt.localRanks = restartRanks;
      // The prediction was for the plan of the first world.
      attempt.prediction.reset();
    }
    attempt.resume = true;
  }
}
