//===- Estimate.cpp - Workload -> program -> simulation -> estimate -------===//

#include "cleave/CostModel/Estimate.h"

#include <algorithm>

namespace cleave::cost {

Result<Estimate> estimate(const ModelConfig &model, const ClusterSpec &cl,
                          const ParallelPlan &plan,
                          const EstimateOptions &options) {
  if (std::string err = validatePlan(plan, model, cl); !err.empty())
    return Result<Estimate>::failure(err);
  const CostConstants &c =
      options.constants ? *options.constants : defaultConstants();
  return estimateWithWorkload(model, cl, plan,
                              buildWorkload(model, cl, plan, c), options);
}

Result<Estimate> estimateWithWorkload(const ModelConfig &model,
                                      const ClusterSpec &cl,
                                      const ParallelPlan &plan,
                                      Workload workload,
                                      const EstimateOptions &options) {
  const CostConstants &c =
      options.constants ? *options.constants : defaultConstants();
  Estimate e;
  e.numGpus = plan.numGpus();
  e.peakFlopsPerGpu = cl.gpu.peakFlops(plan.dtype);
  e.workload = std::move(workload);
  auto program = std::make_shared<Program>(buildProgram(
      model, cl, plan, e.workload, c, ProgramOptions{options.symmetric}));
  SimulationOptions so;
  so.keepTimings = options.keepTimeline;
  Result<SimulationResult> sim = simulate(*program, c, so);
  if (!sim)
    return Result<Estimate>::failure(sim.error());
  e.stepTime = sim->stepTime;
  e.breakdown = sim->breakdown[size_t(sim->criticalRank)];
  e.hostCpuSeconds = sim->hostCpuSeconds;
  e.hostCommCpuSeconds = sim->hostCommCpuSeconds;
  e.criticalStage = program->ranks[size_t(sim->criticalRank)].stage;
  e.modelFlops = e.workload.modelFlopsPerStep;
  e.hardwareFlops = e.workload.hardwareFlopsPerStep;
  double perGpu = e.stepTime * e.numGpus;
  e.modelTflopsPerGpu = e.modelFlops / perGpu / 1e12;
  e.hardwareTflopsPerGpu = e.hardwareFlops / perGpu / 1e12;
  e.mfu = e.modelFlops / perGpu / e.peakFlopsPerGpu;
  e.hfu = e.hardwareFlops / perGpu / e.peakFlopsPerGpu;
  e.mfuBf16Peak = e.modelFlops / perGpu / cl.gpu.peakFlops(DType::BF16);
  e.tokensPerSecond =
      double(plan.globalBatch()) * double(model.seqLen) / e.stepTime;
  if (!(options.memoryHeadroom >= 0 && options.memoryHeadroom < 1))
    return Result<Estimate>::failure(
        "memory headroom: must be in [0, 1), got " +
        std::to_string(options.memoryHeadroom));
  e.memoryPerStage = memoryPerStage(model, cl, plan, e.workload, c);
  for (MemoryBreakdown &m : e.memoryPerStage)
    m.headroom = options.memoryHeadroom;
  for (size_t s = 0; s < e.memoryPerStage.size(); ++s) {
    if (e.memoryPerStage[s].total() >
        e.memoryPerStage[size_t(e.peakMemoryStage)].total())
      e.peakMemoryStage = int(s);
    e.fits = e.fits && e.memoryPerStage[s].fits();
  }
  if (options.keepTimeline) {
    e.program = program;
    e.simulation = std::move(*sim);
  }
  return e;
}

Result<bool> writeTrace(const Estimate &e, std::ostream &out) {
  if (!e.program || e.simulation.timings.empty())
    return Result<bool>::failure(
        "no timeline: estimate with EstimateOptions::keepTimeline");
  writeChromeTrace(*e.program, e.simulation, out);
  return true;
}

} // namespace cleave::cost
