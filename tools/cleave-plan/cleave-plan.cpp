//===- cleave-plan.cpp - Find the best parallel plan and explain it -------===//
//
//   cleave-plan --model gpt3-175b --cluster dgx-a100-80gb --gpus 1024
//       --global-batch 1536 --json plan.json
//   cleave-plan step.mlir --cluster local-cpu --gpus 4 -o planned.mlir
//   cleave-plan --model llama3-405b --cluster dgx-h100 --gpus 1024
//       --scale 1024,4096,16384 --html report.html
//
// See `cleave-plan --help` and docs/planner.md.
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Defaults.h"
#include "cleave/CostModel/Report.h"
#include "cleave/Dialect/CleaveDialect.h"
#include "cleave/Models/ModelZoo.h"
#include "cleave/Planner/AutoShard.h"
#include "cleave/Planner/Explain.h"
#include "cleave/Report/Html.h"
#include "cleave/Support/ClosedPipeLLVM.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <unistd.h>

using namespace llvm;
namespace planner = cleave::planner;

namespace {
cl::OptionCategory category("cleave-plan options");
cl::opt<std::string> input(cl::Positional, cl::desc("[module.mlir]"),
                           cl::init(""), cl::cat(category));
cl::opt<std::string> model("model",
                           cl::desc("Zoo preset to plan (builds its program), "
                                    "or the preset an input module is"),
                           cl::cat(category));
// The model's shape, overriding the --model preset's (as cleave-run names
// them): published runs need not be presets.
cl::opt<int64_t> layers("layers", cl::init(-1), cl::cat(category),
                        cl::desc("Transformer layers (default: the preset's)"));
cl::opt<int64_t> hidden("hidden", cl::init(-1), cl::cat(category),
                        cl::desc("Hidden size (default: the preset's; the "
                                 "feed-forward size follows it unless --ffn)"));
cl::opt<int64_t> heads("heads", cl::init(-1), cl::cat(category),
                       cl::desc("Attention heads (default: the preset's)"));
cl::opt<int64_t> kvHeads("kv-heads", cl::init(-1), cl::cat(category),
                         cl::desc("Key/value heads (default: the preset's, "
                                  "or --heads for gpt)"));
cl::opt<int64_t> ffn("ffn", cl::init(-1), cl::cat(category),
                     cl::desc("Feed-forward size (default: the preset's)"));
cl::opt<int64_t> vocab("vocab", cl::init(-1), cl::cat(category),
                       cl::desc("Vocabulary size (default: the preset's)"));
cl::opt<int64_t> seqLen("seq", cl::init(-1), cl::cat(category),
                        cl::desc("Sequence length (default: the preset's)"));
cl::opt<bool> untiedEmbeddings(
    "untied-embeddings", cl::cat(category),
    cl::desc("A separate output layer (default: the preset's choice)"));
cl::opt<std::string>
    dtype("dtype",
          cl::desc("Compute type of a --model program: f32, bf16 (default), "
                   "f16, f8e4m3 or fp8 (Transformer Engine fp8 linear "
                   "layers, the rest bf16; needs a GPU with an fp8 rate)"),
          cl::init("bf16"), cl::cat(category));
cl::opt<std::string> cluster("cluster",
                             cl::desc(cleave::cost::help::kClusterForPlanning),
                             cl::init(cleave::cost::kDefaultCluster),
                             cl::cat(category));
cl::opt<int> gpus("gpus",
                  cl::desc("Devices (default: one node of a preset, 4 local "
                           "CPU processes, the file's size)"),
                  cl::init(0), cl::cat(category));
cl::opt<int64_t> globalBatch(
    "global-batch",
    cl::desc("Sequences per step (default: the preset's batch for --model, "
             "the module's batch for a module, which must equal it when "
             "given; the report prints it)"),
    cl::init(0), cl::cat(category));
cl::opt<int> tp("tp",
                cl::desc("Fix the tensor-parallel size (default: search)"),
                cl::init(0), cl::cat(category));
cl::opt<int> zero("zero", cl::desc("Fix the ZeRO stage 0-3 (default: search)"),
                  cl::init(-1), cl::cat(category));
cl::opt<int> maxPp("max-pp",
                   cl::desc("Largest pipeline size (default: the layer "
                            "count)"),
                   cl::init(-1), cl::cat(category));
cl::opt<double> headroom("headroom", cl::desc(cleave::cost::help::kHeadroom),
                         cl::init(cleave::cost::kDefaultMemoryHeadroom),
                         cl::cat(category));
cl::opt<int64_t> maxMicroBatches("max-micro-batches",
                                 cl::desc("Largest micro-batch count "
                                          "(default: any)"),
                                 cl::init(0), cl::cat(category));
cl::opt<std::string> function("function",
                              cl::desc("Function to plan (default: "
                                       "train_step, else forward)"),
                              cl::cat(category));
cl::opt<int> top("top", cl::desc("Plans to rank in the report"), cl::init(5),
                 cl::cat(category));
cl::opt<std::string> jsonPath("json",
                              cl::desc("Write the report as JSON to this file"),
                              cl::cat(category));
cl::opt<std::string>
    htmlPath("html",
             cl::desc("Write the report as one self-contained web page (the "
                      "--json data, drawn)"),
             cl::cat(category));
cl::list<int> scale("scale",
                    cl::desc("Also search at each of these GPU counts "
                             "(e.g. 64,128,256) and tabulate the best plans"),
                    cl::CommaSeparated, cl::cat(category));
cl::opt<std::string>
    output("o", cl::desc("Write the annotated module ('-': stdout)"),
           cl::cat(category));
cl::opt<bool> quiet("quiet", cl::desc("No progress on stderr"),
                    cl::cat(category));

int fail(const Twine &message) {
  errs() << "cleave-plan: error: " << message << "\n";
  return 1;
}

/// Progress of long searches on stderr: one line updated in place on a
/// terminal, a line per second otherwise.
class Progress {
public:
  void operator()(const planner::SearchProgress &p) {
    if (quiet || p.seconds < 1.0)
      return;
    bool tty = isatty(2);
    if (!tty && p.seconds - last < 1.0)
      return;
    last = p.seconds;
    errs() << (tty ? "\r" : "") << "searching: " << p.visited << " of "
           << p.candidates << " plans visited, " << p.simulated
           << " simulated, best step "
           << (p.bestStepTime > 0 ? formatv("{0:f3} s", p.bestStepTime).str()
                                  : std::string("-"))
           << formatv(" ({0:f1} s)", p.seconds).str() << (tty ? "" : "\n");
    shown = true;
  }
  void done() {
    if (shown && isatty(2))
      errs() << "\n";
  }

private:
  double last = 0;
  bool shown = false;
};

/// The --model preset after the shape options; set when any was given.
std::optional<cleave::ModelConfig> shaped;

/// Applies the shape options to `c`; false (with `error`) when one is out
/// of range or the result is inconsistent.
bool applyShape(cleave::ModelConfig &c, std::string &error) {
  bool any = untiedEmbeddings;
  if (hidden != -1 && ffn == -1)
    c.ffnHidden = c.ffnForWidth(hidden);
  for (auto [opt, field] :
       {std::pair{&layers, &c.layers}, std::pair{&hidden, &c.hidden},
        std::pair{&heads, &c.heads}, std::pair{&kvHeads, &c.kvHeads},
        std::pair{&ffn, &c.ffnHidden}, std::pair{&vocab, &c.vocab},
        std::pair{&seqLen, &c.seqLen}}) {
    if (*opt == -1)
      continue;
    if (*opt < 1) {
      error = "--" + opt->ArgStr.str() + ": expected an integer >= 1, got " +
              std::to_string(*opt);
      return false;
    }
    *field = *opt;
    any = true;
  }
  if (heads != -1 && kvHeads == -1 && c.arch == cleave::Architecture::GPT)
    c.kvHeads = c.heads;
  if (untiedEmbeddings)
    c.tiedEmbeddings = false;
  if (!any)
    return true;
  if (std::string v = c.validate(); !v.empty()) {
    error = "model: " + v;
    return false;
  }
  return true;
}

mlir::OwningOpRef<mlir::ModuleOp> loadModule(mlir::MLIRContext &ctx,
                                             std::string &error) {
  if (input.empty()) {
    std::optional<cleave::ModelConfig> config = cleave::lookupPreset(model);
    if (!config) {
      error = model.empty() ? "give a module or --model PRESET"
                            : "--model: unknown preset '" + model +
                                  "' (cleave-models --list shows them)";
      return nullptr;
    }
    std::optional<cleave::DType> d =
        dtype == "fp8" ? cleave::DType::F8E4M3 : cleave::parseDType(dtype);
    if (!d) {
      error = "--dtype: expected f32, bf16, f16, f8e4m3 or fp8, got '" + dtype +
              "'";
      return nullptr;
    }
    config->dtype = *d;
    if (globalBatch > 0)
      config->batch = globalBatch;
    if (!applyShape(*config, error))
      return nullptr;
    shaped = *config;
    return mlir::cleave::buildModel(&ctx, *config, error);
  }
  std::string message;
  auto file = mlir::openInputFile(input, &message);
  if (!file) {
    error = message;
    return nullptr;
  }
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  auto module = mlir::parseSourceFile<mlir::ModuleOp>(sources, &ctx);
  if (!module)
    error = input + ": cannot parse the module";
  return module;
}

/// The chosen plan's mesh, pipeline and simulated step (Report/Html.h).
/// The timeline is simulated from the preset's formulas, so a plan priced
/// from the ops of a module no preset matches gets none.
cleave::cost::Result<bool> addPictures(nlohmann::json &j,
                                       const planner::AutoShardResult &r) {
  const cleave::cost::ParallelPlan &plan = r.search.best->plan;
  cleave::cost::EstimateOptions eo;
  eo.keepTimeline = r.transformerMode && (!r.graphDerived || r.presetMatched);
  eo.constants = r.searchOptions.constants;
  eo.memoryHeadroom = r.searchOptions.memoryHeadroom;
  cleave::cost::Result<cleave::cost::Estimate> e =
      cleave::cost::estimate(r.model, r.cluster.spec, plan, eo);
  if (!e)
    return cleave::cost::Result<bool>::failure("the chosen plan: " + e.error());
  j.update(cleave::report::picturesToJson(r.model, r.cluster.spec, plan, *e));
  return true;
}

/// The preset's search at `gpus` (its formulas, as the chosen plan's
/// pictures): the options of `r` on the cluster of that size.
cleave::cost::Result<planner::SearchResult>
searchPreset(const planner::AutoShardResult &r, int gpus) {
  cleave::cost::Result<planner::PlanCluster> c =
      planner::resolveCluster(cluster, gpus);
  if (!c)
    return cleave::cost::Result<planner::SearchResult>::failure(c.error());
  planner::PlannerOptions o = r.searchOptions;
  o.gpus = gpus;
  o.topK = 1;
  o.progress = nullptr;
  return planner::searchPlans(r.model, c->spec, o);
}

/// One point of the scale study: the best plan of search `s` at `gpus`, or
/// why none.
nlohmann::json
scalePoint(int gpus, const cleave::cost::Result<planner::SearchResult> &s) {
  nlohmann::json p = {{"gpus", gpus}};
  if (!s)
    return p["error"] = s.error(), p;
  if (!s->best)
    return p["error"] = s->infeasible.empty() ? std::string("no plan fits")
                                              : s->infeasible.front(),
           p;
  const planner::Candidate &b = *s->best;
  double exposed = 0;
  nlohmann::json byAxis = nlohmann::json::object();
  for (int a = 0; a < cleave::cost::kNumAxes; ++a) {
    double t = b.breakdown.exposedComm[size_t(a)];
    byAxis[cleave::cost::toString(cleave::cost::Axis(a))] = t;
    exposed += t;
  }
  p["plan"] = cleave::cost::describe(b.plan);
  p["step_time_s"] = b.stepTime;
  p["tokens_per_s"] = b.tokensPerSecond;
  p["mfu"] = b.mfu;
  p["exposed_comm_s"] = exposed;
  p["exposed_comm_share"] = exposed / b.stepTime;
  p["exposed_comm_s_by_axis"] = byAxis;
  p["bubble_share"] = b.breakdown.bubble / b.stepTime;
  p["search_seconds"] = s->stats.seconds;
  return p;
}

/// A plan without its per-chunk layer counts (the JSON has them).
std::string shortPlan(const std::string &plan) {
  size_t at = plan.find(" layers=");
  if (at == std::string::npos)
    return plan;
  size_t end = plan.find(' ', at + 1);
  return plan.substr(0, at) + " layers=balanced" +
         (end == std::string::npos ? "" : plan.substr(end));
}

/// The scale study's table.
void printScale(const nlohmann::json &points, int64_t batch) {
  outs() << "\nscale study (global batch " << batch
         << " sequences; the best plan at each size)\n";
  outs() << formatv("  {0,7}  {1,10}  {2,12}  {3,6}  {4,12}  {5,6}  {6}\n",
                    "GPUs", "step", "tokens/s", "MFU", "exposed comm", "bubble",
                    "plan");
  for (const nlohmann::json &p : points) {
    if (!p.contains("plan")) {
      outs() << formatv("  {0,7}  ", p["gpus"].get<int>())
             << p["error"].get<std::string>() << "\n";
      continue;
    }
    outs() << formatv("  {0,7}  {1,10}  {2,12:f0}  {3,5:f1}%  {4,11:f1}%  "
                      "{5,5:f1}%  ",
                      p["gpus"].get<int>(),
                      cleave::cost::formatSeconds(p["step_time_s"]),
                      p["tokens_per_s"].get<double>(),
                      100 * p["mfu"].get<double>(),
                      100 * p["exposed_comm_share"].get<double>(),
                      100 * p["bubble_share"].get<double>())
           << shortPlan(p["plan"]) << "\n";
  }
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  ::cleave::exitQuietlyOnClosedStdout();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "cleave-plan: finds the fastest parallel plan of a training step on a "
      "cluster and explains it\n");
  for (int n : scale)
    if (n < 1)
      return fail("--scale: expected GPU counts >= 1, got " +
                  std::to_string(n));
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::cleave::CleaveDialect, mlir::func::FuncDialect>();
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module = loadModule(ctx, error);
  if (!module)
    return fail(error);
  planner::AutoShardOptions o;
  o.cluster = cluster;
  o.gpus = gpus;
  o.globalBatch = input.empty() ? 0 : globalBatch;
  o.fixedTp = tp;
  o.fixedZero = zero;
  o.maxPp = maxPp;
  o.memoryHeadroom = headroom;
  o.maxMicroBatches = maxMicroBatches;
  o.model = model;
  if (shaped &&
      (untiedEmbeddings || layers != -1 || hidden != -1 || heads != -1 ||
       kvHeads != -1 || ffn != -1 || vocab != -1 || seqLen != -1))
    o.config = *shaped;
  o.function = function;
  o.topK = top;
  Progress progress;
  o.progress = [&](const planner::SearchProgress &p) { progress(p); };
  // The scale study searches the module as it was, before the plan is
  // written into it.
  mlir::OwningOpRef<mlir::ModuleOp> unplanned;
  if (!scale.empty())
    unplanned = module->clone();
  cleave::cost::Result<planner::AutoShardResult> r =
      planner::autoShard(*module, o);
  progress.done();
  if (!r)
    return fail(r.error());
  outs() << r->report();
  nlohmann::json j = r->toJson();
  if (r->search.best && (!jsonPath.empty() || !htmlPath.empty()))
    if (cleave::cost::Result<bool> done = addPictures(j, *r); !done)
      return fail(done.error());
  if (!scale.empty()) {
    // A preset is studied by its formulas (as its pictures are drawn); a
    // module no preset describes is priced from its own ops at each size.
    bool ownOps = !r->transformerMode || (r->graphDerived && !r->presetMatched);
    j["scale"] = nlohmann::json::array();
    for (int n : scale)
      j["scale"].push_back(
          scalePoint(n, ownOps ? planner::searchAtSize(*unplanned, o, n)
                               : searchPreset(*r, n)));
    printScale(j["scale"], r->searchOptions.globalBatch);
  }
  if (!jsonPath.empty()) {
    std::ofstream out(jsonPath);
    out << j.dump(1) << "\n";
    if (!out)
      return fail("--json: cannot write " + jsonPath);
  }
  if (!htmlPath.empty()) {
    std::string title = "cleave-plan: " + r->model.name + " on " +
                        std::to_string(r->search.gpus) + " GPUs";
    if (cleave::cost::Result<bool> w = cleave::report::writeFile(
            htmlPath, cleave::report::renderHtml(j, title));
        !w)
      return fail("--html: " + w.error());
  }
  if (!r->search.best)
    return 1;
  if (!output.empty()) {
    auto out = mlir::openOutputFile(output, &error);
    if (!out)
      return fail("-o: " + error);
    module->print(out->os());
    out->keep();
  }
  return 0;
}
