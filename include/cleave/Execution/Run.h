//===- Run.h - Train a compiled program on local or launched ranks -*- C++
//-*-===//
//
// What cleave-run does once the program is compiled, as a library: the
// training data, the job every rank runs (a JIT build or an AOT shared
// library), the checks before compiling, and the ranks themselves - forked
// on this machine or started by an external launcher - each connecting to
// the runtime, training and saving.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_EXECUTION_RUN_H
#define CLEAVE_EXECUTION_RUN_H

#include "cleave/Execution/CompileCache.h"
#include "cleave/Execution/Compiler.h"
#include "cleave/Execution/Prediction.h"
#include "cleave/Execution/Trainer.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace mlir::cleave {

/// Where the batches come from: per-step tensors, a token file, or a text
/// whose bytes are the tokens (over the text's own alphabet).
struct DataOptions {
  std::string inputsPath;
  std::string tokensPath;
  /// 2 (uint16) or 4 (uint32) per token of `tokensPath`.
  int tokenBytes = 2;
  /// Used when neither path is given.
  llvm::StringRef text;
};

/// The opened training data.
class TrainingData {
public:
  static llvm::Expected<std::unique_ptr<TrainingData>>
  open(const DataOptions &options);
  ~TrainingData();
  /// Token data (a token file or the text), as opposed to per-step tensors.
  bool hasTokens() const { return tokens != nullptr; }
  /// The vocabulary of the text's alphabet; -1 for other data.
  int64_t textVocab() const { return vocab; }
  /// The batch source; for tokens, drawing rows with `seed` and checking
  /// every id against `vocab`. Call once.
  BatchSource &source(uint64_t seed, int64_t vocab);

private:
  TrainingData() = default;
  cleave_token_file *tokens = nullptr;
  int64_t vocab = -1;
  std::unique_ptr<BatchSource> batches;
};

/// What every rank needs; prepared once, before any rank starts.
struct TrainJob {
  ProgramManifest manifest;
  /// The entry points of the step (one per pipeline stage), by name.
  std::map<std::string, EntryFn> entries;
  /// Owns the entries of a JIT build (type-erased: the bundle runner, which
  /// has no compiler, never holds one).
  std::shared_ptr<void> owner;
  BatchSource *source = nullptr;
  /// The validation batches, for the program's kEvalStepName (none: no
  /// validation).
  BatchSource *valSource = nullptr;
};

/// Names of the functions some rank runs: the training step (one per
/// pipeline stage) and the evaluation step if the program has one.
std::vector<std::string> stepEntryNames(const ProgramManifest &manifest);

/// Loads an AOT build (a shared library linked from compileToObject's
/// object file): its manifest and the entry points of the step.
llvm::Expected<TrainJob> loadAotJob(llvm::StringRef path);

/// Checks what can be checked before compiling: the program has a
/// @train_step and the source fills its first batch.
llvm::Error checkJob(const TrainJob &job);

/// Checks that the validation source fills `batches` batches of the
/// program's evaluation step (kEvalStepName) with the shapes, types and ids
/// it reads; errors are prefixed with `what` (the option and file).
llvm::Error checkValidation(const TrainJob &job, int64_t batches,
                            const llvm::Twine &what);

/// Compiles the per-device program `module` into `job` and reports where
/// the time went to `log` (for `world` ranks). With an enabled `cache`, a
/// program compiled before is loaded from it, and a new one is compiled
/// into it; otherwise the program is JIT-compiled.
llvm::Error compileJob(ModuleOp module, const CompileOptions &options,
                       int world, TrainJob &job, llvm::raw_ostream &log,
                       const CompileCache *cache = nullptr);

/// How the ranks train.
struct RunOptions {
  /// Runtime backend: "cpu" or "cuda".
  std::string backend = "cpu";
  /// Fork this many local ranks; 0 or 1: this process is one rank (of the
  /// world an external launcher set in the environment, or alone).
  int localRanks = 0;
  int64_t steps = 100;
  double learningRate = 1e-3;
  uint64_t seed = 0;
  /// Print the loss every N steps (and the first and last).
  int64_t logEvery = 10;
  /// Load the parameters from here (empty: initialize them).
  std::string paramsPath;
  /// Write the final parameters here (and the optimizer state if
  /// `saveState`).
  std::string savePath;
  bool saveState = false;
  /// Write the per-step losses here (and the validation losses).
  std::string lossesPath;
  /// Write rank 0's wall time of every step here (tensor "step_seconds").
  std::string stepTimesPath;
  /// Sharded checkpoints (Checkpoint.h): written to `checkpointDir` every
  /// `checkpointEvery` optimizer steps (0: never), the last
  /// `keepCheckpoints` kept. With `resume`, the newest committed checkpoint
  /// there is loaded (any mesh or plan) and the run continues until the
  /// step counter reaches `steps`; without one it starts at step 0.
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  int keepCheckpoints = 2;
  bool resume = false;
  /// Local ranks (`localRanks` > 1): when the group fails, restart it up to
  /// this many times, resuming from the newest checkpoint.
  int maxRestarts = 0;
  /// The ranks of a restart (`localRanks` unless fewer are asked for); a
  /// world other than `localRanks` needs `jobForWorld`.
  int restartRanks = 0;
  /// The step compiled for another world size (a restart on fewer ranks),
  /// with the plan text for the checkpoints; empty where the step cannot be
  /// compiled again (a bundle).
  std::function<llvm::Expected<TrainJob>(int world, std::string &planText)>
      jobForWorld;
  /// A step whose loss is not finite: "stop", "skip" or "rollback"
  /// (--on-nan).
  std::string onNan = "stop";
  /// The plan, as the user named it (recorded in checkpoints).
  std::string planText;
  /// With a validation source: evaluate after every step whose number is a
  /// multiple of this (0: only after the last step), on `evalBatches`
  /// batches.
  int64_t evalEvery = 0;
  int64_t evalBatches = 1;
  /// The loss scaler of a step that scales its loss (fp16).
  LossScalingOptions lossScaling;
  /// Prefix of error messages ("cleave-run").
  std::string programName = "cleave-run";
  /// Write the measured timeline here (Chrome trace; writeMeasuredTrace).
  std::string tracePath;
  /// Write the run as a web page here (writeRunReport).
  std::string reportPath;
  /// What the report's title says the run is (model, ranks, plan).
  std::string title;
  /// Tokens per optimizer step (0: unknown): the progress line's tokens/s.
  int64_t tokensPerStep = 0;
  /// The cost model's step, if there is one.
  std::optional<StepPrediction> prediction;
};

/// What rank 0 recorded of a run, for its report page.
struct RunRecord {
  std::vector<double> losses;
  std::vector<double> stepSeconds;
  /// The step counter before the first recorded step (a resumed run).
  int64_t firstStep = 0;
  std::vector<double> valLosses;
  std::vector<int64_t> valSteps;
};

/// --trace: rank `rank` of `world` writes its steps' [start, end] and its
/// runtime flight recorder (the last CLEAVE_FLIGHT_RECORDER_SIZE
/// communication calls, 65536 under --trace) to `path`.rank<R>; after a
/// barrier rank 0 merges them into `path` (report::measuredTrace) and
/// removes them. The ranks must share a file system.
llvm::Error
writeMeasuredTrace(const std::string &path, int rank, int world,
                   const std::vector<std::pair<double, double>> &steps);

/// --report: like writeMeasuredTrace, every rank's steps and calls reach
/// rank 0 (through `path`.rank<R>), which writes one self-contained page
/// (report::renderHtml) of `record`, the options' prediction and the
/// measured timeline of the last steps (report::measuredTimeline, with
/// each rank's instance of `manifest`'s groups).
llvm::Error writeRunReport(const std::string &path, int rank, int world,
                           const std::vector<std::pair<double, double>> &steps,
                           const RunRecord &record, const RunOptions &options,
                           const ProgramManifest &manifest);

/// Step times of a run: the first step (warm-up) apart from the median of
/// the others (the steady state).
struct StepTimes {
  std::vector<double> seconds;
  double first() const { return seconds.empty() ? 0 : seconds.front(); }
  /// Median of steps 2..n; 0 with fewer than two steps.
  double steadyMedian() const;
};

/// Trains: forks `options.localRanks` ranks, or runs this process's rank.
/// Rank 0 prints the losses and step times. Returns the exit status.
int runTrainJob(TrainJob &job, const RunOptions &options);

} // namespace mlir::cleave

#endif // CLEAVE_EXECUTION_RUN_H
