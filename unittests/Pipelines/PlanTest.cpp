//===- PlanTest.cpp - Plans as the tools name them ------------------------===//

#include "cleave/Pipelines/Plan.h"
#include <gtest/gtest.h>

using namespace mlir::cleave;

namespace {

PlanSpec parsed(llvm::StringRef text, int world) {
  llvm::Expected<PlanSpec> plan = parsePlan(text, world, "--plan");
  if (!plan) {
    ADD_FAILURE() << text.str() << ": " << llvm::toString(plan.takeError());
    return {};
  }
  return *plan;
}

/// The message of the error parsing `text` (empty if it parses).
std::string error(llvm::StringRef text, int world = 4) {
  llvm::Expected<PlanSpec> plan = parsePlan(text, world, "--plan");
  if (plan)
    return "";
  return llvm::toString(plan.takeError());
}

TEST(PlanTest, NamedPlans) {
  PlanSpec p = parsed("dp=2,tp=2,sp,zero=1", 4);
  EXPECT_FALSE(p.automatic);
  EXPECT_EQ(p.named.dp, 2);
  EXPECT_EQ(p.named.tp, 2);
  EXPECT_TRUE(p.named.sp);
  EXPECT_EQ(p.named.zero, 1);
  EXPECT_FALSE(p.pipelines());
  EXPECT_EQ(p.stages(), 1);

  // Spaces around the parts are allowed.
  p = parsed(" tp=2 , zero=3 ", 8);
  EXPECT_EQ(p.named.tp, 2);
  EXPECT_EQ(p.named.zero, 3);
}

TEST(PlanTest, DataParallelTakesTheRanksLeftOver) {
  EXPECT_EQ(parsed("tp=2", 8).named.dp, 4);
  EXPECT_EQ(parsed("pp=2,tp=2", 8).named.dp, 2);
  // Unknown world, or one tp and pp do not divide: dp stays 1 (the mesh
  // check against the ranks reports it).
  EXPECT_EQ(parsed("tp=2", 0).named.dp, 1);
  EXPECT_EQ(parsed("tp=3", 4).named.dp, 1);
  // Given, it wins.
  EXPECT_EQ(parsed("dp=2,tp=2", 8).named.dp, 2);
}

TEST(PlanTest, ExpertParallelPlans) {
  PlanSpec p = parsed("ep=2", 2);
  EXPECT_EQ(p.named.ep, 2);
  EXPECT_EQ(p.named.dp, 1);
  // The batch splits over dp and ep: dp takes the ranks ep, tp and pp leave.
  EXPECT_EQ(parsed("ep=2", 8).named.dp, 4);
  EXPECT_EQ(parsed("ep=2,tp=2", 8).named.dp, 2);
  EXPECT_EQ(parsed("ep=2,pp=2", 4).named.dp, 1);
  EXPECT_EQ(parsed("ep=3", 8).named.dp, 1);
  PlanSpec q = parsed("ep=2,dp=2,tp=2", 8);
  EXPECT_EQ(q.named.ep, 2);
  EXPECT_EQ(q.named.dp, 2);
  EXPECT_EQ(q.named.tp, 2);
}

TEST(PlanTest, PipelinedPlans) {
  PlanSpec p = parsed("pp=2,dp=2,micro=4,schedule=1f1b", 4);
  EXPECT_TRUE(p.pipelines());
  EXPECT_EQ(p.named.pp, 2);
  EXPECT_EQ(p.named.micro, 4);
  EXPECT_EQ(p.named.schedule, "1f1b");
  EXPECT_EQ(p.stages(), 2);

  // Virtual stages imply the interleaved schedule.
  p = parsed("pp=2,micro=4,virtual=2", 2);
  EXPECT_EQ(p.named.schedule, "interleaved");
  EXPECT_EQ(p.stages(), 4);

  // Micro-batches alone: gradient accumulation, run as a pipeline.
  EXPECT_TRUE(parsed("micro=4", 1).pipelines());
  EXPECT_EQ(parsed("micro=4", 1).stages(), 1);
  EXPECT_EQ(parsed("pp=2,schedule=zb-h1", 2).named.schedule, "zb-h1");
}

TEST(PlanTest, LayerSplit) {
  PlanSpec p = parsed("pp=2,layers=1/3", 2);
  EXPECT_EQ(p.layersPerStage, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(parsed("pp=2,virtual=2,micro=2,layers=0/2/2/0", 2).layersPerStage,
            (std::vector<int64_t>{0, 2, 2, 0}));
  EXPECT_TRUE(parsed("pp=2", 2).layersPerStage.empty());
  EXPECT_EQ(error("pp=2,layers=1/2/1"),
            "--plan: layers= gives 3 stages but the plan has 2 (pp x virtual)");
  EXPECT_EQ(error("pp=2,layers=1/x"),
            "--plan: cannot read 'layers=1/x' (expected layers=N/N/..., one "
            "count per stage)");
  EXPECT_EQ(error("pp=2,layers=1/-1"),
            "--plan: cannot read 'layers=1/-1' (expected layers=N/N/..., one "
            "count per stage)");
}

TEST(PlanTest, RecomputationPerPipelineRank) {
  EXPECT_EQ(parsed("pp=2,micro=2,recompute=full/none", 2).named.recompute,
            "full/none");
  std::string expected = std::string("(expected ") + kPlanSyntax + ")";
  EXPECT_EQ(error("pp=2,recompute=full/some"),
            "--plan: cannot read 'recompute=full/some' " + expected);
}

TEST(PlanTest, Recomputation) {
  EXPECT_EQ(parsed("dp=2", 2).named.recompute, "none");
  EXPECT_EQ(parsed("recompute=full", 1).named.recompute, "full");
  PlanSpec p = parsed("pp=2,micro=2,recompute=selective", 2);
  EXPECT_EQ(p.named.recompute, "selective");
  EXPECT_TRUE(p.pipelines());
  std::string expected = std::string("(expected ") + kPlanSyntax + ")";
  EXPECT_EQ(error("recompute=some"),
            "--plan: cannot read 'recompute=some' " + expected);
  EXPECT_EQ(error("recompute="),
            "--plan: cannot read 'recompute=' " + expected);
}

TEST(PlanTest, PlannerPlans) {
  PlanSpec p = parsed("auto", 4);
  EXPECT_TRUE(p.automatic);
  EXPECT_EQ(p.fixedTp, 0);
  EXPECT_EQ(p.fixedZero, -1);
  EXPECT_FALSE(p.pipelines());
  p = parsed("auto,tp=2,zero=1", 4);
  EXPECT_EQ(p.fixedTp, 2);
  EXPECT_EQ(p.fixedZero, 1);
}

TEST(PlanTest, EachInvalidFormSaysWhatIsWrong) {
  std::string expected = std::string("(expected ") + kPlanSyntax + ")";
  EXPECT_EQ(error("dp=2,fsdp"), "--plan: cannot read 'fsdp' " + expected);
  EXPECT_EQ(error("dp=two"), "--plan: cannot read 'dp=two' " + expected);
  EXPECT_EQ(error("tp="), "--plan: cannot read 'tp=' " + expected);
  EXPECT_EQ(error("sp=1"), "--plan: cannot read 'sp=1' " + expected);
  EXPECT_EQ(error("schedule="), "--plan: cannot read 'schedule=' " + expected);
  EXPECT_EQ(error("dp=2,dp=4"), "--plan: 'dp' is given twice");
  EXPECT_EQ(error("dp=2,,tp=2"), "--plan: 'dp=2,,tp=2' has an empty part");
  EXPECT_EQ(error(""), std::string("--plan: the plan is empty (expected ") +
                           kPlanSyntax + ", or auto)");
  EXPECT_EQ(error("auto,cp=2"), "--plan auto: cannot read 'cp=2' (expected "
                                "tp=N, pp=P or zero=K)");
  EXPECT_EQ(error("auto,tp=-1"), "--plan auto: cannot read 'tp=-1' (expected "
                                 "tp=N, pp=P or zero=K)");
  EXPECT_EQ(error("dp=2,auto"), "--plan: 'auto' comes first and alone, with "
                                "at most tp=N, pp=P and zero=K after it");
}

} // namespace
