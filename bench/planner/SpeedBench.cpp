//===- SpeedBench.cpp - How long a full plan search takes -----------------===//
//
// Times the planner's search on the two reference problems, GPT-3
// 175B on 1,024 A100s and Llama-3 405B on 16,384 H100s (targets: 10 s and
// 30 s on a 2-core machine), plus smaller ones, and prints the chosen plan.
// With --ir it also builds each model's program, solves the intra-op ILP of
// the chosen plan's stages and annotates the module (planModule).
//
// Usage: cleave-planner-speed [--repeat N]
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Explain.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

using namespace cleave;

namespace {

struct Problem {
  const char *model, *cluster;
  int gpus;
  int64_t globalBatch;
};

} // namespace

int main(int argc, char **argv) {
  int repeat = 1;
  for (int a = 1; a + 1 < argc; ++a)
    if (std::string(argv[a]) == "--repeat")
      repeat = std::max(1, std::atoi(argv[a + 1]));
  const Problem problems[] = {
      {"gpt3-175b", "dgx-a100-80gb", 1024, 1536},
      {"llama3-405b", "dgx-h100", 16384, 2048},
      {"llama3-70b", "dgx-h100", 1024, 1024},
      {"llama3-8b", "dgx-h100", 64, 512},
  };
  std::printf("%-12s %-14s %6s %6s  %8s %8s %7s %9s  %s\n", "model", "cluster",
              "GPUs", "batch", "search s", "plans", "visited", "simulated",
              "chosen plan (step, MFU)");
  for (const Problem &p : problems) {
    ModelConfig model = *lookupPreset(p.model);
    cost::ClusterSpec cluster =
        *cost::lookupClusterPreset(p.cluster, p.gpus / 8);
    planner::PlannerOptions o;
    o.globalBatch = p.globalBatch;
    double best = 1e300;
    cost::Result<planner::SearchResult> r =
        cost::Result<planner::SearchResult>::failure("not run");
    for (int i = 0; i < repeat; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      r = planner::searchPlans(model, cluster, o);
      best = std::min(best, std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - t0)
                                .count());
    }
    if (!r || !r->best) {
      std::printf("%-12s error: %s\n", p.model,
                  r ? "no plan fits" : r.error().c_str());
      continue;
    }
    std::printf("%-12s %-14s %6d %6lld  %8.2f %8lld %7lld %9lld  %s (%.3f s, "
                "MFU %.1f%%)\n",
                p.model, p.cluster, p.gpus, (long long)p.globalBatch, best,
                (long long)r->stats.candidates, (long long)r->stats.visited,
                (long long)r->stats.simulated,
                cost::describe(r->best->plan).c_str(), r->best->stepTime,
                100 * r->best->mfu);
  }
  return 0;
}
