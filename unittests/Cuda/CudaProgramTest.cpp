//===- CudaProgramTest.cpp - Compiled programs on the cuda backend --------===//
//
// Here: a zoo training step compiles for CUDA (ptxas included) and its host
// code links in the JIT against the runtime. With a GPU (skipped elsewhere,
// with the reason): the same program and weights train the same on the cpu
// and the cuda backend.
//
//===----------------------------------------------------------------------===//

#include "GpuTestUtil.h"
#include "MultiProcess.h"

#include "cleave/Execution/Compiler.h"
#include "cleave/Execution/Trainer.h"
#include "cleave/ModelConfig/ModelConfig.h"
#include "cleave/Models/ModelZoo.h"
#include "cleave/Runtime/Runtime.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace mlir;
using namespace mlir::cleave;
using namespace ::cleave::test;

namespace {

/// A zoo model with its training step (AdamW), ready to compile.
OwningOpRef<ModuleOp> trainStep(MLIRContext &context, const char *preset,
                                int64_t layers) {
  std::optional<::cleave::ModelConfig> config = ::cleave::lookupPreset(preset);
  if (!config)
    return nullptr;
  config->layers = layers;
  std::string error;
  OwningOpRef<ModuleOp> module = buildModel(&context, *config, error);
  if (!module)
    return nullptr;
  PassManager pm(&context);
  pm.addPass(createCleaveAutodiffPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (failed(pm.run(*module)))
    return nullptr;
  return module;
}

class CudaProgram : public ::testing::Test {
protected:
  CudaProgram() {
    registerCompilerDialects(registry);
    context = std::make_unique<MLIRContext>(registry);
    context->loadAllAvailableDialects();
  }
  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
};

TEST_F(CudaProgram, HostCodeLinksInTheJit) {
  for (const char *preset : {"tiny-gpt", "tiny-llama"}) {
    OwningOpRef<ModuleOp> module = trainStep(*context, preset, 1);
    ASSERT_TRUE(module) << preset;
    CompileOptions options;
    options.target = Target::CUDA;
    auto program = JitProgram::compile(*module, options);
    if (!program) {
      std::string error = toString(program.takeError());
      if (error.find("cannot find ptxas") != std::string::npos)
        GTEST_SKIP() << "no CUDA toolkit: " << error;
      FAIL() << preset << ": " << error;
    }
    // Every runtime symbol of the host code resolved.
    auto entry = (*program)->lookup("train_step");
    EXPECT_TRUE(static_cast<bool>(entry))
        << preset << ": " << toString(entry.takeError());
    EXPECT_NE((*program)->getManifest().lookup("train_step"), nullptr);
  }
}

/// Losses of `steps` steps and the final parameters of one backend.
struct TrainRun {
  std::vector<double> losses;
  std::vector<std::vector<float>> params;
};

/// Trains tiny-gpt on `backend` in this process; returns 0 on success.
int train(MLIRContext &context, const char *backend, int steps, TrainRun &run) {
  cleave_rt_options_t opts;
  cleave_rt_default_options(&opts);
  opts.backend = backend;
  RT_CHECK(cleave_rt_init(&opts) == 0, "%s", cleave_rt_error_message());
  OwningOpRef<ModuleOp> module = trainStep(context, "tiny-gpt", 2);
  RT_CHECK(module, "building the model failed");
  CompileOptions options;
  options.target =
      std::strcmp(backend, "cuda") == 0 ? Target::CUDA : Target::CPU;
  auto program = JitProgram::compile(*module, options);
  RT_CHECK(static_cast<bool>(program), "%s",
           toString(program.takeError()).c_str());
  const FunctionSpec *spec = (*program)->getManifest().lookup("train_step");
  EntryFn entry = cantFail((*program)->lookup("train_step"));
  TrainerOptions trainerOptions;
  trainerOptions.seed = 7;
  auto trainer = Trainer::create(*spec, entry, trainerOptions);
  RT_CHECK(static_cast<bool>(trainer), "%s",
           toString(trainer.takeError()).c_str());
  RT_CHECK(!(*trainer)->initParameters(), "init failed");
  // The same token rows on both backends.
  std::vector<uint16_t> text(4096);
  for (size_t i = 0; i < text.size(); ++i)
    text[i] = uint16_t((i * 7 + i / 13) % 65);
  cleave_token_file *tokens =
      cleave_token_file_from_memory(text.data(), int64_t(text.size()), 2);
  auto source = makeTokenSource(tokens, 1, 65);
  for (int s = 0; s < steps; ++s) {
    auto loss = (*trainer)->runStep(s, *source);
    RT_CHECK(static_cast<bool>(loss), "%s",
             toString(loss.takeError()).c_str());
    run.losses.push_back(*loss);
  }
  for (const BufferSpec &b : spec->buffers)
    if (b.role == BufferSpec::Role::Param) {
      auto *p = static_cast<const float *>((*trainer)->parameter(b.name));
      run.params.emplace_back(p, p + b.numElements());
    }
  // Buffers of the backend go before it does.
  trainer->reset();
  cleave_token_file_close(tokens);
  cleave_rt_finalize();
  return 0;
}

TEST_F(CudaProgram, TrainsLikeTheCpuBackend) {
  REQUIRE_GPUS(1);
  RunOptions options;
  options.deadlineSeconds = 600;
  std::vector<RankResult> results = runRanks(
      1,
      [this](int) {
        const int steps = 3;
        TrainRun cpu, gpu;
        if (int rc = train(*context, "cpu", steps, cpu))
          return rc;
        if (int rc = train(*context, "cuda", steps, gpu))
          return rc;
        // The first loss is computed from identical weights; later ones
        // after AdamW steps on gradients that differ in rounding only.
        for (int s = 0; s < steps; ++s)
          RT_CHECK(std::fabs(cpu.losses[s] - gpu.losses[s]) <=
                       (s == 0 ? 1e-5 : 1e-4) * std::fabs(cpu.losses[s]),
                   "step %d: loss %.7f on the GPU, %.7f on the CPU", s + 1,
                   gpu.losses[s], cpu.losses[s]);
        // AdamW moves a parameter by at most about lr per step.
        double bound = 2e-3 * steps;
        for (size_t p = 0; p < cpu.params.size(); ++p)
          for (size_t i = 0; i < cpu.params[p].size(); ++i)
            RT_CHECK(std::fabs(cpu.params[p][i] - gpu.params[p][i]) <= bound,
                     "parameter %zu element %zu: %g on the GPU, %g on the "
                     "CPU",
                     p, i, double(gpu.params[p][i]),
                     double(cpu.params[p][i]));
        std::printf("losses (cpu, gpu):");
        for (int s = 0; s < steps; ++s)
          std::printf(" (%.6f, %.6f)", cpu.losses[s], gpu.losses[s]);
        std::printf("\n");
        return 0;
      },
      options);
  EXPECT_EQ(results[0].exitCode, 0) << describe(results);
}

} // namespace
