//===- Estimate.h - Step time, MFU and memory of a plan ---------*- C++ -*-===//
//
// The entry point the planner and the tools call: model + cluster + plan
// -> step time, throughput, MFU / HFU, where the time goes, and the memory
// of every pipeline stage. Definitions (Korthikanti et al. 2022, Sec. 6.3,
// as the calibration README states them):
//
//   model FLOPs    = the FLOPs of forward + backward of one step, counting
//                    matmuls only (a multiply-add is 2), attention over the
//                    full s x s score matrix; for GPT this is
//                    72 B L s h^2 (1 + s/(6h) + V/(12 h L)) (Eq. 7)
//   hardware FLOPs = model FLOPs + the recomputed forward FLOPs (full
//                    recompute: Narayanan Eq. 3, 96 B s l h^2 (...))
//   MFU / HFU      = (model / hardware FLOPs per step) / step time /
//                    (GPUs x dense peak of the plan's dtype)
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_ESTIMATE_H
#define CLEAVE_COSTMODEL_ESTIMATE_H

#include "cleave/CostModel/Defaults.h"
#include "cleave/CostModel/Memory.h"
#include "cleave/CostModel/Schedule.h"
#include "cleave/CostModel/Simulator.h"

#include <memory>
#include <ostream>

namespace cleave::cost {

struct EstimateOptions {
  /// Keep the program and every task's timing for writeTrace().
  bool keepTimeline = false;
  /// Simulate one rank per pipeline stage (false: every GPU; testing only).
  bool symmetric = true;
  /// The constants; nullptr: defaultConstants().
  const CostConstants *constants = nullptr;
  /// The fraction of device memory a plan must leave free to fit.
  double memoryHeadroom = kDefaultMemoryHeadroom;
};

struct Estimate {
  int numGpus = 0;
  double peakFlopsPerGpu = 0;
  double stepTime = 0;
  double tokensPerSecond = 0;
  /// Whole step, whole cluster.
  double modelFlops = 0, hardwareFlops = 0;
  double modelTflopsPerGpu = 0, hardwareTflopsPerGpu = 0;
  double mfu = 0, hfu = 0;
  /// MFU against the bf16 peak: the convention of published fp8 runs,
  /// which report fp8 training against the 16-bit peak (equal to `mfu`
  /// unless the plan computes in fp8).
  double mfuBf16Peak = 0;
  /// Where the time of the rank that finishes last went.
  TimeBreakdown breakdown;
  /// A measured shared host's CPU seconds per step per node, and its
  /// collectives' part (SimulationResult::hostCpuSeconds; 0 elsewhere).
  double hostCpuSeconds = 0, hostCommCpuSeconds = 0;
  int criticalStage = 0;
  std::vector<MemoryBreakdown> memoryPerStage;
  /// The stage with the largest total, and whether every stage fits.
  int peakMemoryStage = 0;
  bool fits = true;
  /// The per-rank costs the program was built from.
  Workload workload;
  /// Present with EstimateOptions::keepTimeline.
  std::shared_ptr<const Program> program;
  SimulationResult simulation;

  const MemoryBreakdown &peakMemory() const {
    return memoryPerStage[size_t(peakMemoryStage)];
  }
};

/// Estimates one training step of `plan`. Fails with a message naming the
/// field when the plan does not fit the model or cluster.
Result<Estimate> estimate(const ModelConfig &model, const ClusterSpec &cluster,
                          const ParallelPlan &plan,
                          const EstimateOptions &options = {});

/// estimate() for a valid plan (validatePlan) whose workload is already
/// built: `workload` must be buildWorkload(model, cluster, plan, constants).
/// The planner builds one workload for the many plans that share it (they
/// differ only in pp, dp, schedule and ZeRO stage).
Result<Estimate> estimateWithWorkload(const ModelConfig &model,
                                      const ClusterSpec &cluster,
                                      const ParallelPlan &plan,
                                      Workload workload,
                                      const EstimateOptions &options = {});

/// A readable report: throughput, MFU, time by category and axis, memory
/// per GPU by category and whether it fits in the usable memory (the
/// capacity less the headroom). Report.h has the shared formats and names.
std::string formatReport(const Estimate &e, const ModelConfig &model,
                         const ClusterSpec &cluster, const ParallelPlan &plan);

/// The estimate as JSON (seconds, bytes, FLOP/s).
std::string estimateToJson(const Estimate &e, const ModelConfig &model,
                           const ClusterSpec &cluster,
                           const ParallelPlan &plan);

/// Writes the timeline as Chrome trace JSON; the estimate must have been
/// made with keepTimeline.
Result<bool> writeTrace(const Estimate &e, std::ostream &out);

} // namespace cleave::cost

#endif // CLEAVE_COSTMODEL_ESTIMATE_H
