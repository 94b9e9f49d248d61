//===- Trainer.h - Drive a compiled training step ---------------*- C++ -*-===//
//
// Owns the buffers of one compiled function (a training step), initializes
// or loads parameters, feeds batches, calls the step and swaps the updated
// parameters and optimizer state in. Used by cleave-run, tests and benches.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_EXECUTION_TRAINER_H
#define CLEAVE_EXECUTION_TRAINER_H

#include "cleave/Execution/Compiler.h"
#include "cleave/Execution/Manifest.h"
#include "cleave/Runtime/Runtime.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"
#include <algorithm>
#include <map>
#include <memory>
#include <vector>

namespace mlir::cleave {

/// Where the data inputs of each step come from.
class BatchSource {
public:
  virtual ~BatchSource();
  /// Fills input `spec` (a data input of the step) for step `step`
  /// (0-based) into `data`.
  virtual llvm::Error fill(const BufferSpec &spec, int64_t step,
                           void *data) = 0;
};

/// Token ids from a nanoGPT-style file or memory: fills "tokens" and
/// "targets" ([batch, seq] i32) with rows of the global batch.
std::unique_ptr<BatchSource> makeTokenSource(cleave_token_file *file,
                                             uint64_t seed, int64_t vocab,
                                             int64_t firstRow = 0);
/// Per-step tensors from a tensor file: input "x" of step k is slice k of
/// tensor "x" (shape [steps, ...]).
llvm::Expected<std::unique_ptr<BatchSource>>
makeTensorFileSource(llvm::StringRef path);

/// Dynamic loss scaling (PyTorch's GradScaler and its defaults), for a step
/// built with cleave-autodiff's loss-scaling: its `loss_scale` input, its
/// `update` input (updates done + 1) and its `grad_norm_sq` output.
struct LossScalingOptions {
  double initScale = 65536.0;
  double growthFactor = 2.0;
  double backoffFactor = 0.5;
  /// Good steps in a row after which the scale grows.
  int64_t growthInterval = 2000;
};

struct TrainerOptions {
  double learningRate = 1e-3;
  LossScalingOptions lossScaling;
  /// Seed of parameter initialization and dropout.
  uint64_t seed = 0;
  /// For a per-device program: its mesh and this process's rank. Buffers
  /// are then blocks of global tensors, which the trainer initializes,
  /// loads, feeds and saves in their global form.
  std::optional<MeshSpec> mesh;
  int64_t rank = 0;
  /// For a pipelined program: every stage's function, by stage, and the
  /// index of the pipeline axis in the mesh. The trainer runs one of them;
  /// each parameter lives on one stage, where saving gathers it from.
  std::vector<FunctionSpec> stages;
  int64_t pipelineAxis = -1;
  /// What a step whose loss is NaN or infinite does (cleave-run --on-nan):
  /// false: runStep fails (stop); true: the step keeps the parameters and
  /// optimizer state on every rank (one all-reduce per step agrees on it)
  /// and counts as skipped, as the loss scaler's skip. Steps with loss
  /// scaling always skip (the scaler's rule).
  bool skipNonFinite = false;
  /// Test hook (CLEAVE_FAULT_NAN): when the step counter reaches this step
  /// (1-based; 0: never) the loss and the first updated parameter of this
  /// rank's step are replaced by NaN before the step is judged, as a
  /// diverged batch would leave them.
  int64_t faultNanStep = 0;
};

/// Declares `manifest`'s mesh and communicator groups to the runtime
/// (cleave_rt_define_mesh / _group). Fails, naming both numbers, when the
/// mesh does not have one device per rank of the world. Does nothing for a
/// program without a mesh.
llvm::Error defineCommunicators(const ProgramManifest &manifest);

class Trainer {
public:
  /// Allocates the buffers of `spec`. `entry` may be set later (so that
  /// parameters and data can be checked before compiling).
  static llvm::Expected<std::unique_ptr<Trainer>>
  create(const FunctionSpec &spec, EntryFn entry, TrainerOptions options);
  void setEntry(EntryFn fn) { entry = fn; }
  ~Trainer();

  /// Draws every parameter from its init (seed, name); zeros the state.
  llvm::Error initParameters();
  /// Loads parameters (and optimizer state when present) from a tensor
  /// file; every parameter must be there with its shape and type. A step
  /// counter saved with the state (kStepCounterName) resumes the count.
  llvm::Error loadParameters(llvm::StringRef path);
  /// Writes parameters (and optimizer state if `withState`, with the step
  /// counter: the optimizer updates done so far) atomically, in
  /// their global form. With a mesh every rank must call it (blocks are
  /// gathered, in a pipeline from the stage holding each tensor); rank 0
  /// writes the file.
  llvm::Error saveParameters(llvm::StringRef path, bool withState) const;

  /// Runs step `step` (0-based, counted from the loaded step counter: the
  /// `step` input, the batch and the dropout seed are those of step
  /// `stepCounter() + 1`) and returns the loss. Fails if the runtime
  /// reported an error or the loss is not finite (parameters are then left
  /// as they were before the step).
  llvm::Expected<double> runStep(int64_t step, BatchSource &source);

  /// This rank's part of a sharded checkpoint (Checkpoint.cpp): the
  /// parameter and optimizer-state blocks this rank writes (of the ranks
  /// holding the same block, one per tensor, in turns), with where each
  /// sits in its global tensor.
  struct ShardTensor {
    std::string key; ///< "param:<name>" or "state:<name>".
    int32_t dtype = 0;
    std::vector<int64_t> globalShape, offsets, sizes;
    /// The bytes: the trainer's own from checkpointShard(), the snapshot's
    /// after CheckpointWriter::save copied them.
    const void *data = nullptr;
    int64_t bytes = 0;
    /// Whether `data` is host memory of the trainer's (the loss scaler's
    /// state) rather than a buffer of cleave_rt_alloc (device memory on the
    /// cuda backend).
    bool host = false;
    /// CRC32C of the data (the checkpoint writer's thread computes it).
    uint32_t crc32c = 0;
  };
  std::vector<ShardTensor> checkpointShard() const;
  /// Loads every parameter and state block of this rank from the committed
  /// checkpoint `stepDir` (written by CheckpointWriter, on any mesh or plan
  /// with the same global tensors): each block is assembled from the saved
  /// blocks it overlaps, read from their shard files; nothing is gathered.
  /// The step counter resumes from the checkpoint's.
  llvm::Error loadCheckpoint(llvm::StringRef stepDir);

  /// The mean loss of `batches` batches (0..batches-1 of `source`) under
  /// the current parameters, computed by `evalSpec` (a forward-only step,
  /// kEvalStepName, whose parameters are laid out as this step's; its
  /// first result is the loss) through `evalEntry`. Every rank calls it.
  /// Fails naming the parameter whose layout differs, or the batch whose
  /// loss is not finite.
  llvm::Expected<double> evaluate(const FunctionSpec &evalSpec,
                                  EntryFn evalEntry, BatchSource &source,
                                  int64_t batches);

  /// Whether the step scales its loss (it has a `loss_scale` input).
  bool scalesLoss() const;
  /// The loss scale the next step uses.
  double lossScale() const { return scale; }
  /// Whether the last step found an infinite or NaN gradient (its
  /// `grad_norm_sq`) and was skipped: parameters and optimizer state kept,
  /// the scale multiplied by the backoff factor. Every rank sees the same
  /// norm (the partitioner reduces it over every axis that shards a
  /// gradient), so every rank skips the same steps.
  bool lastStepSkipped() const { return skippedLast; }
  /// Steps skipped so far, loaded ones included.
  int64_t skippedSteps() const { return skipped; }
  /// Whether the last step's loss was NaN or infinite on some rank (under
  /// skipNonFinite or loss scaling; the step was then skipped).
  bool lastStepNonFinite() const { return nonFiniteLast; }
  /// Counts the next step as run and skipped without running it (its batch
  /// is not read): --on-nan rollback passes over the batch that diverged.
  void skipStep();

  /// The optimizer steps done (updates and skipped steps): loaded, plus the
  /// steps run since. It fixes the next batch and dropout seed.
  int64_t stepCounter() const { return firstStep + stepsRun; }
  /// The step counter as loaded (by initParameters, loadParameters or
  /// loadCheckpoint); runStep's `step` counts from it.
  int64_t loadedStep() const { return firstStep; }
  /// The name of the step counter in a file saved with the state.
  static constexpr const char *kStepCounterName = "cleave.step";
  /// The loss scaler's state in a file saved with the state: the scale
  /// (F64), the good steps in a row (I64) and the skipped steps (I64).
  static constexpr const char *kLossScaleName = "cleave.loss_scale";
  static constexpr const char *kGoodStepsName = "cleave.loss_scale_good_steps";
  static constexpr const char *kSkippedStepsName = "cleave.skipped_steps";

  const FunctionSpec &getSpec() const { return spec; }
  /// Current value of parameter `name` (nullptr if absent).
  const void *parameter(llvm::StringRef name) const;
  int64_t numParameterElements() const;

private:
  Trainer(const FunctionSpec &spec, EntryFn entry, TrainerOptions options);
  void *buffer(int64_t index) const { return buffers[index]; }
  /// Fills buffer `index` from its global tensor, which `fill` writes into
  /// a scratch buffer (or directly, for buffers that are not split).
  llvm::Error fromGlobal(int64_t index,
                         llvm::function_ref<llvm::Error(void *)> fill);
  /// The same for a buffer `b` (of this or another function) at `dst`.
  llvm::Error fromGlobal(const BufferSpec &b, void *dst,
                         llvm::function_ref<llvm::Error(void *)> fill);
  /// Fills input `b` at `dst` with batch `batch` of `source`, this rank's
  /// block of it if `b` is split.
  llvm::Error fillInput(const BufferSpec &b, void *dst, int64_t batch,
                        BatchSource &source);
  /// The global tensor of buffer `index`, gathered from every rank (every
  /// rank calls this; the result is complete everywhere).
  llvm::Expected<std::vector<char>> gatherGlobal(int64_t index) const;
  /// Pipelined programs: the global tensor of `buffer`, held by the ranks of
  /// stage `stage`, gathered from there (every rank calls this).
  llvm::Expected<std::vector<char>> gatherFromStage(const BufferSpec &buffer,
                                                    int64_t stage) const;
  /// Reads the step counter from `file` if it has one (then adds its name
  /// to `known`); without one the count starts at 0.
  llvm::Error loadStepCounter(cleave_tensor_file *file,
                              llvm::StringSet<> &known);
  /// Reads the loss scaler's state from `file` where it has it.
  llvm::Error loadScalerState(cleave_tensor_file *file,
                              llvm::StringSet<> &known);
  /// Whether any rank's loss or gradient norm of the step just run is
  /// infinite or NaN (one all-reduce over the world, so that every rank
  /// decides alike).
  llvm::Expected<bool> gradientsOverflowed(double loss) const;
  /// The test hook faultNanStep: NaN into this step's loss and first
  /// updated parameter.
  void poisonStep();
  /// Moves the scale by GradScaler's rule after a step that overflowed
  /// (then skipped) or not.
  void updateScale(bool overflow);
  /// The tensors to save, by buffer spec, in their global form.
  llvm::Expected<std::vector<std::pair<BufferSpec, std::vector<char>>>>
  gatherSaved(bool withState) const;

  FunctionSpec spec;
  EntryFn entry;
  TrainerOptions options;
  /// One allocation per buffer of the ABI.
  std::vector<void *> buffers;
  /// Output buffer index -> the argument it replaces after a step (-1 for
  /// the loss and other plain outputs).
  std::vector<int64_t> feedsBack;
  int64_t lossIndex = -1;
  /// The output `grad_norm_sq` of a loss-scaling step (-1: none).
  int64_t normIndex = -1;
  /// Whether the step has an `update` input (AdamW's update count apart
  /// from the step counter, under loss scaling).
  bool hasUpdateInput = false;
  /// The loss scaler: the scale, good steps in a row, skipped steps.
  double scale = 1.0;
  int64_t goodSteps = 0, skipped = 0;
  bool skippedLast = false, nonFiniteLast = false;
  /// The evaluation step's inputs and outputs (its parameters are this
  /// step's), allocated on the first evaluate().
  std::vector<void *> evalBuffers;
  /// The step counter loaded with the state, and the steps run since.
  int64_t firstStep = 0, stepsRun = 0;
};

} // namespace mlir::cleave

#endif // CLEAVE_EXECUTION_TRAINER_H
