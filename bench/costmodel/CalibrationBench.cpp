//===- CalibrationBench.cpp - The cost model against published runs ------===//
//
// For every row of published_runs.json: build the model, cluster and plan
// from the row alone, estimate the step, and compare the row's measured
// quantity (step time if given, else TFLOP/s per GPU, else MFU) under the
// row's own definition. Prints per-row errors and the mean absolute error.
// Only the global constants of CostConstants and the presets are used: no
// per-row or per-model adjustment, and the measured values are read only to
// print the comparison.
//
// Then the out-of-sample validation (Validation.h): leave-one-source-out,
// ratio errors and two null models, all fitted the same way.
//
// Usage: cleave-costmodel-calibration [--gpu NAME:GEMM:MEMORY]...
//            [--constants FILE] [--detail ROW] [--quick] [--no-validation]
//            [--validation-json FILE] [--check-memory] [published_runs.json]
//
// --check-memory prints each row's peak memory per GPU beside its device's
// and fails if a published plan, which ran, is predicted not to fit.
//
// The rows are read, and the fields they leave out derived, by
// bench/common/PublishedRuns.cpp (shared with the planner's bench).
//
//===----------------------------------------------------------------------===//

#include "PublishedRuns.h"
#include "Validation.h"
#include "cleave/CostModel/Estimate.h"
#include "cleave/Support/ClosedPipe.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>

using namespace cleave;
using namespace cleave::bench;
using namespace cleave::cost;

namespace {

/// The constants in use (defaults unless --constants FILE is given).
CostConstants gConstants;
/// GPU efficiency overrides from --gpu NAME:GEMM:MEMORY (for re-fitting).
std::map<std::string, std::pair<double, double>> gGpuOverrides;

/// The run's cluster with the --gpu efficiency overrides.
Result<ClusterSpec> clusterWithOverrides(const PublishedRun &run) {
  Result<ClusterSpec> c = bench::clusterOf(run);
  if (!c)
    return c;
  auto it = gGpuOverrides.find(c->gpu.name);
  if (it != gGpuOverrides.end()) {
    c->gpu.gemmEfficiency = it->second.first;
    c->gpu.memoryEfficiency = it->second.second;
  }
  return c;
}

/// Prints the per-layer kernels and collectives of one row with their
/// times (for diagnosis; the numbers behind the row's prediction).
void printDetail(const PublishedRun &run) {
  const ModelConfig &model = run.model;
  const ParallelPlan &plan = run.plan;
  Result<ClusterSpec> cluster = clusterWithOverrides(run);
  if (!cluster) {
    std::printf("error: %s\n", cluster.error().c_str());
    return;
  }
  const ClusterSpec &cl = *cluster;
  const CostConstants &c = gConstants;
  std::printf("%s\n", describe(plan).c_str());
  auto show = [&](const char *title, const std::vector<WorkItem> &items) {
    std::printf("%s\n", title);
    double sum[3] = {0, 0, 0};
    for (const WorkItem &it : items) {
      double t;
      if (it.isComm) {
        t = costPhase({it}, it.phase, cl, plan, c).total();
      } else {
        t = kernelTime(it.kernel, cl.gpu, c);
      }
      sum[int(it.phase)] += t;
      double eff = it.conventionFlops > 0
                       ? it.conventionFlops / t / cl.gpu.peakFlops(plan.dtype)
                       : 0;
      std::printf("  %-3s %-34s %9.3f ms  %5.1f%% of peak\n",
                  it.phase == Phase::Forward    ? "F"
                  : it.phase == Phase::Backward ? "B"
                                                : "W",
                  it.name, t * 1e3, 100 * eff);
    }
    std::printf("  total F %.3f ms  B %.3f ms  W %.3f ms\n", sum[0] * 1e3,
                sum[1] * 1e3, sum[2] * 1e3);
  };
  show("layer", layerItems(model, plan));
  show("head", headItems(model, plan));
  EstimateOptions eo;
  eo.constants = &gConstants;
  Result<Estimate> e = estimate(model, cl, plan, eo);
  if (e) {
    const TimeBreakdown &b = e->breakdown;
    std::printf("step %.4f s: fwd %.4f bwd %.4f wgrad %.4f recompute %.4f "
                "optimizer %.4f bubble %.4f tp %.4f cp %.4f dp %.4f pp "
                "%.4f\n",
                e->stepTime, b.forward, b.backward, b.weightGrad, b.recompute,
                b.optimizer, b.bubble, b.exposedComm[0], b.exposedComm[1],
                b.exposedComm[2], b.exposedComm[3]);
    const MemoryBreakdown &m = e->peakMemory();
    std::printf("memory (stage %d): params %.1f grads %.1f optimizer %.1f "
                "activations %.1f transient %.1f comm %.1f reserved %.1f = "
                "%.1f GB\n",
                e->peakMemoryStage, m.parameters / 1e9, m.gradients / 1e9,
                m.optimizerStates / 1e9, m.activations / 1e9, m.transient / 1e9,
                m.communication / 1e9, m.reserved / 1e9, m.total() / 1e9);
  }
}

/// The options besides the rows' file.
struct Options {
  std::optional<size_t> detail;
  bool quick = false, validate = true, checkMemory = false;
  std::string validationJson;
};

/// Consumes the leading options; false (after saying why) on a bad one.
bool parseOptions(int &argc, char **&argv, Options &o) {
  while (argc > 1 && std::string(argv[1]).rfind("--", 0) == 0) {
    std::string opt = argv[1];
    if (opt == "--quick" || opt == "--no-validation" ||
        opt == "--check-memory") {
      if (opt == "--check-memory")
        o.checkMemory = true;
      else
        (opt == "--quick" ? o.quick : o.validate) = opt == "--quick";
      argc -= 1;
      argv += 1;
      continue;
    }
    if (argc < 3) {
      std::fprintf(stderr, "%s: expected a value\n", opt.c_str());
      return false;
    }
    std::string value = argv[2];
    argc -= 2;
    argv += 2;
    if (opt == "--gpu") {
      size_t a = value.find(':'), b = value.rfind(':');
      if (a == std::string::npos || a == b) {
        std::fprintf(stderr, "--gpu expects NAME:GEMM_EFF:MEMORY_EFF\n");
        return false;
      }
      gGpuOverrides[value.substr(0, a)] = {
          std::stod(value.substr(a + 1, b - a - 1)),
          std::stod(value.substr(b + 1))};
    } else if (opt == "--constants") {
      std::ifstream in(value);
      std::string text((std::istreambuf_iterator<char>(in)),
                       std::istreambuf_iterator<char>());
      Result<CostConstants> c = constantsFromJson(text);
      if (!c) {
        std::fprintf(stderr, "%s: %s\n", value.c_str(), c.error().c_str());
        return false;
      }
      gConstants = *c;
    } else if (opt == "--detail") {
      o.detail = std::stoul(value);
    } else if (opt == "--validation-json") {
      o.validationJson = value;
    } else {
      std::fprintf(stderr, "unknown option %s\n", opt.c_str());
      return false;
    }
  }
  return true;
}

/// Estimates one row and prints its line; returns the relative error, or
/// nullopt if the row could not be estimated.
std::optional<double> runRow(const PublishedRun &run) {
  size_t i = run.row;
  Source src = run.source;
  const ModelConfig &model = run.model;
  const ParallelPlan &plan = run.plan;
  Result<ClusterSpec> cluster = clusterWithOverrides(run);
  EstimateOptions eo;
  eo.constants = &gConstants;
  Result<Estimate> e = cluster ? estimate(model, *cluster, plan, eo)
                               : Result<Estimate>::failure(cluster.error());
  if (!e) {
    std::printf("%-3zu %-11s error: %s\n", i, shortName(src),
                e.error().c_str());
    return std::nullopt;
  }
  Comparison c = compare(run, *e);
  double err = (c.predicted - c.measured) / c.measured;
  char planText[64];
  std::snprintf(planText, sizeof(planText),
                "tp%d pp%d dp%d mb%lld m%lld v%d z%d %s%s", plan.tp, plan.pp,
                plan.dp, (long long)plan.microBatchSize,
                (long long)plan.numMicroBatches, plan.chunks(), plan.zeroStage,
                toString(plan.recompute), plan.sequenceParallel ? " sp" : "");
  const TimeBreakdown &b = e->breakdown;
  auto pct = [&](double t) { return 100 * t / e->stepTime; };
  std::printf("%-3zu %-11s %-5s %5d  %-44s %-8s %9.3f %9.3f %+6.1f%%  "
              "%5.1f %5.1f %5.1f %5.1f %4s\n",
              i, shortName(src), model.name.c_str(), plan.numGpus(), planText,
              c.what, c.measured, c.predicted, 100 * err, pct(b.bubble),
              pct(b.exposedComm[size_t(Axis::DP)]),
              pct(b.exposedComm[size_t(Axis::TP)]),
              pct(b.exposedComm[size_t(Axis::PP)]), e->fits ? "fits" : "OOM");
  return err;
}

/// Every published plan ran, so each must fit its GPU: prints the peak
/// memory per GPU of every row and returns the number that do not fit.
int checkMemory(const std::vector<PublishedRun> &runs) {
  int failures = 0;
  std::printf("%-3s %-11s %-5s %-8s %9s %9s %s\n", "row", "source", "model",
              "gpu", "peak GB", "usable", "stage");
  for (const PublishedRun &run : runs) {
    Result<ClusterSpec> cluster = clusterWithOverrides(run);
    EstimateOptions eo;
    eo.constants = &gConstants;
    Result<Estimate> e = cluster ? estimate(run.model, *cluster, run.plan, eo)
                                 : Result<Estimate>::failure(cluster.error());
    if (!e) {
      std::printf("%-3zu error: %s\n", run.row, e.error().c_str());
      ++failures;
      continue;
    }
    const MemoryBreakdown &m = e->peakMemory();
    std::printf("%-3zu %-11s %-5s %-8.8s %9.2f %9.2f %d%s\n", run.row,
                shortName(run.source), run.model.name.c_str(),
                cluster->gpu.name.c_str(), m.total() / 1e9, m.usable() / 1e9,
                e->peakMemoryStage, m.fits() ? "" : "  DOES NOT FIT");
    failures += !m.fits();
  }
  std::printf("\n%d of %zu published plans predicted not to fit\n", failures,
              runs.size());
  return failures;
}

} // namespace

int main(int argc, char **argv) {
  ::cleave::exitQuietlyOnClosedStdoutPosix();
  Options opts;
  if (!parseOptions(argc, argv, opts))
    return 1;
  std::string path = argc > 1 ? argv[1] : defaultPublishedRunsPath();
  Result<std::vector<PublishedRun>> runs = loadPublishedRuns(path);
  if (!runs) {
    std::fprintf(stderr, "%s\n", runs.error().c_str());
    return 1;
  }
  if (opts.detail) {
    if (*opts.detail >= runs->size()) {
      std::fprintf(stderr, "--detail: %s has %zu rows\n", path.c_str(),
                   runs->size());
      return 1;
    }
    printDetail((*runs)[*opts.detail]);
    return 0;
  }
  if (opts.checkMemory)
    return checkMemory(*runs) == 0 ? 0 : 1;
  std::printf("%-3s %-11s %-5s %5s  %-44s %-8s %9s %9s %7s  %5s %5s %5s %5s "
              "%4s\n",
              "row", "source", "model", "GPUs", "plan", "quantity", "measured",
              "predicted", "error", "bub%", "dp%", "tp%", "pp%", "mem");
  double sumAbs = 0, maxAbs = 0;
  int n = 0;
  for (const PublishedRun &run : *runs) {
    if (std::optional<double> err = runRow(run)) {
      sumAbs += std::fabs(*err);
      maxAbs = std::max(maxAbs, std::fabs(*err));
      ++n;
    }
  }
  std::printf("\nrows: %d  mean absolute error: %.1f%%  max: %.1f%%\n", n,
              100 * sumAbs / std::max(n, 1), 100 * maxAbs);
  if (!opts.validate)
    return 0;
  ValidationOptions vo;
  vo.base = gConstants;
  vo.cluster = clusterWithOverrides;
  vo.quick = opts.quick;
  vo.jsonPath = opts.validationJson;
  return runValidation(*runs, vo) ? 0 : 1;
}
