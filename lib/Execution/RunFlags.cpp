//===- RunFlags.cpp - The command-line options of a training run ----------===//

#include "cleave/Execution/RunFlags.h"
#include "cleave/Execution/Checkpoint.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

using namespace llvm;
using namespace mlir::cleave;

std::string mlir::cleave::showNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

Error mlir::cleave::badValue(const Twine &name, const Twine &value,
                             const Twine &expected) {
  return createStringError(inconvertibleErrorCode(), "--" + name + " " + value +
                                                         ": expected " +
                                                         expected);
}

static Error flagError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

RunFlags::RunFlags(cl::OptionCategory &train, cl::OptionCategory &io,
                   cl::OptionCategory &parallel)
    : steps("steps", cl::init(100), cl::cat(train), cl::desc("Training steps")),
      lr("lr", cl::init(1e-3), cl::cat(train), cl::desc("Learning rate")),
      lossScaleInit("loss-scale-init", cl::init(65536.0), cl::cat(train),
                    cl::desc("The first loss scale")),
      lossScaleInterval(
          "loss-scale-growth-interval", cl::init(2000), cl::cat(train),
          cl::desc("Good steps in a row after which the scale grows")),
      lossScaleGrowth("loss-scale-growth", cl::init(2.0), cl::cat(train),
                      cl::desc("Growth factor of the loss scale")),
      lossScaleBackoff("loss-scale-backoff", cl::init(0.5), cl::cat(train),
                       cl::desc("Factor of the loss scale after an overflow")),
      seed("seed", cl::init(1234), cl::cat(train),
           cl::desc("Seed of initialization, data order, dropout")),
      logEvery("log-every", cl::init(10), cl::cat(train),
               cl::desc("Print the loss every N steps")),
      onNan("on-nan", cl::init("stop"), cl::cat(train),
            cl::desc("A step whose loss is NaN or infinite on some rank: "
                     "stop (fail, naming the step); skip (drop that step's "
                     "update on every rank and go on); rollback (load the "
                     "newest committed --checkpoint on every rank and go on "
                     "from there, passing over the batch that diverged)")),
      dataPath("data", cl::cat(io),
               cl::desc("nanoGPT-style token file (.bin)")),
      tokenBytes("token-bytes", cl::init(2), cl::cat(io),
                 cl::desc("2 (uint16) or 4 (uint32) per token")),
      valDataPath(
          "val-data", cl::cat(io),
          cl::desc("Validation data, like the training data: a token file "
                   "with --data, a per-batch tensors file with --inputs; the "
                   "mean loss of --eval-steps batches is printed and saved "
                   "with --save-losses (val_loss, val_step)")),
      evalEvery("eval-every", cl::init(0), cl::cat(io),
                cl::desc("With --val-data: evaluate after every N-th step "
                         "(and after the last); 0: only after the last "
                         "step")),
      evalSteps("eval-steps", cl::init(1), cl::cat(io),
                cl::desc("With --val-data: batches per evaluation (the same "
                         "ones each time)")),
      inputsPath("inputs", cl::cat(io),
                 cl::desc("Per-step input tensors file")),
      paramsPath("params", cl::cat(io),
                 cl::desc("Load parameters from this file")),
      savePath("save-params", cl::cat(io),
               cl::desc("Write the final parameters here")),
      saveState("save-state", cl::cat(io),
                cl::desc("Also write the optimizer state")),
      lossesPath(
          "save-losses", cl::cat(io),
          cl::desc("Write the per-step losses as tensor 'loss' [steps] (f64)")),
      stepTimesPath(
          "save-step-times", cl::cat(io),
          cl::desc("Write the wall time of every step (rank 0's) as tensor "
                   "'step_seconds' [steps] (f64)")),
      tracePath("trace", cl::cat(io),
                cl::desc("Write the measured timeline (steps, communication "
                         "calls) as Chrome trace JSON, the simulator's format "
                         "(Perfetto)")),
      reportPath(
          "report", cl::cat(io),
          cl::desc("Write the run as one self-contained web page: the loss "
                   "curve, the step-time distribution and the measured "
                   "timeline of every rank (compute, each collective, "
                   "waits), from the data of --trace")),
      checkpointDir(
          "checkpoint", cl::cat(io),
          cl::desc("Directory of sharded checkpoints: every rank writes its "
                   "own blocks of the parameters and optimizer state, in the "
                   "background; a step is committed once rank 0 renames its "
                   "manifest into place")),
      checkpointEvery("checkpoint-every", cl::init(0), cl::cat(io),
                      cl::desc("Write a checkpoint every N optimizer steps "
                               "(needs --checkpoint)")),
      keepCheckpoints("keep-checkpoints", cl::init(2), cl::cat(io),
                      cl::desc("Committed checkpoints kept (default 2)")),
      resume("resume", cl::cat(io),
             cl::desc("Load the newest committed checkpoint in --checkpoint "
                      "(saved on any mesh or plan) and continue until the "
                      "step counter reaches --steps; without one, start at "
                      "step 0")),
      maxRestarts(
          "max-restarts", cl::init(0), cl::cat(io),
          cl::desc("With -n N and --checkpoint: when a rank dies or the "
                   "group fails, restart every rank up to this many times, "
                   "resuming from the newest committed checkpoint (under "
                   "torchrun, use its --max-restarts with --resume)")),
      restartRanks(
          "restart-ranks", cl::init(0), cl::cat(io),
          cl::desc("With -n N and --max-restarts: restart on this many ranks "
                   "(fewer than N: as if a node were lost), the step "
                   "compiled again for them with the plan --plan-for gives "
                   "that world, else the planner's, and the checkpoint "
                   "resharded onto it (default: N)")),
      nprocs("n", cl::init(0), cl::cat(parallel),
             cl::desc("Run N local ranks (forks of this process sharing one "
                      "compilation); without it, one rank, or the ranks an "
                      "external launcher (torchrun, Slurm, mpirun) set in the "
                      "environment")),
      heartbeatTimeout(
          "heartbeat-timeout", cl::init(30.0), cl::cat(parallel),
          cl::desc("Seconds without a heartbeat after which a rank that "
                   "another waits for is declared hung and every rank stops, "
                   "naming it (sets CLEAVE_HEARTBEAT_TIMEOUT_MS; default: "
                   "that variable, else 30)")) {}

Error RunFlags::check() const {
  if (nprocs.getNumOccurrences() && (nprocs < 1 || nprocs > 1024))
    return flagError("-n " + Twine(nprocs.getValue()) +
                     ": expected a number of ranks in 1..1024");
  if (steps < 0)
    return badValue("steps", Twine(steps.getValue()), "a number of steps >= 0");
  if (checkpointEvery < 0)
    return badValue("checkpoint-every", Twine(checkpointEvery.getValue()),
                    "a number of steps >= 0");
  if (maxRestarts < 0)
    return badValue("max-restarts", Twine(maxRestarts.getValue()),
                    "a number >= 0");
  if (maxRestarts > 0 && checkpointDir.empty())
    return flagError("--max-restarts needs --checkpoint DIR (a restart "
                     "resumes from its newest checkpoint)");
  if (restartRanks.getNumOccurrences() &&
      (maxRestarts < 1 || nprocs < 2 || restartRanks < 1 ||
       restartRanks > nprocs))
    return badValue("restart-ranks", Twine(restartRanks.getValue()),
                    "a number of ranks in 1..N with -n N and --max-restarts");
  if (onNan != "stop" && onNan != "skip" && onNan != "rollback")
    return badValue("on-nan", onNan.getValue(), "stop, skip or rollback");
  if (onNan == "rollback" && checkpointEvery < 1)
    return flagError("--on-nan rollback needs --checkpoint DIR and "
                     "--checkpoint-every N (it goes back to the newest "
                     "checkpoint)");
  if (keepCheckpoints < 1)
    return badValue("keep-checkpoints", Twine(keepCheckpoints.getValue()),
                    "a number >= 1");
  if (!checkpointDir.empty())
    if (llvm::Expected<int> nice = checkpointWriterNice(); !nice)
      return nice.takeError();
  if ((checkpointEvery > 0 || resume) && checkpointDir.empty())
    return flagError(Twine(resume ? "--resume" : "--checkpoint-every") +
                     " needs --checkpoint DIR");
  if (resume && !paramsPath.empty())
    return flagError("--resume and --params both give the starting "
                     "parameters: use one");
  if (!std::isfinite(heartbeatTimeout) || heartbeatTimeout <= 0)
    return badValue("heartbeat-timeout",
                    showNumber(heartbeatTimeout.getValue()),
                    "a number of seconds > 0");
  if (logEvery < 1)
    return badValue("log-every", Twine(logEvery.getValue()), "a number >= 1");
  if (!std::isfinite(lr) || lr < 0)
    return badValue("lr", showNumber(lr.getValue()), "a finite number >= 0");
  if (!std::isfinite(lossScaleInit) || lossScaleInit <= 0 ||
      lossScaleInit > 1e30)
    return badValue("loss-scale-init", showNumber(lossScaleInit.getValue()),
                    "a finite scale in (0, 1e30]");
  if (lossScaleInterval < 1)
    return badValue("loss-scale-growth-interval",
                    Twine(lossScaleInterval.getValue()),
                    "a number of steps >= 1");
  if (!std::isfinite(lossScaleGrowth) || lossScaleGrowth <= 1)
    return badValue("loss-scale-growth", showNumber(lossScaleGrowth.getValue()),
                    "a finite factor > 1");
  if (!std::isfinite(lossScaleBackoff) || lossScaleBackoff <= 0 ||
      lossScaleBackoff >= 1)
    return badValue("loss-scale-backoff",
                    showNumber(lossScaleBackoff.getValue()),
                    "a factor in (0, 1)");
  if (evalEvery < 0)
    return badValue("eval-every", Twine(evalEvery.getValue()),
                    "a number of steps >= 0");
  if (evalSteps < 1)
    return badValue("eval-steps", Twine(evalSteps.getValue()),
                    "a number of batches >= 1");
  for (const cl::Option *o : {static_cast<const cl::Option *>(&evalEvery),
                              static_cast<const cl::Option *>(&evalSteps)})
    if (o->getNumOccurrences() && valDataPath.empty())
      return flagError("--" + o->ArgStr +
                       ": there is no validation data (give --val-data)");
  if (!valDataPath.empty() && dataPath.empty() && inputsPath.empty())
    return flagError("--val-data " + valDataPath +
                     ": validation data is like the training data: give the "
                     "training data with --data (a token file) or --inputs");
  return Error::success();
}

Error RunFlags::checkPaths(ArrayRef<NamedPath> moreInputs,
                           ArrayRef<NamedPath> moreOutputs) const {
  std::vector<NamedPath> inputs = {{"data", dataPath},
                                   {"val-data", valDataPath},
                                   {"params", paramsPath},
                                   {"inputs", inputsPath}};
  inputs.insert(inputs.end(), moreInputs.begin(), moreInputs.end());
  std::vector<NamedPath> outputs = {{"save-params", savePath},
                                    {"save-losses", lossesPath},
                                    {"save-step-times", stepTimesPath},
                                    {"trace", tracePath},
                                    {"report", reportPath}};
  outputs.insert(outputs.end(), moreOutputs.begin(), moreOutputs.end());
  auto absolute = [](const std::string &path) {
    SmallString<256> p(path);
    (void)sys::fs::make_absolute(p);
    sys::path::remove_dots(p, /*remove_dot_dot=*/true);
    return std::string(p);
  };
  auto same = [&](const std::string &a, const std::string &b) {
    struct stat sa, sb;
    if (absolute(a) == absolute(b))
      return true;
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
           sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string &out = outputs[i].path;
    if (out.empty())
      continue;
    for (const NamedPath &in : inputs)
      if (!in.path.empty() && same(out, in.path))
        return flagError("--" + Twine(outputs[i].option) + " " + out +
                         " is the --" + in.option + " input; refusing to " +
                         "write over it (choose another path)");
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].path.empty() && same(out, outputs[j].path))
        return flagError("--" + Twine(outputs[i].option) + " and --" +
                         outputs[j].option + " name the same file " + out);
    // What an earlier run killed while writing this output left behind.
    if (outputs[i].tensorFile)
      cleave_tensor_file_remove_stale(out.c_str());
    struct stat st;
    if (::stat(out.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode))
        return flagError("--" + Twine(outputs[i].option) + " " + out +
                         " is a directory; expected a file path");
      if (::access(out.c_str(), W_OK) != 0)
        return flagError("--" + Twine(outputs[i].option) + " " + out +
                         ": the file is not writable (" + strerror(errno) +
                         ")");
      continue;
    }
    SmallString<256> dir(out);
    sys::path::remove_filename(dir);
    if (dir.empty())
      dir = ".";
    if (::access(dir.c_str(), W_OK) != 0)
      return flagError("--" + Twine(outputs[i].option) + " " + out +
                       ": cannot write in the directory " + dir + " (" +
                       strerror(errno) + ")");
  }
  if (!checkpointDir.empty()) {
    if (std::error_code ec = sys::fs::create_directories(checkpointDir))
      return flagError("--checkpoint " + checkpointDir + ": " + ec.message());
    if (::access(checkpointDir.c_str(), W_OK) != 0)
      return flagError("--checkpoint " + checkpointDir +
                       ": the directory is not writable (" + strerror(errno) +
                       ")");
    for (const NamedPath &in : inputs)
      if (!in.path.empty() && same(checkpointDir, in.path))
        return flagError("--checkpoint " + checkpointDir + " is the --" +
                         in.option + " input");
  }
  return Error::success();
}

void RunFlags::exportEnvironment() const {
  if (heartbeatTimeout.getNumOccurrences())
    ::setenv("CLEAVE_HEARTBEAT_TIMEOUT_MS",
             std::to_string(int64_t(heartbeatTimeout * 1000.0)).c_str(), 1);
}

int RunFlags::world() const {
  if (nprocs > 0)
    return nprocs;
  for (const char *var : {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"})
    if (const char *v = std::getenv(var))
      return std::max(1, std::atoi(v));
  return 1;
}

DataOptions RunFlags::dataOptions(StringRef text) const {
  DataOptions o;
  o.inputsPath = inputsPath;
  o.tokensPath = dataPath;
  o.tokenBytes = tokenBytes;
  o.text = text;
  return o;
}

/// A validation token file must be tokens of the training data's size
/// and vocabulary: checked over the whole file before anything runs.
static Error checkValidationTokens(StringRef path, int64_t width,
                                   int64_t vocab) {
  auto fail = [&](const Twine &message) {
    return flagError("--val-data " + path + ": " + message);
  };
  ErrorOr<std::unique_ptr<MemoryBuffer>> file =
      MemoryBuffer::getFile(path, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (!file)
    return fail("cannot read it (" + file.getError().message() + ")");
  StringRef bytes = (*file)->getBuffer();
  if (bytes.size() % width)
    return fail(Twine(bytes.size()) + " bytes are not a whole number of " +
                Twine(width) + "-byte tokens (--token-bytes " + Twine(width) +
                ")");
  int64_t count = bytes.size() / width;
  bool oddWordsZero = width == 2 && count >= 16;
  for (int64_t i = 0; i < count; ++i) {
    uint32_t id = 0;
    std::memcpy(&id, bytes.data() + i * width, width); // little endian
    if (vocab >= 0 && int64_t(id) >= vocab)
      return fail("token " + Twine(i) + " is " + Twine(id) +
                  ", outside the vocabulary of " + Twine(vocab) +
                  " tokens that the model is trained on (another tokenizer, "
                  "or --token-bytes " +
                  Twine(width) + " is not the file's)");
    oddWordsZero &= i % 2 == 0 || id == 0;
  }
  if (oddWordsZero)
    return fail("every second 16-bit token is 0: the file holds 4-byte "
                "tokens, but --token-bytes is 2");
  return Error::success();
}

Expected<std::unique_ptr<TrainingData>>
RunFlags::openValidation(int64_t vocab) const {
  if (valDataPath.empty())
    return nullptr;
  DataOptions options;
  if (!inputsPath.empty()) {
    options.inputsPath = valDataPath;
  } else {
    if (Error err = checkValidationTokens(valDataPath, tokenBytes, vocab))
      return std::move(err);
    options.tokensPath = valDataPath;
    options.tokenBytes = tokenBytes;
  }
  Expected<std::unique_ptr<TrainingData>> data = TrainingData::open(options);
  if (!data)
    return flagError("--val-data " + valDataPath + ": " +
                     toString(data.takeError()));
  return data;
}

Error RunFlags::attachData(TrainJob &job, TrainingData &data,
                           TrainingData *valData, int64_t vocab) const {
  job.source = &data.source(seed, vocab);
  if (Error err = checkJob(job))
    return err;
  if (!valData)
    return Error::success();
  // Another seed than training's: with the same file the batches differ.
  job.valSource = &valData->source(seed + 1, vocab);
  return checkValidation(job, evalSteps, "--val-data " + valDataPath);
}

RunOptions RunFlags::runOptions() const {
  RunOptions o;
  o.localRanks = nprocs;
  o.steps = steps;
  o.learningRate = lr;
  o.seed = seed;
  o.logEvery = logEvery;
  o.paramsPath = paramsPath;
  o.savePath = savePath;
  o.saveState = saveState;
  o.lossesPath = lossesPath;
  o.stepTimesPath = stepTimesPath;
  o.tracePath = tracePath;
  o.reportPath = reportPath;
  o.checkpointDir = checkpointDir;
  o.checkpointEvery = checkpointEvery;
  o.keepCheckpoints = keepCheckpoints;
  o.resume = resume;
  o.maxRestarts = maxRestarts;
  o.restartRanks = restartRanks ? restartRanks.getValue() : nprocs.getValue();
  o.onNan = onNan;
  o.evalEvery = evalEvery;
  o.evalBatches = evalSteps;
  o.lossScaling.initScale = lossScaleInit;
  o.lossScaling.growthInterval = lossScaleInterval;
  o.lossScaling.growthFactor = lossScaleGrowth;
  o.lossScaling.backoffFactor = lossScaleBackoff;
  return o;
}
