//===- Pipeline.h - Internals of cleave-pipeline ----------------*- C++ -*-===//
//
// cleave-pipeline cuts a partitioned training step (one device's program for
// one micro-batch: the micro-batches are the mesh axis `mb`) into pipeline
// stages and runs it as a schedule. Three steps share these structures:
//
//   1. analysis (PipelineAnalysis.cpp): every op gets a region (constant,
//      step-invariant, forward, backward, weight gradient, per-step) and a
//      virtual stage;
//   2. ordering (PipelineSchedule.cpp): the passes of each rank in the
//      schedule's order (cost::pipelineOrders), interleaved with the
//      transfers between ranks in one global order, so blocking sends
//      cannot deadlock;
//   3. building (PipelineBuild.cpp): one private function per stage and
//      pass kind, one public function per pipeline rank that calls them.
//
// docs/pipeline.md describes the result.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_PIPELINE_H
#define CLEAVE_LIB_TRANSFORMS_PIPELINE_H

#include "cleave/CostModel/Schedule.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::cleave::pipeline {

namespace cost = ::cleave::cost;

/// When an op runs (its region of the program).
enum class Phase : uint8_t {
  /// No operands but constants, no effects: rebuilt wherever it is used.
  Const,
  /// Depends on parameters and step inputs only: once per step, before the
  /// micro-batches (casts of parameters, ZeRO-3 gathers).
  Invariant,
  /// Per micro-batch, on the path to the loss.
  Forward,
  /// Per micro-batch, the rest (gradients). With a zero-bubble schedule,
  /// only what the gradients sent to other stages need.
  Backward,
  /// Zero-bubble schedules: per micro-batch gradients that only feed the
  /// accumulated parameter gradients (the W pass).
  Weight,
  /// Once per step, after the micro-batches: reductions of the accumulated
  /// sums, optimizer updates.
  Step,
};

/// Per micro-batch regions are the pass kinds of the schedule.
inline bool isPerMicroBatch(Phase r) {
  return r == Phase::Forward || r == Phase::Backward || r == Phase::Weight;
}

/// The pass kind of a per-micro-batch region.
cost::PassKind passKindOf(Phase r);
Phase phaseOf(cost::PassKind kind);

/// The plan of the pipeline (from `cleave.plan` and the mesh).
struct Plan {
  int64_t pp = 1, numMicroBatches = 1, virtualStages = 1;
  cost::Schedule schedule = cost::Schedule::OneFOneB;
  std::string ppAxis = "pp", mbAxis = "mb";
  /// Whether the mesh has the micro-batch axis.
  bool hasMbAxis = false;

  int64_t numStages() const { return pp * virtualStages; }
  int64_t rankOf(int64_t stage) const { return stage % pp; }
  int64_t chunkOf(int64_t stage) const { return stage / pp; }
  bool splitsWeightGrad() const {
    return schedule == cost::Schedule::ZeroBubbleH1;
  }
};

/// What the analysis finds out about the training step.
struct Analysis {
  /// Op handles are values; their accessors are not const.
  mutable func::FuncOp func;
  mutable MeshOp mesh;
  Plan plan;
  llvm::DenseMap<Operation *, Phase> region;
  /// Virtual stage of every op but constants.
  llvm::DenseMap<Operation *, int64_t> stage;
  /// Stage of every parameter and optimizer state argument (its home), -1
  /// for data inputs (every rank that needs one gets it from the host).
  llvm::SmallVector<int64_t> argStage;
  /// Arguments holding one micro-batch per `mb` coordinate.
  llvm::SmallVector<bool> argPerMicroBatch;
  /// Per argument, the axes after `mb` in its first dimension: each
  /// micro-batch is split over them again (expert parallelism's `ep` in
  /// [dp, mb, ep]); empty when `mb` is the minor axis.
  llvm::SmallVector<llvm::SmallVector<StringRef>> argMinorAxes;
  /// Per-micro-batch values summed over the micro-batches (what the
  /// per-step ops read).
  llvm::SetVector<Value> accumulated;
  /// `cleave.axis_index` ops naming the micro-batch axis: the position of
  /// the micro-batch, an operand of every pass that reads it.
  llvm::DenseSet<Operation *> microBatchIndices;
  /// Sums over micro-batches of values computed from the micro-batches'
  /// data alone (e.g. the count of labels a cross_entropy with ignore_index
  /// divides by): each runs before the micro-batches (Phase::Invariant), on
  /// every micro-batch's slice of the data in turn; with the ops it sums,
  /// in program order.
  llvm::DenseMap<Operation *, llvm::SmallVector<Operation *>> dataReductions;
  /// Invariant ops that expand their operands (a broadcast of a parameter to
  /// the activations' shape), pure and cheap: each pass that reads one
  /// rebuilds it from its operands, where it fuses into its users, rather
  /// than reading a result computed once per step and kept alive (and
  /// materialised) until the last micro-batch's backward pass.
  llvm::DenseSet<Operation *> rebuiltInPasses;
  /// The stage each result of the function is produced on.
  llvm::SmallVector<int64_t> resultStage;
  /// Index of the result named "loss".
  unsigned lossResult = 0;

  Phase phaseOfValue(Value v) const;
  /// Stage of a value (-1: a data input or a constant, available anywhere).
  int64_t stageOfValue(Value v) const;
  bool isPerMicroBatchValue(Value v) const;
};

/// Classifies and stages the ops of `func`. Emits a diagnostic and fails on
/// programs that cannot be pipelined (explaining why).
FailureOr<Analysis> analyze(func::FuncOp func, MeshOp mesh, const Plan &plan);

/// One step of a rank's main part: a pass, or one transfer of a
/// per-micro-batch value between ranks.
struct Event {
  enum class Kind { Pass, Send, Recv } kind;
  cost::PassRef pass; ///< The pass, or the pass producing the value.
  Value value;        ///< Send, Recv: the value (for micro-batch pass.mb).
  int64_t peer = -1;  ///< Send, Recv: the other rank.
};

/// The groups of ops of every (region, stage) run as one pass, in program
/// order, and the values each needs from or gives to other groups.
struct PassGroup {
  Phase region;
  int64_t stage;
  llvm::SmallVector<Operation *> ops;
  /// Values defined outside and used inside (constants excluded).
  llvm::SetVector<Value> inputs;
  /// Values defined inside and used outside.
  llvm::SetVector<Value> outputs;
};

/// The pass groups keyed by (region, stage).
using PassGroups = llvm::MapVector<std::pair<Phase, int64_t>, PassGroup>;
PassGroups collectPassGroups(const Analysis &analysis);

/// Orders each rank's passes (the schedule's orders) and the transfers of
/// per-micro-batch values between ranks: every rank issues its transfers
/// in one global order, so no cycle of blocking sends can form. Fails with
/// a diagnostic when the schedule cannot run the program (a pass needs a
/// value that its order produces later).
FailureOr<std::vector<std::vector<Event>>>
orderEvents(const Analysis &analysis, const PassGroups &groups);

/// Replaces the step by its pipelined program: one function per pipeline
/// rank, whose names it returns in rank order.
FailureOr<SmallVector<Attribute>>
buildPipeline(const Analysis &analysis, const PassGroups &groups,
              const std::vector<std::vector<Event>> &events);

/// Once every entry is built: drops the micro-batch axis from `mesh` and
/// names the rank functions of each entry (the first is the training step)
/// in `cleave.pipeline`. Fails if anything still communicates along the
/// micro-batch axis.
LogicalResult
finishPipeline(ModuleOp module, MeshOp mesh, const Plan &plan,
               ArrayRef<std::pair<StringRef, SmallVector<Attribute>>> entries);

/// The `cleave.plan` and mesh of `module` as a Plan; fails with a
/// diagnostic on an inconsistent plan.
FailureOr<Plan> readPlan(ModuleOp module, MeshOp mesh, StringRef ppAxis,
                         StringRef mbAxis);

} // namespace mlir::cleave::pipeline

#endif // CLEAVE_LIB_TRANSFORMS_PIPELINE_H
