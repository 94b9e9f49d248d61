//===- PublishedRuns.cpp - The planner against published plans ------------===//
//
// For every row of published_runs.json: give the planner the row's model,
// cluster (GPU count and node type) and global batch, with the row's
// implementation (precision, attention kernel, overlap flags, dropout), and
// compare the plan it finds with the row's published plan under the same
// cost model: the ratio of predicted throughputs (>= 1: the planner's plan
// is at least as fast), whether each fits in memory, and the search time.
//
// The derivations of the fields the rows leave out are those of the
// calibration benchmark (bench/costmodel/CalibrationBench.cpp, where each is
// justified from the row's source); they are repeated here so that the two
// benchmarks stay independent programs.
//
// Usage: cleave-planner-published-runs [published_runs.json] [--row N]
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Explain.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>

using nlohmann::json;
using namespace cleave;
using namespace cleave::cost;

namespace {

enum class Source { Table1, Table2Ptd, Table2Zero3, Korthikanti, MegatronH100 };

Source sourceOf(const std::string &s) {
  if (s.find("Megatron-LM README") != std::string::npos)
    return Source::MegatronH100;
  if (s.find("Korthikanti") != std::string::npos)
    return Source::Korthikanti;
  if (s.find("ZeRO-3") != std::string::npos)
    return Source::Table2Zero3;
  if (s.find("Table 2") != std::string::npos)
    return Source::Table2Ptd;
  return Source::Table1;
}

int intOr(const json &j, const char *key, int fallback) {
  return j.contains(key) && j[key].is_number() ? j[key].get<int>() : fallback;
}

ModelConfig modelOf(const json &row, Source src) {
  const json &m = row["model"];
  ModelConfig c;
  c.name = std::to_string(int(m["params"].get<double>() / 1e9 + 0.5)) + "B";
  c.arch = Architecture::GPT;
  c.layers = m["layers"].get<int>();
  c.hidden = m["hidden"].get<int>();
  c.heads = m["heads"].get<int>();
  c.kvHeads = intOr(m, "kv_heads", int(c.heads));
  c.ffnHidden = intOr(m, "ffn_hidden", int(4 * c.hidden));
  c.vocab = m["vocab"].get<int>();
  c.seqLen = m["seq_len"].get<int>();
  c.tiedEmbeddings = src != Source::MegatronH100;
  c.dropout = 0.1;
  return c;
}

/// The row's published plan (the calibration benchmark's derivation).
ParallelPlan planOf(const json &row, Source src) {
  const json &pl = row["plan"];
  ParallelPlan p;
  p.dp = intOr(pl, "dp", 1);
  p.tp = intOr(pl, "tp", 1);
  p.pp = intOr(pl, "pp", 1);
  p.cp = intOr(pl, "cp", 1);
  if (src == Source::Table2Ptd) {
    double mp = row["derived"]["model_parallel_size_published"].get<double>();
    p.tp = 8;
    p.pp = int(mp) / 8;
    p.schedule = Schedule::Interleaved1F1B;
    p.virtualStages = p.pp == 35 ? 3 : 2;
  }
  p.microBatchSize = intOr(pl, "microbatch", 1);
  p.numMicroBatches =
      pl["global_batch"].get<int64_t>() / (p.microBatchSize * p.dp);
  int v = intOr(pl, "interleaved_stages", 1);
  if (v > 1) {
    p.schedule = Schedule::Interleaved1F1B;
    p.virtualStages = v;
  }
  std::string rc = pl["recompute"].is_string() ? pl["recompute"] : "none";
  p.recompute = rc.rfind("full", 0) == 0        ? Recompute::Full
                : rc.rfind("selective", 0) == 0 ? Recompute::Selective
                                                : Recompute::None;
  p.sequenceParallel = pl["sequence_parallel"].is_boolean() &&
                       pl["sequence_parallel"].get<bool>();
  p.attention = AttentionImpl::Unfused;
  p.dtype = DType::F16;
  if (src == Source::Table2Zero3)
    p.zeroStage = 3;
  if (src == Source::Korthikanti)
    p.dtype = DType::BF16;
  if (src == Source::MegatronH100) {
    p.dtype = DType::BF16;
    p.attention = AttentionImpl::Flash;
    p.sequenceParallel = p.tp > 1;
    p.zeroStage = 1;
    p.overlapGradReduce = p.overlapParamGather = p.overlapTpComm = true;
  }
  return p;
}

struct Row {
  double publishedStep, plannedStep, seconds;
  bool publishedFits, plannedFits;
};

std::optional<Row> runRow(size_t i, const json &row) {
  Source src = sourceOf(row["source"].get<std::string>());
  ModelConfig model = modelOf(row, src);
  ParallelPlan published = planOf(row, src);
  int gpus = row["cluster"]["gpus"].get<int>();
  std::string preset =
      src == Source::MegatronH100 ? "dgx-h100" : "dgx-a100-80gb";
  Result<ClusterSpec> cluster = lookupClusterPreset(preset, (gpus + 7) / 8);
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
  Row out{pub->stepTime, best.stepTime, r->stats.seconds,
          pub->peakMemory().total() <= cluster->gpu.hbmBytes, best.fits};
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
  std::string path = CLEAVE_CALIBRATION_JSON;
  long only = -1;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "--row" && a + 1 < argc)
      only = std::stol(argv[++a]);
    else
      path = arg;
  }
  std::ifstream in(path);
  json rows = json::parse(in, nullptr, false);
  if (!in || !rows.is_array()) {
    std::fprintf(stderr, "%s: expected a JSON array of runs\n", path.c_str());
    return 1;
  }
  std::printf("%-3s %-5s %5s  %-40s %8s %-4s  %-44s %8s %-4s %6s %6s\n", "row",
              "model", "GPUs", "published plan", "step s", "mem",
              "planner's plan", "step s", "mem", "ratio", "search");
  int n = 0, atLeast = 0, fitting = 0;
  double worst = 1e9, totalSeconds = 0, maxSeconds = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (only >= 0 && size_t(only) != i)
      continue;
    std::optional<Row> r = runRow(i, rows[i]);
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
