//===- FrontHalf.cpp - The front half: global IR to per-device IR ---------===//

#include "cleave/Pipelines/FrontHalf.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::cleave;

void mlir::cleave::buildTrainStepPipeline(OpPassManager &pm,
                                          const FrontHalfOptions &options) {
  if (options.stages > 1) {
    CleavePipelineStagesPassOptions stages;
    stages.stages = options.stages;
    stages.layersPerStage = options.layersPerStage;
    pm.addPass(createCleavePipelineStagesPass(stages));
  }
  if (options.trainStep) {
    pm.addPass(createCleaveAutodiffPass(options.autodiff));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
}

void mlir::cleave::buildPartitionPipeline(OpPassManager &pm,
                                          const FrontHalfOptions &options) {
  // A pipelined plan partitions the scheduled steps alone: any other
  // function (the forward function the step was built from) would keep
  // its sums over micro-batches, which only cleave-pipeline turns into
  // accumulation.
  if (options.pipeline && options.partition) {
    llvm::SmallVector<std::string> entries(options.pipelineEntries.begin(),
                                           options.pipelineEntries.end());
    if (entries.empty())
      entries.push_back("train_step");
    pm.addPass(createSymbolPrivatizePass(entries));
    pm.addPass(createSymbolDCEPass());
  }
  if (options.plan)
    pm.addPass(createCleaveApplyPlanPass(*options.plan));
  if (options.partition) {
    // Recomputation as the plan says, before propagation: the recomputed
    // ops are sharded like the rest of the backward pass.
    pm.addPass(createCleaveRematPass());
    pm.addPass(createCleavePropagateShardingPass());
    pm.addPass(createCleavePartitionPass(options.partitionOptions));
  }
  if (options.pipeline) {
    CleavePipelinePassOptions pipeline;
    pipeline.entries = options.pipelineEntries;
    pm.addPass(createCleavePipelinePass(pipeline));
  }
  // A pipeline is bucketed once its rank functions exist: the epilogue's
  // data-parallel reductions of the accumulated gradients.
  if ((options.partition || options.pipeline) && options.bucketBytes > 0) {
    CleaveBucketCollectivesPassOptions buckets;
    buckets.bucketBytes = options.bucketBytes;
    pm.addPass(createCleaveBucketCollectivesPass(buckets));
  }
  if (options.asyncCollectives && (options.partition || options.pipeline))
    pm.addPass(createCleaveAsyncCollectivesPass());
  if (options.verify)
    pm.addPass(createCleaveVerifyCollectivesPass());
}

void mlir::cleave::buildFrontHalfPipeline(OpPassManager &pm,
                                          const FrontHalfOptions &options) {
  buildTrainStepPipeline(pm, options);
  buildPartitionPipeline(pm, options);
}
