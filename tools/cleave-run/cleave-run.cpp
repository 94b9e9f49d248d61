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
#include "cleave/Execution/Compiler.h"
#include "cleave/Execution/Run.h"
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
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
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
cl::opt<double> lossScaleInit("loss-scale-init", cl::init(65536.0),
                              cl::cat(trainCat),
                              cl::desc("The first loss scale"));
cl::opt<int64_t> lossScaleInterval(
    "loss-scale-growth-interval", cl::init(2000), cl::cat(trainCat),
    cl::desc("Good steps in a row after which the scale grows"));
cl::opt<double> lossScaleGrowth("loss-scale-growth", cl::init(2.0),
                                cl::cat(trainCat),
                                cl::desc("Growth factor of the loss scale"));
cl::opt<double>
    lossScaleBackoff("loss-scale-backoff", cl::init(0.5), cl::cat(trainCat),
                     cl::desc("Factor of the loss scale after an overflow"));
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
cl::opt<std::string> valDataPath(
    "val-data", cl::cat(ioCat),
    cl::desc("Validation data, like the training data: a token file with "
             "--data, a per-batch tensors file with --inputs; the mean loss "
             "of --eval-steps batches is printed and saved with "
             "--save-losses (val_loss, val_step)"));
cl::opt<int64_t> evalEvery(
    "eval-every", cl::init(0), cl::cat(ioCat),
    cl::desc("With --val-data: evaluate after every N-th step (and after "
             "the last); 0: only after the last step"));
cl::opt<int64_t> evalSteps(
    "eval-steps", cl::init(1), cl::cat(ioCat),
    cl::desc("With --val-data: batches per evaluation (the same ones each "
             "time)"));
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
cl::opt<std::string> tracePath(
    "trace", cl::cat(ioCat),
    cl::desc("Write the measured timeline (steps, communication calls) as "
             "Chrome trace JSON, the simulator's format (Perfetto)"));
cl::opt<std::string> checkpointDir(
    "checkpoint", cl::cat(ioCat),
    cl::desc("Directory of sharded checkpoints: every rank writes its own "
             "blocks of the parameters and optimizer state, in the "
             "background; a step is committed once rank 0 renames its "
             "manifest into place"));
cl::opt<int64_t> checkpointEvery(
    "checkpoint-every", cl::init(0), cl::cat(ioCat),
    cl::desc("Write a checkpoint every N optimizer steps (needs "
             "--checkpoint)"));
cl::opt<int>
    keepCheckpoints("keep-checkpoints", cl::init(2), cl::cat(ioCat),
                    cl::desc("Committed checkpoints kept (default 2)"));
cl::opt<bool> resume(
    "resume", cl::cat(ioCat),
    cl::desc("Load the newest committed checkpoint in --checkpoint (saved on "
             "any mesh or plan) and continue until the step counter reaches "
             "--steps; without one, start at step 0"));
cl::opt<int> maxRestarts(
    "max-restarts", cl::init(0), cl::cat(ioCat),
    cl::desc("With -n N and --checkpoint: when a rank dies or the group "
             "fails, restart every rank up to this many times, resuming from "
             "the newest committed checkpoint (under torchrun, use its "
             "--max-restarts with --resume)"));
cl::opt<std::string> emitObject("emit-object", cl::cat(ioCat),
                                cl::desc("Compile to this object file, exit"));
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

cl::OptionCategory parallelCat("Parallelism");
cl::opt<int> nprocs("n", cl::init(0), cl::cat(parallelCat),
                    cl::desc("Run N local ranks (forks of this process "
                             "sharing one compilation); without it, one "
                             "rank, or the ranks an external launcher "
                             "(torchrun, Slurm, mpirun) set in the "
                             "environment"));
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

cl::opt<double> heartbeatTimeout(
    "heartbeat-timeout", cl::init(30.0), cl::cat(parallelCat),
    cl::desc("Seconds without a heartbeat after which a rank that another "
             "waits for is declared hung and every rank stops, naming it "
             "(sets CLEAVE_HEARTBEAT_TIMEOUT_MS; default: that variable, "
             "else 30)"));

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

int fail(const Twine &message) {
  outs().flush();
  errs() << "cleave-run: error: " << message << "\n";
  return 1;
}

/// The world size an external launcher set, or 0.
int launcherWorldSize() {
  for (const char *var : {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"})
    if (const char *v = std::getenv(var))
      return std::atoi(v);
  return 0;
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
      Twine(planSpec.empty() ? "the program's" : "the plan's") + " mesh (" +
          mesh->toString() + ") has " + Twine(mesh->numDevices()) +
          " devices but there are " + Twine(world) + " ranks" +
          (nprocs > 0 ? " (-n " + Twine(world) + ")" : Twine("")));
}

/// An error for option `name` whose value is not in the stated range.
Error badValue(const Twine &name, const Twine &value, const Twine &expected) {
  return createStringError(inconvertibleErrorCode(), "--" + name + " " + value +
                                                         ": expected " +
                                                         expected);
}

std::string showNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

/// The step at which the decay ends: --decay-steps, or the last step.
int64_t effectiveDecaySteps() {
  return decaySteps.getNumOccurrences() ? decaySteps.getValue()
                                        : steps.getValue();
}

/// Range checks of the numeric options, before anything is compiled.
Error checkNumbers() {
  if (nprocs.getNumOccurrences() && (nprocs < 1 || nprocs > 1024))
    return createStringError(inconvertibleErrorCode(),
                             "-n " + Twine(nprocs.getValue()) +
                                 ": expected a number of ranks in 1..1024");
  if (steps < 0)
    return badValue("steps", Twine(steps.getValue()), "a number of steps >= 0");
  if (checkpointEvery < 0)
    return badValue("checkpoint-every", Twine(checkpointEvery.getValue()),
                    "a number of steps >= 0");
  if (maxRestarts < 0)
    return badValue("max-restarts", Twine(maxRestarts.getValue()),
                    "a number >= 0");
  if (maxRestarts > 0 && checkpointDir.empty())
    return createStringError(inconvertibleErrorCode(),
                             "--max-restarts needs --checkpoint DIR (a "
                             "restart resumes from its newest checkpoint)");
  if (keepCheckpoints < 1)
    return badValue("keep-checkpoints", Twine(keepCheckpoints.getValue()),
                    "a number >= 1");
  if ((checkpointEvery > 0 || resume) && checkpointDir.empty())
    return createStringError(inconvertibleErrorCode(),
                             Twine(resume ? "--resume" : "--checkpoint-every") +
                                 " needs --checkpoint DIR");
  if (resume && !paramsPath.empty())
    return createStringError(inconvertibleErrorCode(),
                             "--resume and --params both give the starting "
                             "parameters: use one");
  if (!std::isfinite(heartbeatTimeout) || heartbeatTimeout <= 0)
    return badValue("heartbeat-timeout",
                    showNumber(heartbeatTimeout.getValue()),
                    "a number of seconds > 0");
  if (logEvery < 1)
    return badValue("log-every", Twine(logEvery.getValue()), "a number >= 1");
  auto finite = [](double v) { return std::isfinite(v); };
  if (!finite(lr) || lr < 0)
    return badValue("lr", showNumber(lr.getValue()), "a finite number >= 0");
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
  if (!finite(lrMin) || lrMin < 0 || lrMin > lr)
    return badValue("lr-min", showNumber(lrMin.getValue()),
                    "a finite number in [0, --lr] (--lr is " +
                        showNumber(lr.getValue()) + ")");
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
  if (!finite(lossScaleInit) || lossScaleInit <= 0 || lossScaleInit > 1e30)
    return badValue("loss-scale-init", showNumber(lossScaleInit.getValue()),
                    "a finite scale in (0, 1e30]");
  if (lossScaleInterval < 1)
    return badValue("loss-scale-growth-interval",
                    Twine(lossScaleInterval.getValue()),
                    "a number of steps >= 1");
  if (!finite(lossScaleGrowth) || lossScaleGrowth <= 1)
    return badValue("loss-scale-growth", showNumber(lossScaleGrowth.getValue()),
                    "a finite factor > 1");
  if (!finite(lossScaleBackoff) || lossScaleBackoff <= 0 ||
      lossScaleBackoff >= 1)
    return badValue("loss-scale-backoff",
                    showNumber(lossScaleBackoff.getValue()),
                    "a factor in (0, 1)");
  if (evalEvery < 0)
    return badValue("eval-every", Twine(evalEvery.getValue()),
                    "a number of steps >= 0");
  if (evalSteps < 1)
    return badValue("eval-steps", Twine(evalSteps.getValue()),
                    "a number of batches >= 1");
  for (cl::Option *o : {static_cast<cl::Option *>(&evalEvery),
                        static_cast<cl::Option *>(&evalSteps)})
    if (o->getNumOccurrences() && valDataPath.empty())
      return createStringError(inconvertibleErrorCode(),
                               "--" + o->ArgStr +
                                   ": there is no validation data (give "
                                   "--val-data)");
  if (!valDataPath.empty() && dataPath.empty() && inputsPath.empty())
    return createStringError(
        inconvertibleErrorCode(),
        "--val-data " + valDataPath +
            ": validation data is like the training data: give the "
            "training data with --data (a token file) or --inputs");
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
  struct Path {
    const char *option;
    const std::string *path;
  };
  Path inputs[] = {
      {"data", &dataPath.getValue()},     {"val-data", &valDataPath.getValue()},
      {"params", &paramsPath.getValue()}, {"inputs", &inputsPath.getValue()},
      {"aot", &aotPath.getValue()},       {"program", &input.getValue()}};
  Path outputs[] = {{"save-params", &savePath.getValue()},
                    {"save-losses", &lossesPath.getValue()},
                    {"trace", &tracePath.getValue()},
                    {"emit-object", &emitObject.getValue()}};
  auto absolute = [](const std::string &path) {
    SmallString<256> p(path);
    (void)sys::fs::make_absolute(p);
    sys::path::remove_dots(p, /*remove_dot_dot=*/true);
    return std::string(p);
  };
  auto same = [&](const std::string &a, const std::string &b) {
    struct stat sa, sb;
    if (absolute(a) == absolute(b))
      return true;
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
           sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  };
  auto fail = [](const Twine &message) {
    return createStringError(inconvertibleErrorCode(), message);
  };
  for (size_t i = 0; i < std::size(outputs); ++i) {
    const std::string &out = *outputs[i].path;
    if (out.empty())
      continue;
    for (const Path &in : inputs)
      if (!in.path->empty() && same(out, *in.path))
        return fail("--" + Twine(outputs[i].option) + " " + out + " is the --" +
                    in.option + " input; refusing to " +
                    "write over it (choose another path)");
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].path->empty() && same(out, *outputs[j].path))
        return fail("--" + Twine(outputs[i].option) + " and --" +
                    outputs[j].option + " name the same file " + out);
    // What an earlier run killed while writing this output left behind.
    if (std::string(outputs[i].option) != "emit-object")
      cleave_tensor_file_remove_stale(out.c_str());
    struct stat st;
    if (::stat(out.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode))
        return fail("--" + Twine(outputs[i].option) + " " + out +
                    " is a directory; expected a file path");
      if (::access(out.c_str(), W_OK) != 0)
        return fail("--" + Twine(outputs[i].option) + " " + out +
                    ": the file is not writable (" + strerror(errno) + ")");
      continue;
    }
    SmallString<256> dir(out);
    sys::path::remove_filename(dir);
    if (dir.empty())
      dir = ".";
    if (::access(dir.c_str(), W_OK) != 0)
      return fail("--" + Twine(outputs[i].option) + " " + out +
                  ": cannot write in the directory " + dir + " (" +
                  strerror(errno) + ")");
  }
  if (!checkpointDir.empty()) {
    if (std::error_code ec = sys::fs::create_directories(checkpointDir))
      return fail("--checkpoint " + checkpointDir + ": " + ec.message());
    if (::access(checkpointDir.c_str(), W_OK) != 0)
      return fail("--checkpoint " + checkpointDir +
                  ": the directory is not writable (" + strerror(errno) + ")");
    for (const Path &in : inputs)
      if (!in.path->empty() && same(checkpointDir, *in.path))
        return fail("--checkpoint " + checkpointDir + " is the --" + in.option +
                    " input");
  }
  return Error::success();
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
  o.evalStep = !valDataPath.empty();
  o.log = &outs();
  return o;
}

RunOptions runOptions() {
  RunOptions o;
  o.backend = backendOpt;
  o.localRanks = nprocs;
  o.steps = steps;
  o.learningRate = lr;
  o.seed = seed;
  o.logEvery = logEvery;
  o.paramsPath = paramsPath;
  o.savePath = savePath;
  o.saveState = saveState;
  o.lossesPath = lossesPath;
  o.tracePath = tracePath;
  o.checkpointDir = checkpointDir;
  o.checkpointEvery = checkpointEvery;
  o.keepCheckpoints = keepCheckpoints;
  o.resume = resume;
  o.maxRestarts = maxRestarts;
  o.planText = planSpec;
  o.evalEvery = evalEvery;
  o.evalBatches = evalSteps;
  o.lossScaling.initScale = lossScaleInit;
  o.lossScaling.growthInterval = lossScaleInterval;
  o.lossScaling.growthFactor = lossScaleGrowth;
  o.lossScaling.backoffFactor = lossScaleBackoff;
  return o;
}

/// A validation token file must be tokens of the training data's size
/// and vocabulary: checked over the whole file before anything runs.
Error checkValidationTokens(int64_t vocab) {
  auto fail = [&](const Twine &message) {
    return createStringError(inconvertibleErrorCode(),
                             "--val-data " + valDataPath + ": " + message);
  };
  ErrorOr<std::unique_ptr<MemoryBuffer>> file =
      MemoryBuffer::getFile(valDataPath, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (!file)
    return fail("cannot read it (" + file.getError().message() + ")");
  StringRef bytes = (*file)->getBuffer();
  int64_t width = tokenBytes;
  if (bytes.size() % width)
    return fail(Twine(bytes.size()) + " bytes are not a whole number of " +
                Twine(width) + "-byte tokens (--token-bytes " + Twine(width) +
                ")");
  int64_t count = bytes.size() / width;
  bool oddWordsZero = width == 2 && count >= 16;
  for (int64_t i = 0; i < count; ++i) {
    uint32_t id = 0;
    std::memcpy(&id, bytes.data() + i * width, width); // little endian
    if (vocab >= 0 && int64_t(id) >= vocab)
      return fail("token " + Twine(i) + " is " + Twine(id) +
                  ", outside the vocabulary of " + Twine(vocab) +
                  " tokens that the model is trained on (another tokenizer, "
                  "or --token-bytes " +
                  Twine(width) + " is not the file's)");
    oddWordsZero &= i % 2 == 0 || id == 0;
  }
  if (oddWordsZero)
    return fail("every second 16-bit token is 0: the file holds 4-byte "
                "tokens, but --token-bytes is 2");
  return Error::success();
}

/// The validation batches (--val-data), opened like the training data.
Expected<std::unique_ptr<TrainingData>> openValidation(int64_t vocab) {
  if (valDataPath.empty())
    return nullptr;
  DataOptions options;
  if (!inputsPath.empty()) {
    options.inputsPath = valDataPath;
  } else {
    if (Error err = checkValidationTokens(vocab))
      return std::move(err);
    options.tokensPath = valDataPath;
    options.tokenBytes = tokenBytes;
  }
  Expected<std::unique_ptr<TrainingData>> data = TrainingData::open(options);
  if (!data)
    return createStringError(inconvertibleErrorCode(),
                             "--val-data " + valDataPath + ": " +
                                 toString(data.takeError()));
  return data;
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
  if (heartbeatTimeout.getNumOccurrences())
    ::setenv("CLEAVE_HEARTBEAT_TIMEOUT_MS",
             std::to_string(int64_t(heartbeatTimeout * 1000.0)).c_str(), 1);
  int world = nprocs > 0 ? nprocs.getValue() : std::max(1, launcherWorldSize());
  if (backendOpt != "cpu" && backendOpt != "cuda")
    return fail("unknown --backend '" + backendOpt + "' (cpu or cuda)");
  // Compiling for CUDA needs no device: only running does.
  CompileOptions compileOptions;
  compileOptions.target = backendOpt == "cuda" ? Target::CUDA : Target::CPU;
  RankCompileOptions rankOptions = rankCompileOptions(world);
  if (!(bucketMiB >= 0.0) || bucketMiB > 1e6)
    return fail("--bucket-mb=" + std::to_string(bucketMiB.getValue()) +
                ": must be between 0 and 1e6 (MiB)");
  rankOptions.bucketBytes = int64_t(bucketMiB * 1024.0 * 1024.0);
  rankOptions.asyncCollectives = asyncCollectives;
  if (!planSpec.empty()) {
    Expected<PlanSpec> plan = parsePlan(planSpec, world, "--plan");
    if (!plan)
      return fail(toString(plan.takeError()));
    rankOptions.plan = *plan;
  }
  if (Error err = accumulateInPlan(rankOptions, world))
    return fail(toString(std::move(err)));

  // Data: per-step tensors, a token file, or the embedded corpus.
  DataOptions dataOptions;
  dataOptions.inputsPath = inputsPath;
  dataOptions.tokensPath = dataPath;
  dataOptions.tokenBytes = tokenBytes;
  dataOptions.text = cleaveCorpusText();
  auto data = TrainingData::open(dataOptions);
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
                            rankOptions.model, error);
  if (!module)
    return fail(error);
  if (Error err = checkStepOptions(*module))
    return fail(toString(std::move(err)));
  if (!rankOptions.model && (*data)->hasTokens() && vocab < 0)
    return fail("token data needs --vocab for a program read from a file");
  Expected<std::unique_ptr<TrainingData>> valData = openValidation(vocab);
  if (!valData)
    return fail(toString(valData.takeError()));
  if (aotPath.empty())
    if (Error err = compileForRanks(*module, rankOptions))
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
  Expected<TrainJob> job = aotPath.empty() ? TrainJob() : loadAotJob(aotPath);
  if (!job)
    return fail(toString(job.takeError()));
  if (aotPath.empty()) {
    FailureOr<ProgramManifest> extracted = extractManifest(*module);
    if (failed(extracted))
      return fail("the program's signature cannot be driven by cleave-run");
    job->manifest = std::move(*extracted);
  }
  job->source = &(*data)->source(seed, vocab);
  if (Error err = checkMesh(job->manifest, world))
    return fail(toString(std::move(err)));
  if (Error err = checkJob(*job))
    return fail(toString(std::move(err)));
  if (*valData) {
    // Another seed than training's: with the same file the batches differ.
    job->valSource = &(*valData)->source(seed + 1, vocab);
    if (Error err =
            checkValidation(*job, evalSteps, "--val-data " + valDataPath))
      return fail(toString(std::move(err)));
  }
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
  return runTrainJob(*job, runOptions());
}
