//===- Registration.cpp - Cleave's named pipelines for cleave-opt ---------===//

#include "cleave/Pipelines/Registration.h"
#include "cleave/Pipelines/FrontHalf.h"
#include "cleave/Pipelines/Lowering.h"
#include "cleave/Pipelines/Plan.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {
/// The textual options of `cleave-distribute`.
struct DistributeCLOptions : public PassPipelineOptions<DistributeCLOptions> {
  Option<std::string> plan{
      *this, "plan",
      llvm::cl::desc("Named plan as cleave-run --plan takes it, e.g. "
                     "dp=2,tp=2,sp or pp=2,micro=4,schedule=1f1b (empty: "
                     "the program's own shardings)"),
      llvm::cl::init("")};
  Option<int> ranks{*this, "ranks",
                    llvm::cl::desc("Ranks: dp defaults to those tp and pp "
                                   "leave over (0: dp=1)"),
                    llvm::cl::init(0)};
  Option<bool> trainStep{*this, "train-step",
                         llvm::cl::desc("Build @train_step from @forward "
                                        "(cleave-autodiff) first"),
                         llvm::cl::init(true)};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("adamw, sgd or none"),
                                llvm::cl::init("adamw")};
  Option<bool> verify{*this, "verify",
                      llvm::cl::desc("End with cleave-verify-collectives"),
                      llvm::cl::init(true)};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("Largest gradient/ZeRO bucket in bytes "
                     "(cleave-bucket-collectives; 0: none)"),
      llvm::cl::init(25 * 1024 * 1024)};
  Option<bool> asyncCollectives{
      *this, "async-collectives",
      llvm::cl::desc("Split collectives into start/wait pairs that overlap "
                     "compute (cleave-async-collectives)"),
      llvm::cl::init(true)};
};

/// The textual options of `cleave-lower-to-cuda`.
struct CUDAPipelineCLOptions
    : public PassPipelineOptions<CUDAPipelineCLOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("GPU architecture"),
                           llvm::cl::init("sm_90")};
  Option<std::string> ptxas{*this, "ptxas",
                            llvm::cl::desc("Path of ptxas (default: found "
                                           "under CUDA_HOME or "
                                           "/usr/local/cuda)"),
                            llvm::cl::init("")};
  Option<std::string> report{
      *this, "ptxas-report",
      llvm::cl::desc("Write ptxas' per-kernel resource usage to this JSON "
                     "file ('-': a table on stderr)"),
      llvm::cl::init("")};
  Option<int64_t> blockSize{*this, "block-size",
                            llvm::cl::desc("Threads per block"),
                            llvm::cl::init(256)};
  Option<int64_t> vectorBits{*this, "vector-bits",
                             llvm::cl::desc("Vector access width (0: none)"),
                             llvm::cl::init(128)};
  Option<int64_t> attentionTile{
      *this, "attention-tile",
      llvm::cl::desc("Rows of the flash attention tiles (0: materialise "
                     "the full probabilities)"),
      llvm::cl::init(CUDAPipelineOptions().attentionTile)};
};

struct CPUPipelineCLOptions : public PassPipelineOptions<CPUPipelineCLOptions> {
  Option<int64_t> attentionTile{
      *this, "attention-tile",
      llvm::cl::desc("Rows of the flash attention tiles (0: materialise "
                     "the full probabilities)"),
      llvm::cl::init(CPUPipelineOptions().attentionTile)};
};

/// `cleave-distribute`: the front half as FrontHalfOptions from the text.
LogicalResult buildDistribute(OpPassManager &pm, StringRef text,
                              function_ref<LogicalResult(const Twine &)> fail) {
  DistributeCLOptions cl;
  if (failed(cl.parseFromString(text)))
    return failure();
  FrontHalfOptions options;
  options.trainStep = cl.trainStep;
  options.autodiff.optimizer = cl.optimizer;
  options.verify = cl.verify;
  options.bucketBytes = cl.bucketBytes;
  options.asyncCollectives = cl.asyncCollectives;
  if (!cl.plan.empty()) {
    llvm::Expected<PlanSpec> plan =
        parsePlan(cl.plan, cl.ranks, "cleave-distribute plan");
    if (!plan)
      return fail(llvm::toString(plan.takeError()));
    if (plan->automatic)
      return fail("cleave-distribute plan: 'auto' needs the planner: run "
                  "cleave-auto-shard first, then cleave-distribute without "
                  "a plan");
    options.stages = plan->stages();
    options.layersPerStage = plan->layersPerStage;
    options.plan = plan->named;
    options.pipeline = plan->pipelines();
  }
  buildFrontHalfPipeline(pm, options);
  return success();
}
} // namespace

void mlir::cleave::registerCleavePipelines() {
  registerPassPipeline(
      "cleave-distribute",
      "The front half: the training step of @forward, a named plan, "
      "sharding propagation, partitioning, the pipeline schedule and the "
      "proof that every rank's collectives match; the result has local "
      "shapes, ready for cleave-lower-to-cpu or cleave-lower-to-cuda",
      buildDistribute,
      [](function_ref<void(const detail::PassOptions &)> print) {
        print(DistributeCLOptions());
      });
  PassPipelineRegistration<CPUPipelineCLOptions>(
      "cleave-lower-to-cpu",
      "Lower a cleave program with local shapes to the LLVM dialect for the "
      "CPU, with runtime GEMM calls and cleave_entry_* functions",
      [](OpPassManager &pm, const CPUPipelineCLOptions &cl) {
        CPUPipelineOptions options;
        options.attentionTile = cl.attentionTile;
        buildCPULoweringPipeline(pm, options);
      });
  PassPipelineRegistration<CUDAPipelineCLOptions>(
      "cleave-lower-to-cuda",
      "Lower a cleave program with local shapes to host code in the LLVM "
      "dialect that launches sm_90 cubins and calls the CUDA runtime",
      [](OpPassManager &pm, const CUDAPipelineCLOptions &cl) {
        CUDAPipelineOptions options;
        options.chip = cl.chip;
        options.ptxas = cl.ptxas;
        options.ptxasReport = cl.report;
        options.blockSize = cl.blockSize;
        options.vectorBits = cl.vectorBits;
        options.attentionTile = cl.attentionTile;
        buildCUDALoweringPipeline(pm, options);
      });
}
