//===- Compile.h - Compile a training step for N ranks ----------*- C++ -*-===//
//
// The driver of the front half (FrontHalf.h): from a forward function (or a
// training step) with global shapes to the per-device program that N ranks
// run, deciding each stage from the program and the plan - the stage split
// for a pipelined plan, the training step unless the program has one, the
// named plan, the planner's plan (`auto`), or data parallelism over the
// ranks, then propagation, partitioning and the pipeline schedule when the
// mesh has a pipeline axis. Lowering (Lowering.h) follows, in
// lib/Execution's JIT or object-file compiler.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PIPELINES_COMPILE_H
#define CLEAVE_PIPELINES_COMPILE_H

#include "cleave/CostModel/Plan.h"
#include "cleave/Execution/Manifest.h"
#include "cleave/Execution/Prediction.h"
#include "cleave/ModelConfig/ModelConfig.h"
#include "cleave/Pipelines/Plan.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"
#include <optional>
#include <string>

namespace mlir::cleave {

/// Collects the diagnostics emitted while it lives (for error messages of
/// library calls that run passes).
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext *ctx);
  /// Every diagnostic so far, one per line ("loc: message", then notes).
  std::string text;

private:
  ScopedDiagnosticHandler handler;
};

/// How to compile a program for N ranks.
struct RankCompileOptions {
  /// Ranks the program runs on.
  int world = 1;
  /// The plan; none: the program's own mesh, or data parallelism over
  /// `world` when it has none and `world` > 1.
  std::optional<PlanSpec> plan;
  /// How messages name the plan ("--plan" for cleave-run).
  std::string planName = "plan";
  /// The training step to build unless the program has @train_step.
  CleaveAutodiffPassOptions autodiff;
  /// Keep the functions other than @train_step (and what it calls), e.g.
  /// @forward for an object file. Never kept for a pipelined plan, which
  /// could not partition them.
  bool keepOtherFunctions = false;
  /// Also build @eval_step: @forward with dropout off, partitioned with the
  /// same plan as @train_step (so its parameters are laid out alike), for
  /// a validation loss. Plans that pipeline (stages or micro-batches) and
  /// the planner's plans cannot have one (an error).
  bool evalStep = false;
  /// The zoo configuration the program was built from, if it was (the
  /// planner's cost model uses it; predictions fall back to its formulas
  /// where the program's ops cannot price a plan).
  std::optional<::cleave::ModelConfig> model;
  /// Largest gradient/ZeRO bucket in bytes (cleave-bucket-collectives);
  /// 0: one collective per tensor. Pipelined programs are not bucketed.
  int64_t bucketBytes = 25 * 1024 * 1024;
  /// Overlap communication with compute (cleave-async-collectives): on by
  /// default; off, every collective blocks where the program has it.
  bool asyncCollectives = true;
  /// Run cleave-verify-collectives at the end (the lowering pipelines
  /// begin with it anyway).
  bool verify = false;
  /// Where the planner's choice is reported (`auto`); null: nowhere.
  llvm::raw_ostream *log = nullptr;
  /// Where the planner's prediction of its choice goes (`auto`), and with
  /// `predict` that of a named plan; null: nowhere.
  StepPrediction *plannerPrediction = nullptr;
  /// Also report to `log` what the cost model predicts for the plan the
  /// ranks run (predictLocalStep; an error if it cannot): "predicted by
  /// the cost model: X ms/step, peak memory Y MiB per rank". `auto` always
  /// reports its prediction.
  bool predict = false;
  /// The cluster whose links rank the partitioner's resharding choices
  /// (cleave-partition's `cluster`): local-cpu, this machine's `world`
  /// processes (measured when CLEAVE_LOCAL_CPU_SPEC names a spec), a
  /// preset, or a JSON cluster file; empty: the pass's default preset.
  std::string partitionCluster = "local-cpu";
};

/// Turns `module` in place into the per-device program of
/// `options.world` ranks: one module whose functions have local shapes and
/// whose mesh has one device per rank (a pipelined program has one step
/// function per stage; the manifest says which rank runs which).
/// Diagnostics of the passes go to the context's handlers; the error says
/// which stage failed.
llvm::Error compileForRanks(ModuleOp module, const RankCompileOptions &options);

/// The cost model's plan of named plan `spec` for a training step of
/// `globalBatch` sequences computed in `dtype` (the inverse of how a
/// planner's choice is run as a named plan): the micro-batch size is the
/// batch over dp x micro; per-stage recomputation has no single kind and
/// is left at none. With `step`, the training step's options (gradient
/// clipping, dynamic loss scaling) are priced as it runs them; without, as
/// the cost model's defaults.
::cleave::cost::ParallelPlan
costPlanOf(const PlanSpec &spec, int64_t globalBatch, ::cleave::DType dtype,
           const CleaveAutodiffPassOptions *step = nullptr);

/// costPlanOf for a zoo model: its batch and dtype.
::cleave::cost::ParallelPlan
costPlanOf(const PlanSpec &spec, const ::cleave::ModelConfig &model,
           const CleaveAutodiffPassOptions *step = nullptr);

/// costPlanOf for the training step in `module` (a file or a front-end
/// export): the batch and dtype as the planner reads them
/// (planner::readModuleStep: the leading dimension of the first
/// cleave.input of @train_step, the float type of most FLOPs). An error
/// says what the module lacks.
llvm::Expected<::cleave::cost::ParallelPlan>
costPlanOf(const PlanSpec &spec, ModuleOp module,
           const CleaveAutodiffPassOptions *step = nullptr);

/// What the cost model predicts for one training step of `program` (as
/// loaded: compileForRanks builds its training step on a copy) under
/// `options.plan` (none: data parallel over the ranks) on `options.world`
/// processes of this machine, priced as the planner prices its candidates:
/// the plan's cost-model form read from the module (costPlanOf), priced by
/// planner::estimateModulePlan on the local-cpu cluster of `--plan auto`
/// (CLEAVE_LOCAL_CPU_SPEC's measured one when set) - from the module's
/// ops, by a preset's formulas for a mixture of experts under expert
/// parallelism, or op by op in graph mode for a module without repeated
/// blocks. A zoo transformer (`options.model`) whose ops cannot price the
/// plan gets its preset's formulas, and the source says why. An error says
/// why there is none (the planner's plan: choosePlan predicts that one; a
/// program with its own mesh; an op or plan field the module path cannot
/// price, named).
llvm::Expected<StepPrediction>
predictLocalStep(ModuleOp program, const RankCompileOptions &options);

/// Runs the planner for `world` processes of this machine (cluster
/// local-cpu) under `plan`'s constraints on the training step in `module`,
/// writes its plan into it (shardings of a plan without pipeline), reports
/// the chosen plan and its predicted step time to `log`, and returns it.
/// compileForRanks runs a pipelined choice as its named plan.
llvm::Expected<::cleave::cost::ParallelPlan>
choosePlan(ModuleOp module, const PlanSpec &plan,
           const RankCompileOptions &options);

} // namespace mlir::cleave

#endif // CLEAVE_PIPELINES_COMPILE_H
