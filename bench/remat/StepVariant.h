//===- StepVariant.h - Compiled training steps measured in turn -*- C++ -*-===//
//
// Shared by the benchmarks that compile one model's training step several
// ways (recompute kinds, attention lowerings) and compare them: each
// variant's step is compiled and set up once, then the variants run in
// turn, round after round, so that machine load hits them alike. A step's
// allocator peak comes from AllocationCounter.h.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_BENCH_REMAT_STEPVARIANT_H
#define CLEAVE_BENCH_REMAT_STEPVARIANT_H

#include "cleave/Execution/Compiler.h"
#include "cleave/Execution/Trainer.h"
#include "cleave/ModelConfig/ModelConfig.h"
#include "cleave/Pipelines/Compile.h"
#include "mlir/IR/MLIRContext.h"
#include <memory>
#include <vector>

namespace cleave::bench {

/// Random token batches over `vocab` ids, the same for every variant.
class RandomTokens final : public mlir::cleave::BatchSource {
public:
  explicit RandomTokens(int64_t vocab) : vocab(vocab) {}
  llvm::Error fill(const mlir::cleave::BufferSpec &spec, int64_t step,
                   void *data) override;

private:
  int64_t vocab;
};

/// One compiled training step and what it measured.
struct StepVariant {
  std::unique_ptr<mlir::cleave::JitProgram> program;
  std::unique_ptr<mlir::cleave::Trainer> trainer;
  /// Seconds of each timed step.
  std::vector<double> times;
  /// The largest allocator peak of a step above what was live before it.
  int64_t peak = 0;

  /// Builds `config`'s training step, compiles it for one rank with `step`
  /// and lowers it with `lowering`, and initializes its parameters.
  llvm::Error build(mlir::MLIRContext &context, const ModelConfig &config,
                    const mlir::cleave::RankCompileOptions &step,
                    const mlir::cleave::CompileOptions &lowering = {});
  double medianSeconds() const;
};

/// Runs one warm-up step and `rounds` timed steps of every variant, in
/// turn.
llvm::Error runInTurn(std::vector<StepVariant *> variants, int64_t rounds,
                      mlir::cleave::BatchSource &tokens);

} // namespace cleave::bench

#endif // CLEAVE_BENCH_REMAT_STEPVARIANT_H
