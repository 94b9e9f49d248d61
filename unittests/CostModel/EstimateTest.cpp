//===- EstimateTest.cpp - Step time, FLOPs, MFU and their properties ------===//

#include "TestUtil.h"

#include <nlohmann/json.hpp>

using namespace cleave;
using namespace cleave::cost;

namespace {

TEST(EstimateTest, BadPlansNameTheField) {
  ModelConfig m = test::model("llama3-8b"); // 32 heads, 8 kv heads
  ClusterSpec c = test::preset("dgx-a100-80gb", 2);
  auto error = [&](ParallelPlan p) {
    Result<Estimate> e = estimate(m, c, p);
    EXPECT_FALSE(e);
    return e ? std::string() : e.error();
  };
  EXPECT_EQ(error(test::plan(3, 1, 1)),
            "plan.tp: 3 does not divide the 32 attention heads");
  EXPECT_EQ(error(test::plan(8, 1, 4)),
            "plan: tp x pp x dp x cp = 32 GPUs, but the cluster has 16");
  ParallelPlan fp8 = test::plan(8, 1, 1);
  fp8.dtype = DType::F8E4M3;
  EXPECT_EQ(error(fp8), "plan.dtype: f8e4m3 is not supported by "
                        "a100-sxm4-80gb (no peak rate)");
  ParallelPlan inter = test::plan(1, 4, 1, 6);
  inter.schedule = Schedule::Interleaved1F1B;
  inter.virtualStages = 2;
  EXPECT_EQ(error(inter), "plan.micro_batches: the interleaved schedule "
                          "needs a multiple of pp (4), got 6");
  ParallelPlan zero = test::plan(1, 1, 1);
  zero.zeroStage = 4;
  EXPECT_EQ(error(zero), "plan.zero: stage must be 0, 1, 2 or 3, got 4");
  EXPECT_EQ(error(test::plan(1, 64, 1)),
            "plan.pp: 64 stages x 1 chunks exceed the model's 32 layers");
}

/// Model FLOPs are Korthikanti's Eq. 7 and, under full recompute, hardware
/// FLOPs are Narayanan's Eq. 3, exactly.
TEST(EstimateTest, FlopsFollowThePublishedFormulas) {
  ModelConfig m = test::model("megatron-18b");
  ClusterSpec c = test::preset("dgx-a100-80gb", 32);
  ParallelPlan p = test::plan(8, 1, 32, 4);
  p.microBatchSize = 8;
  p.recompute = Recompute::Full;
  Result<Estimate> e = estimate(m, c, p);
  ASSERT_TRUE(e) << e.error();
  double B = 1024, s = 2048, l = 40, h = 6144, V = 51200;
  double eq7 = 72 * B * l * s * h * h * (1 + s / (6 * h) + V / (12 * h * l));
  double eq3 = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  EXPECT_NEAR(e->modelFlops, eq7, 1e-9 * eq7);
  EXPECT_NEAR(e->hardwareFlops, eq3, 1e-9 * eq3);
  double perGpu = e->stepTime * 256;
  EXPECT_NEAR(e->mfu, eq7 / perGpu / 312e12, 1e-12);
  EXPECT_NEAR(e->hfu, eq3 / perGpu / 312e12, 1e-12);
  EXPECT_NEAR(e->tokensPerSecond, B * s / e->stepTime, 1e-6);
  EXPECT_NEAR(e->breakdown.total(), e->stepTime, 1e-9 * e->stepTime);
}

/// A faster link or GPU never makes a plan slower.
TEST(EstimateTest, MoreBandwidthOrComputeIsNeverSlower) {
  struct Case {
    const char *model;
    ParallelPlan plan;
  } cases[] = {
      {"gpt3-175b", test::plan(8, 8, 4, 32)},
      {"llama3-8b", test::plan(1, 1, 32, 4)},
      {"llama3-70b", test::plan(4, 4, 2, 8)},
  };
  cases[1].plan.zeroStage = 3;
  cases[2].plan.overlapGradReduce = true;
  cases[2].plan.zeroStage = 1;
  for (const Case &k : cases) {
    ModelConfig m = test::model(k.model);
    ClusterSpec base = test::preset("dgx-h100", k.plan.numGpus() / 8);
    double t0 = estimate(m, base, k.plan)->stepTime;
    for (int which = 0; which < 4; ++which) {
      ClusterSpec fast = base;
      if (which == 0)
        fast.inter.nicBandwidth *= 2;
      if (which == 1)
        fast.intra.bandwidth *= 2;
      if (which == 2)
        fast.gpu.hbmBandwidth *= 2;
      if (which == 3)
        fast.gpu.peakBF16 *= 2;
      Result<Estimate> e = estimate(m, fast, k.plan);
      ASSERT_TRUE(e) << e.error();
      EXPECT_LE(e->stepTime, t0 * (1 + 1e-12)) << k.model << " " << which;
    }
  }
}

TEST(EstimateTest, BreakdownAddsUpAndNamesTheBubble) {
  ModelConfig m = test::model("gpt3-175b");
  ClusterSpec c = test::preset("dgx-a100-80gb", 32);
  ParallelPlan p = test::plan(8, 8, 4, 16);
  p.sequenceParallel = true;
  Result<Estimate> e = estimate(m, c, p);
  ASSERT_TRUE(e) << e.error();
  const TimeBreakdown &b = e->breakdown;
  EXPECT_NEAR(b.total(), e->stepTime, 1e-9 * e->stepTime);
  // 1F1B with 16 micro-batches on 8 stages: about 7/23 of the step idle.
  EXPECT_NEAR(b.bubble / e->stepTime, 7.0 / 23, 0.05);
  EXPECT_GT(b.exposedComm[size_t(Axis::TP)], 0);
  EXPECT_GT(b.exposedComm[size_t(Axis::DP)], 0);
  EXPECT_GT(b.forward, 0);
  EXPECT_GT(b.backward, b.forward);
}

TEST(EstimateTest, ReportsAndJson) {
  ModelConfig m = test::model("llama3-8b");
  ClusterSpec c = test::preset("dgx-h100", 1);
  ParallelPlan p = test::plan(8, 1, 1, 4);
  Result<Estimate> e = estimate(m, c, p);
  ASSERT_TRUE(e) << e.error();
  std::string text = formatReport(*e, m, c, p);
  EXPECT_NE(text.find("MFU / HFU"), std::string::npos);
  EXPECT_NE(text.find("fits"), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(estimateToJson(*e, m, c, p));
  EXPECT_DOUBLE_EQ(j["step_time_s"].get<double>(), e->stepTime);
  EXPECT_EQ(j["memory_bytes_per_stage"].size(), 1u);
  EXPECT_EQ(j["fits"].get<bool>(), e->fits);
}

/// A plan whose activations cannot fit is reported as such.
TEST(EstimateTest, OversizedPlansDoNotFit) {
  ModelConfig m = test::model("gpt3-175b");
  ClusterSpec c = test::preset("dgx-a100-80gb", 1);
  Result<Estimate> e = estimate(m, c, test::plan(8, 1, 1));
  ASSERT_TRUE(e) << e.error();
  EXPECT_FALSE(e->fits);
  EXPECT_GT(e->peakMemory().total(), 80e9);
}

} // namespace

namespace {

/// Explicit per-chunk layer counts move layers between stages: the stage
/// given more layers holds more parameters and gets slower, and a split that
/// gives the last stage (with the 51,200-word output layer and loss, about
/// three layers' time here) fewer layers beats the even split.
TEST(EstimateTest, LayersPerChunkMoveLayersBetweenStages) {
  ModelConfig m = test::model("megatron-1.7b"); // 24 layers
  ClusterSpec c = test::preset("dgx-a100-80gb", 1);
  ParallelPlan p = test::plan(1, 4, 2, 8);
  Result<Estimate> even = estimate(m, c, p);
  p.layersPerChunk = {6, 6, 6, 6};
  Result<Estimate> same = estimate(m, c, p);
  p.layersPerChunk = {7, 7, 6, 4};
  Result<Estimate> balanced = estimate(m, c, p);
  p.layersPerChunk = {12, 4, 4, 4};
  Result<Estimate> front = estimate(m, c, p);
  ASSERT_TRUE(even && same && balanced && front);
  EXPECT_DOUBLE_EQ(same->stepTime, even->stepTime);
  EXPECT_EQ(layersInChunk(m, p, 0), 12);
  EXPECT_EQ(layersInChunk(m, p, 3), 4);
  EXPECT_GT(front->memoryPerStage[0].parameters,
            even->memoryPerStage[0].parameters * 1.5);
  EXPECT_LT(front->memoryPerStage[1].parameters,
            even->memoryPerStage[1].parameters);
  EXPECT_GT(front->stepTime, even->stepTime * 1.15);
  EXPECT_LT(balanced->stepTime, even->stepTime * 0.97);
  EXPECT_NE(describe(p).find("layers=12,4,4,4"), std::string::npos);
}

TEST(EstimateTest, LayersPerChunkAreValidated) {
  ModelConfig m = test::model("megatron-1.7b");
  ClusterSpec c = test::preset("dgx-a100-80gb", 1);
  ParallelPlan p = test::plan(1, 4, 2, 8);
  p.layersPerChunk = {8, 8, 8};
  EXPECT_EQ(validatePlan(p, m, c), "plan.layers_per_chunk: 3 entries for 4 "
                                   "pipeline chunks (pp x chunks)");
  p.layersPerChunk = {12, 12, 0, 0};
  EXPECT_EQ(validatePlan(p, m, c),
            "plan.layers_per_chunk[2]: every chunk but the first and the last "
            "needs at least one layer, got 0");
  p.layersPerChunk = {-1, 13, 12, 0};
  EXPECT_EQ(validatePlan(p, m, c),
            "plan.layers_per_chunk[0]: every chunk but the first and the last "
            "needs at least one layer, got -1");
  p.layersPerChunk = {6, 6, 6, 5};
  EXPECT_EQ(validatePlan(p, m, c), "plan.layers_per_chunk: the chunks hold 23 "
                                   "layers, the model has 24");
}

/// Llama 3's pipeline: the first stage holds only the embedding and the
/// last only the output layer and the loss, so more stages than layers
/// would allow are fine, and those two stages hold no layer activations.
TEST(EstimateTest, EmbeddingAndLossStagesWithoutLayers) {
  ModelConfig m = test::model("megatron-1.7b");
  ClusterSpec c = test::preset("dgx-a100-80gb", 1);
  ParallelPlan p = test::plan(1, 4, 2, 8);
  p.layersPerChunk = {0, 12, 12, 0};
  EXPECT_EQ(validatePlan(p, m, c), "");
  Result<Estimate> e = estimate(m, c, p);
  ASSERT_TRUE(e) << e.error();
  ASSERT_EQ(e->memoryPerStage.size(), 4u);
  EXPECT_LT(e->memoryPerStage[0].activations,
            0.2 * e->memoryPerStage[1].activations);
  EXPECT_LT(e->memoryPerStage[3].parameters, e->memoryPerStage[2].parameters);
  ParallelPlan even = test::plan(1, 4, 2, 8);
  Result<Estimate> base = estimate(m, c, even);
  ASSERT_TRUE(base);
  // Two stages of 12 layers are slower than four of 6.
  EXPECT_GT(e->stepTime, base->stepTime);
  // Even a chunk per layer and two more fits the check.
  ModelConfig small = m;
  small.layers = 2;
  p.layersPerChunk = {0, 1, 1, 0};
  EXPECT_EQ(validatePlan(p, small, c), "");
}

/// estimateWithWorkload on the plan's own workload is estimate().
TEST(EstimateTest, EstimateWithWorkloadEqualsEstimate) {
  ModelConfig m = test::model("gpt3-175b");
  ClusterSpec c = test::preset("dgx-a100-80gb", 16);
  ParallelPlan p = test::plan(8, 8, 2, 16);
  p.schedule = Schedule::Interleaved1F1B;
  p.virtualStages = 2;
  p.zeroStage = 1;
  Result<Estimate> a = estimate(m, c, p);
  Result<Estimate> b =
      estimateWithWorkload(m, c, p, buildWorkload(m, c, p, defaultConstants()));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->stepTime, b->stepTime);
  EXPECT_EQ(a->peakMemory().total(), b->peakMemory().total());
  EXPECT_EQ(a->mfu, b->mfu);
}

} // namespace

namespace {

/// Per-stage recomputation: the same kind on every stage is the uniform
/// plan; mixing kinds puts each stage's activations, recompute time and
/// recomputed FLOPs between the two uniform plans.
TEST(EstimateTest, RecomputePerStage) {
  ModelConfig m = test::model("gpt3-175b");
  ClusterSpec c = test::preset("dgx-a100-80gb", 8);
  ParallelPlan p = test::plan(8, 8, 1, 16);
  p.sequenceParallel = true;
  auto run = [&](std::vector<Recompute> kinds, Recompute uniform) {
    ParallelPlan q = p;
    q.recompute = uniform;
    q.recomputePerStage = std::move(kinds);
    Result<Estimate> e = estimate(m, c, q);
    EXPECT_TRUE(e) << e.error();
    return *e;
  };
  using R = Recompute;
  Estimate sel = run({}, R::Selective);
  Estimate sel8 = run(std::vector<R>(8, R::Selective), R::None);
  EXPECT_EQ(sel.stepTime, sel8.stepTime);
  EXPECT_EQ(sel.hardwareFlops, sel8.hardwareFlops);
  EXPECT_EQ(sel.peakMemory().total(), sel8.peakMemory().total());

  Estimate none = run({}, R::None), full = run({}, R::Full);
  Estimate mixed = run(
      {R::Full, R::Full, R::Full, R::Full, R::None, R::None, R::None, R::None},
      R::None);
  EXPECT_EQ(mixed.memoryPerStage[0].activations,
            full.memoryPerStage[0].activations);
  EXPECT_EQ(mixed.memoryPerStage[7].activations,
            none.memoryPerStage[7].activations);
  EXPECT_GT(mixed.stepTime, none.stepTime);
  EXPECT_LT(mixed.stepTime, full.stepTime);
  EXPECT_GT(mixed.hardwareFlops, none.hardwareFlops);
  EXPECT_LT(mixed.hardwareFlops, full.hardwareFlops);
  // Half the layers are recomputed in full.
  EXPECT_NEAR(mixed.hardwareFlops - none.hardwareFlops,
              (full.hardwareFlops - none.hardwareFlops) / 2,
              1e-9 * full.hardwareFlops);
  ParallelPlan shown = p;
  shown.recomputePerStage = {R::Full, R::Selective};
  shown.pp = 2;
  EXPECT_NE(describe(shown).find("recompute=full,selective"),
            std::string::npos);

  ParallelPlan bad = p;
  bad.recomputePerStage = {R::Full};
  EXPECT_EQ(validatePlan(bad, m, c),
            "plan.recompute_per_stage: 1 entries for 8 pipeline stages");
}

} // namespace

namespace {

/// fp8 plans: Transformer Engine's cast-transpose before every fp8 linear
/// (x in forward, dY in backward), attention and the output layer in bf16,
/// and a step faster than bf16 but by less than the GEMMs alone.
TEST(EstimateTest, Fp8LinearsPayForTheirCasts) {
  ModelConfig m = test::model("llama3-8b");
  ClusterSpec c = test::preset("dgx-h100", 1);
  ParallelPlan bf = test::plan(8, 1, 1, 4);
  ParallelPlan f8 = bf;
  f8.dtype = DType::F8E4M3;
  auto casts = [](const std::vector<WorkItem> &items, Phase phase) {
    int n = 0;
    for (const WorkItem &it : items)
      n += std::string(it.name) == "fp8_cast_transpose" && it.phase == phase;
    return n;
  };
  // qkv, attention output, mlp up and mlp down.
  EXPECT_EQ(casts(layerItems(m, f8), Phase::Forward), 4);
  EXPECT_EQ(casts(layerItems(m, f8), Phase::Backward), 4);
  EXPECT_EQ(casts(layerItems(m, bf), Phase::Forward), 0);
  for (const WorkItem &it : headItems(m, f8))
    if (!it.isComm && it.kernel.kind == KernelKind::Gemm)
      EXPECT_EQ(it.kernel.dtype, DType::BF16) << it.name;
  double gemm[2] = {0, 0}, all[2] = {0, 0};
  for (int i = 0; i < 2; ++i)
    for (const WorkItem &it : layerItems(m, i ? f8 : bf)) {
      if (it.isComm)
        continue;
      double t = kernelTime(it.kernel, c.gpu, defaultConstants());
      all[i] += t;
      if (it.kernel.kind == KernelKind::Gemm)
        gemm[i] += t;
    }
  EXPECT_LT(all[1], all[0]);
  EXPECT_GT(all[1] / all[0], gemm[1] / gemm[0]);
  Result<Estimate> eb = estimate(m, c, bf), e8 = estimate(m, c, f8);
  ASSERT_TRUE(eb && e8);
  EXPECT_LT(e8->stepTime, eb->stepTime);
  EXPECT_GT(e8->stepTime, 0.5 * eb->stepTime);
}

/// "sharp": true changes ZeRO-1: its gradient reduce-scatter and parameter
/// all-gather across nodes, 8 members per node (tp 1), go through the
/// switches on every NIC of the node instead of a flat ring.
TEST(EstimateTest, SharpSpeedsUpZero1AcrossNodes) {
  ModelConfig m = test::model("llama3-8b");
  ClusterSpec c = test::preset("dgx-h100", 4);
  ParallelPlan p = test::plan(1, 1, 32, 4);
  p.zeroStage = 1;
  Result<Estimate> plain = estimate(m, c, p);
  c.inter.sharp = true;
  Result<Estimate> sharp = estimate(m, c, p);
  ASSERT_TRUE(plain && sharp);
  double dp = plain->breakdown.exposedComm[size_t(Axis::DP)];
  EXPECT_GT(dp, 0);
  EXPECT_LT(sharp->breakdown.exposedComm[size_t(Axis::DP)], 0.5 * dp);
  EXPECT_LT(sharp->stepTime, plain->stepTime);
}

/// Gradient clipping all-reduces one fp32 scalar (the sum of squares) over
/// every GPU and reads it on the host before the optimizer's kernels: the
/// optimizer of an unsharded replica costs that much more on 64 GPUs than
/// on one, with the same parameters per GPU.
TEST(EstimateTest, GradientClippingPaysItsNormAllReduce) {
  ModelConfig m = test::model("gpt2-medium");
  CostConstants k;
  EstimateOptions o;
  o.constants = &k;
  Result<Estimate> one =
      estimate(m, test::preset("dgx-h100", 1), test::plan(1, 1, 1), o);
  ClusterSpec c = test::preset("dgx-h100", 8);
  Result<Estimate> many = estimate(m, c, test::plan(1, 1, 64), o);
  ASSERT_TRUE(one && many);
  double norm =
      collectiveCost(CollectiveKind::AllReduce, 4, placeGroup(64, 1, 8), c, k)
          .time;
  EXPECT_GT(norm, 0);
  EXPECT_NEAR(many->breakdown.optimizer - one->breakdown.optimizer, norm, 1e-9);
}

} // namespace

namespace {

/// Global-norm clipping costs a read of each rank's gradient shard and one
/// scalar all-reduce over all ranks, in the optimizer's time: more than
/// nothing, far less than the optimizer update itself.
TEST(EstimateTest, GradientClippingIsASmallOptimizerCost) {
  ModelConfig m = test::model("gpt3-175b");
  ClusterSpec c = test::preset("dgx-a100-80gb", 16);
  ParallelPlan p = test::plan(8, 8, 2, 16);
  p.zeroStage = 1;
  p.clipGradients = false;
  Result<Estimate> plain = estimate(m, c, p);
  p.clipGradients = true;
  Result<Estimate> clipped = estimate(m, c, p);
  ASSERT_TRUE(plain && clipped);
  double extra = clipped->breakdown.optimizer - plain->breakdown.optimizer;
  EXPECT_GT(extra, 0.0);
  EXPECT_LT(extra, plain->breakdown.optimizer);
  EXPECT_GT(clipped->stepTime, plain->stepTime);
}

/// fp16's dynamic loss scaling unscales every gradient (a read and a write
/// of the rank's gradient shard, and a launch) and checks for overflow
/// through the global sum of squares: alone it pays the norm's all-reduce;
/// with clipping it shares it, so it adds exactly the unscaling pass.
TEST(EstimateTest, DynamicLossScalingPaysUnscaleAndSharesTheNorm) {
  ModelConfig m = test::model("gpt2-medium");
  m.dtype = DType::F16;
  ClusterSpec c = test::preset("dgx-h100", 8);
  CostConstants k;
  EstimateOptions o;
  o.constants = &k;
  ParallelPlan p = test::plan(1, 1, 64);
  p.dtype = DType::F16;
  p.clipGradients = false;
  Result<Estimate> plain = estimate(m, c, p, o);
  p.dynamicLossScaling = true;
  Result<Estimate> scaled = estimate(m, c, p, o);
  p.clipGradients = true;
  Result<Estimate> both = estimate(m, c, p, o);
  p.dynamicLossScaling = false;
  Result<Estimate> clipped = estimate(m, c, p, o);
  ASSERT_TRUE(plain && scaled && both && clipped);
  double norm =
      collectiveCost(CollectiveKind::AllReduce, 4, placeGroup(64, 1, 8), c, k)
          .time +
      k.kernelOverhead;
  // f16 gradients of every parameter (one replica holds them all), read
  // and written once.
  double unscale =
      k.kernelOverhead + memoryTime(double(m.numParameters()) * 2 * 2, c.gpu);
  EXPECT_NEAR(scaled->breakdown.optimizer - plain->breakdown.optimizer,
              norm + unscale, 0.05 * unscale);
  EXPECT_NEAR(both->breakdown.optimizer - clipped->breakdown.optimizer, unscale,
              0.05 * unscale);
}

} // namespace

/// Context parallelism is priced as cleave-run executes it: one all-gather
/// of the whole K and V over cp before each attention and one
/// reduce-scatter of dK and dV after its backward, on the critical path
/// (not ring attention's overlapped exchanges).
/// cp-layout=contiguous: the last rank's queries see (2cp-1)/2cp of the
/// keys, so its causal attention does (2cp-1)/cp times the balanced
/// layout's average, and every rank waits for it.
TEST(EstimateTest, ContiguousContextParallelPricesTheLastRank) {
  ModelConfig m = test::model("llama3-8b");
  ParallelPlan p = test::plan(1, 1, 1);
  p.cp = 4;
  p.attention = AttentionImpl::Flash;
  auto attentionFlops = [&](bool balanced) {
    p.cpBalanced = balanced;
    double flops = 0;
    for (const WorkItem &it : layerItems(m, p))
      if (!it.isComm && it.kernel.kind == KernelKind::FlashAttention)
        flops += it.kernel.attention.executedFlops(false);
    return flops;
  };
  double balanced = attentionFlops(true), contiguous = attentionFlops(false);
  EXPECT_GT(balanced, 0.0);
  EXPECT_DOUBLE_EQ(contiguous / balanced, 7.0 / 4.0);
  ClusterSpec c = test::preset("dgx-h100", 1);
  p.cpBalanced = false;
  m.seqLen = 4 * 1025; // divisible by cp, not by 2 cp
  EXPECT_EQ(validatePlan(p, m, c), "");
  p.cpBalanced = true;
  EXPECT_NE(validatePlan(p, m, c).find("divisible by 2 x cp = 8"),
            std::string::npos);
}

TEST(EstimateTest, ContextParallelIsAllGatherOfKV) {
  ModelConfig m = test::model("llama3-8b");
  ParallelPlan p = test::plan(1, 1, 1);
  p.cp = 4;
  double kv =
      2.0 * p.microBatchSize * m.seqLen * m.kvHeads * m.headDim() * 2.0; // bf16
  int gathers = 0, scatters = 0;
  for (const WorkItem &it : layerItems(m, p)) {
    if (!it.isComm || it.commAxis != Axis::CP)
      continue;
    EXPECT_FALSE(it.overlapsPrevious) << it.name;
    EXPECT_DOUBLE_EQ(it.commBytes, kv) << it.name;
    if (it.commKind == CollectiveKind::AllGather) {
      EXPECT_EQ(it.phase, Phase::Forward);
      ++gathers;
    } else {
      EXPECT_EQ(it.commKind, CollectiveKind::ReduceScatter) << it.name;
      EXPECT_EQ(it.phase, Phase::Backward);
      ++scatters;
    }
  }
  EXPECT_EQ(gathers, 1);
  EXPECT_EQ(scatters, 1);
  p.cp = 1;
  for (const WorkItem &it : layerItems(m, p))
    EXPECT_FALSE(it.isComm && it.commAxis == Axis::CP) << it.name;
}
