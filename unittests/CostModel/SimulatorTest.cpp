//===- SimulatorTest.cpp - Event replay, symmetry and timelines -----------===//

#include "TestUtil.h"

#include <nlohmann/json.hpp>

#include <sstream>

using namespace cleave;
using namespace cleave::cost;

namespace {

Task compute(double seconds) {
  Task t;
  t.duration = seconds;
  return t;
}

Task comm(Stream stream, double seconds, uint8_t links, int32_t group = -1) {
  Task t;
  t.kind = TaskKind::Collective;
  t.category = TaskCategory::Communication;
  t.axis = Axis::DP;
  t.stream = stream;
  t.duration = seconds;
  t.links = links;
  t.group = group;
  return t;
}

SimulationResult run(const Program &p, const CostConstants &c) {
  SimulationOptions o;
  o.keepTimings = true;
  Result<SimulationResult> r = simulate(p, c, o);
  EXPECT_TRUE(r) << r.error();
  return *r;
}

/// Two transfers on the same NIC direction share it: both take twice as
/// long; on different directions they do not interfere.
TEST(SimulatorTest, SharedLinksSplitTheirBandwidth) {
  CostConstants c = test::exactConstants();
  Program p;
  p.ranks.resize(1);
  p.add(0, comm(kDpGatherStream, 1, kNicOut), {});
  p.add(0, comm(kPpStream, 1, kNicOut), {});
  SimulationResult r = run(p, c);
  EXPECT_NEAR(r.timings[0][0].end, 2, 1e-12);
  EXPECT_NEAR(r.timings[0][1].end, 2, 1e-12);
  Program q;
  q.ranks.resize(1);
  q.add(0, comm(kDpGatherStream, 1, kNicOut), {});
  q.add(0, comm(kPpStream, 1, kNicIn), {});
  EXPECT_NEAR(run(q, c).stepTime, 1, 1e-12);
}

/// A shorter transfer on a shared link finishes, then the other speeds up:
/// 1 s and 3 s alone -> the first ends at 2 s, the second at 4 s.
TEST(SimulatorTest, ProcessorSharingRerates) {
  CostConstants c = test::exactConstants();
  Program p;
  p.ranks.resize(1);
  p.add(0, comm(kDpGatherStream, 1, kNicOut | kNicIn), {});
  p.add(0, comm(kDpReduceStream, 3, kNicOut), {});
  SimulationResult r = run(p, c);
  EXPECT_NEAR(r.timings[0][0].end, 2, 1e-12);
  EXPECT_NEAR(r.timings[0][1].end, 4, 1e-12);
}

/// Compute slows while a collective runs on its GPU.
TEST(SimulatorTest, OverlapSlowsCompute) {
  CostConstants c = test::exactConstants();
  c.overlapSlowdown = 0.5;
  Program p;
  p.ranks.resize(1);
  p.add(0, compute(1), {});
  p.add(0, comm(kDpGatherStream, 1, 0), {});
  SimulationResult r = run(p, c);
  // 1 s at rate 2/3, then the remaining 1/3 at full speed.
  EXPECT_NEAR(r.timings[0][0].end, 1 + 1.0 / 3, 1e-12);
  EXPECT_NEAR(r.timings[0][1].end, 1, 1e-12);
}

/// On a shared host (4 ranks per node computing as fast as 1 alone),
/// durations are priced with every rank computing: a stage computes faster
/// while the other is idle or communicating.
TEST(SimulatorTest, SharedHostRunsFewerRanksFaster) {
  CostConstants c = test::exactConstants();
  Program p;
  p.hostCapacity = 1;
  p.hostRanksPerNode = 4;
  p.ranks.resize(2);
  p.ranks[0].multiplicity = p.ranks[1].multiplicity = 2;
  p.add(0, compute(4), {});
  p.add(1, compute(2), {});
  SimulationResult r = run(p, c);
  // Both stages compute until 2 s; then rank 0's last 2 s run twice as fast.
  EXPECT_NEAR(r.timings[1][0].end, 2, 1e-12);
  EXPECT_NEAR(r.timings[0][0].end, 3, 1e-12);

  // A compute task's blocking communication (here TP) does not load the
  // host: while rank 0 communicates, rank 1 computes twice as fast.
  Program q = p;
  q.ranks[0].tasks.clear();
  q.ranks[1].tasks.clear();
  Task withTp = compute(3);
  withTp.tp = 1;
  q.add(0, withTp, {});
  q.add(1, compute(4), {});
  r = run(q, c);
  EXPECT_NEAR(r.timings[0][0].end, 3, 1e-12);
  EXPECT_NEAR(r.timings[1][0].end, 3, 1e-12);

  // Alone, a rank runs at most at the capacity's rate alone: with the
  // capacity of 2 ranks, one rank of 4 computes twice as fast, not 4x.
  Program one;
  one.hostCapacity = 2;
  one.hostRanksPerNode = 4;
  one.ranks.resize(1);
  one.add(0, compute(4), {});
  EXPECT_NEAR(run(one, c).stepTime, 2, 1e-12);
}

/// With the host's cores known, the step takes at least the node's
/// computation plus its collectives' CPU over the cores.
TEST(SimulatorTest, SharedHostStepIsBoundByItsCpu) {
  CostConstants c = test::exactConstants();
  Program p;
  p.hostCapacity = 1;
  p.hostRanksPerNode = 4;
  p.ranks.resize(1);
  p.ranks[0].multiplicity = 4;
  // 2 s of computation with every rank computing, then a blocking TP call
  // of 1 s that costs each process 0.5 s of CPU.
  Task withTp = compute(3);
  withTp.tp = 1;
  withTp.cpu = 0.5;
  p.add(0, withTp, {});
  SimulationResult r = run(p, c);
  // Without the cores the schedule is the bound: 3 s.
  EXPECT_NEAR(r.stepTime, 3, 1e-12);
  EXPECT_EQ(r.hostCpuBound, 0);

  // On 1 core: 4 ranks x 2 s / 4 ranks of computation, and 4 x 0.5 s of
  // CPU for the calls over 1 core: 4 s, 1 s more than the schedule.
  p.hostCores = 1;
  r = run(p, c);
  EXPECT_NEAR(r.hostCpuSeconds, 4, 1e-12);
  EXPECT_NEAR(r.hostCommCpuSeconds, 2, 1e-12);
  EXPECT_NEAR(r.hostCpuBound, 4, 1e-12);
  EXPECT_NEAR(r.stepTime, 4, 1e-12);
  EXPECT_NEAR(r.breakdown[0].hostCpu, 1, 1e-12);
  EXPECT_NEAR(r.breakdown[0].total(), 4, 1e-12);

  // On 4 cores the bound (2 + 0.5 s) is below the schedule: unchanged.
  p.hostCores = 4;
  r = run(p, c);
  EXPECT_NEAR(r.hostCpuBound, 2.5, 1e-12);
  EXPECT_NEAR(r.stepTime, 3, 1e-12);
  EXPECT_EQ(r.breakdown[0].hostCpu, 0);
}

/// A collective starts when the last member arrives.
TEST(SimulatorTest, CollectivesWaitForEveryMember) {
  CostConstants c = test::exactConstants();
  Program p;
  p.ranks.resize(2);
  p.groups.push_back({0, 1});
  p.add(0, comm(kDpGatherStream, 1, 0, 0), {});
  int32_t work = p.add(1, compute(2), {});
  p.add(1, comm(kDpGatherStream, 1, 0, 0), {{1, work}});
  SimulationResult r = run(p, c);
  EXPECT_NEAR(r.timings[0][0].start, 0, 1e-12);
  EXPECT_NEAR(r.timings[0][0].transferStart, 2, 1e-12);
  EXPECT_NEAR(r.timings[0][0].end, 3, 1e-12);
  EXPECT_NEAR(r.timings[1][1].end, 3, 1e-12);
  EXPECT_EQ(r.criticalRank, 0);
}

TEST(SimulatorTest, DeadlocksAreReportedNotHung) {
  CostConstants c = test::exactConstants();
  Program p;
  p.ranks.resize(2);
  p.groups.push_back({0, 1});
  p.add(0, compute(1), {});
  p.add(0, comm(kDpGatherStream, 1, 0, 0), {});
  // Rank 1 never reaches the collective: its only task waits on itself.
  p.add(1, compute(1), {{1, 0}});
  Result<SimulationResult> r = simulate(p, c);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("simulation cannot finish: rank 0"),
            std::string::npos)
      << r.error();
  EXPECT_NE(r.error().find("waits for the other members"), std::string::npos);
}

struct SymmetryCase {
  const char *model;
  ParallelPlan plan;
};

ParallelPlan with(ParallelPlan p, void (*edit)(ParallelPlan &)) {
  edit(p);
  return p;
}

/// The one-rank-per-stage simulation equals a simulation of every GPU with
/// real collective groups and point-to-point partners.
TEST(SimulatorTest, SymmetricEqualsBruteForce) {
  SymmetryCase cases[] = {
      {"gpt2-medium",
       with(test::plan(2, 2, 2, 4),
            [](ParallelPlan &p) { p.overlapGradReduce = true; })},
      {"gpt2-medium", with(test::plan(1, 4, 2, 8),
                           [](ParallelPlan &p) {
                             p.schedule = Schedule::Interleaved1F1B;
                             p.virtualStages = 2;
                             p.zeroStage = 1;
                             p.overlapParamGather = true;
                           })},
      {"gpt2-medium", with(test::plan(2, 1, 4, 2),
                           [](ParallelPlan &p) {
                             p.zeroStage = 3;
                             p.recompute = Recompute::Full;
                           })},
      {"llama3-8b", with(test::plan(2, 2, 2, 4),
                         [](ParallelPlan &p) {
                           p.cp = 2;
                           p.schedule = Schedule::ZeroBubbleH1;
                           p.sequenceParallel = true;
                         })},
      {"llama3-8b", with(test::plan(4, 4, 4, 8),
                         [](ParallelPlan &p) {
                           p.zeroStage = 1;
                           p.overlapGradReduce = true;
                           p.recompute = Recompute::Selective;
                         })},
  };
  for (const SymmetryCase &sc : cases) {
    ModelConfig m = test::model(sc.model);
    ClusterSpec c = test::preset("dgx-h100", (sc.plan.numGpus() + 7) / 8);
    ASSERT_EQ(validatePlan(sc.plan, m, c), "");
    EstimateOptions brute;
    brute.symmetric = false;
    Result<Estimate> a = estimate(m, c, sc.plan);
    Result<Estimate> b = estimate(m, c, sc.plan, brute);
    ASSERT_TRUE(a && b) << a.error() << b.error();
    EXPECT_NEAR(a->stepTime, b->stepTime, 1e-9 * a->stepTime)
        << describe(sc.plan);
    EXPECT_NEAR(a->breakdown.bubble, b->breakdown.bubble, 1e-9 * a->stepTime);
    for (int ax = 0; ax < kNumAxes; ++ax)
      EXPECT_NEAR(a->breakdown.exposedComm[size_t(ax)],
                  b->breakdown.exposedComm[size_t(ax)], 1e-9 * a->stepTime);
  }
}

/// The timeline is Trace Event Format JSON that Perfetto reads.
TEST(SimulatorTest, ChromeTraceIsWellFormed) {
  ModelConfig m = test::model("gpt2-medium");
  ClusterSpec c = test::preset("dgx-a100-80gb", 2);
  ParallelPlan p = test::plan(2, 4, 2, 8);
  p.overlapGradReduce = true;
  EstimateOptions o;
  o.keepTimeline = true;
  Result<Estimate> e = estimate(m, c, p, o);
  ASSERT_TRUE(e) << e.error();
  std::ostringstream out;
  ASSERT_TRUE(writeTrace(*e, out));
  nlohmann::json j = nlohmann::json::parse(out.str(), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  ASSERT_TRUE(j["traceEvents"].is_array());
  size_t complete = 0, names = 0;
  double lastEnd = 0;
  for (const nlohmann::json &ev : j["traceEvents"]) {
    ASSERT_TRUE(ev["ph"].is_string());
    ASSERT_TRUE(ev["pid"].is_number_integer());
    if (ev["ph"] == "X") {
      ++complete;
      ASSERT_TRUE(ev["name"].is_string());
      ASSERT_TRUE(ev["tid"].is_number_integer());
      ASSERT_GE(ev["ts"].get<double>(), 0);
      ASSERT_GE(ev["dur"].get<double>(), 0);
      lastEnd =
          std::max(lastEnd, ev["ts"].get<double>() + ev["dur"].get<double>());
    } else if (ev["ph"] == "M" && ev["name"] == "process_name") {
      ++names;
    }
  }
  EXPECT_EQ(names, 4u); // one process per pipeline stage
  size_t tasks = 0;
  for (const RankProgram &r : e->program->ranks)
    tasks += r.tasks.size();
  EXPECT_EQ(complete, tasks);
  EXPECT_NEAR(lastEnd, e->stepTime * 1e6, 1e-3);
  Estimate plain = *estimate(m, c, p);
  std::ostringstream none;
  EXPECT_FALSE(writeTrace(plain, none));
}

} // namespace

namespace {

/// Megatron-Core's DDP buckets hold max(40M, 1M x dp) parameters, so a
/// larger data-parallel group reduces the same gradients in fewer, larger
/// buckets.
TEST(SimulatorTest, GradientBucketsGrowWithDataParallelism) {
  ModelConfig m = test::model("gpt2-medium"); // 24 layers of 12.6M
  CostConstants k;
  auto buckets = [&](int dp) {
    ClusterSpec c = test::preset("dgx-h100", dp / 8);
    ParallelPlan p = test::plan(1, 1, dp, 2);
    p.zeroStage = 1;
    p.overlapGradReduce = true;
    Program prog = buildProgram(m, c, p, buildWorkload(m, c, p, k), k);
    int n = 0;
    for (const Task &t : prog.ranks[0].tasks)
      n += t.stream == kDpGatherStream && t.axis == Axis::DP;
    return n;
  };
  // 40M: 4 layers a bucket (6 buckets); 64M: 6 layers (4); 128M: 11 layers
  // (3); each plus the parameter all-gather after the step.
  EXPECT_EQ(buckets(8), 6 + 1);
  EXPECT_EQ(buckets(64), 4 + 1);
  EXPECT_EQ(buckets(128), 3 + 1);
}

} // namespace

namespace {

/// A pipeline send costs its transfer (link latency + bytes / bandwidth),
/// the launch of NCCL's send/recv kernel and, with Megatron's device
/// synchronization after it, the host's relaunch of the next kernel.
TEST(SimulatorTest, PipelineSendsPayTheirLaunch) {
  ModelConfig m = test::model("gpt2-medium");
  ClusterSpec c = test::preset("dgx-a100-80gb", 1);
  ParallelPlan p = test::plan(1, 2, 1, 4);
  for (bool sync : {true, false}) {
    CostConstants k;
    k.p2pSynchronize = sync;
    Workload w = buildWorkload(m, c, p, k);
    Program prog = buildProgram(m, c, p, w, k);
    int sends = 0;
    for (const Task &t : prog.ranks[0].tasks)
      if (t.kind == TaskKind::Send) {
        ++sends;
        EXPECT_DOUBLE_EQ(t.duration, p2pTime(w.p2pBytes, false, c, k) +
                                         k.kernelOverhead * (sync ? 2 : 1));
      }
    EXPECT_EQ(sends, 4); // stage 0 sends one activation per micro-batch
  }
}

/// Megatron synchronizes the device after each pipeline send/receive: the
/// sending stage's next compute waits for its send (and the host's
/// relaunch), so a slow link holds the sender too, not only the receiver.
TEST(SimulatorTest, SynchronizedSendsBlockTheSender) {
  ModelConfig m = test::model("gpt2-medium");
  ClusterSpec c = test::preset("dgx-a100-80gb", 1);
  c.intra.bandwidth = 1e9; // each send as long as a pass or more
  ParallelPlan p = test::plan(1, 2, 1, 4);
  p.schedule = Schedule::GPipe;
  for (bool sync : {true, false}) {
    CostConstants k;
    k.p2pSynchronize = sync;
    Workload w = buildWorkload(m, c, p, k);
    Program prog = buildProgram(m, c, p, w, k);
    Result<SimulationResult> r = simulate(prog, k, {true});
    ASSERT_TRUE(r) << r.error();
    // Stage 0 runs F0 S0 F1 S1 ...: with the synchronization each forward
    // after the first starts when the previous send has ended; without it,
    // right after the previous forward.
    const std::vector<Task> &tasks = prog.ranks[0].tasks;
    const std::vector<TaskTiming> &at = r->timings[0];
    int checked = 0;
    double lastSendEnd = -1, lastForwardEnd = -1;
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].kind == TaskKind::Send) {
        lastSendEnd = at[i].end;
        continue;
      }
      if (tasks[i].category != TaskCategory::Forward)
        continue;
      if (lastSendEnd >= 0) {
        ++checked;
        EXPECT_GT(lastSendEnd, lastForwardEnd + 1e-3);
        EXPECT_NEAR(at[i].start, sync ? lastSendEnd : lastForwardEnd, 1e-9);
      }
      lastForwardEnd = at[i].end;
    }
    EXPECT_EQ(checked, 3);
  }
}

} // namespace
