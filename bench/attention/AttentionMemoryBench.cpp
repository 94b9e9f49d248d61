//===- AttentionMemoryBench.cpp - Memory of tiled vs materialised attention
//-===//
//
//   cleave-bench-attention --seq 1024,4096,16384 --layers 2 --hidden 64
//       --heads 2 --tile 128 --full-limit-mb 6000 --rounds 3
//
// Compiles a small GPT's training step (batch 1, fp32, one process) per
// sequence length with both attention lowerings of cleave-lower-to-linalg:
// `full` (attention-tile=0: the [B*H, S, S] probabilities materialised in
// forward and backward) and `flash` (tiled online softmax, --tile rows).
// Both steps of one length run in turn, --rounds times (interleaved, so
// machine load hits them alike). For each it prints the median step time and
// the allocator peak of a step (bytes malloc'ed by the compiled step above what
// was live before it;
// ../remat/AllocationCounter.h), beside the cost model's activations +
// gradients + transient memory of the same step with attention=flash and
// attention=unfused (local-cpu, fp32, one rank). `full` is skipped where its
// S x S buffers alone (three of B*H*S*S floats in the backward pass) would
// pass --full-limit-mb. One JSON line per measured variant follows.
//
//===----------------------------------------------------------------------===//

#include "StepVariant.h"
#include "cleave/CostModel/Estimate.h"
#include "cleave/Execution/Compiler.h"
#include "cleave/Models/ModelZoo.h"
#include "cleave/Pipelines/Compile.h"
#include "cleave/Planner/AutoShard.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace mlir::cleave;

namespace {
cl::OptionCategory category("cleave-bench-attention options");
cl::list<int64_t>
    seqLens("seq", cl::CommaSeparated,
            cl::desc("Sequence lengths (default 1024,4096,16384)"),
            cl::cat(category));
cl::opt<int64_t> layers("layers", cl::init(2), cl::desc("Transformer layers"),
                        cl::cat(category));
cl::opt<int64_t> hidden("hidden", cl::init(64), cl::desc("Hidden size"),
                        cl::cat(category));
cl::opt<int64_t> heads("heads", cl::init(2), cl::desc("Attention heads"),
                       cl::cat(category));
cl::opt<int64_t> tile("tile", cl::init(128),
                      cl::desc("Rows of the flash attention tiles"),
                      cl::cat(category));
cl::opt<int64_t> fullLimitMb(
    "full-limit-mb", cl::init(6000),
    cl::desc("Skip the materialised lowering above this many MB of S x S "
             "buffers"),
    cl::cat(category));
cl::opt<int64_t> rounds("rounds", cl::init(3),
                        cl::desc("Timed steps of each variant"),
                        cl::cat(category));

cleave::ModelConfig configFor(int64_t seq) {
  cleave::ModelConfig config = *cleave::lookupPreset("tiny-gpt");
  config.layers = layers;
  config.hidden = hidden;
  config.heads = config.kvHeads = heads;
  config.ffnHidden = 4 * hidden;
  config.seqLen = seq;
  config.batch = 1;
  return config;
}

/// The cost model's activations + gradients + transient bytes of the step.
Expected<double> predictedBytes(const cleave::ModelConfig &config,
                                cleave::cost::AttentionImpl attention) {
  auto cluster = cleave::planner::resolveCluster("local-cpu", 1);
  if (!cluster)
    return createStringError(inconvertibleErrorCode(), cluster.error());
  cleave::cost::ParallelPlan p;
  p.microBatchSize = config.batch;
  p.dtype = cleave::DType::F32;
  p.attention = attention;
  auto e = cleave::cost::estimate(config, cluster->spec, p);
  if (!e)
    return createStringError(inconvertibleErrorCode(), e.error());
  const cleave::cost::MemoryBreakdown &m = e->peakMemory();
  return m.activations + m.gradients + m.transient;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "Memory of tiled vs materialised attention\n");
  std::vector<int64_t> seqs(seqLens.begin(), seqLens.end());
  if (seqs.empty())
    seqs = {1024, 4096, 16384};
  cleave_rt_options_t options;
  cleave_rt_default_options(&options);
  if (cleave_rt_init(&options) != 0) {
    errs() << cleave_rt_error_message() << "\n";
    return 1;
  }
  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  outs() << "gpt: " << layers << " layers, hidden " << hidden << ", " << heads
         << " heads, batch 1, fp32, tile " << tile << "; median of " << rounds
         << " steps\n";
  outs() << "    seq  lowering    step ms   peak MB | pred flash MB  pred "
            "unfused MB\n";
  std::vector<std::string> json;
  for (int64_t seq : seqs) {
    cleave::ModelConfig config = configFor(seq);
    auto flashBytes =
        predictedBytes(config, cleave::cost::AttentionImpl::Flash);
    auto unfusedBytes =
        predictedBytes(config, cleave::cost::AttentionImpl::Unfused);
    if (!flashBytes || !unfusedBytes)
      return errs() << toString(flashBytes.takeError())
                    << toString(unfusedBytes.takeError()) << "\n",
             1;
    double scoreMb = 3.0 * heads * seq * seq * 4 / 1e6;
    std::vector<int64_t> tiles;
    if (scoreMb <= fullLimitMb)
      tiles.push_back(0);
    else
      outs() << format("%7lld  %-8s  (skipped: %.0f MB of S x S buffers)\n",
                       (long long)seq, (const char *)"full", scoreMb);
    tiles.push_back(tile);
    std::vector<cleave::bench::StepVariant> variants(tiles.size());
    std::vector<cleave::bench::StepVariant *> steps;
    for (auto [t, v] : llvm::zip(tiles, variants)) {
      RankCompileOptions step;
      step.plan.emplace();
      CompileOptions lowering;
      lowering.pipeline.attentionTile = t;
      if (Error err = v.build(context, config, step, lowering))
        return errs() << toString(std::move(err)) << "\n", 1;
      steps.push_back(&v);
    }
    cleave::bench::RandomTokens tokens(config.vocab);
    if (Error err = cleave::bench::runInTurn(steps, rounds, tokens))
      return errs() << toString(std::move(err)) << "\n", 1;
    for (auto [t, v] : llvm::zip(tiles, variants)) {
      const char *name = t == 0 ? "full" : "flash";
      double ms = 1e3 * v.medianSeconds();
      outs() << format("%7lld  %-8s %9.1f %9.1f | %13.1f %15.1f\n",
                       (long long)seq, name, ms, v.peak / 1e6,
                       *flashBytes / 1e6, *unfusedBytes / 1e6);
      json.push_back(
          formatv("{{\"seq\": {0}, \"lowering\": \"{1}\", \"median_ms\": "
                  "{2}, \"peak_bytes\": {3}, \"predicted_flash_bytes\": {4}, "
                  "\"predicted_unfused_bytes\": {5}}",
                  seq, name, ms, v.peak, *flashBytes, *unfusedBytes)
              .str());
    }
    outs().flush();
  }
  for (const std::string &line : json)
    outs() << line << "\n";
  cleave_rt_finalize();
  return 0;
}
