//===- Checkpoint.h - Sharded, asynchronous, resumable checkpoints -*- C++
//-*-===//
//
// A checkpoint directory holds one folder per committed step:
//
//   DIR/step-00000010/shard-00003.ckpt   rank 3's blocks (a tensor file)
//   DIR/step-00000010/shard-00003.json   what they are (written after it)
//   DIR/step-00000010/manifest.json      the commit
//
// Every rank writes its own blocks of the parameters and optimizer state,
// in parallel and never gathered (a block that several ranks hold is
// written once, by one of them: they take turns by tensor). The write happens
// on a background thread from a host snapshot taken at the step boundary. Rank
// 0 commits a step once every shard is there: it writes manifest.json (the
// plan, the mesh, the step, every shard with its tensors, global shapes and
// block positions, and its size) to a temporary name and renames it into place.
// Only then is the step a checkpoint; older ones beyond `keep` are deleted
// after the commit, never before. Loading (Trainer::loadCheckpoint) works on
// any mesh and plan: each rank reads only the saved blocks that overlap its
// own.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_EXECUTION_CHECKPOINT_H
#define CLEAVE_EXECUTION_CHECKPOINT_H

#include "cleave/Execution/Trainer.h"
#include "llvm/Support/Error.h"
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace mlir::cleave {

/// The folder of step `step` in checkpoint directory `dir`.
std::string checkpointStepDir(llvm::StringRef dir, int64_t step);

/// The newest committed checkpoint in `dir` (its step folder), if any.
std::optional<std::string> latestCheckpoint(llvm::StringRef dir);

/// The committed checkpoints of `dir`, newest first.
std::vector<std::string> committedCheckpoints(llvm::StringRef dir);

/// Loads the newest committed checkpoint of `dir` that every rank can load.
/// Every rank calls it; one all-reduce per checkpoint tried makes them
/// agree. A checkpoint that fails on some rank (a corrupted or missing
/// shard: the error names the file and the checkpoint) is reported on that
/// rank's stderr and the one before it is tried. Returns the step folder
/// loaded, std::nullopt when `dir` has no committed checkpoint, or an error
/// (the newest one's) when none loads.
llvm::Expected<std::optional<std::string>>
loadNewestCheckpoint(Trainer &trainer, llvm::StringRef dir, int rank);

/// Removes the step folders of `dir` below step `belowStep` that were never
/// committed (a run killed mid-write); returns how many. At start every
/// such folder goes; a commit removes only older ones (a rank that is
/// ahead may be writing a newer step).
int removeUncommittedCheckpoints(
    llvm::StringRef dir,
    int64_t belowStep = std::numeric_limits<int64_t>::max());

/// The checkpoint writer thread's nice value from CLEAVE_CHECKPOINT_NICE
/// (0 when unset); an error naming the variable when it is not an integer
/// from 0 to 19.
llvm::Expected<int> checkpointWriterNice();

class CheckpointWriter {
public:
  /// `plan` describes the plan for the manifest (e.g. "dp=2,tp=2").
  CheckpointWriter(std::string dir, int rank, int world, int keep,
                   std::string plan, int64_t timeoutMs);
  ~CheckpointWriter();

  /// Snapshots `trainer`'s shard at its current step counter and writes it
  /// in the background (after the previous write has finished). Returns an
  /// error of the previous write, if it failed.
  llvm::Error save(const Trainer &trainer);
  /// Waits for the write in progress (rank 0: and its commit).
  llvm::Error finish();
  /// finish(), then waits (every rank, at most the timeout) until the last
  /// checkpoint saved is committed by rank 0. For fault injection: a rank
  /// killed after it returns leaves a known newest checkpoint behind.
  llvm::Error waitForCommit();
  /// Seconds the calling thread spent in save() (the snapshot), in total.
  double snapshotSeconds() const { return snapshotSeconds_; }
  /// After finish(): checkpoints written, and the bytes and seconds of this
  /// rank's shard writes (in the background; commits not included).
  int64_t checkpointsWritten() const { return written_; }
  int64_t bytesWritten() const { return bytesWritten_; }
  double writeSeconds() const { return writeSeconds_; }

private:
  /// The background thread: writes the shard (a failure is left in
  /// shard-R.error for rank 0's commit to see), then rank 0 commits.
  void write(std::vector<Trainer::ShardTensor> shard, int64_t step);
  llvm::Error writeShard(std::vector<Trainer::ShardTensor> &shard,
                         int64_t step);
  llvm::Error commit(int64_t step);

  std::string dir_, plan_;
  int rank_, world_, keep_;
  int64_t timeoutMs_;
  std::thread thread_;
  std::string error_;
  /// The snapshot's host memory, kept from one checkpoint to the next.
  struct FreeArena {
    void operator()(char *p) const;
  };
  std::unique_ptr<char, FreeArena> arena_;
  int64_t arenaBytes_ = 0;
  double snapshotSeconds_ = 0, writeSeconds_ = 0;
  int64_t written_ = 0, bytesWritten_ = 0;
  /// The step of the last save() (0: none yet).
  int64_t lastSaved_ = 0;
};

/// The bytes of the shard files of checkpoint `stepDir`.
int64_t checkpointBytes(llvm::StringRef stepDir);

} // namespace mlir::cleave

#endif // CLEAVE_EXECUTION_CHECKPOINT_H
