//===- cleave-estimate.cpp - Estimate a training plan from the command line
//===//
//
// Prints the step time, throughput, MFU/HFU, where the time goes and the
// memory per GPU of one training step of a model on a cluster under a
// plan. See `cleave-estimate --help` and docs/cost-model.md.
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Defaults.h"
#include "cleave/CostModel/Estimate.h"
#include "cleave/Report/Html.h"
#include "cleave/Support/ClosedPipeLLVM.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>
#include <iostream>
#include <sstream>

using namespace cleave;
using namespace cleave::cost;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory modelCat(
    "model (a preset, optionally with fields overridden, or every field)");
cl::OptionCategory clusterCat("cluster");
cl::OptionCategory planCat("plan");
cl::OptionCategory outputCat("output");

cl::opt<std::string>
    presetName("model",
               cl::desc("Zoo preset: gpt3-175b, llama3-70b, megatron-530b, "
                        "... (cleave-models --list)"),
               cl::cat(modelCat));
cl::opt<std::string> arch("arch", cl::desc("Architecture: gpt or llama"),
                          cl::cat(modelCat));
cl::opt<int64_t> layers("layers", cl::desc("Transformer layers"),
                        cl::cat(modelCat));
cl::opt<int64_t> hidden("hidden", cl::desc("Hidden size"), cl::cat(modelCat));
cl::opt<int64_t> heads("heads", cl::desc("Attention heads"), cl::cat(modelCat));
cl::opt<int64_t> kvHeads("kv-heads",
                         cl::desc("Key/value heads (default: --heads)"),
                         cl::cat(modelCat));
cl::opt<int64_t> ffnHidden(
    "ffn-hidden",
    cl::desc("Feed-forward size (default: the preset's, or 4 x --hidden)"),
    cl::cat(modelCat));
cl::opt<int64_t> vocab("vocab", cl::desc("Vocabulary size"), cl::cat(modelCat));
cl::opt<int64_t> seqLen("seq-len", cl::desc("Sequence length"),
                        cl::cat(modelCat));
cl::opt<double> dropout("dropout", cl::desc("Dropout probability"),
                        cl::cat(modelCat));
cl::opt<bool> untiedEmbeddings(
    "untied-embeddings",
    cl::desc("A separate output layer (default: tied for gpt, untied for "
             "llama)"),
    cl::cat(modelCat));
cl::opt<bool>
    tiedEmbeddings("tied-embeddings",
                   cl::desc("The output layer shares the token embedding"),
                   cl::cat(modelCat));

cl::opt<std::string> cluster("cluster", cl::desc(help::kClusterForEstimate),
                             cl::init(kDefaultCluster), cl::cat(clusterCat));
cl::opt<int64_t> nodes("nodes",
                       cl::desc("Nodes of the preset cluster (default: just "
                                "enough for the plan, 8 GPUs per node)"),
                       cl::cat(clusterCat));
cl::opt<std::string> clusterFile(
    "cluster-file",
    cl::desc("JSON cluster file (docs/cost-model.md); overrides the preset"),
    cl::cat(clusterCat));

cl::opt<int64_t> tp("tp", cl::desc("Tensor-parallel size (default: 1)"),
                    cl::init(1), cl::cat(planCat));
cl::opt<int64_t> pp("pp", cl::desc("Pipeline-parallel size (default: 1)"),
                    cl::init(1), cl::cat(planCat));
cl::opt<int64_t> dp("dp",
                    cl::desc("Data-parallel size (default: the GPUs left "
                             "after tp x pp x cp)"),
                    cl::cat(planCat));
cl::opt<int64_t> cp("cp", cl::desc("Context-parallel size (default: 1)"),
                    cl::init(1), cl::cat(planCat));
cl::opt<int64_t>
    ep("ep",
       cl::desc("Expert-parallel size of a mixture of experts, carved out of "
                "dp: ep of the dp ranks split the experts (default: 1)"),
       cl::init(1), cl::cat(planCat));
cl::opt<int64_t> microBatch("micro-batch",
                            cl::desc("Sequences per micro-batch (default: 1)"),
                            cl::init(1), cl::cat(planCat));
cl::opt<int64_t> globalBatch(
    "global-batch",
    cl::desc("Sequences per step (default: one micro-batch per data-parallel "
             "replica, micro-batch x dp; the report prints it)"),
    cl::cat(planCat));
cl::opt<int64_t> microBatches(
    "micro-batches",
    cl::desc("Micro-batches per replica per step (instead of --global-batch)"),
    cl::cat(planCat));
cl::opt<std::string> schedule(
    "schedule",
    cl::desc("Pipeline schedule: gpipe, 1f1b (default), interleaved, zb-h1"),
    cl::cat(planCat));
cl::opt<int64_t>
    virtualStages("virtual-stages",
                  cl::desc("Model chunks per stage (interleaved; default: 1)"),
                  cl::init(1), cl::cat(planCat));
cl::opt<int64_t> zero("zero", cl::desc("ZeRO stage 0-3 (default: 0)"),
                      cl::init(0), cl::cat(planCat));
cl::opt<std::string>
    recompute("recompute",
              cl::desc("Recomputation: none (default), selective, full"),
              cl::cat(planCat));
cl::list<std::string> recomputePerStage(
    "recompute-per-stage",
    cl::desc("Recomputation of each pipeline stage, pp entries (e.g. "
             "full,full,selective,none)"),
    cl::CommaSeparated, cl::cat(planCat));
cl::list<int> layersPerChunk(
    "layers-per-chunk",
    cl::desc("Transformer layers of each pipeline chunk in model order, pp x "
             "virtual-stages entries; the first and last may be 0 (a stage "
             "holding only the embedding or the loss, as Llama 3 ran)"),
    cl::CommaSeparated, cl::cat(planCat));
cl::opt<bool> sequenceParallel(
    "sequence-parallel",
    cl::desc("Shard norms and dropout over tp (Korthikanti et al.)"),
    cl::cat(planCat));
cl::opt<std::string>
    dtype("dtype", cl::desc("Compute type: bf16 (default), f16, f32, f8e4m3"),
          cl::cat(planCat));
cl::opt<std::string>
    gradDtype("grad-dtype",
              cl::desc("Gradient reduction type (default: f32, or f16 for f16 "
                       "training)"),
              cl::cat(planCat));
cl::opt<std::string>
    attention("attention",
              cl::desc("Attention kernel: flash (default) or unfused"),
              cl::cat(planCat));
cl::opt<bool> overlapGradReduce(
    "overlap-grad-reduce",
    cl::desc("Overlap the gradient reduction with the backward pass"),
    cl::cat(planCat));
cl::opt<bool> overlapParamGather(
    "overlap-param-gather",
    cl::desc("Overlap ZeRO parameter gathers with the forward pass"),
    cl::cat(planCat));
cl::opt<bool>
    overlapTpComm("overlap-tp-comm",
                  cl::desc("Overlap tensor-parallel collectives with GEMMs"),
                  cl::cat(planCat));
cl::opt<bool>
    noScatterGather("no-scatter-gather",
                    cl::desc("Send whole activations between pipeline stages"),
                    cl::cat(planCat));
cl::opt<double> headroom("headroom", cl::desc(help::kHeadroom),
                         cl::init(kDefaultMemoryHeadroom), cl::cat(planCat));

cl::opt<bool> json("json",
                   cl::desc("Print the estimate as JSON, with the mesh, the "
                            "pipeline and the simulated step"),
                   cl::cat(outputCat));
cl::opt<std::string>
    html("html",
         cl::desc("Write the estimate as one self-contained web page (the "
                  "--json data, drawn)"),
         cl::value_desc("path"), cl::cat(outputCat));
cl::opt<std::string>
    trace("trace",
          cl::desc("Write the timeline as Chrome trace JSON (Perfetto)"),
          cl::value_desc("path"), cl::cat(outputCat));
cl::opt<std::string>
    constantsPath("constants",
                  cl::desc("Cost constants as JSON (default: the calibrated "
                           "set)"),
                  cl::value_desc("path"), cl::cat(outputCat));

bool given(const cl::Option &o) { return o.getNumOccurrences() > 0; }

/// "--tp: expected an integer >= 1, got 0" for each given integer option
/// below its minimum; empty when all are in range.
std::string checkRanges() {
  struct Bound {
    cl::opt<int64_t> *option;
    int64_t min;
  };
  for (Bound b : {Bound{&layers, 1},
                  {&hidden, 1},
                  {&heads, 1},
                  {&kvHeads, 1},
                  {&ffnHidden, 1},
                  {&vocab, 1},
                  {&seqLen, 1},
                  {&nodes, 1},
                  {&tp, 1},
                  {&pp, 1},
                  {&dp, 1},
                  {&cp, 1},
                  {&ep, 1},
                  {&microBatch, 1},
                  {&globalBatch, 1},
                  {&microBatches, 1},
                  {&virtualStages, 1},
                  {&zero, 0}})
    if (given(*b.option) && *b.option < b.min)
      return "--" + b.option->ArgStr.str() +
             ": expected an integer >= " + std::to_string(b.min) + ", got " +
             std::to_string(*b.option);
  return "";
}

Result<ModelConfig> readModel() {
  ModelConfig m;
  if (given(presetName)) {
    std::optional<ModelConfig> p = lookupPreset(presetName);
    if (!p) {
      std::string known;
      for (const std::string &n : presetNames())
        known += (known.empty() ? "" : ", ") + n;
      return Result<ModelConfig>::failure("--model: unknown preset '" +
                                          presetName + "' (known: " + known +
                                          ")");
    }
    m = *p;
  } else {
    m.name = "custom";
    m.dtype = DType::BF16;
  }
  if (given(arch)) {
    std::optional<Architecture> a = parseArchitecture(arch);
    if (!a)
      return Result<ModelConfig>::failure(
          "--arch: expected gpt or llama, got '" + arch + "'");
    m.arch = *a;
    m.tiedEmbeddings = *a == Architecture::GPT;
  }
  auto set = [](cl::opt<int64_t> &o, int64_t &field) {
    if (given(o))
      field = o;
  };
  set(layers, m.layers);
  set(hidden, m.hidden);
  set(heads, m.heads);
  m.kvHeads = given(heads) && !given(kvHeads) ? m.heads : m.kvHeads;
  set(kvHeads, m.kvHeads);
  if (given(hidden) && !given(ffnHidden) && !given(presetName))
    m.ffnHidden = 4 * m.hidden;
  set(ffnHidden, m.ffnHidden);
  set(vocab, m.vocab);
  set(seqLen, m.seqLen);
  if (given(dropout))
    m.dropout = dropout;
  if (given(untiedEmbeddings) && given(tiedEmbeddings))
    return Result<ModelConfig>::failure(
        "--tied-embeddings and --untied-embeddings: give one of them");
  if (given(untiedEmbeddings) || given(tiedEmbeddings))
    m.tiedEmbeddings = given(tiedEmbeddings);
  if (std::string v = m.validate(); !v.empty())
    return Result<ModelConfig>::failure("model: " + v +
                                        " (give --model or every field)");
  return m;
}

/// The mesh, batching and ZeRO stage; dp defaults to the GPUs left after
/// tp, pp and cp.
std::string readSizes(int clusterGpus, ParallelPlan &p) {
  int64_t d = dp;
  if (!given(dp)) {
    if (clusterGpus % (tp * pp * cp) != 0)
      return "--dp: not given, and tp x pp x cp = " +
             std::to_string(tp * pp * cp) + " does not divide the cluster's " +
             std::to_string(clusterGpus) + " GPUs";
    d = clusterGpus / (tp * pp * cp);
  }
  p.tp = int(tp);
  p.pp = int(pp);
  p.cp = int(cp);
  p.dp = int(d);
  p.ep = int(ep);
  p.microBatchSize = microBatch;
  p.virtualStages = int(virtualStages);
  p.zeroStage = int(zero);
  if (given(globalBatch) && given(microBatches))
    return "--global-batch and --micro-batches: give one of them";
  if (given(globalBatch) && globalBatch % (microBatch * d) != 0)
    return "--global-batch: " + std::to_string(globalBatch) +
           " is not a multiple of micro-batch x dp = " +
           std::to_string(microBatch * d);
  p.numMicroBatches = given(globalBatch)    ? globalBatch / (microBatch * d)
                      : given(microBatches) ? int64_t(microBatches)
                                            : 1;
  if (virtualStages > 1 && !given(schedule))
    p.schedule = Schedule::Interleaved1F1B;
  return "";
}

/// Sets `out` from `option` through `parse`; an error lists `choices`.
template <typename Parse, typename T>
std::string pick(const cl::opt<std::string> &option, Parse parse, T &out,
                 const char *choices) {
  if (!given(option))
    return "";
  auto parsed = parse(option);
  if (!parsed)
    return "--" + option.ArgStr.str() + ": expected " + choices + ", got '" +
           option + "'";
  out = *parsed;
  return "";
}

/// The schedule, recompute, precision and implementation choices.
std::string readChoices(ParallelPlan &p) {
  DType grad = DType::F32;
  for (std::string err :
       {pick(schedule, parseSchedule, p.schedule,
             "gpipe, 1f1b, interleaved or zb-h1"),
        pick(recompute, parseRecompute, p.recompute, "none, selective or full"),
        pick(dtype, parseDType, p.dtype, "f32, bf16, f16 or f8e4m3"),
        pick(attention, parseAttention, p.attention, "flash or unfused"),
        pick(gradDtype, parseDType, grad, "f32, bf16 or f16")})
    if (!err.empty())
      return err;
  if (given(gradDtype))
    p.gradReduceDType = grad;
  for (const std::string &r : recomputePerStage) {
    std::optional<Recompute> parsed = parseRecompute(r);
    if (!parsed)
      return "--recompute-per-stage: expected none, selective or full, got '" +
             r + "'";
    p.recomputePerStage.push_back(*parsed);
  }
  for (int n : layersPerChunk) {
    if (n < 0)
      return "--layers-per-chunk: expected counts >= 0, got " +
             std::to_string(n);
    p.layersPerChunk.push_back(n);
  }
  p.sequenceParallel = sequenceParallel;
  p.overlapGradReduce = overlapGradReduce;
  p.overlapParamGather = overlapParamGather;
  p.overlapTpComm = overlapTpComm;
  p.scatterGatherP2p = !noScatterGather;
  return "";
}

Result<ParallelPlan> readPlan(int clusterGpus) {
  ParallelPlan p;
  std::string err = readSizes(clusterGpus, p);
  if (err.empty())
    err = readChoices(p);
  if (!err.empty())
    return Result<ParallelPlan>::failure(err);
  return p;
}

Result<ClusterSpec> readCluster() {
  if (given(clusterFile)) {
    if (given(cluster))
      return Result<ClusterSpec>::failure(
          "--cluster and --cluster-file: give one of them");
    return loadClusterFile(clusterFile);
  }
  // Just enough nodes of 8 GPUs for the mesh without dp (dp: 1 if not
  // given, then it takes the rest).
  int64_t gpus = tp * pp * cp * (given(dp) ? int64_t(dp) : 1);
  int64_t n =
      given(nodes) ? int64_t(nodes) : std::max<int64_t>(1, (gpus + 7) / 8);
  return lookupClusterPreset(cluster, int(n));
}

Result<CostConstants> readConstants() {
  if (!given(constantsPath))
    return defaultConstants();
  std::ifstream in(constantsPath);
  if (!in)
    return Result<CostConstants>::failure(constantsPath +
                                          ": cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  Result<CostConstants> c = constantsFromJson(text.str());
  if (!c)
    return Result<CostConstants>::failure(constantsPath + ": " + c.error());
  return c;
}

int fail(const std::string &message) {
  llvm::errs() << "cleave-estimate: " << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  ::cleave::exitQuietlyOnClosedStdout();
  cl::HideUnrelatedOptions({&modelCat, &clusterCat, &planCat, &outputCat});
  const char *overview =
      "cleave-estimate: estimates one training step: step time, tokens/s, "
      "TFLOP/s per GPU, MFU and HFU, time by category and by mesh axis, "
      "memory per GPU and whether it fits\n";
  if (argc == 1) {
    cl::ParseCommandLineOptions(argc, argv, overview);
    cl::PrintHelpMessage(/*Hidden=*/false, /*Categorized=*/true);
    return 1;
  }
  cl::ParseCommandLineOptions(argc, argv, overview);
  if (std::string err = checkRanges(); !err.empty())
    return fail(err);
  Result<ModelConfig> model = readModel();
  if (!model)
    return fail(model.error());
  Result<ClusterSpec> clusterSpec = readCluster();
  if (!clusterSpec)
    return fail(clusterSpec.error());
  Result<ParallelPlan> plan = readPlan(clusterSpec->numGpus());
  if (!plan)
    return fail(plan.error());
  Result<CostConstants> constants = readConstants();
  if (!constants)
    return fail(constants.error());
  EstimateOptions eo;
  eo.constants = &*constants;
  eo.keepTimeline = given(trace) || json || given(html);
  eo.memoryHeadroom = headroom;
  Result<Estimate> e = estimate(*model, *clusterSpec, *plan, eo);
  if (!e)
    return fail(e.error());
  if (given(trace)) {
    std::ofstream out(trace);
    if (!out)
      return fail("--trace: cannot write " + trace);
    writeTrace(*e, out);
  }
  if (json || given(html)) {
    nlohmann::json j =
        nlohmann::json::parse(estimateToJson(*e, *model, *clusterSpec, *plan));
    j.update(report::picturesToJson(*model, *clusterSpec, *plan, *e));
    if (given(html)) {
      std::string title = "cleave-estimate: " + model->name + " on " +
                          std::to_string(e->numGpus) + " GPUs";
      if (Result<bool> w =
              report::writeFile(html, report::renderHtml(j, title));
          !w)
        return fail("--html: " + w.error());
    }
    if (json) {
      std::cout << j.dump(2) << "\n";
      return 0;
    }
  }
  std::cout << formatReport(*e, *model, *clusterSpec, *plan);
  return 0;
}
