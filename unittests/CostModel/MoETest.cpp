//===- MoETest.cpp - Mixtures of experts and expert parallelism -----------===//

#include "TestUtil.h"

using namespace cleave;
using namespace cleave::cost;

namespace {

/// Mixtral 8x7B on `dp` x `tp` x `pp` H100s with expert parallelism `ep`.
ParallelPlan mixtralPlan(int tp, int pp, int dp, int ep) {
  ParallelPlan p = test::plan(tp, pp, dp);
  p.ep = ep;
  return p;
}

Workload workloadOf(const ModelConfig &m, const ClusterSpec &cl,
                    const ParallelPlan &p) {
  EXPECT_EQ(validatePlan(p, m, cl), "");
  return buildWorkload(m, cl, p, defaultConstants());
}

TEST(MoETest, PlanValidatesExpertParallelism) {
  ModelConfig mixtral = test::model("mixtral-8x7b");
  ClusterSpec cl = test::preset("dgx-h100", 8);
  EXPECT_EQ(validatePlan(mixtralPlan(1, 1, 16, 8), mixtral, cl), "");
  EXPECT_EQ(validatePlan(mixtralPlan(1, 1, 12, 3), mixtral, cl),
            "plan.ep: 3 does not divide the 8 experts");
  EXPECT_EQ(validatePlan(mixtralPlan(1, 1, 4, 8), mixtral, cl),
            "plan.ep: 8 does not divide dp = 4 (the expert-parallel ranks are "
            "data-parallel ranks)");
  EXPECT_EQ(validatePlan(mixtralPlan(1, 1, 4, 0), mixtral, cl),
            "plan.ep: must be at least 1, got 0");
  EXPECT_EQ(validatePlan(mixtralPlan(1, 1, 4, 2), test::model("llama3-8b"), cl),
            "plan.ep: expert parallelism (ep=2) needs a mixture of experts, "
            "and llama3-8b has no experts");
  EXPECT_EQ(describe(mixtralPlan(2, 1, 8, 4)).substr(0, 22),
            "tp=2 pp=1 dp=8 ep=4 cp");
  // No ep field in the line of a plan without it.
  EXPECT_EQ(describe(mixtralPlan(2, 1, 8, 1)).substr(0, 19),
            "tp=2 pp=1 dp=8 cp=1");
}

/// A MoE layer's convention FLOPs are the router, the top-k experts and
/// the shared experts: the dense MLP replaced by the active parameters.
TEST(MoETest, ModelFlopsCountTheActiveExperts) {
  ModelConfig m = test::model("tiny-moe"); // h 64, E 4, top-2, 1 shared, F 32
  ParallelPlan p = test::plan(1, 1, 1);
  double dense =
      conventionFlops(layerItems(m, p, false), Phase::Forward, false);
  double moe = conventionFlops(layerItems(m, p, true), Phase::Forward, false);
  double s = double(m.seqLen), h = 64, f = 32;
  double mlp = 2 * s * 3 * h * double(m.ffnHidden);
  double expected = 2 * s * (4 * h + (2 + 1) * 3 * h * f);
  EXPECT_DOUBLE_EQ(moe - dense, expected - mlp);
  // The capacity factor pads the expert GEMMs but not the model FLOPs.
  m.capacityFactor = 2.0;
  EXPECT_DOUBLE_EQ(
      conventionFlops(layerItems(m, p, true), Phase::Forward, false), moe);
}

TEST(MoETest, ExpertParallelismShardsExpertMemory) {
  ModelConfig m = test::model("mixtral-8x7b");
  ClusterSpec cl = test::preset("dgx-h100", 8);
  ParallelPlan p1 = mixtralPlan(1, 4, 16, 1), p8 = mixtralPlan(1, 4, 16, 8);
  Workload w1 = workloadOf(m, cl, p1), w8 = workloadOf(m, cl, p8);
  double experts = 8.0 * 3 * 4096 * 14336; // per layer, unsplit
  EXPECT_DOUBLE_EQ(w1.layerExpertParams, experts);
  EXPECT_DOUBLE_EQ(w8.layerExpertParams, experts / 8);
  EXPECT_DOUBLE_EQ(w1.layerParams - w8.layerParams, experts * 7 / 8);
  MemoryBreakdown m1 = memoryPerStage(m, cl, p1, w1, defaultConstants())[1];
  MemoryBreakdown m8 = memoryPerStage(m, cl, p8, w8, defaultConstants())[1];
  // Stage 1 holds 8 layers: bf16 weights, fp32 gradients, 12 B of Adam.
  double saved = 8 * experts * 7 / 8;
  EXPECT_DOUBLE_EQ(m1.parameters - m8.parameters, saved * 2);
  EXPECT_DOUBLE_EQ(m1.gradients - m8.gradients, saved * 4);
  EXPECT_DOUBLE_EQ(m1.optimizerStates - m8.optimizerStates, saved * 12);
  // ZeRO-1 shards the experts' optimizer state over dp / ep = 2 ranks only,
  // the dense state over all 16.
  p8.zeroStage = 1;
  MemoryBreakdown z = memoryPerStage(m, cl, p8, w8, defaultConstants())[1];
  double dense = 8 * (w8.layerParams - w8.layerExpertParams);
  EXPECT_NEAR(z.optimizerStates,
              12 * (dense / 16 + 8 * w8.layerExpertParams / 2), 1);
}

TEST(MoETest, AllToAllsOnlyUnderExpertParallelism) {
  ModelConfig m = test::model("mixtral-8x7b");
  ClusterSpec cl = test::preset("dgx-h100", 8);
  int all2all = 0;
  for (const WorkItem &it : layerItems(m, mixtralPlan(1, 1, 8, 8)))
    if (it.isComm && it.commAxis == Axis::EP) {
      EXPECT_EQ(it.commKind, CollectiveKind::AllToAll);
      // tokens x top-k x load (dropless under ep: the prior) x hidden x 2 B
      EXPECT_DOUBLE_EQ(it.commBytes, 4096.0 * 2 * 1.25 * 4096 * 2);
      ++all2all;
    }
  EXPECT_EQ(all2all, 4); // dispatch and combine, forward and backward
  Workload w1 = workloadOf(m, cl, mixtralPlan(1, 1, 8, 1));
  EXPECT_EQ(w1.layerForward.epComm, 0);
  EXPECT_GT(workloadOf(m, cl, mixtralPlan(1, 1, 8, 8)).layerForward.epComm, 0);
}

TEST(MoETest, AllToAllSlowerAcrossNodes) {
  ModelConfig m = test::model("mixtral-8x7b");
  ClusterSpec cl = test::preset("dgx-h100", 8);
  // ep = 8 over consecutive ranks: one node (NVLink); with tp = 2 before
  // it, the 8 expert-parallel ranks span two nodes (InfiniBand). The
  // payload is the same: the experts see the TP group's whole tokens.
  ParallelPlan inNode = mixtralPlan(1, 1, 8, 8),
               acrossNodes = mixtralPlan(2, 1, 8, 8);
  EXPECT_EQ(axisGroup(Axis::EP, inNode, cl).nodes, 1);
  EXPECT_EQ(axisGroup(Axis::EP, acrossNodes, cl).nodes, 2);
  double in = workloadOf(m, cl, inNode).layerForward.epComm;
  double across = workloadOf(m, cl, acrossNodes).layerForward.epComm;
  EXPECT_GT(across, 2 * in);
}

TEST(MoETest, CapacityFactorCostsComputeAndCommunication) {
  ModelConfig m = test::model("mixtral-8x7b");
  ClusterSpec cl = test::preset("dgx-h100", 2);
  ParallelPlan p = mixtralPlan(1, 4, 4, 4);
  p.numMicroBatches = 4;
  m.capacityFactor = 1.0;
  Workload w10 = workloadOf(m, cl, p);
  Result<Estimate> e10 = estimate(m, cl, p);
  m.capacityFactor = 1.25;
  Workload w125 = workloadOf(m, cl, p);
  Result<Estimate> e125 = estimate(m, cl, p);
  ASSERT_TRUE(e10 && e125);
  EXPECT_GT(w125.layerForward.compute, w10.layerForward.compute);
  EXPECT_GT(w125.layerForward.epComm, w10.layerForward.epComm);
  EXPECT_GT(e125->stepTime, e10->stepTime);
  // The model FLOPs do not change, so the MFU drops.
  EXPECT_DOUBLE_EQ(e125->modelFlops, e10->modelFlops);
  EXPECT_LT(e125->mfu, e10->mfu);
  // The exposed all-to-all time is reported on its own axis.
  EXPECT_GT(e125->breakdown.exposedComm[size_t(Axis::EP)], 0);
}

TEST(MoETest, LoadFactorFromCapacityOrTheDroplessPrior) {
  const CostConstants &c = defaultConstants();
  ModelConfig m = test::model("mixtral-8x7b"); // dropless, E 8, top-2
  EXPECT_EQ(expertLoadFactor(m, mixtralPlan(1, 1, 8, 1), c), 1.0);
  EXPECT_EQ(expertLoadFactor(m, mixtralPlan(1, 1, 8, 8), c), 1.25);
  m.capacityFactor = 1.5;
  EXPECT_EQ(expertLoadFactor(m, mixtralPlan(1, 1, 8, 1), c), 1.5);
  // Capacity is at most the sequence: E / k = 4 times the mean share.
  m.capacityFactor = 6;
  EXPECT_EQ(expertLoadFactor(m, mixtralPlan(1, 1, 8, 8), c), 4.0);
}

TEST(MoETest, ExpertGradientsReduceOverExpertDataParallelOnly) {
  ClusterSpec cl = test::preset("dgx-h100", 8);
  ParallelPlan p = mixtralPlan(1, 1, 64, 8);
  // dp / ep = 8 replicas of each expert, 8 ranks apart: one per node.
  GroupPlacement g = expertDpGroup(p, cl);
  EXPECT_EQ(g.size, 8);
  EXPECT_EQ(g.nodes, 8);
  EXPECT_EQ(g.ranksPerNode, 1);
  p.ep = 1;
  EXPECT_EQ(expertDpGroup(p, cl).size, 64);
}

} // namespace
