//===- RematBench.cpp - Memory and time of recomputation ------------------===//
//
//   cleave-bench-remat --arch gpt --layers 4 --hidden 256 --heads 8
//       --seq 512 --batch 8 --rounds 5
//
// Compiles a zoo model's training step three times, with recompute none,
// selective and full (cleave-remat), then runs the three steps in turn,
// --rounds times (interleaved, so machine load hits them alike). For each
// kind it prints the median step time, the allocator peak of a step (bytes
// malloc'ed by the compiled step above what was live before it:
// activations, gradients, temporaries; AllocationCounter.h), and the cost
// model's prediction for the same model and plan on the local-cpu cluster
// (fp32, one rank): step time, the recompute time within it, and the
// activations + gradients + transient memory of the step. One JSON line
// per kind follows the table.
//
//===----------------------------------------------------------------------===//

#include "StepVariant.h"
#include "cleave/CostModel/Estimate.h"
#include "cleave/Execution/Compiler.h"
#include "cleave/Execution/Trainer.h"
#include "cleave/Models/ModelZoo.h"
#include "cleave/Pipelines/Compile.h"
#include "cleave/Planner/AutoShard.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <random>

using namespace llvm;
using namespace mlir::cleave;

namespace {
cl::OptionCategory category("cleave-bench-remat options");
cl::opt<std::string> arch("arch", cl::init("gpt"),
                          cl::desc("Architecture: gpt or llama"),
                          cl::cat(category));
cl::opt<int64_t> layers("layers", cl::init(4), cl::desc("Transformer layers"),
                        cl::cat(category));
cl::opt<int64_t> hidden("hidden", cl::init(256), cl::desc("Hidden size"),
                        cl::cat(category));
cl::opt<int64_t> heads("heads", cl::init(8), cl::desc("Attention heads"),
                       cl::cat(category));
cl::opt<int64_t> seqLen("seq", cl::init(512), cl::desc("Sequence length"),
                        cl::cat(category));
cl::opt<int64_t> batch("batch", cl::init(8), cl::desc("Sequences per step"),
                       cl::cat(category));
cl::opt<int64_t> vocab("vocab", cl::init(65), cl::desc("Vocabulary size"),
                       cl::cat(category));
cl::opt<int64_t> rounds("rounds", cl::init(5),
                        cl::desc("Timed steps of each kind (interleaved)"),
                        cl::cat(category));

const char *const kKinds[] = {"none", "selective", "full"};

/// One recompute kind's step and the cost model's estimate of it.
struct Variant {
  std::string kind;
  cleave::bench::StepVariant step;
  cleave::cost::Estimate predicted;
};

cleave::ModelConfig configFromFlags() {
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
  return config;
}

/// Compiles the step with `recompute=kind` and sets up its trainer.
llvm::Error build(mlir::MLIRContext &context, const cleave::ModelConfig &config,
                  Variant &v) {
  RankCompileOptions step;
  step.plan.emplace();
  step.plan->named.recompute = v.kind;
  return v.step.build(context, config, step);
}

/// The cost model's estimate of the same step: one rank of local-cpu,
/// fp32, fused attention.
llvm::Error predict(const cleave::ModelConfig &config, Variant &v) {
  auto cluster = cleave::planner::resolveCluster("local-cpu", 1);
  if (!cluster)
    return createStringError(inconvertibleErrorCode(), cluster.error());
  cleave::cost::ParallelPlan p;
  p.microBatchSize = config.batch;
  p.dtype = cleave::DType::F32;
  p.recompute = *cleave::cost::parseRecompute(v.kind);
  auto e = cleave::cost::estimate(config, cluster->spec, p);
  if (!e)
    return createStringError(inconvertibleErrorCode(), e.error());
  v.predicted = *e;
  return Error::success();
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Memory and time of recomputation\n");
  cleave_rt_options_t options;
  cleave_rt_default_options(&options);
  if (cleave_rt_init(&options) != 0) {
    errs() << cleave_rt_error_message() << "\n";
    return 1;
  }
  cleave::ModelConfig config = configFromFlags();
  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  std::vector<Variant> variants(3);
  for (int i = 0; i < 3; ++i) {
    variants[i].kind = kKinds[i];
    if (Error err = build(context, config, variants[i]))
      return errs() << toString(std::move(err)) << "\n", 1;
    if (Error err = predict(config, variants[i]))
      return errs() << toString(std::move(err)) << "\n", 1;
  }
  cleave::bench::RandomTokens tokens(vocab);
  std::vector<cleave::bench::StepVariant *> steps;
  for (Variant &v : variants)
    steps.push_back(&v.step);
  if (Error err = cleave::bench::runInTurn(steps, rounds, tokens))
    return errs() << toString(std::move(err)) << "\n", 1;
  outs() << arch << ": " << layers << " layers, hidden " << hidden << ", "
         << heads << " heads, seq " << seqLen << ", batch " << batch
         << ", fp32; median of " << rounds << " interleaved steps\n";
  outs() << "recompute    step ms   peak MB  saved MB |   pred ms   pred rc"
            "   pred MB\n";
  double basePeak = double(variants[0].step.peak);
  for (Variant &v : variants) {
    const cleave::cost::MemoryBreakdown &m = v.predicted.peakMemory();
    double predictedBytes = m.activations + m.gradients + m.transient;
    outs() << format(
        "%-10s %9.1f %9.1f %9.1f | %9.1f %9.1f %9.1f\n", v.kind.c_str(),
        1e3 * v.step.medianSeconds(), v.step.peak / 1e6,
        (basePeak - v.step.peak) / 1e6, 1e3 * v.predicted.stepTime,
        1e3 * v.predicted.breakdown.recompute, predictedBytes / 1e6);
  }
  for (Variant &v : variants) {
    const cleave::cost::MemoryBreakdown &m = v.predicted.peakMemory();
    outs() << "{\"recompute\": \"" << v.kind
           << "\", \"median_ms\": " << 1e3 * v.step.medianSeconds()
           << ", \"peak_bytes\": " << v.step.peak
           << ", \"predicted_ms\": " << 1e3 * v.predicted.stepTime
           << ", \"predicted_recompute_ms\": "
           << 1e3 * v.predicted.breakdown.recompute
           << ", \"predicted_activation_bytes\": " << m.activations
           << ", \"predicted_gradient_bytes\": " << m.gradients
           << ", \"predicted_transient_bytes\": " << m.transient << "}\n";
  }
  variants.clear();
  cleave_rt_finalize();
  return 0;
}
