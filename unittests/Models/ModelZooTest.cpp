//===- ModelZooTest.cpp - Zoo programs match their configs ----------------===//

#include "cleave/Models/ModelZoo.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include <gtest/gtest.h>

using namespace mlir;

namespace {

/// Sums the elements of every parameter argument of @forward.
int64_t countParameters(ModuleOp module) {
  auto func = module.lookupSymbol<func::FuncOp>("forward");
  int64_t n = 0;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (func.getArgAttr(i, mlir::cleave::CleaveDialect::kParamAttrName))
      n += cast<RankedTensorType>(func.getArgument(i).getType())
               .getNumElements();
  return n;
}

/// Every preset builds, verifies, and declares exactly the parameters its
/// config counts (the cost model and the planner rely on both).
TEST(ModelZooTest, EveryPresetBuildsWithItsParameterCount) {
  MLIRContext context;
  for (const std::string &name : ::cleave::presetNames()) {
    ::cleave::ModelConfig config = *::cleave::lookupPreset(name);
    std::string error;
    OwningOpRef<ModuleOp> module =
        mlir::cleave::buildModel(&context, config, error);
    ASSERT_TRUE(module) << name << ": " << error;
    EXPECT_TRUE(succeeded(verify(*module))) << name;
    EXPECT_EQ(countParameters(*module), config.numParameters()) << name;
  }
}

TEST(ModelZooTest, InvalidConfigIsReportedNotBuilt) {
  MLIRContext context;
  ::cleave::ModelConfig config = *::cleave::lookupPreset("tiny-gpt");
  config.heads = 5;
  config.kvHeads = 5;
  std::string error;
  EXPECT_FALSE(mlir::cleave::buildModel(&context, config, error));
  EXPECT_EQ(error, "hidden (64) must be divisible by heads (5)");
}

TEST(ModelZooTest, DropoutAddsASeedInputAndDistinctStreams) {
  MLIRContext context;
  ::cleave::ModelConfig config = *::cleave::lookupPreset("tiny-llama");
  config.dropout = 0.1;
  std::string error;
  OwningOpRef<ModuleOp> module =
      mlir::cleave::buildModel(&context, config, error);
  ASSERT_TRUE(module);
  llvm::SmallDenseSet<int64_t> streams;
  int count = 0;
  module->walk([&](mlir::cleave::DropoutOp op) {
    streams.insert(op.getStream());
    ++count;
  });
  EXPECT_EQ(count, 1 + 2 * config.layers);
  EXPECT_EQ(static_cast<int>(streams.size()), count);
}

} // namespace
