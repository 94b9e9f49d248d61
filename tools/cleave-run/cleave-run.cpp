//===- cleave-run.cpp - Train a cleave program ----------------------------===//
//
// Examples:
//   cleave-run --model tiny-gpt --steps 200          (embedded corpus)
//   cleave-run model.mlir --params init.safetensors --inputs batches.st
//   cleave-run --model gpt2-small --data train.bin --token-bytes 2
//   cleave-run --model tiny-gpt --emit-object step.o (ahead of time)
//   cleave-run --model tiny-gpt --aot step.so        (run an AOT build)
//   cleave-run --model gpt2-small --backend cuda     (one process per GPU)
//   cleave-run -n 4 --model tiny-gpt --plan auto     (the planner's plan)
//
// The work is in libraries: lib/Pipelines compiles the program for the
// ranks (plan, training step, partitioning, pipeline), lib/Execution
// lowers it, loads the data and runs the ranks.
//
//===----------------------------------------------------------------------===//

#include "Corpus.h"
#include "cleave/Execution/Bundle.h"
#include "cleave/Execution/Compiler.h"
#include "cleave/Execution/Run.h"
#include "cleave/Execution/RunFlags.h"
#include "cleave/Models/ModelZoo.h"
#include "cleave/Pipelines/Compile.h"
#include "cleave/Support/ClosedPipeLLVM.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

using namespace llvm;
using namespace mlir::cleave;

namespace {
cl::OptionCategory modelCat("Model (when no .mlir file is given)");
cl::opt<std::string> input(cl::Positional, cl::desc("[program.mlir]"),
                           cl::init(""));
cl::opt<std::string> preset("model", cl::desc("Model-zoo preset"),
                            cl::init("tiny-gpt"), cl::cat(modelCat));
cl::opt<int64_t> layers("layers", cl::init(-1), cl::cat(modelCat),
                        cl::desc("Override: layers"));
cl::opt<int64_t> hidden(
    "hidden", cl::init(-1), cl::cat(modelCat),
    cl::desc("Override: hidden size; without --ffn the feed-forward size "
             "follows the preset's rule (GPT: 4 x hidden; Llama: the "
             "preset's ffn/hidden ratio); the first line of the run shows "
             "the shape"));
cl::opt<int64_t> heads("heads", cl::init(-1), cl::cat(modelCat),
                       cl::desc("Override: attention heads"));
cl::opt<int64_t> kvHeads("kv-heads", cl::init(-1), cl::cat(modelCat),
                         cl::desc("Override: key/value heads"));
cl::opt<int64_t> ffn("ffn", cl::init(-1), cl::cat(modelCat),
                     cl::desc("Override: feed-forward size"));
cl::opt<int64_t> seqLen("seq", cl::init(-1), cl::cat(modelCat),
                        cl::desc("Override: sequence length"));
cl::opt<int64_t> batch("batch", cl::init(-1), cl::cat(modelCat),
                       cl::desc("Override: sequences per step"));
cl::opt<double> dropout("dropout", cl::init(-1.0), cl::cat(modelCat),
                        cl::desc("Override: dropout rate"));
cl::opt<double> capacityFactor(
    "capacity-factor", cl::init(-1.0), cl::cat(modelCat),
    cl::desc("Override of a mixture-of-experts model: expert slots per "
             "sequence are ceil(factor * seq * top_k / experts), tokens "
             "beyond them are dropped; 0: dropless (docs/moe.md)"));
cl::opt<std::string> dtype("dtype", cl::init(""), cl::cat(modelCat),
                           cl::desc("Compute type: f32, bf16, f16 (master "
                                    "weights and optimizer state stay f32)"));

cl::OptionCategory trainCat("Training");
cl::opt<std::string> optimizer("optimizer", cl::init("adamw"),
                               cl::cat(trainCat), cl::desc("adamw or sgd"));
cl::opt<double> beta1("beta1", cl::init(0.9), cl::cat(trainCat));
cl::opt<double> beta2("beta2", cl::init(0.999), cl::cat(trainCat));
cl::opt<double> eps("eps", cl::init(1e-8), cl::cat(trainCat));
cl::opt<double> weightDecay("weight-decay", cl::init(0.01), cl::cat(trainCat));
cl::opt<std::string> lrSchedule(
    "lr-schedule", cl::init("constant"), cl::cat(trainCat),
    cl::desc("Learning rate after the warmup: constant, cosine or linear "
             "decay from --lr to --lr-min at step --decay-steps"));
cl::opt<int64_t> warmupSteps("warmup-steps", cl::init(0), cl::cat(trainCat),
                             cl::desc("Steps of linear warmup to --lr"));
cl::opt<int64_t> decaySteps(
    "decay-steps", cl::init(-1), cl::cat(trainCat),
    cl::desc("The step at which the decay reaches --lr-min (default: "
             "--steps)"));
cl::opt<double> lrMin("lr-min", cl::init(0.0), cl::cat(trainCat),
                      cl::desc("The learning rate at the end of the decay"));
cl::opt<double> gradClip(
    "grad-clip", cl::init(0.0), cl::cat(trainCat),
    cl::desc("Clip the global gradient norm (over every shard and stage) to "
             "this value before the optimizer update, as "
             "torch.nn.utils.clip_grad_norm_; 0: no clipping"));
cl::opt<int64_t> accumulate(
    "accumulate", cl::init(1), cl::cat(trainCat),
    cl::desc("Gradient accumulation: one optimizer update per K batches "
             "(nanoGPT's gradient_accumulation_steps), run one after the "
             "other as micro-batches; a zoo model's step takes K x --batch "
             "sequences, a program's batch is split in K"));
cl::opt<bool> noDecayVectors(
    "no-decay-vectors", cl::init(false), cl::cat(trainCat),
    cl::desc("Weight decay on matrices only: biases and norm weights (rank "
             "< 2) are not decayed, as nanoGPT's optimizer groups"));
cl::opt<std::string> lossScale(
    "loss-scale", cl::init(""), cl::cat(trainCat),
    cl::desc("dynamic: scale the loss, skip steps whose gradients overflow "
             "(inf/NaN on any rank) and halve the scale, grow it after "
             "--loss-scale-growth-interval good steps (PyTorch's GradScaler); "
             "none: no scaling (default: dynamic with --dtype f16, else "
             "none)"));

cl::OptionCategory ioCat("Data and files");
cl::opt<int64_t> vocabOpt("vocab", cl::init(-1), cl::cat(ioCat),
                          cl::desc("Vocabulary of the token data"));
cl::opt<std::string> emitObject("emit-object", cl::cat(ioCat),
                                cl::desc("Compile to this object file, exit"));
cl::opt<std::string> emitBundle(
    "emit-bundle", cl::cat(ioCat),
    cl::desc("Write a bundle to this directory and exit: the compiled step "
             "(for --backend cuda also its CPU build), a runner without "
             "LLVM/MLIR, the libraries, the data and DIR/run, which trains "
             "on another machine with the run options of cleave-run and "
             "checks a GPU with --selftest (docs/cuda.md)"));
cl::opt<std::string> bundleCpu(
    "bundle-cpu", cl::init(kBundleHostCpu), cl::cat(ioCat),
    cl::desc("With --emit-bundle: the CPU the bundle's host code is "
             "generated for (an LLVM CPU name; 'host': this machine's, which "
             "trains bit for bit like cleave-run here)"));
cl::opt<bool> bundleParams(
    "bundle-params", cl::cat(ioCat),
    cl::desc("With --emit-bundle and --params: carry the parameters in the "
             "bundle (its runs start from them)"));
cl::opt<std::string> aotPath("aot", cl::cat(ioCat),
                             cl::desc("Run an AOT-compiled shared library"));
cl::opt<bool> noCompileCache(
    "no-compile-cache", cl::cat(ioCat),
    cl::desc("Compile the step even if the compile cache has it, and do not "
             "keep it there (CLEAVE_COMPILE_CACHE=0 does the same; "
             "CLEAVE_COMPILE_CACHE_DIR and CLEAVE_COMPILE_CACHE_MAX_MB set "
             "where it lives and its bound, docs/cleave-run.md)"));

cl::OptionCategory deviceCat("Device");
cl::opt<std::string> backendOpt(
    "backend", cl::init("cpu"), cl::cat(deviceCat),
    cl::desc("cpu (Gloo, OpenBLAS) or cuda (NCCL, cuBLASLt; one process per "
             "GPU, LOCAL_RANK selects the device)"));

cl::opt<int64_t> attentionTile(
    "attention-tile", cl::init(CPUPipelineOptions().attentionTile),
    cl::cat(deviceCat),
    cl::desc("Rows of the query and key tiles of the flash attention "
             "lowering, on both backends (docs/attention.md); 0: the "
             "materialised lowering, whose [B*H, S, S] probabilities grow "
             "with the square of the sequence"));

cl::OptionCategory parallelCat("Parallelism");
// steps, data, files, checkpoints, -n: shared with bundle runners.
RunFlags flags(trainCat, ioCat, parallelCat);
cl::opt<std::string> planSpec(
    "plan", cl::init(""), cl::cat(parallelCat),
    cl::desc("Named plan, e.g. dp=2,tp=2,sp,zero=1, dp=2,cp=2 (context "
             "parallel: the sequence split) or "
             "pp=2,dp=2,schedule=1f1b,micro=4 (cleave-apply-plan; pipelines: "
             "pp, micro, schedule=gpipe|1f1b|interleaved|zb-h1, virtual=V); "
             "dp defaults to the ranks left over by tp, cp and pp; or 'auto' "
             "(optionally auto,tp=N,pp=P,zero=K): the planner's choice for the "
             "ranks on this machine (cleave-auto-shard, cluster local-cpu); "
             "without --plan, several ranks and no mesh in the program: "
             "dp=<ranks>"));

cl::list<std::string> planFor(
    "plan-for", cl::cat(parallelCat), cl::value_desc("N:PLAN"),
    cl::desc("The plan when there are N ranks (repeatable; --plan is the "
             "plan of every other world size), e.g. --plan dp=2,tp=2 "
             "--plan-for 2:tp=2: a run under an elastic launcher, or a "
             "restart on fewer ranks (--restart-ranks), compiles the step "
             "with it; a restart on a world with neither uses --plan if it "
             "fits, else the planner's choice (auto)"));

cl::opt<double> bucketMiB(
    "bucket-mb", cl::init(25.0), cl::cat(parallelCat),
    cl::desc("Largest gradient bucket in MiB: data-parallel gradients and "
             "ZeRO's all-gathers and reduce-scatters are coalesced into one "
             "collective per bucket (cleave-bucket-collectives); 0: one "
             "collective per tensor"));

cl::opt<bool> asyncCollectives(
    "async-collectives", cl::init(true), cl::cat(parallelCat),
    cl::desc("Overlap communication with compute: collectives and pipeline "
             "transfers start early and are waited where their result is "
             "used (cleave-async-collectives); =false: every collective "
             "blocks. CLEAVE_ASYNC=0 keeps the schedule but runs each start "
             "at once, without the progress thread"));

cl::opt<bool> predict(
    "predict", cl::init(false), cl::cat(parallelCat),
    cl::desc("Also print what the cost model predicts for the plan (step "
             "time, peak memory per rank), priced from the program's ops on "
             "cluster local-cpu as the planner prices its candidates "
             "(measured when CLEAVE_LOCAL_CPU_SPEC names a spec; "
             "docs/planner.md)"));

int fail(const Twine &message) {
  outs().flush();
  errs() << "cleave-run: error: " << message << "\n";
  return 1;
}

/// The zoo config from --model and the overrides.
Expected<cleave::ModelConfig> zooConfig() {
  std::optional<cleave::ModelConfig> c = cleave::lookupPreset(preset);
  if (!c)
    return createStringError(inconvertibleErrorCode(),
                             "unknown preset '" + preset +
                                 "' (cleave-models --list shows them)");
  // Without --ffn the feed-forward size follows the width by the preset's
  // rule, as the published configurations scale.
  if (hidden != -1 && ffn == -1)
    c->ffnHidden = c->ffnForWidth(hidden);
  for (auto [opt, field] :
       {std::pair{&layers, &c->layers}, std::pair{&hidden, &c->hidden},
        std::pair{&heads, &c->heads}, std::pair{&kvHeads, &c->kvHeads},
        std::pair{&ffn, &c->ffnHidden}, std::pair{&seqLen, &c->seqLen},
        std::pair{&batch, &c->batch}})
    if (*opt != -1)
      *field = *opt;
  if (heads != -1 && kvHeads == -1 && c->arch == cleave::Architecture::GPT)
    c->kvHeads = c->heads;
  if (dropout >= 0.0)
    c->dropout = dropout;
  if (capacityFactor.getNumOccurrences()) {
    if (c->experts == 0)
      return createStringError(inconvertibleErrorCode(),
                               "--capacity-factor: model '" + preset +
                                   "' has no experts (a mixture-of-experts "
                                   "preset such as tiny-moe has)");
    c->capacityFactor = capacityFactor;
  }
  // Each accumulated micro-batch has --batch sequences.
  c->batch *= accumulate;
  if (!dtype.empty()) {
    std::optional<cleave::DType> d = cleave::parseDType(dtype);
    if (!d)
      return createStringError(inconvertibleErrorCode(),
                               "unknown --dtype '" + dtype +
                                   "' (f32, bf16, f16)");
    c->dtype = *d;
  }
  return *c;
}

/// The run's first line: the model's effective shape, overrides applied.
void printModel(const cleave::ModelConfig &c) {
  outs() << "model " << c.name << " (" << cleave::toString(c.arch) << "): ";
  if (c.arch == cleave::Architecture::MLP)
    outs() << c.layers << " layers, " << c.hidden << " features, width "
           << c.ffnHidden << ", " << c.vocab << " classes";
  else
    outs() << c.layers << " layers, hidden " << c.hidden << ", " << c.heads
           << " heads (" << c.kvHeads << " kv), ffn " << c.ffnHidden
           << (hidden != -1 && ffn == -1 ? " (scaled with --hidden)" : "")
           << ", vocab " << c.vocab << ", seq " << c.seqLen;
  outs() << ", " << cleave::toString(c.dtype) << "; " << c.numParameters()
         << " parameters, batch " << c.batch
         << (c.arch == cleave::Architecture::MLP
                 ? ""
                 : " x " + std::to_string(c.seqLen))
         << "\n";
  outs().flush(); // before the minutes compilation may take
}

/// The program: the file given, or the zoo model (then `model` is set and
/// `vocab`, if unknown, becomes the model's).
mlir::OwningOpRef<mlir::ModuleOp>
loadProgram(mlir::MLIRContext &context, SourceMgr &sourceMgr, bool textVocab,
            int64_t &vocab, std::optional<cleave::ModelConfig> &model,
            std::string &error) {
  if (!input.empty()) {
    auto module =
        mlir::parseSourceFile<mlir::ModuleOp>(input, sourceMgr, &context);
    if (!module)
      error = "cannot read the program " + input;
    return module;
  }
  Expected<cleave::ModelConfig> config = zooConfig();
  if (!config) {
    error = toString(config.takeError());
    return nullptr;
  }
  if (textVocab)
    config->vocab = vocab;
  else if (vocab < 0)
    vocab = config->vocab;
  model = *config;
  auto module = buildModel(&context, *config, error);
  if (!module)
    error = "invalid model: " + error;
  else
    printModel(*config);
  return module;
}

/// The mesh of the program must have one device per rank.
Error checkMesh(const ProgramManifest &manifest, int world) {
  const std::optional<MeshSpec> &mesh = manifest.mesh;
  if (!mesh || mesh->numDevices() == world)
    return Error::success();
  return createStringError(
      inconvertibleErrorCode(),
      Twine(planSpec.empty() && planFor.empty() ? "the program's"
                                                : "the plan's") +
          " mesh (" + mesh->toString() + ") has " + Twine(mesh->numDevices()) +
          " devices but there are " + Twine(world) + " ranks" +
          (flags.nprocs > 0 ? " (-n " + Twine(world) + ")" : Twine("")));
}

/// The step at which the decay ends: --decay-steps, or the last step.
int64_t effectiveDecaySteps() {
  return decaySteps.getNumOccurrences() ? decaySteps.getValue()
                                        : flags.steps.getValue();
}

/// Range checks of the numeric options, before anything is compiled.
Error checkNumbers() {
  if (Error err = flags.check())
    return err;
  auto finite = [](double v) { return std::isfinite(v); };
  for (auto [opt, name] : {std::pair{&beta1, "beta1"}, {&beta2, "beta2"}})
    if (!finite(*opt) || *opt < 0 || *opt >= 1)
      return badValue(name, showNumber(opt->getValue()), "a number in [0, 1)");
  if (!finite(eps) || eps <= 0)
    return badValue("eps", showNumber(eps.getValue()), "a finite number > 0");
  if (!finite(weightDecay) || weightDecay < 0)
    return badValue("weight-decay", showNumber(weightDecay.getValue()),
                    "a finite number >= 0");
  if (accumulate < 1 || accumulate > 4096)
    return badValue("accumulate", Twine(accumulate.getValue()),
                    "a number of batches in 1..4096");
  if (gradClip.getNumOccurrences() && (!finite(gradClip) || gradClip <= 0))
    return badValue("grad-clip", showNumber(gradClip.getValue()),
                    "a finite norm > 0");
  if (lrSchedule != "constant" && lrSchedule != "cosine" &&
      lrSchedule != "linear")
    return badValue("lr-schedule", lrSchedule.getValue(),
                    "constant, cosine or linear");
  if (warmupSteps < 0)
    return badValue("warmup-steps", Twine(warmupSteps.getValue()),
                    "a number of steps >= 0");
  if (!finite(lrMin) || lrMin < 0 || lrMin > flags.lr)
    return badValue("lr-min", showNumber(lrMin.getValue()),
                    "a finite number in [0, --lr] (--lr is " +
                        showNumber(flags.lr.getValue()) + ")");
  if (decaySteps.getNumOccurrences() && lrSchedule == "constant")
    return badValue("decay-steps", Twine(decaySteps.getValue()),
                    "no decay with --lr-schedule constant (choose cosine or "
                    "linear)");
  if (lrSchedule != "constant" && effectiveDecaySteps() < warmupSteps)
    return badValue("decay-steps", Twine(effectiveDecaySteps()),
                    "a step >= --warmup-steps " +
                        Twine(warmupSteps.getValue()) +
                        ": the decay starts after the warmup");
  if (!lossScale.empty() && lossScale != "dynamic" && lossScale != "none")
    return badValue("loss-scale", lossScale.getValue(), "dynamic or none");
  if (dropout.getNumOccurrences() &&
      (!finite(dropout) || dropout < 0 || dropout >= 1))
    return badValue("dropout", showNumber(dropout.getValue()),
                    "a rate in [0, 1)");
  for (auto [opt, name] : {std::pair{&layers, "layers"},
                           {&hidden, "hidden"},
                           {&heads, "heads"},
                           {&kvHeads, "kv-heads"},
                           {&ffn, "ffn"},
                           {&seqLen, "seq"},
                           {&batch, "batch"}})
    if (opt->getNumOccurrences() && *opt < 1)
      return badValue(name, showNumber(opt->getValue()), "a size >= 1");
  return Error::success();
}

/// The options that shape the training step need a program cleave-run
/// builds the step of: a program with its own @train_step ignores them.
Error checkStepOptions(mlir::ModuleOp module) {
  if (!module.lookupSymbol("train_step"))
    return Error::success();
  for (cl::Option *o : std::initializer_list<cl::Option *>{
           &lrSchedule, &warmupSteps, &decaySteps, &lrMin, &noDecayVectors,
           &gradClip, &lossScale})
    if (o->getNumOccurrences())
      return createStringError(
          inconvertibleErrorCode(),
          "--" + o->ArgStr + ": the program " + input +
              " has its own @train_step, which this option cannot change; "
              "give the program's @forward instead");
  return Error::success();
}

/// Every output path is writable, and none is an input or another output,
/// checked before the first step so that no work or data is lost.
Error checkPaths() {
  NamedPath inputs[] = {{"aot", aotPath}, {"program", input}};
  NamedPath outputs[] = {{"emit-object", emitObject, /*tensorFile=*/false}};
  return flags.checkPaths(inputs, outputs);
}

/// --accumulate K runs the step's batch as K micro-batches before one
/// update: the micro-batch axis of the plan (docs/pipeline.md), which a
/// pipeline's own micro-batches multiply.
Error accumulateInPlan(RankCompileOptions &options, int world) {
  if (accumulate == 1)
    return Error::success();
  if (!options.plan) {
    Expected<PlanSpec> plan =
        parsePlan("micro=" + std::to_string(accumulate), world, "--plan");
    if (!plan)
      return plan.takeError();
    options.plan = *plan;
    return Error::success();
  }
  if (options.plan->automatic)
    return badValue("accumulate", Twine(accumulate.getValue()),
                    "a named --plan (the planner does not choose "
                    "micro-batches here)");
  options.plan->named.micro *= accumulate;
  return Error::success();
}

/// Compiling for the ranks: the plan, the training step, partitioning.
RankCompileOptions rankCompileOptions(int world) {
  RankCompileOptions o;
  o.world = world;
  o.planName = "--plan";
  o.autodiff.optimizer = optimizer;
  o.autodiff.beta1 = beta1;
  o.autodiff.beta2 = beta2;
  o.autodiff.epsilon = eps;
  o.autodiff.weightDecay = weightDecay;
  o.autodiff.noDecayVectors = noDecayVectors;
  o.autodiff.lrSchedule = lrSchedule;
  o.autodiff.warmupSteps = warmupSteps;
  o.autodiff.decaySteps = lrSchedule == "constant" ? 0 : effectiveDecaySteps();
  o.autodiff.lrMin = lrMin;
  o.autodiff.gradClip = gradClip;
  o.autodiff.lossScaling =
      lossScale.empty() ? dtype == "f16" : lossScale == "dynamic";
  o.keepOtherFunctions = !emitObject.empty();
  o.evalStep = !flags.valDataPath.empty();
  o.log = &outs();
  return o;
}

/// The --plan-for entries by world size; errors name a malformed one.
Expected<std::map<int, std::string>> plansByWorld() {
  std::map<int, std::string> plans;
  for (const std::string &entry : planFor) {
    StringRef ranks, plan;
    std::tie(ranks, plan) = StringRef(entry).split(':');
    int n = 0;
    if (!StringRef(entry).contains(':') || ranks.getAsInteger(10, n) || n < 1 ||
        n > 1024)
      return badValue("plan-for", entry,
                      "N:PLAN with N a number of ranks in 1..1024");
    if (!plans.emplace(n, plan.str()).second)
      return badValue("plan-for", entry,
                      "one plan per world size (" + Twine(n) + " has two)");
  }
  return plans;
}

/// The plan text of a world of `world` ranks: its --plan-for entry, else
/// --plan. With `orPlanner`, a --plan that does not fit the world gives
/// way to the planner's choice ("auto"); `why` says which it is.
std::string planTextFor(const std::map<int, std::string> &plans, int world,
                        bool orPlanner, std::string &why) {
  if (auto it = plans.find(world); it != plans.end()) {
    why = "--plan-for " + std::to_string(world);
    return it->second;
  }
  why = planSpec.empty() ? "the default" : "--plan";
  if (!orPlanner || planSpec.empty())
    return planSpec;
  Expected<PlanSpec> plan = parsePlan(planSpec, world, "--plan");
  if (plan &&
      (plan->automatic || plan->named.dp * plan->named.tp * plan->named.ep *
                                  plan->named.cp * plan->named.pp ==
                              world))
    return planSpec;
  if (!plan)
    consumeError(plan.takeError());
  why = "the planner's choice: --plan " + planSpec + " does not fit " +
        std::to_string(world) + " ranks";
  return "auto";
}

/// The compile options of a world of `world` ranks under plan `planText`.
Expected<RankCompileOptions> rankOptionsFor(int world,
                                            const std::string &planText) {
  RankCompileOptions o = rankCompileOptions(world);
  o.bucketBytes = int64_t(bucketMiB * 1024.0 * 1024.0);
  o.asyncCollectives = asyncCollectives;
  o.predict = predict;
  // Resharding is ranked on the links the ranks use: this machine's
  // processes on the CPU; a GPU run keeps the pass's default cluster.
  if (backendOpt == "cuda")
    o.partitionCluster.clear();
  if (!planText.empty()) {
    Expected<PlanSpec> plan = parsePlan(planText, world, "--plan");
    if (!plan)
      return plan.takeError();
    o.plan = *plan;
  }
  if (Error err = accumulateInPlan(o, world))
    return std::move(err);
  return o;
}

/// Compiles the step of `program` (as loaded, before compileForRanks) for
/// a restart on `world` ranks, with `like`'s data; `planText` gets its plan.
Expected<TrainJob> jobForWorld(mlir::ModuleOp program, const TrainJob &like,
                               const std::map<int, std::string> &plans,
                               const CompileOptions &compileOptions, int world,
                               std::string &planText) {
  std::string why;
  planText = planTextFor(plans, world, /*orPlanner=*/true, why);
  outs() << "compiling the step for " << world << " ranks, plan '" << planText
         << "' (" << why << ")\n";
  Expected<RankCompileOptions> options = rankOptionsFor(world, planText);
  if (!options)
    return options.takeError();
  mlir::OwningOpRef<mlir::ModuleOp> module = program.clone();
  if (Error err = compileForRanks(*module, *options))
    return std::move(err);
  FailureOr<ProgramManifest> manifest = extractManifest(*module);
  if (failed(manifest))
    return createStringError(inconvertibleErrorCode(),
                             "the program's signature cannot be driven by "
                             "cleave-run on " +
                                 Twine(world) + " ranks");
  TrainJob job;
  job.manifest = std::move(*manifest);
  job.source = like.source;
  job.valSource = like.valSource;
  if (Error err = checkJob(job))
    return std::move(err);
  Expected<CompileCacheOptions> cacheOptions =
      CompileCacheOptions::fromEnvironment();
  if (!cacheOptions)
    return cacheOptions.takeError();
  cacheOptions->enabled &= !noCompileCache;
  CompileCache cache(*cacheOptions);
  if (Error err =
          compileJob(*module, compileOptions, world, job, outs(), &cache))
    return std::move(err);
  return std::move(job);
}

/// The global batch's tokens: a zoo model's batch x sequence, or a
/// program's first integer input of rank 2 (token ids [batch, seq]).
int64_t tokensPerStep(const ProgramManifest &manifest,
                      const std::optional<cleave::ModelConfig> &model) {
  if (model)
    return model->arch == cleave::Architecture::MLP
               ? 0
               : model->batch * model->seqLen;
  const FunctionSpec *step =
      manifest.lookup(manifest.entryFor("train_step", 0));
  if (!step)
    return 0;
  for (const BufferSpec &b : step->buffers)
    if (b.role == BufferSpec::Role::Input && b.shape.size() == 2 &&
        (b.dtype == CLEAVE_I32 || b.dtype == CLEAVE_I64)) {
      std::vector<int64_t> shape =
          manifest.mesh ? globalShape(b, *manifest.mesh) : b.shape;
      return shape[0] * shape[1];
    }
  return 0;
}

/// Whether this process is the first rank (or the launcher of the ranks):
/// under an external launcher, one process says what all would.
bool firstProcess() {
  for (const char *var : {"RANK", "OMPI_COMM_WORLD_RANK"})
    if (const char *v = std::getenv(var); v && flags.nprocs <= 0)
      return std::atoi(v) == 0;
  return true;
}

/// The cost model's prediction of the step for the progress line, priced
/// on `program` as loaded (compileForRanks rewrites it) into `into`, when
/// compiling does not make it (the planner's plan and --predict do); or
/// why there is none.
std::string predictBeforeCompiling(mlir::ModuleOp program,
                                   const RankCompileOptions &options,
                                   StepPrediction &into) {
  if (backendOpt != "cpu")
    return "the cost model's GPU for --backend " + backendOpt +
           " is not known here";
  if (!aotPath.empty())
    return "an --aot build carries no model for the cost model";
  if ((options.plan && options.plan->automatic) || options.predict)
    return "";
  Expected<StepPrediction> p = predictLocalStep(program, options);
  if (!p)
    return toString(p.takeError());
  into = *p;
  return "";
}

/// The run options, with what the progress line and the report show: the
/// title, tokens per step and the cost model's prediction `planned` (said
/// once, or `none`: why there is none).
RunOptions runOptions(const RankCompileOptions &compiled,
                      const StepPrediction &planned, std::string none,
                      const ProgramManifest &manifest,
                      const std::string &planText) {
  RunOptions o = flags.runOptions();
  o.backend = backendOpt;
  o.planText = planText;
  int world = compiled.world;
  o.title = (compiled.model ? compiled.model->name : input.getValue()) + ", " +
            std::to_string(world) + " rank" + (world == 1 ? "" : "s") +
            (planText.empty() ? "" : ", --plan " + planText);
  o.tokensPerStep = tokensPerStep(manifest, compiled.model);
  if (none.empty() && planned.stepSeconds > 0)
    o.prediction = planned;
  else if (none.empty())
    none = "the planner chose no plan";
  if (!firstProcess())
    return o;
  if (o.prediction)
    outs() << "predicted step: "
           << format("%.1f", 1000.0 * o.prediction->stepSeconds) << " ms, MFU "
           << format("%.2f", 100 * o.prediction->mfu)
           << "% (cost model: " << o.prediction->source << ")\n";
  else
    outs() << "no predicted step time: " << none << "\n";
  outs().flush(); // before the ranks are forked
  return o;
}

/// --emit-bundle: the bundle of the program compiled for the ranks.
int writeBundleOf(mlir::ModuleOp module, const CompileOptions &compileOptions,
                  const RankCompileOptions &rankOptions, int world,
                  const std::string &planText, int64_t vocab) {
  if (!aotPath.empty())
    return fail("--emit-bundle compiles the program; it cannot take --aot");
  if (bundleParams && flags.paramsPath.empty())
    return fail("--bundle-params needs --params FILE (the parameters to "
                "carry)");
  BundleOptions o;
  o.dir = emitBundle;
  o.compile = compileOptions;
  o.compile.hostCpu =
      bundleCpu == "host" ? sys::getHostCPUName().str() : bundleCpu.getValue();
  SmallString<256> runner(
      sys::fs::getMainExecutable(nullptr, (void *)&writeBundleOf));
  sys::path::remove_filename(runner);
  sys::path::append(runner, "cleave-bundle-run");
  o.runner = std::string(runner);
  o.world = world;
  o.planText = planText;
  o.model = rankOptions.model;
  o.plan = rankOptions.plan;
  o.step = rankOptions.autodiff;
  o.inputsPath = flags.inputsPath;
  o.tokensPath = flags.dataPath;
  o.valDataPath = flags.valDataPath;
  o.tokenBytes = flags.tokenBytes;
  o.text = flags.inputsPath.empty() && flags.dataPath.empty()
               ? StringRef(cleaveCorpusText())
               : StringRef();
  o.vocab = vocab;
  if (bundleParams)
    o.paramsPath = flags.paramsPath;
  o.steps = flags.steps;
  o.learningRate = flags.lr;
  o.seed = flags.seed;
  Expected<CompileCacheOptions> cacheOptions =
      CompileCacheOptions::fromEnvironment();
  if (!cacheOptions)
    return fail(toString(cacheOptions.takeError()));
  cacheOptions->enabled &= !noCompileCache;
  CompileCache cache(*cacheOptions);
  o.cache = &cache;
  if (Error err = writeBundle(module, o, outs()))
    return fail(toString(std::move(err)));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  ::cleave::exitQuietlyOnClosedStdout();
  // --help lists cleave-run's options, not every LLVM backend's.
  cl::HideUnrelatedOptions(
      {&modelCat, &trainCat, &ioCat, &deviceCat, &parallelCat});
  cl::ParseCommandLineOptions(argc, argv, "Train a cleave program\n");
  if (Error err = checkNumbers())
    return fail(toString(std::move(err)));
  if (Error err = checkPaths())
    return fail(toString(std::move(err)));
  flags.exportEnvironment();
  int world = flags.world();
  if (backendOpt != "cpu" && backendOpt != "cuda")
    return fail("unknown --backend '" + backendOpt + "' (cpu or cuda)");
  // Compiling for CUDA needs no device: only running does.
  CompileOptions compileOptions;
  compileOptions.target = backendOpt == "cuda" ? Target::CUDA : Target::CPU;
  if (attentionTile < 0)
    return fail("--attention-tile=" + std::to_string(attentionTile) +
                ": must be 0 (materialised) or a number of rows");
  compileOptions.pipeline.attentionTile = attentionTile;
  compileOptions.cuda.attentionTile = attentionTile;
  if (!(bucketMiB >= 0.0) || bucketMiB > 1e6)
    return fail("--bucket-mb=" + std::to_string(bucketMiB.getValue()) +
                ": must be between 0 and 1e6 (MiB)");
  Expected<std::map<int, std::string>> plans = plansByWorld();
  if (!plans)
    return fail(toString(plans.takeError()));
  std::string planWhy;
  std::string planText =
      planTextFor(*plans, world, /*orPlanner=*/false, planWhy);
  Expected<RankCompileOptions> rankOptions = rankOptionsFor(world, planText);
  if (!rankOptions)
    return fail(toString(rankOptions.takeError()));
  StepPrediction planned;
  rankOptions->plannerPrediction = &planned;

  // Data: per-step tensors, a token file, or the embedded corpus.
  auto data = TrainingData::open(flags.dataOptions(cleaveCorpusText()));
  if (!data)
    return fail(toString(data.takeError()));
  bool textVocab = (*data)->textVocab() >= 0;
  int64_t vocab = textVocab ? (*data)->textVocab() : vocabOpt.getValue();

  // The program, compiled for the ranks. Diagnostics on a program file
  // quote its source lines (not the IR).
  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);
  SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  std::string error;
  auto module = loadProgram(context, sourceMgr, textVocab, vocab,
                            rankOptions->model, error);
  if (!module)
    return fail(error);
  if (Error err = checkStepOptions(*module))
    return fail(toString(std::move(err)));
  if (!rankOptions->model && (*data)->hasTokens() && vocab < 0)
    return fail("token data needs --vocab for a program read from a file");
  Expected<std::unique_ptr<TrainingData>> valData = flags.openValidation(vocab);
  if (!valData)
    return fail(toString(valData.takeError()));
  // A restart on fewer ranks compiles the program again, from this copy.
  mlir::OwningOpRef<mlir::ModuleOp> program;
  bool shrinks = flags.maxRestarts > 0 &&
                 flags.restartRanks.getNumOccurrences() &&
                 flags.restartRanks != world;
  if (shrinks && aotPath.empty())
    program = module->clone();
  // Nothing runs for a bundle or an object file: no progress line.
  std::string noPrediction =
      emitBundle.empty() && emitObject.empty()
          ? predictBeforeCompiling(*module, *rankOptions, planned)
          : "";
  if (aotPath.empty())
    if (Error err = compileForRanks(*module, *rankOptions))
      return fail(toString(std::move(err)));
  if (!emitBundle.empty())
    return writeBundleOf(*module, compileOptions, *rankOptions, world, planText,
                         vocab);
  if (!emitObject.empty()) {
    if (Error err = compileToObject(*module, emitObject, compileOptions))
      return fail(toString(std::move(err)));
    outs() << "wrote " << emitObject << "; link it with: cc -shared -o step.so "
           << emitObject << " -L<build>/lib -lCleaveRuntime\n";
    return 0;
  }

  // Everything that can be checked before compiling is: the buffers the
  // step needs, the mesh against the ranks, the first batch.
  Expected<TrainJob> job = aotPath.empty() ? TrainJob() : loadAotJob(aotPath);
  if (!job)
    return fail(toString(job.takeError()));
  if (aotPath.empty()) {
    FailureOr<ProgramManifest> extracted = extractManifest(*module);
    if (failed(extracted))
      return fail("the program's signature cannot be driven by cleave-run");
    job->manifest = std::move(*extracted);
  }
  if (Error err = checkMesh(job->manifest, world))
    return fail(toString(std::move(err)));
  if (Error err = flags.attachData(*job, **data, valData->get(), vocab))
    return fail(toString(std::move(err)));
  if (job->entries.empty()) {
    Expected<CompileCacheOptions> cacheOptions =
        CompileCacheOptions::fromEnvironment();
    if (!cacheOptions)
      return fail(toString(cacheOptions.takeError()));
    cacheOptions->enabled &= !noCompileCache;
    CompileCache cache(*cacheOptions);
    if (Error err =
            compileJob(*module, compileOptions, world, *job, outs(), &cache))
      return fail(toString(std::move(err)));
  }
  RunOptions options =
      runOptions(*rankOptions, planned, noPrediction, job->manifest, planText);
  if (program)
    options.jobForWorld = [&](int ranks, std::string &text) {
      return jobForWorld(*program, *job, *plans, compileOptions, ranks, text);
    };
  return runTrainJob(*job, options);
}
