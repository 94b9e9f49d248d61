//===- PublishedRuns.cpp - The published training runs, read once ---------===//
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

#include "PublishedRuns.h"

#include <nlohmann/json.hpp>

#include <fstream>

using nlohmann::json;

namespace cleave::bench {
namespace {

using cost::ParallelPlan;
template <typename T>
using Result = cost::Result<T>;

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

/// Reads the fields of one row; a missing or mistyped field is reported by
/// `field` with its path.
class RowReader {
public:
  explicit RowReader(const json &row) : row(row) {}

  const json &object(const char *key) {
    static const json empty = json::object();
    auto it = row.find(key);
    if (it == row.end() || !it->is_object()) {
      fail(key, "an object");
      return empty;
    }
    return *it;
  }
  template <typename T>
  T number(const json &o, const char *path, const char *key) {
    auto it = o.find(key);
    if (it == o.end() || !it->is_number()) {
      fail(std::string(path) + "." + key, "a number");
      return T();
    }
    return it->get<T>();
  }
  template <typename T>
  T numberOr(const json &o, const char *key, T fallback) {
    auto it = o.find(key);
    return it != o.end() && it->is_number() ? it->get<T>() : fallback;
  }
  std::optional<double> optionalNumber(const json &o, const char *key) {
    auto it = o.find(key);
    if (it != o.end() && it->is_number())
      return it->get<double>();
    return std::nullopt;
  }
  std::string error;

private:
  void fail(const std::string &field, const char *what) {
    if (error.empty())
      error = field + ": expected " + what;
  }
  const json &row;
};

ModelConfig modelOf(RowReader &r, const json &m, Source src) {
  ModelConfig c;
  c.name =
      std::to_string(int(r.number<double>(m, "model", "params") / 1e9 + 0.5)) +
      "B";
  c.arch = Architecture::GPT;
  c.layers = r.number<int64_t>(m, "model", "layers");
  c.hidden = r.number<int64_t>(m, "model", "hidden");
  c.heads = r.number<int64_t>(m, "model", "heads");
  c.kvHeads = r.numberOr<int64_t>(m, "kv_heads", c.heads);
  c.ffnHidden = r.numberOr<int64_t>(m, "ffn_hidden", 4 * c.hidden);
  c.vocab = r.number<int64_t>(m, "model", "vocab");
  c.seqLen = r.number<int64_t>(m, "model", "seq_len");
  c.tiedEmbeddings = src != Source::MegatronH100;
  c.dropout = 0.1;
  return c;
}

/// The published plan, with the derivations of the file comment.
ParallelPlan planOf(RowReader &r, const json &row, const json &pl, Source src) {
  ParallelPlan p;
  p.dp = r.numberOr(pl, "dp", 1);
  p.tp = r.numberOr(pl, "tp", 1);
  p.pp = r.numberOr(pl, "pp", 1);
  p.cp = r.numberOr(pl, "cp", 1);
  if (src == Source::Table2Ptd) {
    const json &derived = r.object("derived");
    int mp = int(
        r.number<double>(derived, "derived", "model_parallel_size_published"));
    p.tp = 8;
    p.pp = mp / 8;
    p.schedule = cost::Schedule::Interleaved1F1B;
    p.virtualStages = p.pp == 35 ? 3 : 2;
  }
  p.microBatchSize = r.numberOr<int64_t>(pl, "microbatch", 1);
  p.numMicroBatches = r.number<int64_t>(pl, "plan", "global_batch") /
                      std::max<int64_t>(1, p.microBatchSize * p.dp);
  int v = r.numberOr(pl, "interleaved_stages", 1);
  if (v > 1) {
    p.schedule = cost::Schedule::Interleaved1F1B;
    p.virtualStages = v;
  }
  auto rc = pl.find("recompute");
  std::string recompute = rc != pl.end() && rc->is_string()
                              ? rc->get<std::string>()
                              : std::string("none");
  p.recompute = recompute.rfind("full", 0) == 0 ? cost::Recompute::Full
                : recompute.rfind("selective", 0) == 0
                    ? cost::Recompute::Selective
                    : cost::Recompute::None;
  auto sp = pl.find("sequence_parallel");
  p.sequenceParallel = sp != pl.end() && sp->is_boolean() && sp->get<bool>();
  p.attention = cost::AttentionImpl::Unfused;
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
    p.attention = cost::AttentionImpl::Flash;
    p.sequenceParallel = p.tp > 1;
    p.zeroStage = 1;
    p.overlapGradReduce = p.overlapParamGather = p.overlapTpComm = true;
    break;
  }
  (void)row;
  return p;
}

Result<PublishedRun> readRow(size_t i, const json &row) {
  std::string where = "row " + std::to_string(i) + ": ";
  if (!row.is_object())
    return Result<PublishedRun>::failure(where + "not an object");
  auto source = row.find("source");
  if (source == row.end() || !source->is_string())
    return Result<PublishedRun>::failure(where + "source: expected a string");
  RowReader r(row);
  PublishedRun run;
  run.row = i;
  run.source = sourceOf(source->get<std::string>());
  run.model = modelOf(r, r.object("model"), run.source);
  run.plan = planOf(r, row, r.object("plan"), run.source);
  run.gpus = r.number<int>(r.object("cluster"), "cluster", "gpus");
  run.clusterPreset =
      run.source == Source::MegatronH100 ? "dgx-h100" : "dgx-a100-80gb";
  const json &m = r.object("measured");
  run.stepTime = r.optionalNumber(m, "step_time_s");
  run.tflopsPerGpu = r.optionalNumber(m, "tflops_per_gpu");
  run.mfu = r.optionalNumber(m, "mfu");
  if (r.error.empty() && !run.stepTime && !run.tflopsPerGpu && !run.mfu)
    r.error = "measured: needs step_time_s, tflops_per_gpu or mfu";
  if (!r.error.empty())
    return Result<PublishedRun>::failure(where + r.error);
  return run;
}

} // namespace

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

std::string defaultPublishedRunsPath() { return CLEAVE_PUBLISHED_RUNS_JSON; }

Result<std::vector<PublishedRun>> loadPublishedRuns(const std::string &path) {
  using R = Result<std::vector<PublishedRun>>;
  std::ifstream in(path);
  if (!in)
    return R::failure(path + ": cannot open the file");
  json rows = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!rows.is_array())
    return R::failure(path + ": expected a JSON array of runs");
  std::vector<PublishedRun> runs;
  for (size_t i = 0; i < rows.size(); ++i) {
    Result<PublishedRun> run = readRow(i, rows[i]);
    if (!run)
      return R::failure(path + ": " + run.error());
    runs.push_back(std::move(*run));
  }
  return runs;
}

Result<cost::ClusterSpec> clusterOf(const PublishedRun &run) {
  return cost::lookupClusterPreset(run.clusterPreset, (run.gpus + 7) / 8);
}

double rowFlopsPerStep(const PublishedRun &run, const cost::Estimate &e) {
  return run.source == Source::MegatronH100 ? e.modelFlops : e.hardwareFlops;
}

Comparison compare(const PublishedRun &run, const cost::Estimate &e) {
  if (run.stepTime)
    return {"step s", *run.stepTime, e.stepTime};
  if (run.tflopsPerGpu)
    return {"TFLOP/s", *run.tflopsPerGpu,
            rowFlopsPerStep(run, e) / e.stepTime / e.numGpus / 1e12};
  return {"MFU", *run.mfu, e.mfu};
}

} // namespace cleave::bench
