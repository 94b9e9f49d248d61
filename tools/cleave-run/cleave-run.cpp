//===- cleave-run.cpp - Train a cleave program ----------------------------===//
//
//   cleave-run --model tiny-gpt --steps 200             # embedded corpus
//   cleave-run model.mlir --params init.safetensors --inputs batches.safetensors
//   cleave-run --model gpt2-small --data train.bin --token-bytes 2 --steps 10
//   cleave-run --model tiny-gpt --emit-object step.o    # ahead of time
//   cleave-run --model tiny-gpt --aot step.so           # run an AOT build
//   cleave-run --model gpt2-small --backend cuda        # one process per GPU
//   cleave-run -n 4 --model tiny-gpt --plan auto        # the planner's plan
//
//===----------------------------------------------------------------------===//

#include "Corpus.h"
#include "cleave/Execution/Compiler.h"
#include "cleave/Execution/Trainer.h"
#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Models/ModelZoo.h"
#include "cleave/Planner/AutoShard.h"
#include "llvm/ADT/StringExtras.h"
#include <cstdlib>
#include "cleave/Transforms/Passes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Process.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include <dlfcn.h>
#include <map>

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
cl::opt<int64_t> hidden("hidden", cl::init(-1), cl::cat(modelCat),
                        cl::desc("Override: hidden size"));
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
cl::opt<std::string> dtype("dtype", cl::init(""), cl::cat(modelCat),
                           cl::desc("Compute type: f32, bf16, f16 (master "
                                    "weights and optimizer state stay f32)"));

cl::OptionCategory trainCat("Training");
cl::opt<int64_t> steps("steps", cl::init(100), cl::cat(trainCat),
                       cl::desc("Training steps"));
cl::opt<double> lr("lr", cl::init(1e-3), cl::cat(trainCat),
                   cl::desc("Learning rate"));
cl::opt<std::string> optimizer("optimizer", cl::init("adamw"),
                               cl::cat(trainCat), cl::desc("adamw or sgd"));
cl::opt<double> beta1("beta1", cl::init(0.9), cl::cat(trainCat));
cl::opt<double> beta2("beta2", cl::init(0.999), cl::cat(trainCat));
cl::opt<double> eps("eps", cl::init(1e-8), cl::cat(trainCat));
cl::opt<double> weightDecay("weight-decay", cl::init(0.01), cl::cat(trainCat));
cl::opt<uint64_t> seed("seed", cl::init(1234), cl::cat(trainCat),
                       cl::desc("Seed of initialization, data order, dropout"));
cl::opt<int64_t> logEvery("log-every", cl::init(10), cl::cat(trainCat),
                          cl::desc("Print the loss every N steps"));

cl::OptionCategory ioCat("Data and files");
cl::opt<std::string> dataPath("data", cl::cat(ioCat),
                              cl::desc("nanoGPT-style token file (.bin)"));
cl::opt<int> tokenBytes("token-bytes", cl::init(2), cl::cat(ioCat),
                        cl::desc("2 (uint16) or 4 (uint32) per token"));
cl::opt<int64_t> vocabOpt("vocab", cl::init(-1), cl::cat(ioCat),
                          cl::desc("Vocabulary of the token data"));
cl::opt<std::string> inputsPath("inputs", cl::cat(ioCat),
                                cl::desc("Per-step input tensors file"));
cl::opt<std::string> paramsPath("params", cl::cat(ioCat),
                                cl::desc("Load parameters from this file"));
cl::opt<std::string> savePath("save-params", cl::cat(ioCat),
                              cl::desc("Write the final parameters here"));
cl::opt<bool> saveState("save-state", cl::cat(ioCat),
                        cl::desc("Also write the optimizer state"));
cl::opt<std::string> lossesPath(
    "save-losses", cl::cat(ioCat),
    cl::desc("Write the per-step losses as tensor 'loss' [steps] (f64)"));
cl::opt<std::string> emitObject("emit-object", cl::cat(ioCat),
                                cl::desc("Compile to this object file, exit"));
cl::opt<std::string> aotPath("aot", cl::cat(ioCat),
                             cl::desc("Run an AOT-compiled shared library"));

cl::OptionCategory deviceCat("Device");
cl::opt<std::string> backendOpt(
    "backend", cl::init("cpu"), cl::cat(deviceCat),
    cl::desc("cpu (Gloo, OpenBLAS) or cuda (NCCL, cuBLASLt; one process per "
             "GPU, LOCAL_RANK selects the device)"));

cl::OptionCategory parallelCat("Parallelism");
cl::opt<int> nprocs("n", cl::init(0), cl::cat(parallelCat),
                    cl::desc("Run N local ranks (forks of this process "
                             "sharing one compilation); without it, one "
                             "rank, or the ranks an external launcher "
                             "(torchrun, Slurm, mpirun) set in the "
                             "environment"));
cl::opt<std::string> planSpec(
    "plan", cl::init(""), cl::cat(parallelCat),
    cl::desc("Named plan, e.g. dp=2,tp=2,sp,zero=1 or "
             "pp=2,dp=2,schedule=1f1b,micro=4 (cleave-apply-plan; pipelines: "
             "pp, micro, schedule=gpipe|1f1b|interleaved|zb-h1, virtual=V); "
             "dp defaults to the ranks left over by tp and pp; or 'auto' "
             "(optionally auto,tp=N,zero=K): the planner's choice for the "
             "ranks on this machine (cleave-auto-shard, cluster local-cpu); "
             "without --plan, several ranks and no mesh in the program: "
             "dp=<ranks>"));

int fail(const Twine &message) {
  outs().flush();
  errs() << "cleave-run: error: " << message << "\n";
  return 1;
}

/// The embedded text as byte tokens over its own alphabet.
struct CharCorpus {
  std::vector<uint16_t> tokens;
  int64_t vocab = 0;
};

CharCorpus encodeCorpus(StringRef text) {
  bool present[256] = {};
  for (unsigned char c : text)
    present[c] = true;
  int16_t id[256];
  CharCorpus corpus;
  for (int c = 0; c < 256; ++c)
    if (present[c])
      id[c] = corpus.vocab++;
  for (unsigned char c : text)
    corpus.tokens.push_back(id[c]);
  return corpus;
}

/// The zoo config from --model and the overrides.
Expected<cleave::ModelConfig> zooConfig() {
  std::optional<cleave::ModelConfig> c = cleave::lookupPreset(preset);
  if (!c)
    return createStringError(inconvertibleErrorCode(),
                             "unknown preset '" + preset +
                                 "' (cleave-models --list shows them)");
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

/// Adds @train_step with the requested optimizer unless the module has one.
LogicalResult addTrainStep(mlir::ModuleOp module) {
  if (module.lookupSymbol("train_step"))
    return success();
  mlir::PassManager pm(module.getContext());
  CleaveAutodiffPassOptions o;
  o.optimizer = optimizer;
  o.beta1 = beta1;
  o.beta2 = beta2;
  o.epsilon = eps;
  o.weightDecay = weightDecay;
  pm.addPass(createCleaveAutodiffPass(o));
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  return pm.run(module);
}

/// The world size an external launcher set, or 0.
int launcherWorldSize() {
  for (const char *var : {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"})
    if (const char *v = std::getenv(var))
      return std::atoi(v);
  return 0;
}

/// Parses "dp=2,tp=2,sp,zero=1,pp=2,micro=4,schedule=1f1b,virtual=2" into
/// cleave-apply-plan options; without dp, the ranks that tensor and
/// pipeline parallelism leave over (of `world`, if known) are data parallel.
Expected<CleaveApplyPlanPassOptions> parsePlan(StringRef text, int world) {
  CleaveApplyPlanPassOptions o;
  bool dpGiven = false;
  SmallVector<StringRef> parts;
  text.split(parts, ',', -1, false);
  for (StringRef part : parts) {
    auto [key, value] = part.trim().split('=');
    int64_t n = 1;
    bool numeric = !value.empty() && !value.getAsInteger(10, n);
    if (key == "sp" && value.empty())
      o.sp = true;
    else if (key == "dp" && numeric)
      o.dp = n, dpGiven = true;
    else if (key == "tp" && numeric)
      o.tp = n;
    else if (key == "zero" && numeric)
      o.zero = n;
    else if (key == "pp" && numeric)
      o.pp = n;
    else if (key == "micro" && numeric)
      o.micro = n;
    else if (key == "virtual" && numeric)
      o.virtualStages = n;
    else if (key == "schedule" && !value.empty())
      o.schedule = value.str();
    else
      return createStringError(
          inconvertibleErrorCode(),
          "--plan: cannot read '" + part +
              "' (expected dp=N, tp=N, sp, zero=K, pp=N, micro=N, "
              "schedule=gpipe|1f1b|interleaved|zb-h1, virtual=N)");
  }
  if (o.virtualStages > 1 && o.schedule == "1f1b")
    o.schedule = "interleaved";
  if (!dpGiven && world > 0 && o.tp > 0 && o.pp > 0 &&
      world % (o.tp * o.pp) == 0)
    o.dp = world / (o.tp * o.pp);
  return o;
}

/// Whether the named plan pipelines or micro-batches the step.
bool plansPipeline() {
  if (planSpec.empty())
    return false;
  Expected<CleaveApplyPlanPassOptions> o = parsePlan(planSpec, 0);
  if (!o) {
    consumeError(o.takeError());
    return false;
  }
  return o->pp > 1 || o->micro > 1;
}

/// Before differentiation: stages by layer (unless the program has them)
/// for a pipelined plan.
LogicalResult splitStages(mlir::ModuleOp module) {
  Expected<CleaveApplyPlanPassOptions> o = parsePlan(planSpec, 0);
  if (!o)
    return failure(); // reported when the plan is applied
  auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward");
  bool annotated = false;
  if (forward)
    forward.walk([&](mlir::Operation *op) {
      annotated |= op->hasAttr(mlir::cleave::CleaveDialect::kStageAttrName);
    });
  if (!forward || annotated || o->pp * o->virtualStages <= 1)
    return success();
  mlir::PassManager pm(module.getContext());
  CleavePipelineStagesPassOptions stages;
  stages.stages = o->pp * o->virtualStages;
  pm.addPass(createCleavePipelineStagesPass(stages));
  return pm.run(module);
}

/// True for "auto" and "auto,<constraints>".
bool isAutoPlan(StringRef text) {
  return text == "auto" || text.starts_with("auto,");
}

/// "--plan auto[,tp=N][,zero=K]": the planner chooses the plan of `world`
/// processes of this machine and writes it into the program (docs/planner.md);
/// prints the chosen plan and its predicted step time.
Error planAutomatically(mlir::ModuleOp module, int world, StringRef text,
                        const cleave::ModelConfig *config) {
  auto error = [](const Twine &message) {
    return createStringError(inconvertibleErrorCode(),
                             "--plan " + message.str());
  };
  cleave::planner::AutoShardOptions o;
  o.cluster = "local-cpu";
  o.gpus = world;
  if (config && config->arch != cleave::Architecture::MLP)
    o.config = *config;
  SmallVector<StringRef> parts;
  text.split(parts, ',', -1, false);
  for (StringRef part : ArrayRef(parts).drop_front()) {
    auto [key, value] = part.trim().split('=');
    int *field = key == "tp"     ? &o.fixedTp
                 : key == "zero" ? &o.fixedZero
                                 : nullptr;
    if (!field || value.getAsInteger(10, *field) || *field < 0)
      return error("auto: cannot read '" + part +
                   "' (expected tp=N or zero=K)");
  }
  cleave::cost::Result<cleave::planner::AutoShardResult> r =
      cleave::planner::autoShard(module, o);
  if (!r)
    return error("auto: " + r.error());
  if (!r->search.best) {
    std::string why =
        "auto: no plan fits " + std::to_string(world) + " local ranks";
    for (const std::string &line : r->search.infeasible)
      why += "\n  " + line;
    return error(why);
  }
  const cleave::planner::Candidate &best = *r->search.best;
  outs() << "plan (planner, " << world
         << " local ranks): " << cleave::cost::describe(best.plan)
         << "; predicted step " << format("%.2f", best.stepTime * 1e3)
         << " ms, " << format("%.2f", best.peakMemory / 1e9)
         << " GB per rank\n";
  return Error::success();
}

/// Turns the global training step into the per-device program of `world`
/// ranks: the named plan, the planner's plan (--plan auto) or data
/// parallelism, then propagation and partitioning. `config`: the zoo model
/// the program was built from, if it was.
Error partition(mlir::ModuleOp module, int world,
                const cleave::ModelConfig *config) {
  bool hasMesh = !module.getOps<mlir::cleave::MeshOp>().empty();
  std::string plan = planSpec;
  if (plan.empty() && !hasMesh && world > 1)
    plan = "dp=" + std::to_string(world);
  if (plan.empty() && !hasMesh)
    return Error::success();
  if (!plan.empty() && hasMesh)
    return createStringError(inconvertibleErrorCode(),
                             "--plan: the program already has a mesh and "
                             "sharding annotations");
  if (isAutoPlan(plan)) {
    if (Error err = planAutomatically(module, world, plan, config))
      return err;
    plan.clear();
  }
  mlir::PassManager pm(module.getContext());
  if (!plan.empty()) {
    Expected<CleaveApplyPlanPassOptions> options = parsePlan(plan, world);
    if (!options)
      return options.takeError();
    pm.addPass(createCleaveApplyPlanPass(*options));
  }
  pm.addPass(createCleavePropagateShardingPass());
  pm.addPass(createCleavePartitionPass());
  if (failed(pm.run(module)))
    return createStringError(inconvertibleErrorCode(),
                             "partitioning the training step failed");
  // A mesh with a pipeline axis: run the stages as a schedule.
  auto meshes = module.getOps<mlir::cleave::MeshOp>();
  if (meshes.empty() || !(*meshes.begin()).getAxisIndex("pp"))
    return Error::success();
  mlir::PassManager pipeline(module.getContext());
  pipeline.addPass(createCleavePipelinePass());
  if (failed(pipeline.run(module)))
    return createStringError(inconvertibleErrorCode(),
                             "pipelining the training step failed");
  return Error::success();
}

/// The entry points of the step (one per pipeline stage), by name.
using Entries = std::map<std::string, EntryFn>;

/// Names of the functions some rank runs as the training step.
std::vector<std::string> stepNames(const ProgramManifest &manifest) {
  if (manifest.pipeline)
    return manifest.pipeline->stages;
  return {"train_step"};
}

/// Loads an AOT build: its manifest and the entry points of the step.
Expected<std::pair<ProgramManifest, Entries>> loadShared(StringRef path) {
  void *handle = dlopen(path.str().c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle)
    return createStringError(inconvertibleErrorCode(), dlerror());
  auto manifestFn =
      reinterpret_cast<const char *(*)()>(dlsym(handle, "cleave_manifest_json"));
  if (!manifestFn)
    return createStringError(inconvertibleErrorCode(),
                             path + " is not a cleave AOT build (no "
                                    "cleave_manifest_json)");
  Expected<ProgramManifest> manifest = ProgramManifest::fromJSON(manifestFn());
  if (!manifest)
    return manifest.takeError();
  Entries entries;
  for (const std::string &name : stepNames(*manifest)) {
    std::string symbol = "cleave_entry_" + name;
    auto entry = reinterpret_cast<EntryFn>(dlsym(handle, symbol.c_str()));
    if (!entry)
      return createStringError(inconvertibleErrorCode(),
                               path + " is not a cleave AOT build of a "
                                      "training step (no " +
                                   symbol + ")");
    entries[name] = entry;
  }
  return std::make_pair(std::move(*manifest), std::move(entries));
}

/// What every rank needs; prepared once, before any rank starts.
struct Job {
  ProgramManifest manifest;
  Entries entries;
  BatchSource *source = nullptr;
  int world = 1;
};

/// Writes the losses (rank 0), with every rank's row for comparison.
Error saveLosses(const std::vector<double> &losses, int world, int rank) {
  int64_t n = losses.size();
  std::vector<double> all(n * world);
  if (world > 1) {
    cleave_rt_all_gather(CLEAVE_WORLD_GROUP, CLEAVE_F64, losses.data(),
                         all.data(), n);
    if (cleave_rt_failed())
      return createStringError(inconvertibleErrorCode(),
                               cleave_rt_error_message());
  } else {
    all = losses;
  }
  if (rank != 0)
    return Error::success();
  cleave_tensor_writer *w = cleave_tensor_writer_create(lossesPath.c_str());
  int64_t shape[2] = {world, n};
  if (!w ||
      cleave_tensor_writer_add(w, "loss", CLEAVE_F64, 1, &n, losses.data()) ||
      cleave_tensor_writer_add(w, "loss_by_rank", CLEAVE_F64, 2, shape,
                               all.data()) ||
      cleave_tensor_writer_finish(w) != 0)
    return createStringError(inconvertibleErrorCode(),
                             cleave_rt_error_message());
  return Error::success();
}

/// One rank: connect, set up the trainer, train, save.
int runRank(Job &job) {
  cleave_rt_options_t rtOptions;
  cleave_rt_default_options(&rtOptions);
  rtOptions.backend = backendOpt == "cuda" ? "cuda" : "cpu";
  if (cleave_rt_init(&rtOptions) != 0)
    return fail(cleave_rt_error_message());
  int rank = cleave_rt_rank(), world = cleave_rt_world_size();
  if (Error err = defineCommunicators(job.manifest))
    return fail(toString(std::move(err)));
  TrainerOptions trainerOptions;
  trainerOptions.learningRate = lr;
  trainerOptions.seed = seed;
  trainerOptions.mesh = job.manifest.mesh;
  trainerOptions.rank = rank;
  if (job.manifest.pipeline) {
    for (const FunctionSpec *f : job.manifest.stepFunctions("train_step"))
      trainerOptions.stages.push_back(*f);
    trainerOptions.pipelineAxis = job.manifest.pipeline->axis;
  }
  std::string name = job.manifest.entryFor("train_step", rank);
  auto trainer = Trainer::create(*job.manifest.lookup(name),
                                 job.entries.at(name), trainerOptions);
  if (!trainer)
    return fail(toString(trainer.takeError()));
  Error loaded = paramsPath.empty() ? (*trainer)->initParameters()
                                    : (*trainer)->loadParameters(paramsPath);
  if (loaded)
    return fail(toString(std::move(loaded)));

  bool tty = rank == 0 && sys::Process::StandardOutIsDisplayed();
  std::vector<double> losses;
  double start = cleave_rt_now();
  for (int64_t s = 0; s < steps; ++s) {
    Expected<double> loss = (*trainer)->runStep(s, *job.source);
    if (!loss)
      return fail("rank " + Twine(rank) + ": " + toString(loss.takeError()));
    losses.push_back(*loss);
    double elapsed = cleave_rt_now() - start;
    bool log = (s + 1) % std::max<int64_t>(logEvery, 1) == 0 || s == 0 ||
               s + 1 == steps;
    if (rank == 0 && (tty || log)) {
      outs() << (tty ? "\r" : "") << "step " << format("%5lld", (long long)(s + 1))
             << "/" << steps << "  loss " << format("%.4f", *loss) << "  "
             << format("%.1f", 1000.0 * elapsed / (s + 1)) << " ms/step";
      if (!tty || log)
        outs() << "\n";
      outs().flush();
    }
  }
  if (!savePath.empty()) {
    if (Error err = (*trainer)->saveParameters(savePath, saveState))
      return fail(toString(std::move(err)));
    if (rank == 0)
      outs() << "saved parameters to " << savePath << "\n";
  }
  if (!lossesPath.empty())
    if (Error err = saveLosses(losses, world, rank))
      return fail(toString(std::move(err)));
  trainer->reset();
  cleave_rt_finalize();
  outs().flush();
  return 0;
}

int runForkedRank(void *job) { return runRank(*static_cast<Job *>(job)); }

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // --help lists cleave-run's options, not every LLVM backend's.
  cl::HideUnrelatedOptions({&modelCat, &trainCat, &ioCat, &deviceCat,
                            &parallelCat});
  cl::ParseCommandLineOptions(argc, argv, "Train a cleave program\n");
  int world = nprocs > 0 ? nprocs.getValue() : std::max(1, launcherWorldSize());
  if (backendOpt != "cpu" && backendOpt != "cuda")
    return fail("unknown --backend '" + backendOpt + "' (cpu or cuda)");
  // Compiling for CUDA needs no device: only running does.
  CompileOptions compileOptions;
  compileOptions.target = backendOpt == "cuda" ? Target::CUDA : Target::CPU;

  // Data: per-step tensors, a token file, or the embedded corpus.
  std::unique_ptr<BatchSource> source;
  cleave_token_file *tokens = nullptr;
  int64_t vocab = vocabOpt;
  bool useCorpus = inputsPath.empty() && dataPath.empty();
  if (!inputsPath.empty()) {
    auto s = makeTensorFileSource(inputsPath);
    if (!s)
      return fail(toString(s.takeError()));
    source = std::move(*s);
  } else if (!dataPath.empty()) {
    if (tokenBytes != 2 && tokenBytes != 4)
      return fail("--token-bytes must be 2 or 4");
    tokens = cleave_token_file_open(dataPath.c_str(), tokenBytes);
    if (!tokens)
      return fail(cleave_rt_error_message());
  } else {
    CharCorpus corpus = encodeCorpus(cleaveCorpusText());
    tokens = cleave_token_file_from_memory(corpus.tokens.data(),
                                           corpus.tokens.size(), 2);
    if (!tokens)
      return fail(cleave_rt_error_message());
    vocab = corpus.vocab;
  }

  // The program.
  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::optional<cleave::ModelConfig> built; // the zoo model, if one is built
  // Diagnostics on a program file quote its source lines (not the IR).
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  if (!input.empty()) {
    module = mlir::parseSourceFile<mlir::ModuleOp>(input, sourceMgr,
                                                   &context);
    if (!module)
      return fail("cannot read the program " + input);
    if (tokens && vocab < 0)
      return fail("token data needs --vocab for a program read from a file");
  } else {
    Expected<cleave::ModelConfig> config = zooConfig();
    if (!config)
      return fail(toString(config.takeError()));
    if (useCorpus)
      config->vocab = vocab;
    else if (vocab < 0)
      vocab = config->vocab;
    std::string error;
    built = *config;
    module = buildModel(&context, *config, error);
    if (!module)
      return fail("invalid model: " + error);
    outs() << "model " << config->name << " (" << cleave::toString(config->arch)
           << "): " << config->numParameters() << " parameters, batch "
           << config->batch << " x " << config->seqLen << "\n";
  }
  bool pipelined = plansPipeline();
  if (pipelined && failed(splitStages(*module)))
    return fail("splitting the model into pipeline stages failed");
  if (failed(addTrainStep(*module)))
    return fail("building the training step failed");
  // Training needs only @train_step: the forward function (and anything
  // else) would be partitioned and compiled for nothing. A pipelined plan
  // cannot partition it at all (its micro-batches would stay a mesh axis).
  if (emitObject.empty() || pipelined)
    for (auto func : llvm::make_early_inc_range(
             module->getOps<mlir::func::FuncOp>()))
      if (func.getSymName() != "train_step" &&
          mlir::SymbolTable::symbolKnownUseEmpty(func, *module))
        func.erase();
  if (tokens)
    source = makeTokenSource(tokens, seed, vocab);
  if (aotPath.empty())
    if (Error err = partition(*module, world, built ? &*built : nullptr))
      return fail(toString(std::move(err)));

  if (!emitObject.empty()) {
    if (Error err = compileToObject(*module, emitObject, compileOptions))
      return fail(toString(std::move(err)));
    outs() << "wrote " << emitObject << "; link it with: cc -shared -o step.so "
           << emitObject << " -L<build>/lib -lCleaveRuntime\n";
    return 0;
  }

  // Everything that can be checked before compiling is: the buffers the
  // step needs, the mesh against the ranks, the first batch.
  Job job;
  job.world = world;
  job.source = source.get();
  if (!aotPath.empty()) {
    auto loaded = loadShared(aotPath);
    if (!loaded)
      return fail(toString(loaded.takeError()));
    std::tie(job.manifest, job.entries) = *loaded;
  } else {
    FailureOr<ProgramManifest> extracted = extractManifest(*module);
    if (failed(extracted))
      return fail("the program's signature cannot be driven by cleave-run");
    job.manifest = std::move(*extracted);
  }
  std::vector<const FunctionSpec *> stepFunctions =
      job.manifest.stepFunctions("train_step");
  if (stepFunctions.empty())
    return fail("the program has no @train_step");
  const std::optional<MeshSpec> &mesh = job.manifest.mesh;
  if (mesh && mesh->numDevices() != world)
    return fail(Twine(planSpec.empty() ? "the program's" : "the plan's") +
                " mesh (" + mesh->toString() + ") has " +
                Twine(mesh->numDevices()) + " devices but there are " +
                Twine(world) + " ranks" +
                (nprocs > 0 ? " (-n " + Twine(world) + ")" : Twine("")));
  for (const FunctionSpec *f : stepFunctions)
    for (const BufferSpec &b : f->buffers) {
      if (b.role != BufferSpec::Role::Input || b.name == "lr" ||
          b.name == "step" || b.name == "seed")
        continue;
      BufferSpec global = b;
      if (mesh)
        global.shape = globalShape(b, *mesh);
      global.layout.clear();
      std::vector<char> scratch(std::max<int64_t>(global.numBytes(), 8));
      if (Error err = source->fill(global, 0, scratch.data()))
        return fail(toString(std::move(err)));
    }

  std::unique_ptr<JitProgram> jit;
  if (job.entries.empty()) {
    double compileStart = cleave_rt_now();
    auto compiled = JitProgram::compile(*module, compileOptions);
    if (!compiled)
      return fail(toString(compiled.takeError()));
    jit = std::move(*compiled);
    job.manifest = jit->getManifest();
    for (const std::string &name : stepNames(job.manifest)) {
      auto e = jit->lookup(name);
      if (!e)
        return fail(toString(e.takeError()));
      job.entries[name] = *e;
    }
    // The JIT emits machine code on the first lookup.
    double total = cleave_rt_now() - compileStart;
    const auto &stats = jit->getStats();
    outs() << "compiled in " << format("%.2f", total) << " s (lowering "
           << format("%.2f", stats.loweringSeconds) << " s, LLVM IR "
           << format("%.2f", stats.codegenSeconds) << " s, machine code "
           << format("%.2f", total - stats.loweringSeconds -
                                 stats.codegenSeconds)
           << " s)";
    if (mesh)
      outs() << " for " << world << " ranks on mesh (" << mesh->toString()
             << ")";
    outs() << "\n";
    outs().flush();
  }

  int rc;
  if (nprocs > 1) {
    cleave_launch_options_t o{};
    o.nprocs = nprocs;
    o.prefix_output = 1;
    o.body = runForkedRank;
    o.body_arg = &job;
    rc = cleave_launch(&o);
    if (rc != 0 && cleave_rt_failed())
      errs() << "cleave-run: error: " << cleave_rt_error_message() << "\n";
  } else {
    rc = runRank(job);
  }
  cleave_token_file_close(tokens);
  return rc;
}
