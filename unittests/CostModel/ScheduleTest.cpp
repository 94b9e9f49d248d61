//===- ScheduleTest.cpp - Pass orders and pipeline bubbles ----------------===//

#include "TestUtil.h"

#include "cleave/CostModel/Schedule.h"

#include <map>
#include <set>

using namespace cleave;
using namespace cleave::cost;

namespace {

std::string text(const std::vector<PassRef> &order) {
  std::string s;
  for (const PassRef &r : order) {
    s += r.kind == PassKind::Forward    ? "F"
         : r.kind == PassKind::Backward ? "B"
                                        : "W";
    s += std::to_string(r.microBatch);
    if (r.chunk)
      s += "." + std::to_string(r.chunk);
    s += " ";
  }
  return s;
}

TEST(ScheduleTest, OneFOneBOrder) {
  ParallelPlan p = test::plan(1, 4, 1, 8);
  std::vector<std::vector<PassRef>> o = pipelineOrders(p);
  EXPECT_EQ(text(o[0]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7 ");
  EXPECT_EQ(text(o[3]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 ");
  p.schedule = Schedule::GPipe;
  EXPECT_EQ(text(pipelineOrders(p)[1]),
            "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7 ");
}

TEST(ScheduleTest, InterleavedOrderFollowsMegatron) {
  ParallelPlan p = test::plan(1, 2, 1, 4);
  p.schedule = Schedule::Interleaved1F1B;
  p.virtualStages = 2;
  std::vector<std::vector<PassRef>> o = pipelineOrders(p);
  // Stage 0: (2-0-1)*2 + (2-1)*2 = 4 warm-up forwards.
  EXPECT_EQ(text(o[0]),
            "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3 ");
}

/// Every schedule runs every pass of every (micro-batch, chunk) once.
TEST(ScheduleTest, EveryPassRunsOnce) {
  for (Schedule s : {Schedule::GPipe, Schedule::OneFOneB,
                     Schedule::Interleaved1F1B, Schedule::ZeroBubbleH1}) {
    ParallelPlan p = test::plan(1, 4, 1, 12);
    p.schedule = s;
    p.virtualStages = s == Schedule::Interleaved1F1B ? 3 : 1;
    for (const std::vector<PassRef> &order : pipelineOrders(p)) {
      std::map<std::tuple<int, int, int>, int> seen;
      for (const PassRef &r : order)
        ++seen[{int(r.kind), r.microBatch, r.chunk}];
      int kinds = s == Schedule::ZeroBubbleH1 ? 3 : 2;
      EXPECT_EQ(seen.size(), size_t(kinds * 12 * p.virtualStages))
          << toString(s);
      for (const auto &[key, n] : seen)
        EXPECT_EQ(n, 1);
    }
  }
}

/// A pipeline whose passes take exactly 1 (forward) and 2 (backward) per
/// layer, with no communication and no optimizer cost.
struct Synthetic {
  ModelConfig model;
  ClusterSpec cluster = test::preset("dgx-h100", 64);
  CostConstants constants = test::exactConstants();
  Workload work;

  explicit Synthetic(int layers, double f = 1, double b = 2, double w = 0) {
    model = test::model("gpt2-small");
    model.layers = layers;
    work.layerForward.compute = f;
    work.layerBackward.compute = b;
    work.layerWeightGrad.compute = w;
  }
  SimulationResult run(const ParallelPlan &p) {
    Program prog = buildProgram(model, cluster, p, work, constants);
    Result<SimulationResult> r = simulate(prog, constants);
    EXPECT_TRUE(r) << r.error();
    return *r;
  }
};

/// 1F1B and GPipe: step = (m + p - 1)(tf + tb), bubble (p-1)/(m+p-1).
TEST(ScheduleTest, OneFOneBBubbleByHand) {
  for (Schedule s : {Schedule::OneFOneB, Schedule::GPipe}) {
    for (int p : {2, 4, 8}) {
      for (int m : {1, 4, 16}) {
        Synthetic syn(p);
        ParallelPlan plan = test::plan(1, p, 1, m);
        plan.schedule = s;
        SimulationResult r = syn.run(plan);
        EXPECT_NEAR(r.stepTime, (m + p - 1) * 3.0, 1e-9)
            << toString(s) << " p " << p << " m " << m;
        const TimeBreakdown &b = r.breakdown[size_t(r.criticalRank)];
        EXPECT_NEAR(b.bubble / r.stepTime, double(p - 1) / (m + p - 1), 1e-9);
        EXPECT_NEAR(b.total(), r.stepTime, 1e-9);
      }
    }
  }
}

/// Interleaving v chunks: bubble (p-1)/(v m) of the ideal time.
TEST(ScheduleTest, InterleavedBubbleByHand) {
  for (int p : {2, 4}) {
    for (int v : {2, 3}) {
      int m = 2 * p;
      Synthetic syn(p * v); // one layer per chunk
      ParallelPlan plan = test::plan(1, p, 1, m);
      plan.schedule = Schedule::Interleaved1F1B;
      plan.virtualStages = v;
      SimulationResult r = syn.run(plan);
      double ideal = m * v * 3.0;
      EXPECT_NEAR((r.stepTime - ideal) / ideal, double(p - 1) / (v * m), 1e-9)
          << "p " << p << " v " << v;
    }
  }
}

TEST(ScheduleTest, MoreMicroBatchesNeverMoreBubble) {
  for (Schedule s : {Schedule::GPipe, Schedule::OneFOneB,
                     Schedule::Interleaved1F1B, Schedule::ZeroBubbleH1}) {
    double previous = 1;
    for (int m : {4, 8, 12, 16, 32}) {
      Synthetic syn(8, 1, s == Schedule::ZeroBubbleH1 ? 1 : 2,
                    s == Schedule::ZeroBubbleH1 ? 1 : 0);
      ParallelPlan plan = test::plan(1, 4, 1, m);
      plan.schedule = s;
      plan.virtualStages = s == Schedule::Interleaved1F1B ? 2 : 1;
      SimulationResult r = syn.run(plan);
      double fraction = r.breakdown[size_t(r.criticalRank)].bubble / r.stepTime;
      EXPECT_LE(fraction, previous + 1e-12) << toString(s) << " m " << m;
      previous = fraction;
    }
  }
}

/// ZB-H1 fills the bubble with weight-gradient passes: (p-1)(F+B-W) idle
/// time instead of 1F1B's (p-1)(F+B+W), at 1F1B's peak of live activations
/// (p micro-batches, which 1F1B keeps on its first stage).
TEST(ScheduleTest, ZeroBubbleBeats1F1B) {
  for (int m : {4, 8, 16}) {
    ParallelPlan plan = test::plan(1, 4, 1, m);
    Synthetic split(4, 1, 1, 1), whole(4, 1, 2, 0);
    plan.schedule = Schedule::OneFOneB;
    double oneF = whole.run(plan).stepTime;
    plan.schedule = Schedule::ZeroBubbleH1;
    double zb = split.run(plan).stepTime;
    EXPECT_NEAR(oneF, (m + 3) * 3.0, 1e-9);
    EXPECT_NEAR(zb, m * 3.0 + 3 * (1 + 1 - 1), 1e-9) << "m " << m;
    std::vector<std::vector<PassRef>> o = pipelineOrders(plan);
    for (int stage = 0; stage < 4; ++stage)
      EXPECT_LE(peakLive(o[stage], true, {1.0}), 4.0);
  }
}

} // namespace
