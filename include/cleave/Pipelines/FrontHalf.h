//===- FrontHalf.h - The front half: global IR to per-device IR -*- C++ -*-===//
//
// The staged passes from a forward function with global shapes to the
// per-device training step: stage split, training step (autodiff), plan,
// propagation, partitioning, pipeline schedule, collective verification.
// The back half (Lowering.h) takes it from there. Compile.h drives both
// halves for N ranks, deciding each stage from the program.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PIPELINES_FRONTHALF_H
#define CLEAVE_PIPELINES_FRONTHALF_H

#include "cleave/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include <optional>
#include <vector>

namespace mlir::cleave {

/// Which stages of the front half run, and how.
struct FrontHalfOptions {
  /// Cut @forward into this many pipeline stages by layer before
  /// differentiating (cleave-pipeline-stages); 1: no cut.
  int64_t stages = 1;
  /// Layers of each of those stages, in model order (empty: an even split).
  std::vector<int64_t> layersPerStage;
  /// Build @train_step (cleave-autodiff), then canonicalize and CSE.
  bool trainStep = true;
  CleaveAutodiffPassOptions autodiff;
  /// Write this named plan into the module (cleave-apply-plan).
  std::optional<CleaveApplyPlanPassOptions> plan;
  /// Recompute as the plan says, complete the shardings and partition
  /// (cleave-remat, cleave-propagate-sharding, cleave-partition); needs a
  /// mesh, the plan's or the program's.
  bool partition = true;
  /// cleave-partition's options (the cluster that prices resharding).
  CleavePartitionPassOptions partitionOptions;
  /// Turn the stages into a schedule (cleave-pipeline); needs a mesh with a
  /// pipeline axis.
  bool pipeline = false;
  /// The steps cleave-pipeline schedules, the training step first (empty:
  /// train_step alone).
  llvm::SmallVector<std::string> pipelineEntries;
  /// Coalesce the partitioned program's gradient all-reduces and ZeRO
  /// all-gathers/reduce-scatters into buckets of at most this many bytes
  /// (cleave-bucket-collectives; after partitioning, or after
  /// cleave-pipeline for a pipelined program); 0: one collective per tensor.
  int64_t bucketBytes = 25 * 1024 * 1024;
  /// Split the partitioned (or pipelined) program's collectives and
  /// send/recv into start/wait pairs that overlap compute
  /// (cleave-async-collectives, after bucketing or cleave-pipeline).
  bool asyncCollectives = true;
  /// Prove every rank's collectives match (cleave-verify-collectives). The
  /// lowering pipelines begin with it too.
  bool verify = true;
};

/// The stages before planning: stage split, training step.
void buildTrainStepPipeline(OpPassManager &pm, const FrontHalfOptions &options);

/// The stages from the plan on: apply the plan, propagate, partition,
/// pipeline, verify.
void buildPartitionPipeline(OpPassManager &pm, const FrontHalfOptions &options);

/// The whole front half: buildTrainStepPipeline, then
/// buildPartitionPipeline.
void buildFrontHalfPipeline(OpPassManager &pm, const FrontHalfOptions &options);

} // namespace mlir::cleave

#endif // CLEAVE_PIPELINES_FRONTHALF_H
