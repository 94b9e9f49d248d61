//===- CompileTest.cpp - Compiling a training step for N ranks ------------===//
//
// compileForRanks on the zoo's tiny GPT: the per-device program of a named
// plan (local shapes on a mesh of one device per rank), of a pipelined plan
// (one step function per pipeline rank), of the default data parallelism,
// and the errors of plans that do not fit the program.
//
//===----------------------------------------------------------------------===//

#include "cleave/Pipelines/Compile.h"
#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Models/ModelZoo.h"
#include "cleave/Pipelines/Lowering.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::cleave;

namespace {

class CompileForRanksTest : public ::testing::Test {
protected:
  CompileForRanksTest() {
    registerCPULoweringDialects(registry);
    context = std::make_unique<MLIRContext>(registry);
    context->loadAllAvailableDialects();
  }

  /// The zoo's tiny GPT (batch 4, sequence 32) with `layers` layers.
  OwningOpRef<ModuleOp> tinyGpt(int64_t layers = 2) {
    ::cleave::ModelConfig config = *::cleave::lookupPreset("tiny-gpt");
    config.layers = layers;
    std::string error;
    OwningOpRef<ModuleOp> module = buildModel(context.get(), config, error);
    EXPECT_TRUE(module) << error;
    return module;
  }

  /// Compiles `module` for `world` ranks under `plan` ("": none), the
  /// collectives verified; the error message, or "" on success.
  std::string compile(ModuleOp module, int world, llvm::StringRef plan) {
    RankCompileOptions options;
    options.world = world;
    options.verify = true;
    if (!plan.empty())
      options.plan = llvm::cantFail(parsePlan(plan, world));
    llvm::Error err = compileForRanks(module, options);
    return err ? llvm::toString(std::move(err)) : "";
  }

  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
};

/// The type of the argument of `func` named `name` (cleave.param or
/// cleave.input).
RankedTensorType argumentType(func::FuncOp func, llvm::StringRef name) {
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    for (llvm::StringRef role :
         {CleaveDialect::kParamAttrName, CleaveDialect::kInputAttrName})
      if (auto attr = func.getArgAttrOfType<StringAttr>(i, role))
        if (attr.getValue() == name)
          return cast<RankedTensorType>(func.getArgument(i).getType());
  return nullptr;
}

MeshOp onlyMesh(ModuleOp module) {
  auto meshes = module.getOps<MeshOp>();
  return meshes.empty() ? nullptr : *meshes.begin();
}

TEST_F(CompileForRanksTest, NamedPlanGivesLocalShapesOnOneDevicePerRank) {
  OwningOpRef<ModuleOp> module = tinyGpt();
  ASSERT_EQ(compile(*module, 4, "dp=2,tp=2"), "");
  MeshOp mesh = onlyMesh(*module);
  ASSERT_TRUE(mesh);
  EXPECT_EQ(mesh.getNumDevices(), 4);
  EXPECT_EQ(mesh.getAxisSize("dp"), 2);
  EXPECT_EQ(mesh.getAxisSize("tp"), 2);
  // Only the training step is compiled, with per-device shapes: the batch
  // split over dp, the query weight's rows over tp.
  EXPECT_FALSE(module->lookupSymbol("forward"));
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  ASSERT_TRUE(step);
  RankedTensorType tokens = argumentType(step, "tokens");
  ASSERT_TRUE(tokens);
  EXPECT_EQ(tokens.getShape(), llvm::ArrayRef<int64_t>({2, 32}));
  RankedTensorType query = argumentType(step, "h.0.attn.q.weight");
  ASSERT_TRUE(query);
  EXPECT_EQ(query.getNumElements(), 64 * 64 / 2);
}

TEST_F(CompileForRanksTest, PipelinedPlanGivesOneStepFunctionPerStage) {
  OwningOpRef<ModuleOp> module = tinyGpt(4);
  ASSERT_EQ(compile(*module, 4, "pp=2,dp=2,micro=2,schedule=1f1b"), "");
  MeshOp mesh = onlyMesh(*module);
  ASSERT_TRUE(mesh);
  EXPECT_EQ(mesh.getNumDevices(), 4);
  EXPECT_EQ(mesh.getAxisSize("pp"), 2);
  // One public step function per pipeline rank, named in cleave.pipeline.
  ASSERT_TRUE((*module)->hasAttr(CleaveDialect::kPipelineAttrName));
  for (const char *name : {"train_step_s0", "train_step_s1"}) {
    auto stage = module->lookupSymbol<func::FuncOp>(name);
    ASSERT_TRUE(stage) << name;
    EXPECT_TRUE(stage.isPublic()) << name;
  }
}

TEST_F(CompileForRanksTest, WithoutPlanOneRankGetsTheGlobalStep) {
  OwningOpRef<ModuleOp> module = tinyGpt();
  ASSERT_EQ(compile(*module, 1, ""), "");
  EXPECT_FALSE(onlyMesh(*module));
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  ASSERT_TRUE(step);
  EXPECT_EQ(argumentType(step, "tokens").getShape(),
            llvm::ArrayRef<int64_t>({4, 32}));
}

TEST_F(CompileForRanksTest, WithoutPlanSeveralRanksAreDataParallel) {
  OwningOpRef<ModuleOp> module = tinyGpt();
  ASSERT_EQ(compile(*module, 2, ""), "");
  MeshOp mesh = onlyMesh(*module);
  ASSERT_TRUE(mesh);
  EXPECT_EQ(mesh.getAxisSize("dp"), 2);
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  ASSERT_TRUE(step);
  EXPECT_EQ(argumentType(step, "tokens").getShape(),
            llvm::ArrayRef<int64_t>({2, 32}));
}

TEST_F(CompileForRanksTest, KeepsOtherFunctionsWhenAsked) {
  OwningOpRef<ModuleOp> module = tinyGpt();
  RankCompileOptions options;
  options.keepOtherFunctions = true;
  llvm::Error err = compileForRanks(*module, options);
  ASSERT_FALSE(err) << llvm::toString(std::move(err));
  EXPECT_TRUE(module->lookupSymbol("forward"));
  EXPECT_TRUE(module->lookupSymbol("train_step"));
}

TEST_F(CompileForRanksTest, PlansThatDoNotFitSayWhichStageFailed) {
  // The diagnostics of the failing pass go to the context's handlers.
  context->getDiagEngine().registerHandler([](Diagnostic &) {});
  OwningOpRef<ModuleOp> module = tinyGpt();
  EXPECT_EQ(compile(*module, 3, "dp=3"),
            "partitioning the training step failed");
  // A second plan on a program that has one.
  module = tinyGpt();
  ASSERT_EQ(compile(*module, 2, "dp=2"), "");
  EXPECT_EQ(compile(*module, 2, "dp=2"),
            "plan: the program already has a mesh and sharding annotations");
}

/// A program read from IR needs no zoo configuration: costPlanOf reads the
/// batch and the compute type from the module, as the planner does, and
/// gives the plan the configuration gives.
TEST_F(CompileForRanksTest, CostPlanOfReadsTheModule) {
  OwningOpRef<ModuleOp> module = tinyGpt();
  ::cleave::ModelConfig config = *::cleave::lookupPreset("tiny-gpt");
  PlanSpec plan = llvm::cantFail(parsePlan("dp=2,micro=2", 2));
  llvm::Expected<::cleave::cost::ParallelPlan> read = costPlanOf(plan, *module);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  ::cleave::cost::ParallelPlan preset = costPlanOf(plan, config);
  EXPECT_EQ(read->microBatchSize, preset.microBatchSize);
  EXPECT_EQ(read->numMicroBatches, 2);
  EXPECT_EQ(read->dtype, preset.dtype);
  EXPECT_EQ(::cleave::cost::describe(*read), ::cleave::cost::describe(preset));
}

/// The prediction of a program without a zoo configuration, priced from
/// its ops; a program with its own shardings has none.
TEST_F(CompileForRanksTest, PredictsAProgramWithoutItsConfiguration) {
  OwningOpRef<ModuleOp> module = tinyGpt();
  RankCompileOptions options;
  options.world = 2;
  options.plan = llvm::cantFail(parsePlan("dp=2", 2));
  llvm::Expected<StepPrediction> p = predictLocalStep(*module, options);
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  EXPECT_GT(p->stepSeconds, 0);
  EXPECT_NE(p->source.find("priced from the module's ops on local-cpu"),
            std::string::npos)
      << p->source;
  // The program is not changed: it compiles as before.
  ASSERT_EQ(compile(*module, 2, "dp=2"), "");
  options.plan.reset();
  llvm::Expected<StepPrediction> meshed = predictLocalStep(*module, options);
  ASSERT_FALSE(bool(meshed));
  EXPECT_EQ(llvm::toString(meshed.takeError()),
            "the program carries its own mesh and shardings; the cost model "
            "prices a named plan");
}

} // namespace

/// The named plan's ep reaches the cost model: its dp there counts the
/// expert-parallel ranks (the executor's dp x ep), which split the batch.
TEST(CostPlanOfTest, ExpertParallelismIsCarvedOutOfDp) {
  std::optional<::cleave::ModelConfig> m = ::cleave::lookupPreset("tiny-moe");
  ASSERT_TRUE(m);
  ::cleave::cost::ParallelPlan p =
      costPlanOf(llvm::cantFail(parsePlan("ep=2,dp=2", 4)), *m);
  EXPECT_EQ(p.ep, 2);
  EXPECT_EQ(p.dp, 4);
  EXPECT_EQ(p.numGpus(), 4);
  EXPECT_EQ(p.microBatchSize, m->batch / 4);
  EXPECT_EQ(::cleave::cost::validatePlan(
                p, *m, *::cleave::cost::lookupClusterPreset("dgx-h100", 1)),
            "");
  ::cleave::cost::ParallelPlan q =
      costPlanOf(llvm::cantFail(parsePlan("dp=4", 4)), *m);
  EXPECT_EQ(q.ep, 1);
  EXPECT_EQ(q.dp, 4);
}
