//===- cleave-estimate.cpp - Estimate a training plan from the command line
//===//
//
// Prints the step time, throughput, MFU/HFU, where the time goes and the
// memory per GPU of one training step of a model on a cluster under a
// plan. See `cleave-estimate --help` and docs/cost-model.md.
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Estimate.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace cleave;
using namespace cleave::cost;

namespace {

const char *kUsage = R"(usage: cleave-estimate [options]

Estimates one training step: step time, tokens/s, TFLOP/s per GPU, MFU and
HFU, time by category and by mesh axis, memory per GPU and whether it fits.

model (a preset, optionally with fields overridden, or all fields):
  --model NAME            preset: gpt3-175b, llama3-70b, megatron-530b, ...
  --arch gpt|llama        --layers N --hidden N --heads N --kv-heads N
  --ffn-hidden N          --vocab N --seq-len N --dropout P
cluster:
  --cluster NAME          dgx-a100-40gb, dgx-a100-80gb, dgx-h100, dgx-h200
  --nodes N               cluster size for a preset (default: just enough)
  --cluster-file PATH     a JSON cluster spec (docs/cost-model.md)
plan:
  --tp N --pp N --dp N --cp N   mesh (dp defaults to the remaining GPUs)
  --micro-batch N         sequences per micro-batch (default 1)
  --global-batch N        sequences per step (or --micro-batches N per replica)
  --schedule S            gpipe, 1f1b (default), interleaved, zb-h1
  --virtual-stages N      model chunks per stage (interleaved)
  --zero N                ZeRO stage 0-3
  --recompute R           none (default), selective, full
  --sequence-parallel     shard norms/dropout over TP (Korthikanti et al.)
  --dtype T               bf16 (default), f16, f32, f8e4m3
  --grad-dtype T          gradient reduction precision (default: fp32, or
                          f16 for f16 training)
  --attention A           flash (default) or unfused
  --overlap-grad-reduce --overlap-param-gather --overlap-tp-comm
  --no-scatter-gather     send whole activations between pipeline stages
output:
  --json                  print the estimate as JSON
  --trace PATH            write the timeline as Chrome trace JSON (Perfetto)
  --constants PATH        cost constants as JSON (default: the calibrated set)
  --help
)";

/// Command-line state; every error says which option is wrong.
struct Options {
  std::map<std::string, std::string> values;
  std::vector<std::string> flags;
  bool has(const std::string &f) const {
    return values.count(f) || std::count(flags.begin(), flags.end(), f);
  }
};

const char *kFlags[] = {"--sequence-parallel",
                        "--overlap-grad-reduce",
                        "--overlap-param-gather",
                        "--overlap-tp-comm",
                        "--no-scatter-gather",
                        "--json",
                        "--help"};
const char *kValued[] = {"--model",        "--arch",
                         "--layers",       "--hidden",
                         "--heads",        "--kv-heads",
                         "--ffn-hidden",   "--vocab",
                         "--seq-len",      "--dropout",
                         "--cluster",      "--nodes",
                         "--cluster-file", "--tp",
                         "--pp",           "--dp",
                         "--cp",           "--micro-batch",
                         "--global-batch", "--micro-batches",
                         "--schedule",     "--virtual-stages",
                         "--zero",         "--recompute",
                         "--dtype",        "--grad-dtype",
                         "--attention",    "--trace",
                         "--constants"};

Result<Options> parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string value;
    size_t eq = a.find('=');
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    bool isFlag = false, isValued = false;
    for (const char *f : kFlags)
      isFlag |= a == f;
    for (const char *v : kValued)
      isValued |= a == v;
    if (isFlag) {
      o.flags.push_back(a);
    } else if (isValued) {
      if (eq == std::string::npos) {
        if (i + 1 >= argc)
          return Result<Options>::failure(a + ": missing value");
        value = argv[++i];
      }
      o.values[a] = value;
    } else {
      return Result<Options>::failure(a + ": unknown option (see --help)");
    }
  }
  return o;
}

/// Reads integer option `name` into `out` if given; false on a bad value.
bool readInt(const Options &o, const char *name, int64_t &out, int64_t min,
             std::string &err) {
  auto it = o.values.find(name);
  if (it == o.values.end() || !err.empty())
    return true;
  char *end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || v < min) {
    err = std::string(name) +
          ": expected an integer >= " + std::to_string(min) + ", got '" +
          it->second + "'";
    return false;
  }
  out = v;
  return true;
}

Result<ModelConfig> readModel(const Options &o) {
  ModelConfig m;
  std::string err;
  if (o.values.count("--model")) {
    std::optional<ModelConfig> p = lookupPreset(o.values.at("--model"));
    if (!p) {
      std::string known;
      for (const std::string &n : presetNames())
        known += (known.empty() ? "" : ", ") + n;
      return Result<ModelConfig>::failure("--model: unknown preset '" +
                                          o.values.at("--model") +
                                          "' (known: " + known + ")");
    }
    m = *p;
  } else {
    m.name = "custom";
    m.dtype = DType::BF16;
  }
  if (o.values.count("--arch")) {
    std::optional<Architecture> a = parseArchitecture(o.values.at("--arch"));
    if (!a)
      return Result<ModelConfig>::failure("--arch: expected gpt or llama, "
                                          "got '" +
                                          o.values.at("--arch") + "'");
    m.arch = *a;
    m.tiedEmbeddings = *a == Architecture::GPT;
  }
  readInt(o, "--layers", m.layers, 1, err);
  readInt(o, "--hidden", m.hidden, 1, err);
  readInt(o, "--heads", m.heads, 1, err);
  if (o.values.count("--heads") && !o.values.count("--kv-heads"))
    m.kvHeads = m.heads;
  readInt(o, "--kv-heads", m.kvHeads, 1, err);
  if (o.values.count("--hidden") && !o.values.count("--ffn-hidden") &&
      !o.values.count("--model"))
    m.ffnHidden = 4 * m.hidden;
  readInt(o, "--ffn-hidden", m.ffnHidden, 1, err);
  readInt(o, "--vocab", m.vocab, 1, err);
  readInt(o, "--seq-len", m.seqLen, 1, err);
  if (o.values.count("--dropout"))
    m.dropout = std::atof(o.values.at("--dropout").c_str());
  if (!err.empty())
    return Result<ModelConfig>::failure(err);
  if (std::string v = m.validate(); !v.empty())
    return Result<ModelConfig>::failure("model: " + v +
                                        " (give --model or every field)");
  return m;
}

/// The mesh, batching and ZeRO stage; dp defaults to the GPUs left after
/// tp, pp and cp.
std::string readSizes(const Options &o, int clusterGpus, ParallelPlan &p) {
  std::string err;
  int64_t tp = 1, pp = 1, cp = 1, dp = 0, mbs = 1, gb = 0, mb = 0, v = 1,
          zero = 0;
  readInt(o, "--tp", tp, 1, err);
  readInt(o, "--pp", pp, 1, err);
  readInt(o, "--cp", cp, 1, err);
  readInt(o, "--dp", dp, 1, err);
  readInt(o, "--micro-batch", mbs, 1, err);
  readInt(o, "--global-batch", gb, 1, err);
  readInt(o, "--micro-batches", mb, 1, err);
  readInt(o, "--virtual-stages", v, 1, err);
  readInt(o, "--zero", zero, 0, err);
  if (!err.empty())
    return err;
  if (dp == 0) {
    if (clusterGpus % (tp * pp * cp) != 0)
      return "--dp: not given, and tp x pp x cp = " +
             std::to_string(tp * pp * cp) + " does not divide the cluster's " +
             std::to_string(clusterGpus) + " GPUs";
    dp = clusterGpus / (tp * pp * cp);
  }
  p.tp = int(tp);
  p.pp = int(pp);
  p.cp = int(cp);
  p.dp = int(dp);
  p.microBatchSize = mbs;
  p.virtualStages = int(v);
  p.zeroStage = int(zero);
  if (gb > 0 && mb > 0)
    return "--global-batch and --micro-batches: give one of them";
  if (gb > 0 && gb % (mbs * dp) != 0)
    return "--global-batch: " + std::to_string(gb) +
           " is not a multiple of micro-batch x dp = " +
           std::to_string(mbs * dp);
  p.numMicroBatches = gb > 0 ? gb / (mbs * dp) : (mb > 0 ? mb : 1);
  if (v > 1 && !o.values.count("--schedule"))
    p.schedule = Schedule::Interleaved1F1B;
  return "";
}

/// Sets `out` from option `name` through `parse`; an error lists `choices`.
template <typename Parse, typename T>
std::string pick(const Options &o, const char *name, Parse parse, T &out,
                 const char *choices) {
  auto it = o.values.find(name);
  if (it == o.values.end())
    return "";
  auto parsed = parse(it->second);
  if (!parsed)
    return std::string(name) + ": expected " + choices + ", got '" +
           it->second + "'";
  out = *parsed;
  return "";
}

/// The schedule, recompute, precision and implementation choices.
std::string readChoices(const Options &o, ParallelPlan &p) {
  for (std::string err :
       {pick(o, "--schedule", parseSchedule, p.schedule,
             "gpipe, 1f1b, interleaved or zb-h1"),
        pick(o, "--recompute", parseRecompute, p.recompute,
             "none, selective or full"),
        pick(o, "--dtype", parseDType, p.dtype, "f32, bf16, f16 or f8e4m3"),
        pick(o, "--attention", parseAttention, p.attention,
             "flash or unfused")})
    if (!err.empty())
      return err;
  DType grad = DType::F32;
  if (std::string err =
          pick(o, "--grad-dtype", parseDType, grad, "f32, bf16 or f16");
      !err.empty())
    return err;
  if (o.values.count("--grad-dtype"))
    p.gradReduceDType = grad;
  p.sequenceParallel = o.has("--sequence-parallel");
  p.overlapGradReduce = o.has("--overlap-grad-reduce");
  p.overlapParamGather = o.has("--overlap-param-gather");
  p.overlapTpComm = o.has("--overlap-tp-comm");
  p.scatterGatherP2p = !o.has("--no-scatter-gather");
  return "";
}

Result<ParallelPlan> readPlan(const Options &o, int clusterGpus) {
  ParallelPlan p;
  std::string err = readSizes(o, clusterGpus, p);
  if (err.empty())
    err = readChoices(o, p);
  if (!err.empty())
    return Result<ParallelPlan>::failure(err);
  return p;
}

Result<ClusterSpec> readCluster(const Options &o, int64_t gpusWanted) {
  if (o.values.count("--cluster-file")) {
    if (o.values.count("--cluster"))
      return Result<ClusterSpec>::failure(
          "--cluster and --cluster-file: give one of them");
    return loadClusterFile(o.values.at("--cluster-file"));
  }
  std::string name =
      o.values.count("--cluster") ? o.values.at("--cluster") : "dgx-h100";
  int64_t nodes = 0;
  std::string err;
  readInt(o, "--nodes", nodes, 1, err);
  if (!err.empty())
    return Result<ClusterSpec>::failure(err);
  if (nodes == 0) // just enough nodes for the plan (8 GPUs per node)
    nodes = std::max<int64_t>(1, (gpusWanted + 7) / 8);
  return lookupClusterPreset(name, int(nodes));
}

int fail(const std::string &message) {
  std::fprintf(stderr, "cleave-estimate: %s\n", message.c_str());
  return 1;
}

Result<CostConstants> readConstants(const Options &o) {
  if (!o.values.count("--constants"))
    return defaultConstants();
  const std::string &path = o.values.at("--constants");
  std::ifstream in(path);
  if (!in)
    return Result<CostConstants>::failure(path + ": cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  Result<CostConstants> c = constantsFromJson(text.str());
  if (!c)
    return Result<CostConstants>::failure(path + ": " + c.error());
  return c;
}

} // namespace

int main(int argc, char **argv) {
  Result<Options> opts = parseArgs(argc, argv);
  if (!opts)
    return fail(opts.error());
  if (opts->has("--help") || argc == 1) {
    std::fputs(kUsage, stdout);
    return argc == 1 ? 1 : 0;
  }
  Result<ModelConfig> model = readModel(*opts);
  if (!model)
    return fail(model.error());
  // The mesh without dp fixes how many GPUs a preset cluster needs.
  int64_t tp = 1, pp = 1, cp = 1, dp = 1;
  std::string err;
  readInt(*opts, "--tp", tp, 1, err);
  readInt(*opts, "--pp", pp, 1, err);
  readInt(*opts, "--cp", cp, 1, err);
  readInt(*opts, "--dp", dp, 1, err);
  if (!err.empty())
    return fail(err);
  Result<ClusterSpec> cluster = readCluster(*opts, tp * pp * cp * dp);
  if (!cluster)
    return fail(cluster.error());
  Result<ParallelPlan> plan = readPlan(*opts, cluster->numGpus());
  if (!plan)
    return fail(plan.error());
  Result<CostConstants> constants = readConstants(*opts);
  if (!constants)
    return fail(constants.error());
  EstimateOptions eo;
  eo.constants = &*constants;
  eo.keepTimeline = opts->values.count("--trace") > 0;
  Result<Estimate> e = estimate(*model, *cluster, *plan, eo);
  if (!e)
    return fail(e.error());
  if (opts->values.count("--trace")) {
    const std::string &path = opts->values.at("--trace");
    std::ofstream out(path);
    if (!out)
      return fail("--trace: cannot write " + path);
    writeTrace(*e, out);
  }
  if (opts->has("--json"))
    std::cout << estimateToJson(*e, *model, *cluster, *plan) << "\n";
  else
    std::cout << formatReport(*e, *model, *cluster, *plan);
  return 0;
}
