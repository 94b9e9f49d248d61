//===- StepVariant.cpp - Compiled training steps measured in turn ---------===//

#include "StepVariant.h"
#include "AllocationCounter.h"
#include "cleave/Models/ModelZoo.h"
#include "cleave/Runtime/Runtime.h"
#include <algorithm>
#include <random>

using namespace llvm;
using namespace mlir::cleave;

namespace cleave::bench {

Error RandomTokens::fill(const BufferSpec &spec, int64_t step, void *data) {
  std::mt19937 rng(static_cast<uint32_t>(step * 2 + (spec.name == "targets")));
  auto *ids = static_cast<int32_t *>(data);
  for (int64_t i = 0; i < spec.numElements(); ++i)
    ids[i] = static_cast<int32_t>(rng() % vocab);
  return Error::success();
}

Error StepVariant::build(mlir::MLIRContext &context, const ModelConfig &config,
                         const RankCompileOptions &step,
                         const CompileOptions &lowering) {
  std::string error;
  auto module = buildModel(&context, config, error);
  if (!module)
    return createStringError(inconvertibleErrorCode(), error);
  if (Error err = compileForRanks(*module, step))
    return err;
  auto compiled = JitProgram::compile(*module, lowering);
  if (!compiled)
    return compiled.takeError();
  program = std::move(*compiled);
  const FunctionSpec *spec = program->getManifest().lookup("train_step");
  auto created = Trainer::create(*spec, cantFail(program->lookup("train_step")),
                                 TrainerOptions{1e-4, 1});
  if (!created)
    return created.takeError();
  trainer = std::move(*created);
  if (trainer->initParameters())
    return createStringError(inconvertibleErrorCode(),
                             "cannot initialize the parameters");
  return Error::success();
}

double StepVariant::medianSeconds() const {
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  return sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
}

Error runInTurn(std::vector<StepVariant *> variants, int64_t rounds,
                BatchSource &tokens) {
  for (int64_t r = -1; r < rounds; ++r) // round -1 warms up
    for (StepVariant *v : variants) {
      resetPeak();
      int64_t before = liveBytes();
      double start = cleave_rt_now();
      auto loss = v->trainer->runStep(std::max<int64_t>(r, 0), tokens);
      double seconds = cleave_rt_now() - start;
      if (!loss)
        return loss.takeError();
      if (r < 0)
        continue;
      v->times.push_back(seconds);
      v->peak = std::max(v->peak, peakBytes() - before);
    }
  return Error::success();
}

} // namespace cleave::bench
