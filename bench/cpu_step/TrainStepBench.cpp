//===- TrainStepBench.cpp - Time a compiled training step -----------------===//
//
//   cleave-bench-train-step --layers 4 --hidden 256 --heads 8 --seq 128
//       --batch 8 --steps 20
//
// Compiles a zoo GPT's training step, warms it up, and prints the median
// and mean step time over --steps steps (forward, backward, AdamW) as JSON,
// for bench/cpu_step/run.py to compare with PyTorch.
//
//===----------------------------------------------------------------------===//

#include "cleave/Execution/Compiler.h"
#include "cleave/Execution/Trainer.h"
#include "cleave/Models/ModelZoo.h"
#include "cleave/Pipelines/Compile.h"
#include "cleave/Support/ClosedPipeLLVM.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <random>

using namespace llvm;
using namespace mlir::cleave;

namespace {
cl::OptionCategory category("cleave-bench-train-step options");
cl::opt<std::string> arch("arch", cl::init("gpt"),
                          cl::desc("Architecture: gpt or llama"),
                          cl::cat(category));
cl::opt<int64_t> layers("layers", cl::init(4), cl::desc("Transformer layers"),
                        cl::cat(category));
cl::opt<int64_t> hidden("hidden", cl::init(256), cl::desc("Hidden size"),
                        cl::cat(category));
cl::opt<int64_t> heads("heads", cl::init(8), cl::desc("Attention heads"),
                       cl::cat(category));
cl::opt<int64_t> seqLen("seq", cl::init(128), cl::desc("Sequence length"),
                        cl::cat(category));
cl::opt<int64_t> batch("batch", cl::init(8), cl::desc("Sequences per step"),
                       cl::cat(category));
cl::opt<int64_t> vocab("vocab", cl::init(65), cl::desc("Vocabulary size"),
                       cl::cat(category));
cl::opt<int64_t> steps("steps", cl::init(20), cl::desc("Timed steps"),
                       cl::cat(category));
cl::opt<int64_t> warmup("warmup", cl::init(3),
                        cl::desc("Untimed steps before them"),
                        cl::cat(category));

/// Random token batches.
class RandomTokens final : public BatchSource {
public:
  llvm::Error fill(const BufferSpec &spec, int64_t step, void *data) override {
    std::mt19937 rng(
        static_cast<uint32_t>(step * 2 + (spec.name == "targets")));
    auto *ids = static_cast<int32_t *>(data);
    for (int64_t i = 0; i < spec.numElements(); ++i)
      ids[i] = static_cast<int32_t>(rng() % vocab);
    return llvm::Error::success();
  }
};
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  ::cleave::exitQuietlyOnClosedStdout();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Time a compiled training step\n");
  cleave_rt_options_t options;
  cleave_rt_default_options(&options);
  if (cleave_rt_init(&options) != 0) {
    errs() << cleave_rt_error_message() << "\n";
    return 1;
  }
  cleave::ModelConfig config =
      *cleave::lookupPreset(arch == "llama" ? "tiny-llama" : "tiny-gpt");
  config.layers = layers;
  config.hidden = hidden;
  config.heads = config.kvHeads = heads;
  if (arch == "llama")
    config.kvHeads = std::max<int64_t>(1, heads / 2);
  config.ffnHidden = arch == "llama" ? 8 * hidden / 3 : 4 * hidden;
  config.seqLen = seqLen;
  config.batch = batch;
  config.vocab = vocab;

  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  std::string error;
  auto module = buildModel(&context, config, error);
  if (!module) {
    errs() << error << "\n";
    return 1;
  }
  // The training step on one rank; @forward is timed too.
  RankCompileOptions step;
  step.keepOtherFunctions = true;
  if (Error err = compileForRanks(*module, step)) {
    errs() << toString(std::move(err)) << "\n";
    return 1;
  }
  double t0 = cleave_rt_now();
  auto program = JitProgram::compile(*module);
  if (!program) {
    errs() << toString(program.takeError()) << "\n";
    return 1;
  }
  double compileSeconds = cleave_rt_now() - t0;
  const FunctionSpec *spec = (*program)->getManifest().lookup("train_step");
  auto trainer =
      Trainer::create(*spec, cantFail((*program)->lookup("train_step")),
                      TrainerOptions{1e-4, 1});
  if (!trainer || (*trainer)->initParameters()) {
    errs() << "cannot set up the trainer\n";
    return 1;
  }
  RandomTokens tokens;
  std::vector<double> times;
  for (int64_t s = 0; s < warmup + steps; ++s) {
    double start = cleave_rt_now();
    auto loss = (*trainer)->runStep(s, tokens);
    if (!loss) {
      errs() << toString(loss.takeError()) << "\n";
      return 1;
    }
    if (s >= warmup)
      times.push_back(cleave_rt_now() - start);
  }
  // The forward function alone, on the trainer's current buffers (its
  // arguments are a prefix of the training step's).
  const FunctionSpec *fwdSpec = (*program)->getManifest().lookup("forward");
  EntryFn forward = cantFail((*program)->lookup("forward"));
  std::vector<void *> fwdBuffers;
  std::vector<std::vector<char>> fwdStorage;
  for (const BufferSpec &b : fwdSpec->buffers) {
    fwdStorage.emplace_back(std::max<int64_t>(b.numBytes(), 8), 0);
    fwdBuffers.push_back(fwdStorage.back().data());
  }
  std::vector<double> fwdTimes;
  for (int64_t s = 0; s < steps; ++s) {
    double start = cleave_rt_now();
    forward(fwdBuffers.data());
    fwdTimes.push_back(cleave_rt_now() - start);
  }
  std::sort(fwdTimes.begin(), fwdTimes.end());
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  double mean = 0;
  for (double t : times)
    mean += t / times.size();
  outs() << "{\"median_ms\": " << 1e3 * sorted[sorted.size() / 2]
         << ", \"mean_ms\": " << 1e3 * mean
         << ", \"forward_ms\": " << 1e3 * fwdTimes[fwdTimes.size() / 2]
         << ", \"compile_s\": " << compileSeconds
         << ", \"parameters\": " << config.numParameters() << "}\n";
  cleave_rt_finalize();
  return 0;
}
