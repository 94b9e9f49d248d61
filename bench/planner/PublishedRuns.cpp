//===- PublishedRuns.cpp - The planner against published plans ------------===//
//
// For every row of published_runs.json: give the planner the row's model,
// cluster (GPU count and node type) and global batch, with the row's
// implementation (precision, attention kernel, overlap flags, dropout), and
// compare the plan it finds with the row's published plan under the same
// cost model: the ratio of predicted throughputs (>= 1: the planner's plan
// is at least as fast), whether each fits in memory, and the search time.
//
// The rows are read, and the fields they leave out derived, by
// bench/common/PublishedRuns.cpp, as for the calibration benchmark.
//
// Usage: cleave-planner-published-runs [published_runs.json] [--row N]
//
//===----------------------------------------------------------------------===//

#include "PublishedRuns.h"
#include "cleave/Planner/Explain.h"
#include "cleave/Support/ClosedPipe.h"

#include <cmath>
#include <cstdio>
#include <fstream>

using namespace cleave;
using namespace cleave::bench;
using namespace cleave::cost;

namespace {

struct Row {
  double publishedStep, plannedStep, seconds;
  bool publishedFits, plannedFits;
};

std::optional<Row> runRow(const PublishedRun &run) {
  size_t i = run.row;
  const ModelConfig &model = run.model;
  const ParallelPlan &published = run.plan;
  int gpus = run.gpus;
  Result<ClusterSpec> cluster = clusterOf(run);
  if (!cluster) {
    std::printf("%-3zu error: %s\n", i, cluster.error().c_str());
    return std::nullopt;
  }
  Result<Estimate> pub = estimate(model, *cluster, published);
  planner::PlannerOptions o;
  o.globalBatch = published.globalBatch();
  o.gpus = gpus;
  o.implementation = published;
  Result<planner::SearchResult> r = planner::searchPlans(model, *cluster, o);
  if (!pub || !r || !r->best) {
    std::printf(
        "%-3zu error: %s\n", i,
        !pub ? pub.error().c_str()
        : !r ? r.error().c_str()
             : (r->infeasible.empty() ? "no plan" : r->infeasible[0].c_str()));
    return std::nullopt;
  }
  const planner::Candidate &best = *r->best;
  Row out{pub->stepTime, best.stepTime, r->stats.seconds, pub->fits, best.fits};
  auto brief = [](const ParallelPlan &p) {
    char s[96];
    std::snprintf(s, sizeof(s), "tp%d pp%d dp%d cp%d mb%lld %s%s z%d %s%s",
                  p.tp, p.pp, p.dp, p.cp, (long long)p.microBatchSize,
                  p.schedule == Schedule::Interleaved1F1B ? "v" : "",
                  p.schedule == Schedule::Interleaved1F1B
                      ? std::to_string(p.virtualStages).c_str()
                      : toString(p.schedule),
                  p.zeroStage,
                  p.recomputePerStage.empty() ? toString(p.recompute)
                                              : "per-stage",
                  p.sequenceParallel ? " sp" : "");
    return std::string(s);
  };
  std::printf("%-3zu %-5s %5d  %-40s %8.3f %-4s  %-44s %8.3f %-4s %6.3f "
              "%6.2f\n",
              i, model.name.c_str(), gpus, brief(published).c_str(),
              out.publishedStep, out.publishedFits ? "fits" : "OOM",
              brief(best.plan).c_str(), out.plannedStep,
              out.plannedFits ? "fits" : "OOM",
              out.publishedStep / out.plannedStep, out.seconds);
  return out;
}

} // namespace

int main(int argc, char **argv) {
  ::cleave::exitQuietlyOnClosedStdoutPosix();
  std::string path = defaultPublishedRunsPath();
  long only = -1;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "--row" && a + 1 < argc)
      only = std::stol(argv[++a]);
    else
      path = arg;
  }
  Result<std::vector<PublishedRun>> runs = loadPublishedRuns(path);
  if (!runs) {
    std::fprintf(stderr, "%s\n", runs.error().c_str());
    return 1;
  }
  std::printf("%-3s %-5s %5s  %-40s %8s %-4s  %-44s %8s %-4s %6s %6s\n", "row",
              "model", "GPUs", "published plan", "step s", "mem",
              "planner's plan", "step s", "mem", "ratio", "search");
  int n = 0, atLeast = 0, fitting = 0;
  double worst = 1e9, totalSeconds = 0, maxSeconds = 0;
  for (const PublishedRun &run : *runs) {
    if (only >= 0 && size_t(only) != run.row)
      continue;
    std::optional<Row> r = runRow(run);
    if (!r)
      continue;
    ++n;
    double ratio = r->publishedStep / r->plannedStep;
    atLeast += ratio >= 1 - 1e-12;
    fitting += r->plannedFits;
    worst = std::min(worst, ratio);
    totalSeconds += r->seconds;
    maxSeconds = std::max(maxSeconds, r->seconds);
  }
  std::printf("\nrows: %d  planner at least as fast as published: %d  "
              "planner's plan fits: %d  smallest ratio: %.3f  search time: "
              "%.1f s total, %.2f s max\n",
              n, atLeast, fitting, worst, totalSeconds, maxSeconds);
  return atLeast == n && fitting == n ? 0 : 1;
}
