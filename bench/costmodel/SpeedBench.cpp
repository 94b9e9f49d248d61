//===- SpeedBench.cpp - How fast estimate() is at scale -------------------===//
//
// Times cost::estimate() (workload, program, simulation, memory) on large
// plans, as the planner calls it, and prints milliseconds per call.
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Estimate.h"
#include "cleave/Support/ClosedPipe.h"

#include <chrono>
#include <cstdio>

using namespace cleave;
using namespace cleave::cost;

namespace {

struct Case {
  const char *what;
  const char *model;
  const char *cluster;
  ParallelPlan plan;
};

ParallelPlan plan(int tp, int pp, int dp, int cp, int64_t m, Schedule s, int v,
                  int zero) {
  ParallelPlan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.cp = cp;
  p.sequenceParallel = tp > 1;
  p.numMicroBatches = m;
  p.schedule = s;
  p.virtualStages = v;
  p.zeroStage = zero;
  p.recompute = Recompute::Selective;
  p.overlapGradReduce = p.overlapParamGather = true;
  return p;
}

double timeIt(const ModelConfig &m, const ClusterSpec &cl,
              const ParallelPlan &p, int reps, Estimate &last) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) {
    Result<Estimate> e = estimate(m, cl, p);
    if (!e) {
      std::fprintf(stderr, "estimate failed: %s\n", e.error().c_str());
      return -1;
    }
    last = *e;
  }
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(t1 - t0).count() / reps;
}

} // namespace

int main() {
  ::cleave::exitQuietlyOnClosedStdoutPosix();
  Case cases[] = {
      {"1,024 GPUs", "gpt3-175b", "dgx-a100-80gb",
       plan(8, 8, 16, 1, 128, Schedule::Interleaved1F1B, 3, 1)},
      {"1,024 GPUs", "llama3-70b", "dgx-h100",
       plan(8, 4, 32, 1, 64, Schedule::OneFOneB, 1, 1)},
      {"16,384 GPUs", "llama3-405b", "dgx-h100",
       plan(8, 16, 128, 1, 16, Schedule::Interleaved1F1B, 2, 1)},
      {"16,384 GPUs", "llama3-405b", "dgx-h100",
       plan(8, 16, 64, 2, 32, Schedule::OneFOneB, 1, 1)},
      {"16,384 GPUs", "gpt3-175b", "dgx-h100",
       plan(8, 16, 128, 1, 64, Schedule::ZeroBubbleH1, 1, 1)},
      {"16,384 GPUs", "gpt3-175b", "dgx-h100",
       plan(4, 1, 4096, 1, 1, Schedule::OneFOneB, 1, 3)},
  };
  std::printf("%-12s %-12s %-14s %-58s %10s %10s %7s\n", "scale", "model",
              "cluster", "plan", "ms/call", "step s", "MFU");
  for (const Case &c : cases) {
    ModelConfig m = *lookupPreset(c.model);
    Result<ClusterSpec> cl =
        lookupClusterPreset(c.cluster, c.plan.numGpus() / 8);
    Estimate e;
    timeIt(m, *cl, c.plan, 1, e); // warm up
    double sec = timeIt(m, *cl, c.plan, 5, e);
    std::printf("%-12s %-12s %-14s %-58s %10.2f %10.3f %6.1f%%\n", c.what,
                c.model, c.cluster, describe(c.plan).substr(0, 58).c_str(),
                sec * 1e3, e.stepTime, 100 * e.mfu);
  }
  return 0;
}
