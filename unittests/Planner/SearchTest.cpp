//===- SearchTest.cpp - The plan search against exhaustive enumeration ----===//

#include "../../lib/Planner/Space.h"
#include "cleave/Planner/Explain.h"
#include "cleave/Planner/StagePartition.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <random>

using namespace cleave;
using namespace cleave::planner;

namespace {

/// The model preset `name` into `out`; an unknown name fails the test
/// (call under ASSERT_NO_FATAL_FAILURE).
void loadModel(const std::string &name, ModelConfig &out) {
  std::optional<ModelConfig> m = lookupPreset(name);
  ASSERT_TRUE(m) << "no model preset " << name;
  out = *m;
}

/// The cluster preset `name` with `nodes` nodes into `out`.
void loadCluster(const std::string &name, int nodes, cost::ClusterSpec &out) {
  cost::Result<cost::ClusterSpec> c = cost::lookupClusterPreset(name, nodes);
  ASSERT_TRUE(c) << c.error();
  out = *c;
}

/// A small search space so that simulating every candidate stays quick.
PlannerOptions smallOptions(int64_t globalBatch) {
  PlannerOptions o;
  o.globalBatch = globalBatch;
  o.space.maxMicroBatchSize = 4;
  o.space.maxVirtualStages = 2;
  o.space.maxContextParallel = 2;
  o.topK = 4;
  return o;
}

struct Instance {
  const char *model, *cluster;
  int gpus;
  int64_t globalBatch;
  std::function<void(PlannerOptions &)> tweak;
};

std::vector<Instance> instances() {
  return {
      {"gpt2-small", "dgx-a100-80gb", 8, 16, nullptr},
      {"megatron-1.7b", "dgx-a100-80gb", 8, 32,
       [](PlannerOptions &o) { o.memoryHeadroom = 0.6; }},
      {"llama3-8b", "dgx-h100", 8, 16, nullptr},
      {"megatron-7.5b", "dgx-a100-40gb", 8, 8,
       [](PlannerOptions &o) { o.maxPp = 4; }},
      {"gpt2-medium", "dgx-a100-80gb", 4, 8,
       [](PlannerOptions &o) {
         o.gpus = 4;
         o.fixedTp = 2;
       }},
      // Expert parallelism (ep 1, 2, 4 on dp up to 8) with every ZeRO stage.
      {"tiny-moe", "dgx-h100", 8, 16, nullptr},
  };
}

std::vector<std::string> ranking(const SearchResult &r) {
  std::vector<std::string> out;
  if (r.best)
    out.push_back(cost::describe(r.best->plan));
  for (const Candidate &c : r.runnersUp)
    out.push_back(cost::describe(c.plan));
  return out;
}

/// On small instances the branch and bound keeps exactly the plans
/// simulating every candidate keeps, in the same order, and visits fewer.
TEST(SearchTest, BranchAndBoundEqualsExhaustiveEnumeration) {
  for (const Instance &in : instances()) {
    SCOPED_TRACE(in.model);
    ModelConfig m;
    ASSERT_NO_FATAL_FAILURE(loadModel(in.model, m));
    cost::ClusterSpec c;
    ASSERT_NO_FATAL_FAILURE(loadCluster(in.cluster, 1, c));
    PlannerOptions o = smallOptions(in.globalBatch);
    if (in.tweak)
      in.tweak(o);
    cost::Result<SearchResult> fast = searchPlans(m, c, o);
    cost::Result<SearchResult> all = searchExhaustive(m, c, o);
    ASSERT_TRUE(fast) << fast.error();
    ASSERT_TRUE(all) << all.error();
    ASSERT_TRUE(fast->best);
    ASSERT_TRUE(all->best);
    EXPECT_EQ(ranking(*fast), ranking(*all));
    EXPECT_EQ(fast->best->stepTime, all->best->stepTime);
    EXPECT_TRUE(fast->best->fits);
    EXPECT_LE(fast->best->peakMemory, all->memoryLimit);
    EXPECT_LT(fast->stats.simulated, all->stats.simulated);
    EXPECT_EQ(fast->stats.candidates, all->stats.candidates);
  }
}

/// The bound that orders and prunes the search never exceeds the simulated
/// step time, for every candidate of several spaces (pipelines, ZeRO-3,
/// interleaving, zero bubble, per-stage recomputation, balanced stages).
TEST(SearchTest, LowerBoundNeverExceedsTheSimulation) {
  for (const Instance &in : instances()) {
    SCOPED_TRACE(in.model);
    ModelConfig m;
    ASSERT_NO_FATAL_FAILURE(loadModel(in.model, m));
    cost::ClusterSpec c;
    ASSERT_NO_FATAL_FAILURE(loadCluster(in.cluster, 1, c));
    PlannerOptions o = smallOptions(in.globalBatch);
    if (in.tweak)
      in.tweak(o);
    detail::Space space(m, c, o);
    space.enumerate();
    int checked = 0;
    for (size_t i = 0; i < space.candidates.size(); i += 3) {
      detail::Candidate cand = space.candidates[i];
      double coarse = cand.bound;
      if (!cand.exact)
        space.refine(cand);
      if (cand.dropped)
        continue;
      cost::Result<Candidate> e = space.evaluate(cand);
      ASSERT_TRUE(e) << e.error();
      EXPECT_LE(cand.bound, e->stepTime * (1 + 1e-9))
          << cost::describe(e->plan);
      EXPECT_LE(coarse, cand.bound * (1 + 1e-9)) << cost::describe(e->plan);
      ++checked;
    }
    EXPECT_GT(checked, 50);
  }
}

/// The dynamic program finds the optimal bottleneck (checked against every
/// composition) and, among optimal splits, the one with the most layers in
/// the latest chunks.
TEST(SearchTest, BalancedPartitionIsOptimal) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.5, 2.0), extra(0.0, 4.0);
  for (int trial = 0; trial < 200; ++trial) {
    int layers = 1 + int(rng() % 9), chunks = 1 + int(rng() % layers);
    std::vector<double> c;
    c.resize(size_t(layers));
    for (double &x : c)
      x = trial % 2 ? 1.0 : cost(rng);
    double first = extra(rng), last = extra(rng);
    std::vector<int> got = balancedPartition(c, first, last, chunks);
    ASSERT_EQ(int(got.size()), chunks);
    // Every composition of `layers` into `chunks` positive parts.
    double best = 1e300;
    std::vector<int> bestLate;
    std::vector<int> parts(size_t(chunks), 1);
    std::function<void(int, int)> rec = [&](int k, int left) {
      if (k == chunks - 1) {
        parts[size_t(k)] = left;
        double b = bottleneck(c, first, last, parts);
        // Later chunks larger: compare reversed lexicographically.
        bool later = bestLate.empty() || std::lexicographical_compare(
                                             bestLate.rbegin(), bestLate.rend(),
                                             parts.rbegin(), parts.rend());
        if (b < best - 1e-12 || (b < best + 1e-12 && later)) {
          best = std::min(best, b);
          bestLate = parts;
        }
        return;
      }
      for (int n = 1; n <= left - (chunks - 1 - k); ++n) {
        parts[size_t(k)] = n;
        rec(k + 1, left - n);
      }
    };
    rec(0, layers);
    EXPECT_NEAR(bottleneck(c, first, last, got), best, 1e-9);
    if (trial % 2)
      EXPECT_EQ(got, bestLate);
  }
  EXPECT_TRUE(balancedPartition({1, 1}, 0, 0, 3).empty());
  // The output layer weighs three layers: the last of four chunks gets
  // fewer layers than the even split gives it.
  EXPECT_EQ(balancedPartition(std::vector<double>(24, 1.0), 0.2, 3.0, 4),
            (std::vector<int>{6, 7, 7, 4}));
}

TEST(SearchTest, SaysByHowMuchNothingFits) {
  ModelConfig m;
  ASSERT_NO_FATAL_FAILURE(loadModel("gpt3-175b", m));
  cost::ClusterSpec c;
  ASSERT_NO_FATAL_FAILURE(loadCluster("dgx-a100-80gb", 1, c));
  PlannerOptions o = smallOptions(8);
  o.maxPp = 2;
  cost::Result<SearchResult> r = searchPlans(m, c, o);
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->best);
  ASSERT_GE(r->infeasible.size(), 2u);
  EXPECT_EQ(
      r->infeasible[0].rfind("memory: the plan needing the least memory", 0),
      0u)
      << r->infeasible[0];
  EXPECT_NE(
      r->infeasible[0].find("over the 85.1 GB usable of 85.1 GB (0% headroom)"),
      std::string::npos);
  EXPECT_EQ(r->infeasible[1],
            "constraints in effect: pp at most 2 (relaxing them may help)");
  // Every plan was checked, so the least memory is the true minimum.
  cost::Result<SearchResult> all = searchExhaustive(m, c, o);
  ASSERT_TRUE(all) << all.error();
  ASSERT_TRUE(all->leastMemory);
  ASSERT_TRUE(r->leastMemory);
  EXPECT_EQ(r->leastMemory->memory.total(), all->leastMemory->memory.total());
  std::string text = formatSearch(*r, m, c, o);
  EXPECT_NE(text.find("no plan fits"), std::string::npos);
}

TEST(SearchTest, SaysWhichMeshConstraintFails) {
  ModelConfig m;
  ASSERT_NO_FATAL_FAILURE(loadModel("llama3-8b", m)); // 32 heads
  cost::ClusterSpec c;
  ASSERT_NO_FATAL_FAILURE(loadCluster("dgx-h100", 1, c));
  PlannerOptions o = smallOptions(7);
  cost::Result<SearchResult> r = searchPlans(m, c, o);
  ASSERT_TRUE(r) << r.error();
  // Only dp = 1 divides 7: meshes with dp > 1 are rejected, the rest run.
  ASSERT_TRUE(r->best);
  EXPECT_EQ(r->best->plan.dp, 1);
  o.fixedTp = 6;
  o.gpus = 6;
  r = searchPlans(m, c, o);
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->best);
  ASSERT_GE(r->infeasible.size(), 2u);
  EXPECT_EQ(r->infeasible[0], "mesh: no factorization of the 6 GPUs into pp x "
                              "dp x cp x tp can run llama3-8b with a global "
                              "batch of 7");
  EXPECT_EQ(r->infeasible[1],
            "  plan.tp: 6 does not divide the 32 attention heads (1 mesh)");
}

TEST(SearchTest, BadOptionsNameTheOption) {
  ModelConfig m;
  ASSERT_NO_FATAL_FAILURE(loadModel("llama3-8b", m));
  cost::ClusterSpec c;
  ASSERT_NO_FATAL_FAILURE(loadCluster("dgx-h100", 1, c));
  auto error = [&](std::function<void(PlannerOptions &)> f) {
    PlannerOptions o = smallOptions(8);
    f(o);
    cost::Result<SearchResult> r = searchPlans(m, c, o);
    EXPECT_FALSE(r);
    return r ? std::string() : r.error();
  };
  EXPECT_EQ(error([](auto &o) { o.globalBatch = 0; }),
            "options.global_batch: must be at least 1, got 0");
  EXPECT_EQ(error([](auto &o) { o.gpus = 16; }),
            "options.gpus: 16 is not between 1 and the 8 GPUs of the cluster");
  EXPECT_EQ(error([](auto &o) { o.fixedTp = 3; }),
            "options.tp: 3 does not divide the 8 GPUs");
  EXPECT_EQ(error([](auto &o) { o.memoryHeadroom = 1; }),
            "options.memory_headroom: must be in [0, 1), got 1.000000");
  ModelConfig mlp;
  ASSERT_NO_FATAL_FAILURE(loadModel("tiny-mlp", mlp));
  PlannerOptions o = smallOptions(8);
  cost::Result<SearchResult> r = searchPlans(mlp, c, o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(),
            "model: the plan search covers transformer models (gpt, llama), "
            "not mlp");
}

/// The report explains each loser; JSON carries the same numbers.
TEST(SearchTest, ReportExplainsEveryRankedPlan) {
  ModelConfig m;
  ASSERT_NO_FATAL_FAILURE(loadModel("megatron-1.7b", m));
  cost::ClusterSpec c;
  ASSERT_NO_FATAL_FAILURE(loadCluster("dgx-a100-80gb", 1, c));
  PlannerOptions o = smallOptions(32);
  o.memoryHeadroom = 0.8; // 16 GB: the fastest plans do not fit
  int calls = 0;
  o.progress = [&](const SearchProgress &p) {
    ++calls;
    EXPECT_LE(p.visited, p.candidates);
  };
  cost::Result<SearchResult> r = searchPlans(m, c, o);
  ASSERT_TRUE(r) << r.error();
  ASSERT_TRUE(r->best);
  EXPECT_GE(calls, 1);
  ASSERT_EQ(r->runnersUp.size(), 3u);
  for (const Candidate &loser : r->runnersUp) {
    EXPECT_GE(loser.stepTime, r->best->stepTime);
    EXPECT_EQ(loser.lostBecause.rfind("+", 0), 0u) << loser.lostBecause;
  }
  ASSERT_FALSE(r->overMemory.empty());
  for (const Candidate &loser : r->overMemory) {
    EXPECT_LT(loser.stepTime, r->best->stepTime);
    EXPECT_FALSE(loser.fits);
    EXPECT_EQ(loser.lostBecause.rfind("memory limit: needs", 0), 0u)
        << loser.lostBecause;
  }
  EXPECT_LE(r->best->peakMemory, 16e9);
  std::string text = formatSearch(*r, m, c, o);
  EXPECT_NE(text.find("chosen plan"), std::string::npos);
  EXPECT_NE(text.find(r->runnersUp[0].lostBecause), std::string::npos);
  nlohmann::json j = searchToJson(*r, m, c, o);
  EXPECT_EQ(j["chosen"]["step_time_s"].get<double>(), r->best->stepTime);
  EXPECT_EQ(j["runners_up"].size(), 3u);
  EXPECT_EQ(j["over_memory"].size(), r->overMemory.size());
  EXPECT_EQ(j["chosen"]["fits"].get<bool>(), true);
}

/// A search space for Mixtral small enough for a unit test.
PlannerOptions mixtralOptions(int64_t globalBatch) {
  PlannerOptions o;
  o.globalBatch = globalBatch;
  o.space.maxMicroBatchSize = 1;
  o.space.maxContextParallel = 1;
  o.space.schedules = {cost::Schedule::OneFOneB};
  o.space.recomputes = {cost::Recompute::None, cost::Recompute::Full};
  o.space.recomputePerStage = false;
  o.space.balancedStages = false;
  o.space.sequenceParallel = false;
  o.maxPp = 4;
  o.topK = 3;
  return o;
}

/// Mixtral 8x7B on 64 H100s with at most 4 pipeline stages: the search
/// tries ep jointly with the mesh and picks expert parallelism, and the
/// report says what the best plan without it costs. (With deeper pipelines
/// the full search keeps ep = 1: cleave-plan-moe.mlir.)
TEST(SearchTest, ExpertParallelismForMixtralOn64Gpus) {
  ModelConfig m;
  ASSERT_NO_FATAL_FAILURE(loadModel("mixtral-8x7b", m));
  cost::ClusterSpec c;
  ASSERT_NO_FATAL_FAILURE(loadCluster("dgx-h100", 8, c));
  cost::Result<SearchResult> r = searchPlans(m, c, mixtralOptions(256));
  ASSERT_TRUE(r) << r.error();
  ASSERT_TRUE(r->best);
  EXPECT_GT(r->best->plan.ep, 1) << cost::describe(r->best->plan);
  ASSERT_TRUE(r->expertAlternative);
  EXPECT_EQ(r->expertAlternative->plan.ep, 1);
  EXPECT_GE(r->expertAlternative->stepTime, r->best->stepTime);
  EXPECT_EQ(r->expertParallel.rfind(
                "ep=" + std::to_string(r->best->plan.ep) + " (experts ", 0),
            0u)
      << r->expertParallel;
  EXPECT_NE(r->expertParallel.find("the best plan without expert parallelism"),
            std::string::npos)
      << r->expertParallel;
  // Without ep every rank reduces the gradients of all 8 experts over all
  // its data-parallel replicas; with it, of its own experts over dp / ep.
  EXPECT_NE(r->expertParallel.find("mostly exposed DP communication"),
            std::string::npos)
      << r->expertParallel;
  std::string text = formatSearch(*r, m, c, mixtralOptions(256));
  EXPECT_NE(text.find("expert parallelism: " + r->expertParallel),
            std::string::npos);
  nlohmann::json j = searchToJson(*r, m, c, mixtralOptions(256));
  EXPECT_EQ(j["chosen"]["ep"].get<int>(), r->best->plan.ep);
  EXPECT_EQ(j["expert_alternative"]["ep"].get<int>(), 1);
}

/// Dense models are searched without ep and get no ep explanation.
TEST(SearchTest, DenseModelsHaveNoExpertParallelism) {
  ModelConfig m;
  ASSERT_NO_FATAL_FAILURE(loadModel("gpt2-small", m));
  cost::ClusterSpec c;
  ASSERT_NO_FATAL_FAILURE(loadCluster("dgx-a100-80gb", 1, c));
  cost::Result<SearchResult> r = searchPlans(m, c, smallOptions(16));
  ASSERT_TRUE(r && r->best);
  EXPECT_EQ(r->best->plan.ep, 1);
  EXPECT_TRUE(r->expertParallel.empty());
  EXPECT_FALSE(r->expertAlternative);
}

/// cleave-run runs ep with micro-batches ([dp, mb, ep], docs/moe.md): the
/// space pairs ep > 1 with more than one micro-batch.
TEST(SearchTest, ExpertParallelismWithMicroBatches) {
  ModelConfig m;
  ASSERT_NO_FATAL_FAILURE(loadModel("tiny-moe", m));
  cost::ClusterSpec c;
  ASSERT_NO_FATAL_FAILURE(loadCluster("dgx-a100-80gb", 1, c));
  PlannerOptions o = smallOptions(4);
  o.gpus = 4;
  o.space.maxMicroBatchSize = 1;
  o.topK = 1000;
  cost::Result<SearchResult> r = searchExhaustive(m, c, o);
  ASSERT_TRUE(r && r->best);
  int withMicro = 0;
  for (const Candidate &k : r->runnersUp)
    withMicro += k.plan.ep > 1 && k.plan.numMicroBatches > 1;
  EXPECT_GT(withMicro, 0);
}

} // namespace

/// The cost model prices the gradient bucket size (cleave-run --bucket-mb
/// reaches it through AutoShardOptions::dpBucketBytes): buckets of a
/// thousand parameters pay one collective latency each and predict a
/// slower step than the default buckets, on the same data-parallel plan.
TEST(SearchTest, SmallGradientBucketsCostLatency) {
  ModelConfig m;
  ASSERT_NO_FATAL_FAILURE(loadModel("gpt2-small", m));
  cost::ClusterSpec c;
  ASSERT_NO_FATAL_FAILURE(loadCluster("dgx-a100-80gb", 1, c));
  auto bestTime = [&](double bucketParams) {
    PlannerOptions o = smallOptions(16);
    o.fixedTp = 1;
    o.maxPp = 1;
    o.space.zeroStages = {0};
    cost::CostConstants k = cost::defaultConstants();
    k.dpBucketParams = bucketParams;
    o.constants = &k;
    cost::Result<SearchResult> r = searchPlans(m, c, o);
    EXPECT_TRUE(r && r->best) << (r ? "no plan" : r.error());
    return r && r->best ? r->best->stepTime : 0.0;
  };
  double small = bestTime(1e3), large = bestTime(40e6);
  EXPECT_GT(large, 0.0);
  EXPECT_GT(small, large * 1.01) << small << " vs " << large;
}
