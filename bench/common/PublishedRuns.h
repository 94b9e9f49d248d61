//===- PublishedRuns.h - The published training runs, read once -*- C++ -*-===//
//
// bench/costmodel/published_runs.json as models, clusters and plans: the
// cost-model calibration bench and the planner's published-runs bench both
// read it through this loader, so the fields a row leaves out are derived
// in one place (the derivations and their sources are in PublishedRuns.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_BENCH_COMMON_PUBLISHEDRUNS_H
#define CLEAVE_BENCH_COMMON_PUBLISHEDRUNS_H

#include "cleave/CostModel/Estimate.h"

#include <optional>
#include <string>
#include <vector>

namespace cleave::bench {

/// The publication a row comes from; it decides the derived fields.
enum class Source { Table1, Table2Ptd, Table2Zero3, Korthikanti, MegatronH100 };

/// "PTD-P T1", "ZeRO-3 T2", "MLM H100", ...
const char *shortName(Source source);

/// One published run: what was run and what was measured.
struct PublishedRun {
  /// Index of the row in the file.
  size_t row = 0;
  Source source = Source::Table1;
  ModelConfig model;
  cost::ParallelPlan plan;
  /// The cluster preset (DGX A100 80 GB or DGX H100) and the GPU count.
  std::string clusterPreset;
  int gpus = 0;
  /// The measured quantities the row gives.
  std::optional<double> stepTime, tflopsPerGpu, mfu;
};

/// The default file (the copy in the source tree).
std::string defaultPublishedRunsPath();

/// Reads every row of `path`; an error names the file, the row and the
/// field.
cost::Result<std::vector<PublishedRun>>
loadPublishedRuns(const std::string &path);

/// The run's cluster: its preset with just enough nodes of 8 GPUs.
cost::Result<cost::ClusterSpec> clusterOf(const PublishedRun &run);

/// The row's measured quantity and an estimate's prediction of it, under
/// the row's own definition: step time if the row gives it, else TFLOP/s
/// per GPU, else MFU.
struct Comparison {
  const char *what;
  double measured, predicted;
};
Comparison compare(const PublishedRun &run, const cost::Estimate &e);

/// The FLOPs per step (whole cluster) behind the row's TFLOP/s: Narayanan's
/// Eq. 3 (hardware FLOPs, recompute counted) for the A100 papers,
/// Megatron-Core's model FLOPs for the H100 rows.
double rowFlopsPerStep(const PublishedRun &run, const cost::Estimate &e);

} // namespace cleave::bench

#endif // CLEAVE_BENCH_COMMON_PUBLISHEDRUNS_H
