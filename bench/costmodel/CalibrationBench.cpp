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
// Usage: cleave-costmodel-calibration [published_runs.json]
//
// Derivations of fields the rows leave out (each from the row's source, as
// its notes say):
//  * Narayanan et al. 2021 (Table 1, Table 2): fp16 (CONFIG.sh --fp16)
//    with fp16 gradients all-reduced once after the backward pass (Megatron
//    "local" DDP, no overlap); unfused attention (fused scale-mask-softmax
//    kernels, no FlashAttention in 2021); dropout 0.1 (Megatron-LM's
//    defaults); tied input/output embeddings; the scatter/gather
//    optimization for pipeline sends (Sec. 4.1, enabled for all runs).
//  * Table 2 PTD rows give only dp and the model-parallel size: the paper
//    runs tensor parallelism inside a node (tp = 8) and pipeline parallelism
//    across nodes, so mp 96 -> tp 8 x pp 12 (175B) and mp 280 -> tp 8 x pp 35
//    (530B, the Table 1 configuration). Interleaving: the 530B rows use the
//    Table 1 530B schedule (3 chunks per stage); the 175B rows use 2 chunks
//    per stage, as the Table 1 models of similar depth per stage (145B,
//    310B) do. Micro-batch 1 (given), full recompute (Eq. 3 assumes it).
//  * Table 2 ZeRO-3 rows: DeepSpeed ZeRO stage 3 with dp = GPUs, no model
//    parallelism, full recompute, fp16.
//  * Korthikanti et al. 2022: bf16 with fp32 gradient all-reduce (Megatron
//    requires fp32 main grads with bf16), unfused attention, dropout 0.1,
//    sequence parallelism and selective recompute as given, no DP overlap
//    (row 26 says so).
//  * Megatron-LM README H100 rows: GPT shape with ffn = 4h, multi-head
//    attention and untied embeddings (the only shape that reproduces the
//    nominal 1.7B / 32B / 177B sizes from layers, hidden and vocab); bf16
//    with fp32 gradient reduction; FlashAttention (Transformer Engine's
//    fused attention, Megatron-Core's default); micro-batch 1; no
//    recompute; sequence parallelism whenever tp > 1 (required by
//    --tp-comm-overlap); distributed optimizer (ZeRO-1) with
//    --overlap-grad-reduce --overlap-param-gather --tp-comm-overlap; plain
//    1F1B (the README states no interleaving); DGX H100 nodes (8 GPUs, 8 x
//    NDR 400 Gb/s).
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Estimate.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>

using nlohmann::json;
using namespace cleave;
using namespace cleave::cost;

namespace {

/// The constants in use (defaults unless --constants FILE is given).
CostConstants gConstants;
/// GPU efficiency overrides from --gpu NAME:GEMM:MEMORY (for re-fitting).
std::map<std::string, std::pair<double, double>> gGpuOverrides;

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

const char *shortName(Source s) {
  switch (s) {
  case Source::Table1:
    return "PTD-P T1";
  case Source::Table2Ptd:
    return "PTD-P T2";
  case Source::Table2Zero3:
    return "ZeRO-3 T2";
  case Source::Korthikanti:
    return "Korthikanti";
  case Source::MegatronH100:
    return "MLM H100";
  }
  return "?";
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

/// Model-parallel split of the Table 2 PTD rows (see the file comment).
void deriveTable2(const json &row, ParallelPlan &p) {
  double mp = row["derived"]["model_parallel_size_published"].get<double>();
  p.tp = 8;
  p.pp = int(mp) / 8;
  p.schedule = Schedule::Interleaved1F1B;
  p.virtualStages = p.pp == 35 ? 3 : 2;
}

ParallelPlan planOf(const json &row, Source src, const ModelConfig &model) {
  const json &pl = row["plan"];
  ParallelPlan p;
  p.dp = intOr(pl, "dp", 1);
  p.tp = intOr(pl, "tp", 1);
  p.pp = intOr(pl, "pp", 1);
  p.cp = intOr(pl, "cp", 1);
  if (src == Source::Table2Ptd)
    deriveTable2(row, p);
  p.microBatchSize = intOr(pl, "microbatch", 1);
  int64_t gb = pl["global_batch"].get<int64_t>();
  p.numMicroBatches = gb / (p.microBatchSize * p.dp);
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
  switch (src) {
  case Source::Table1:
  case Source::Table2Ptd:
    break;
  case Source::Table2Zero3:
    p.zeroStage = 3;
    break;
  case Source::Korthikanti:
    p.dtype = DType::BF16;
    break;
  case Source::MegatronH100:
    p.dtype = DType::BF16;
    p.attention = AttentionImpl::Flash;
    p.sequenceParallel = p.tp > 1;
    p.zeroStage = 1;
    p.overlapGradReduce = p.overlapParamGather = p.overlapTpComm = true;
    break;
  }
  (void)model;
  return p;
}

Result<ClusterSpec> clusterOf(const json &row, Source src) {
  int gpus = row["cluster"]["gpus"].get<int>();
  std::string preset =
      src == Source::MegatronH100 ? "dgx-h100" : "dgx-a100-80gb";
  Result<ClusterSpec> c = lookupClusterPreset(preset, (gpus + 7) / 8);
  auto it = gGpuOverrides.find(c->gpu.name);
  if (c && it != gGpuOverrides.end()) {
    c->gpu.gemmEfficiency = it->second.first;
    c->gpu.memoryEfficiency = it->second.second;
  }
  return c;
}

struct Comparison {
  const char *what;
  double measured, predicted;
};

/// The row's measured quantity and our prediction of it, by its definition.
Comparison compare(const json &row, Source src, const Estimate &e) {
  const json &m = row["measured"];
  if (m["step_time_s"].is_number())
    return {"step s", m["step_time_s"].get<double>(), e.stepTime};
  if (m["tflops_per_gpu"].is_number()) {
    // Narayanan's TFLOP/s use Eq. 3 (counting the recompute forward);
    // Megatron-Core reports model FLOPs.
    double pred = src == Source::MegatronH100 ? e.modelTflopsPerGpu
                                              : e.hardwareTflopsPerGpu;
    return {"TFLOP/s", m["tflops_per_gpu"].get<double>(), pred};
  }
  return {"MFU", m["mfu"].get<double>(), e.mfu};
}

/// Prints the per-layer kernels and collectives of one row with their
/// times (for diagnosis; the numbers behind the row's prediction).
void printDetail(const json &row, Source src) {
  ModelConfig model = modelOf(row, src);
  ParallelPlan plan = planOf(row, src, model);
  ClusterSpec cl = *clusterOf(row, src);
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

/// Consumes the leading --gpu and --constants options; false on a bad one.
bool parseOptions(int &argc, char **&argv) {
  while (argc > 2 && std::string(argv[1]) == "--gpu") {
    std::string spec = argv[2];
    size_t a = spec.find(':'), b = spec.rfind(':');
    if (a == std::string::npos || a == b) {
      std::fprintf(stderr, "--gpu expects NAME:GEMM_EFF:MEMORY_EFF\n");
      return false;
    }
    gGpuOverrides[spec.substr(0, a)] = {
        std::stod(spec.substr(a + 1, b - a - 1)),
        std::stod(spec.substr(b + 1))};
    argc -= 2;
    argv += 2;
  }
  if (argc > 2 && std::string(argv[1]) == "--constants") {
    std::ifstream in(argv[2]);
    std::string text((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    Result<CostConstants> c = constantsFromJson(text);
    if (!c) {
      std::fprintf(stderr, "%s: %s\n", argv[2], c.error().c_str());
      return false;
    }
    gConstants = *c;
    argc -= 2;
    argv += 2;
  }
  return true;
}

/// Estimates one row and prints its line; returns the relative error, or
/// nullopt if the row could not be estimated.
std::optional<double> runRow(size_t i, const json &row) {
  Source src = sourceOf(row["source"].get<std::string>());
  ModelConfig model = modelOf(row, src);
  ParallelPlan plan = planOf(row, src, model);
  Result<ClusterSpec> cluster = clusterOf(row, src);
  EstimateOptions eo;
  eo.constants = &gConstants;
  Result<Estimate> e = cluster ? estimate(model, *cluster, plan, eo)
                               : Result<Estimate>::failure(cluster.error());
  if (!e) {
    std::printf("%-3zu %-11s error: %s\n", i, shortName(src),
                e.error().c_str());
    return std::nullopt;
  }
  Comparison c = compare(row, src, *e);
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

} // namespace

int main(int argc, char **argv) {
  if (!parseOptions(argc, argv))
    return 1;
  if (argc > 2 && std::string(argv[1]) == "--detail") {
    std::ifstream in(argc > 3 ? argv[3] : CLEAVE_CALIBRATION_JSON);
    json rows = json::parse(in, nullptr, false);
    size_t i = std::stoul(argv[2]);
    if (!rows.is_array() || i >= rows.size())
      return 1;
    printDetail(rows[i], sourceOf(rows[i]["source"].get<std::string>()));
    return 0;
  }
  std::string path = argc > 1 ? argv[1] : CLEAVE_CALIBRATION_JSON;
  std::ifstream in(path);
  json rows = json::parse(in, nullptr, false);
  if (!in || !rows.is_array()) {
    std::fprintf(stderr, "%s: expected a JSON array of runs\n", path.c_str());
    return 1;
  }
  std::printf("%-3s %-11s %-5s %5s  %-44s %-8s %9s %9s %7s  %5s %5s %5s %5s "
              "%4s\n",
              "row", "source", "model", "GPUs", "plan", "quantity", "measured",
              "predicted", "error", "bub%", "dp%", "tp%", "pp%", "mem");
  double sumAbs = 0, maxAbs = 0;
  int n = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (std::optional<double> err = runRow(i, rows[i])) {
      sumAbs += std::fabs(*err);
      maxAbs = std::max(maxAbs, std::fabs(*err));
      ++n;
    }
  }
  std::printf("\nrows: %d  mean absolute error: %.1f%%  max: %.1f%%\n", n,
              100 * sumAbs / std::max(n, 1), 100 * maxAbs);
  return 0;
}
