//===- CudaProgramTest.cpp - Compiled programs on the cuda backend --------===//
//
// Here: a zoo training step compiles for CUDA (ptxas included) and its host
// code links in the JIT against the runtime, with the flash attention tiled
// (several tiles a sequence) and materialised; on the CPU the tiled step
// trains like the materialised one, and a run resumed from a checkpoint
// equals the straight run bit for bit. With a GPU (skipped elsewhere, with
// the reason): the same program and weights train the same on the cpu and
// the cuda backend, whichever attention lowering either uses; a resume on
// the GPU is bit-exact, and a checkpoint of either backend resumes on the
// other.
//
//===----------------------------------------------------------------------===//

#include "GpuTestUtil.h"
#include "MultiProcess.h"

#include "cleave/Execution/Checkpoint.h"
#include "cleave/Execution/Compiler.h"
#include "cleave/Execution/Trainer.h"
#include "cleave/ModelConfig/ModelConfig.h"
#include "cleave/Models/ModelZoo.h"
#include "cleave/Pipelines/Compile.h"
#include "cleave/Runtime/Runtime.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::cleave;
using namespace ::cleave::test;

namespace {

/// A zoo model with its training step (AdamW), ready to compile; with a
/// plan, partitioned (data parallel x tensor parallel, optionally sequence
/// parallel).
OwningOpRef<ModuleOp> trainStep(MLIRContext &context, const char *preset,
                                int64_t layers, int64_t dp = 1, int64_t tp = 1,
                                bool sp = false) {
  std::optional<::cleave::ModelConfig> config = ::cleave::lookupPreset(preset);
  if (!config)
    return nullptr;
  config->layers = layers;
  std::string error;
  OwningOpRef<ModuleOp> module = buildModel(&context, *config, error);
  if (!module)
    return nullptr;
  RankCompileOptions options;
  options.world = dp * tp;
  options.keepOtherFunctions = true;
  if (dp * tp > 1) {
    options.plan.emplace();
    options.plan->named.dp = dp;
    options.plan->named.tp = tp;
    options.plan->named.sp = sp;
  }
  if (llvm::Error err = compileForRanks(*module, options)) {
    ADD_FAILURE() << llvm::toString(std::move(err));
    return nullptr;
  }
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

/// Rows of the attention tiles of the tests: the zoo's tiny models have 32
/// positions, so 8 gives 4 query and key tiles (causal tiles skipped, the
/// diagonal masked); 0 is the materialised lowering.
constexpr int64_t kSmallTile = 8;

TEST_F(CudaProgram, HostCodeLinksInTheJit) {
  for (const char *preset : {"tiny-gpt", "tiny-llama"}) {
    for (int64_t tile : {kSmallTile, int64_t(0)}) {
      OwningOpRef<ModuleOp> module = trainStep(*context, preset, 1);
      ASSERT_TRUE(module) << preset;
      CompileOptions options;
      options.target = Target::CUDA;
      options.cuda.attentionTile = tile;
      auto program = JitProgram::compile(*module, options);
      if (!program) {
        std::string error = toString(program.takeError());
        if (error.find("cannot find ptxas") != std::string::npos)
          GTEST_SKIP() << "no CUDA toolkit: " << error;
        FAIL() << preset << ", attention tile " << tile << ": " << error;
      }
      // Every runtime symbol of the host code resolved.
      auto entry = (*program)->lookup("train_step");
      EXPECT_TRUE(static_cast<bool>(entry))
          << preset << ": " << toString(entry.takeError());
      EXPECT_NE((*program)->getManifest().lookup("train_step"), nullptr);
    }
  }
}

/// Losses of `steps` steps and the final parameters of one backend.
struct TrainRun {
  std::vector<double> losses;
  std::vector<std::vector<float>> params;
};

/// A compiled training step.
struct Step {
  std::unique_ptr<JitProgram> program;
  const FunctionSpec *spec = nullptr;
  EntryFn entry = nullptr;
};

/// Compiles `module` for `target` with attention tiles of `attentionTile`
/// rows (0: materialised); false (with a test failure) on error.
bool compileStep(ModuleOp module, Target target, Step &step,
                 int64_t attentionTile = CUDAPipelineOptions().attentionTile) {
  CompileOptions options;
  options.target = target;
  options.pipeline.attentionTile = attentionTile;
  options.cuda.attentionTile = attentionTile;
  auto program = JitProgram::compile(module, options);
  if (!program) {
    ADD_FAILURE() << toString(program.takeError());
    return false;
  }
  step.program = std::move(*program);
  step.spec = step.program->getManifest().lookup("train_step");
  step.entry = cantFail(step.program->lookup("train_step"));
  return true;
}

/// Checkpoints of a training run (train()): resume from the newest one in
/// `dir`, and write one there every `every` steps (0: none).
struct Checkpoints {
  std::string dir;
  bool resume = false;
  int64_t every = 0;
};

/// Trains `step` as this process's rank on `backend` (connecting the
/// program's communicators) until its step counter reaches `steps`: from
/// the initialization, or with `checkpoints` resumed from its newest
/// checkpoint. Returns 0 on success.
int train(const Step &step, const char *backend, int steps, TrainRun &run,
          const Checkpoints &checkpoints = {}) {
  cleave_rt_options_t opts;
  cleave_rt_default_options(&opts);
  opts.backend = backend;
  RT_CHECK(cleave_rt_init(&opts) == 0, "%s", cleave_rt_error_message());
  const ProgramManifest &manifest = step.program->getManifest();
  RT_CHECK(!defineCommunicators(manifest), "defining communicators failed");
  TrainerOptions trainerOptions;
  trainerOptions.seed = 7;
  trainerOptions.mesh = manifest.mesh;
  trainerOptions.rank = cleave_rt_rank();
  auto trainer = Trainer::create(*step.spec, step.entry, trainerOptions);
  RT_CHECK(static_cast<bool>(trainer), "%s",
           toString(trainer.takeError()).c_str());
  if (checkpoints.resume) {
    auto loaded = loadNewestCheckpoint(**trainer, checkpoints.dir, 0);
    RT_CHECK(static_cast<bool>(loaded), "%s",
             toString(loaded.takeError()).c_str());
    RT_CHECK(loaded->has_value(), "no checkpoint in %s",
             checkpoints.dir.c_str());
  } else {
    llvm::Error err = (*trainer)->initParameters();
    RT_CHECK(!err, "init failed: %s", toString(std::move(err)).c_str());
  }
  std::optional<CheckpointWriter> writer;
  if (checkpoints.every > 0)
    writer.emplace(checkpoints.dir, 0, 1, /*keep=*/2, "", /*timeoutMs=*/60000);
  // The same token rows on every backend and plan.
  std::vector<uint16_t> text(4096);
  for (size_t i = 0; i < text.size(); ++i)
    text[i] = uint16_t((i * 7 + i / 13) % 65);
  cleave_token_file *tokens =
      cleave_token_file_from_memory(text.data(), int64_t(text.size()), 2);
  auto source = makeTokenSource(tokens, 1, 65);
  for (int64_t s = 0; (*trainer)->stepCounter() < steps; ++s) {
    auto loss = (*trainer)->runStep(s, *source);
    RT_CHECK(static_cast<bool>(loss), "%s", toString(loss.takeError()).c_str());
    run.losses.push_back(*loss);
    if (writer && (*trainer)->stepCounter() % checkpoints.every == 0) {
      llvm::Error err = writer->save(**trainer);
      RT_CHECK(!err, "%s", toString(std::move(err)).c_str());
    }
  }
  if (writer) {
    llvm::Error err = writer->finish();
    RT_CHECK(!err, "%s", toString(std::move(err)).c_str());
    // Its pinned snapshot goes before the backend does.
    writer.reset();
  }
  for (const BufferSpec &b : step.spec->buffers)
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

/// Losses agree: the first exactly up to rounding (identical weights), the
/// later ones after AdamW steps on gradients that differ in rounding only.
int compareLosses(const TrainRun &want, const TrainRun &got, const char *what) {
  for (size_t s = 0; s < want.losses.size(); ++s)
    RT_CHECK(std::fabs(want.losses[s] - got.losses[s]) <=
                 (s == 0 ? 1e-5 : 1e-4) * std::fabs(want.losses[s]),
             "%s, step %zu: loss %.7f, reference %.7f", what, s + 1,
             got.losses[s], want.losses[s]);
  return 0;
}

/// Trains tiny-gpt (2 layers) for `steps` steps on the cpu backend with
/// attention tiles of `cpuTile` rows and, in a child, on the cuda backend
/// with `gpuTile`; the losses and parameters must agree.
void trainsLikeTheCpu(MLIRContext &context, int64_t cpuTile, int64_t gpuTile) {
  const int steps = 3;
  // The CPU reference here; the GPU in a child (this process must not
  // initialize CUDA: later tests fork ranks).
  OwningOpRef<ModuleOp> cpuModule = trainStep(context, "tiny-gpt", 2);
  OwningOpRef<ModuleOp> gpuModule = trainStep(context, "tiny-gpt", 2);
  ASSERT_TRUE(cpuModule && gpuModule);
  Step cpuStep, gpuStep;
  ASSERT_TRUE(compileStep(*cpuModule, Target::CPU, cpuStep, cpuTile));
  ASSERT_TRUE(compileStep(*gpuModule, Target::CUDA, gpuStep, gpuTile));
  TrainRun cpu;
  ASSERT_EQ(train(cpuStep, "cpu", steps, cpu), 0) << cleave_rt_error_message();
  RunOptions options;
  options.deadlineSeconds = 300;
  std::vector<RankResult> results = runRanks(
      1,
      [&](int) {
        TrainRun gpu;
        if (int rc = train(gpuStep, "cuda", steps, gpu))
          return rc;
        if (int rc = compareLosses(cpu, gpu, "cuda vs cpu"))
          return rc;
        // AdamW moves a parameter by at most about lr per step.
        double bound = 2e-3 * steps;
        for (size_t p = 0; p < cpu.params.size(); ++p)
          for (size_t i = 0; i < cpu.params[p].size(); ++i)
            RT_CHECK(std::fabs(cpu.params[p][i] - gpu.params[p][i]) <= bound,
                     "parameter %zu element %zu: %g on the GPU, %g on the "
                     "CPU",
                     p, i, double(gpu.params[p][i]), double(cpu.params[p][i]));
        std::printf("attention tiles %lld (cpu) and %lld (gpu), losses (cpu, "
                    "gpu):",
                    (long long)cpuTile, (long long)gpuTile);
        for (int s = 0; s < steps; ++s)
          std::printf(" (%.6f, %.6f)", cpu.losses[s], gpu.losses[s]);
        std::printf("\n");
        return 0;
      },
      options);
  EXPECT_EQ(results[0].exitCode, 0) << describe(results);
}

TEST_F(CudaProgram, TrainsLikeTheCpuBackend) {
  REQUIRE_GPUS(1);
  // The pipelines' default tiles (one tile a sequence at 32 positions).
  trainsLikeTheCpu(*context, CPUPipelineOptions().attentionTile,
                   CUDAPipelineOptions().attentionTile);
}

TEST_F(CudaProgram, TiledAttentionTrainsLikeTheMaterialisedOnTheCpu) {
  REQUIRE_GPUS(1);
  // Several tiles a sequence on the GPU (the online softmax across key
  // tiles, causal tiles skipped, the diagonal masked) against the CPU's
  // materialised [B*H, S, S] probabilities; and the GPU's materialised
  // lowering against the CPU's tiled one.
  trainsLikeTheCpu(*context, /*cpuTile=*/0, /*gpuTile=*/kSmallTile);
  trainsLikeTheCpu(*context, /*cpuTile=*/kSmallTile, /*gpuTile=*/0);
}

TEST_F(CudaProgram, TiledReferenceTrainsLikeTheMaterialised) {
  // No GPU needed: the GPU tests' references, the same tiny-gpt step on the
  // CPU with the tiles the CUDA tests use and materialised, train alike
  // (the tensor-level IR is the one the CUDA pipeline lowers).
  const int steps = 3;
  OwningOpRef<ModuleOp> tiledModule = trainStep(*context, "tiny-gpt", 2);
  OwningOpRef<ModuleOp> fullModule = trainStep(*context, "tiny-gpt", 2);
  ASSERT_TRUE(tiledModule && fullModule);
  Step tiledStep, fullStep;
  ASSERT_TRUE(compileStep(*tiledModule, Target::CPU, tiledStep, kSmallTile));
  ASSERT_TRUE(compileStep(*fullModule, Target::CPU, fullStep, 0));
  TrainRun tiled, full;
  ASSERT_EQ(train(fullStep, "cpu", steps, full), 0)
      << cleave_rt_error_message();
  ASSERT_EQ(train(tiledStep, "cpu", steps, tiled), 0)
      << cleave_rt_error_message();
  // compareLosses names the step and the losses on stderr.
  ASSERT_EQ(compareLosses(full, tiled, "tiled vs materialised"), 0);
  for (size_t p = 0; p < full.params.size(); ++p)
    for (size_t i = 0; i < full.params[p].size(); ++i)
      ASSERT_NEAR(full.params[p][i], tiled.params[p][i], 1e-4)
          << "parameter " << p << " element " << i;
}

//===----------------------------------------------------------------------===//
// Checkpoints (CheckpointWriter, Trainer::loadCheckpoint): on the cuda
// backend the snapshot is a copy from the device to pinned host memory on
// the copy stream, and a restore a copy back.
//===----------------------------------------------------------------------===//

/// A fresh folder for checkpoints, removed with the object.
struct TempDir {
  std::string path;
  TempDir() {
    llvm::SmallString<128> p;
    if (!llvm::sys::fs::createUniqueDirectory("cleave-ckpt-test", p))
      path = std::string(p);
  }
  ~TempDir() {
    if (!path.empty())
      llvm::sys::fs::remove_directories(path);
  }
};

/// The steps of the checkpoint tests: `kSteps` straight against `kSteps /
/// 2`, a checkpoint, and a resumed run of the rest.
constexpr int kSteps = 20;

/// The losses of `run` from step `from` (0-based) on.
TrainRun after(const TrainRun &run, int from) {
  TrainRun tail = run;
  tail.losses.erase(tail.losses.begin(), tail.losses.begin() + from);
  return tail;
}

/// Sets `want` to the straight run after the checkpoint; fails unless the
/// resumed run has as many steps.
int stepsAfterCheckpoint(const TrainRun &straight, const TrainRun &resumed,
                         const char *what, TrainRun &want) {
  want = after(straight, kSteps / 2);
  RT_CHECK(want.losses.size() == resumed.losses.size(),
           "%s: %zu steps resumed, %zu expected", what, resumed.losses.size(),
           want.losses.size());
  return 0;
}

/// The resumed run equals the straight one bit for bit: the losses of the
/// steps after the checkpoint and the final parameters.
int compareBitExact(const TrainRun &straight, const TrainRun &resumed,
                    const char *what) {
  TrainRun want;
  if (int rc = stepsAfterCheckpoint(straight, resumed, what, want))
    return rc;
  for (size_t s = 0; s < want.losses.size(); ++s)
    RT_CHECK(std::memcmp(&want.losses[s], &resumed.losses[s], 8) == 0,
             "%s, step %zu: loss %.9g resumed, %.9g straight", what,
             s + 1 + kSteps / 2, resumed.losses[s], want.losses[s]);
  RT_CHECK(want.params.size() == resumed.params.size(),
           "%s: %zu parameters, %zu expected", what, resumed.params.size(),
           want.params.size());
  for (size_t p = 0; p < want.params.size(); ++p)
    RT_CHECK(want.params[p].size() == resumed.params[p].size() &&
                 std::memcmp(want.params[p].data(), resumed.params[p].data(),
                             want.params[p].size() * sizeof(float)) == 0,
             "%s: final parameter %zu differs from the straight run's", what,
             p);
  return 0;
}

/// On one backend: `kSteps` straight; half of them with a checkpoint at the
/// end, then the other half resumed from it in a new runtime; the two ends
/// must be the same bit for bit.
int resumesBitExact(const Step &step, const char *backend) {
  TempDir dir;
  RT_CHECK(!dir.path.empty(), "cannot create a temporary folder");
  TrainRun straight, first, resumed;
  if (int rc = train(step, backend, kSteps, straight))
    return rc;
  if (int rc = train(step, backend, kSteps / 2, first,
                     {dir.path, false, kSteps / 2}))
    return rc;
  RT_CHECK(latestCheckpoint(dir.path).has_value(), "no checkpoint written");
  if (int rc = train(step, backend, kSteps, resumed, {dir.path, true, 0}))
    return rc;
  return compareBitExact(straight, resumed, backend);
}

TEST_F(CudaProgram, ResumesBitExactOnTheCpu) {
  // No GPU needed: the GPU test's harness and reference on the cpu
  // backend (buffers in place, the snapshot a memcpy).
  OwningOpRef<ModuleOp> module = trainStep(*context, "tiny-gpt", 2);
  ASSERT_TRUE(module);
  Step step;
  ASSERT_TRUE(compileStep(*module, Target::CPU, step));
  EXPECT_EQ(resumesBitExact(step, "cpu"), 0) << cleave_rt_error_message();
}

TEST_F(CudaProgram, ResumesBitExactOnTheGpu) {
  REQUIRE_GPUS(1);
  OwningOpRef<ModuleOp> module = trainStep(*context, "tiny-gpt", 2);
  ASSERT_TRUE(module);
  Step step;
  ASSERT_TRUE(compileStep(*module, Target::CUDA, step));
  RunOptions options;
  options.deadlineSeconds = 300;
  std::vector<RankResult> results =
      runRanks(1, [&](int) { return resumesBitExact(step, "cuda"); }, options);
  EXPECT_EQ(results[0].exitCode, 0) << describe(results);
}

/// Losses of a run resumed from the other backend's checkpoint against the
/// straight run on this backend: the parameters at the checkpoint differ by
/// the two backends' rounding, as after any steps of trainsLikeTheCpu.
int compareAcrossBackends(const TrainRun &straight, const TrainRun &resumed,
                          const char *what) {
  TrainRun want;
  if (int rc = stepsAfterCheckpoint(straight, resumed, what, want))
    return rc;
  for (size_t s = 0; s < want.losses.size(); ++s)
    RT_CHECK(std::fabs(want.losses[s] - resumed.losses[s]) <=
                 1e-4 * std::fabs(want.losses[s]),
             "%s, step %zu: loss %.7f, straight %.7f", what, s + 1 + kSteps / 2,
             resumed.losses[s], want.losses[s]);
  return 0;
}

TEST_F(CudaProgram, CheckpointsMoveBetweenTheCpuAndTheGpu) {
  REQUIRE_GPUS(1);
  OwningOpRef<ModuleOp> cpuModule = trainStep(*context, "tiny-gpt", 2);
  OwningOpRef<ModuleOp> gpuModule = trainStep(*context, "tiny-gpt", 2);
  ASSERT_TRUE(cpuModule && gpuModule);
  Step cpuStep, gpuStep;
  ASSERT_TRUE(compileStep(*cpuModule, Target::CPU, cpuStep));
  ASSERT_TRUE(compileStep(*gpuModule, Target::CUDA, gpuStep));
  TempDir fromCpu, fromGpu;
  ASSERT_FALSE(fromCpu.path.empty() || fromGpu.path.empty());
  // The CPU's runs here; the GPU's in a child (this process must not
  // initialize CUDA: later tests fork ranks).
  TrainRun cpu, cpuHalf;
  ASSERT_EQ(train(cpuStep, "cpu", kSteps, cpu), 0) << cleave_rt_error_message();
  ASSERT_EQ(train(cpuStep, "cpu", kSteps / 2, cpuHalf,
                  {fromCpu.path, false, kSteps / 2}),
            0)
      << cleave_rt_error_message();
  RunOptions options;
  options.deadlineSeconds = 300;
  std::vector<RankResult> results = runRanks(
      1,
      [&](int) {
        TrainRun gpu, gpuHalf, resumed;
        if (int rc = train(gpuStep, "cuda", kSteps, gpu))
          return rc;
        // The CPU's checkpoint of step 10, resumed on the GPU.
        if (int rc = train(gpuStep, "cuda", kSteps, resumed,
                           {fromCpu.path, true, 0}))
          return rc;
        if (int rc = compareAcrossBackends(gpu, resumed, "cpu -> cuda"))
          return rc;
        // And the GPU's own for the CPU to resume.
        return train(gpuStep, "cuda", kSteps / 2, gpuHalf,
                     {fromGpu.path, false, kSteps / 2});
      },
      options);
  ASSERT_EQ(results[0].exitCode, 0) << describe(results);
  TrainRun resumed;
  ASSERT_EQ(train(cpuStep, "cpu", kSteps, resumed, {fromGpu.path, true, 0}), 0)
      << cleave_rt_error_message();
  EXPECT_EQ(compareAcrossBackends(cpu, resumed, "cuda -> cpu"), 0);
}

TEST_F(CudaProgram, PartitionedOnFourGpusTrainsLikeOneCpu) {
  REQUIRE_GPUS(4);
  const int steps = 3;
  OwningOpRef<ModuleOp> cpuModule = trainStep(*context, "tiny-gpt", 2);
  OwningOpRef<ModuleOp> gpuModule =
      trainStep(*context, "tiny-gpt", 2, /*dp=*/2, /*tp=*/2, /*sp=*/true);
  ASSERT_TRUE(cpuModule && gpuModule);
  Step cpuStep, gpuStep;
  ASSERT_TRUE(compileStep(*cpuModule, Target::CPU, cpuStep));
  ASSERT_TRUE(compileStep(*gpuModule, Target::CUDA, gpuStep));
  TrainRun cpu;
  ASSERT_EQ(train(cpuStep, "cpu", steps, cpu), 0) << cleave_rt_error_message();
  RunOptions options;
  options.timeoutMs = 120000;
  options.deadlineSeconds = 600;
  std::vector<RankResult> results = runRanks(
      4,
      [&](int) {
        TrainRun gpu;
        if (int rc = train(gpuStep, "cuda", steps, gpu))
          return rc;
        return compareLosses(cpu, gpu, "dp 2 x tp 2 + sp on 4 GPUs vs 1 CPU");
      },
      options);
  for (const RankResult &r : results)
    EXPECT_EQ(r.exitCode, 0) << describe(results);
}

} // namespace
