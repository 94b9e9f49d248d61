//===- Bundle.h - A compiled training run that moves to another machine -*-===//
//
// `cleave-run --emit-bundle DIR` writes everything a training run needs on a
// machine without Cleave's compiler: the ahead-of-time compiled step (for a
// cuda bundle also the same program compiled for the CPU, the selftest's
// reference), the runner (cleave-bundle-run: the runtime and the code that
// drives steps, logs and saves, with no LLVM, MLIR or CBC library), the
// runtime libraries and every non-system library they need except the CUDA
// driver and CUDA libraries, the training data, optionally the parameters,
// a manifest (bundle.json) and a launcher script, DIR/run. docs/cuda.md
// ("Running on a GPU cluster") describes the layout and its use.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_EXECUTION_BUNDLE_H
#define CLEAVE_EXECUTION_BUNDLE_H

#include "cleave/Execution/CompileCache.h"
#include "cleave/Execution/Compiler.h"
#include "cleave/ModelConfig/ModelConfig.h"
#include "cleave/Pipelines/Plan.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"
#include <optional>
#include <string>

namespace mlir::cleave {

/// The CPU bundles generate host code for by default: x86-64 with AVX2 and
/// FMA, which every GPU server of the last decade has.
inline constexpr const char *kBundleHostCpu = "x86-64-v3";

struct BundleOptions {
  std::string dir;
  /// The bundle's backend: its step is compiled with `compile`; a CUDA
  /// bundle also carries the CPU build of the same program.
  CompileOptions compile;
  /// The runner (cleave-bundle-run) to copy; its libraries come with it.
  std::string runner;
  /// Ranks and the plan as the user named it.
  int world = 1;
  std::string planText;
  /// The zoo model, when the program is one: the bundle then carries the
  /// cost model's predictions for the known GPU kinds.
  std::optional<::cleave::ModelConfig> model;
  std::optional<PlanSpec> plan;
  /// The training step's options, priced as it runs them (clipping, loss
  /// scaling).
  CleaveAutodiffPassOptions step;
  /// The training data: a token file, a per-step tensors file, or text
  /// (written into the bundle), and the vocabulary ids are checked against.
  std::string tokensPath, inputsPath, valDataPath;
  int tokenBytes = 2;
  llvm::StringRef text;
  int64_t vocab = -1;
  /// Parameters to carry (empty: the runner initializes them).
  std::string paramsPath;
  /// Defaults of the runner (its flags override them).
  int64_t steps = 100;
  double learningRate = 1e-3;
  uint64_t seed = 0;
  /// Where compiled steps come from and go (the compile cache).
  const CompileCache *cache = nullptr;
};

/// Writes the bundle of per-device program `module` (compiled for the ranks:
/// planned, differentiated, partitioned) into `options.dir`, which must be
/// empty, absent or an earlier bundle. Reports what it wrote to `log`.
llvm::Error writeBundle(ModuleOp module, const BundleOptions &options,
                        llvm::raw_ostream &log);

} // namespace mlir::cleave

#endif // CLEAVE_EXECUTION_BUNDLE_H
