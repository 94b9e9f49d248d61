//===- RunFlags.h - The command-line options of a training run --*- C++ -*-===//
//
// The options that say how to run a compiled step - steps, learning rate,
// data, files, checkpoints, local ranks - and not what to compile. cleave-run
// and the runner of a bundle (cleave-bundle-run) declare them once, here,
// with the same names, help, defaults and checks.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_EXECUTION_RUNFLAGS_H
#define CLEAVE_EXECUTION_RUNFLAGS_H

#include "cleave/Execution/Run.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include <memory>
#include <string>

namespace mlir::cleave {

/// A file a run reads or writes, for the path checks.
struct NamedPath {
  const char *option;
  std::string path;
  /// An output written as a tensor file (what a killed writer left of it is
  /// removed first).
  bool tensorFile = true;
};

class RunFlags {
public:
  /// Registers the options in the given categories (their order in --help).
  RunFlags(llvm::cl::OptionCategory &train, llvm::cl::OptionCategory &io,
           llvm::cl::OptionCategory &parallel);

  // Training.
  llvm::cl::opt<int64_t> steps;
  llvm::cl::opt<double> lr;
  llvm::cl::opt<double> lossScaleInit;
  llvm::cl::opt<int64_t> lossScaleInterval;
  llvm::cl::opt<double> lossScaleGrowth;
  llvm::cl::opt<double> lossScaleBackoff;
  llvm::cl::opt<uint64_t> seed;
  llvm::cl::opt<int64_t> logEvery;
  llvm::cl::opt<std::string> onNan;
  // Data and files.
  llvm::cl::opt<std::string> dataPath;
  llvm::cl::opt<int> tokenBytes;
  llvm::cl::opt<std::string> valDataPath;
  llvm::cl::opt<int64_t> evalEvery;
  llvm::cl::opt<int64_t> evalSteps;
  llvm::cl::opt<std::string> inputsPath;
  llvm::cl::opt<std::string> paramsPath;
  llvm::cl::opt<std::string> savePath;
  llvm::cl::opt<bool> saveState;
  llvm::cl::opt<std::string> lossesPath;
  llvm::cl::opt<std::string> stepTimesPath;
  llvm::cl::opt<std::string> tracePath;
  llvm::cl::opt<std::string> reportPath;
  llvm::cl::opt<std::string> checkpointDir;
  llvm::cl::opt<int64_t> checkpointEvery;
  llvm::cl::opt<int> keepCheckpoints;
  llvm::cl::opt<bool> resume;
  llvm::cl::opt<int> maxRestarts;
  llvm::cl::opt<int> restartRanks;
  // Parallelism.
  llvm::cl::opt<int> nprocs;
  llvm::cl::opt<double> heartbeatTimeout;

  /// The range and consistency checks, before anything runs; errors name
  /// the option and its value.
  llvm::Error check() const;
  /// Every output path (the flags' own and `moreOutputs`) is writable and
  /// is not an input (the flags' own and `moreInputs`) or another output;
  /// the checkpoint directory is created. Checked before the first step so
  /// that no work or data is lost.
  llvm::Error checkPaths(llvm::ArrayRef<NamedPath> moreInputs,
                         llvm::ArrayRef<NamedPath> moreOutputs) const;
  /// Sets CLEAVE_HEARTBEAT_TIMEOUT_MS when --heartbeat-timeout is given.
  void exportEnvironment() const;
  /// The ranks: -n, or the world size an external launcher set, or 1.
  int world() const;
  /// The training data of the flags (`text` when no file is given).
  DataOptions dataOptions(llvm::StringRef text) const;
  /// The validation data (--val-data), opened like the training data; a
  /// token file is first checked whole against `vocab` (-1: unknown). Null
  /// without --val-data.
  llvm::Expected<std::unique_ptr<TrainingData>>
  openValidation(int64_t vocab) const;
  /// Gives `job` its batches: `data`'s, and `valData`'s (if any) for the
  /// evaluation step, drawn with another seed; checks that they fill the
  /// step's inputs (checkJob, checkValidation).
  llvm::Error attachData(TrainJob &job, TrainingData &data,
                         TrainingData *valData, int64_t vocab) const;
  /// The run options of the flags; the caller sets the backend and the plan.
  RunOptions runOptions() const;
};

/// "%g" of `v`, for messages.
std::string showNumber(double v);
/// The error for option `name` whose `value` is not `expected`.
llvm::Error badValue(const llvm::Twine &name, const llvm::Twine &value,
                     const llvm::Twine &expected);

} // namespace mlir::cleave

#endif // CLEAVE_EXECUTION_RUNFLAGS_H
