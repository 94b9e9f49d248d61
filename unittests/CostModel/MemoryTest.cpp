//===- MemoryTest.cpp - Model state and activation memory -----------------===//

#include "TestUtil.h"

using namespace cleave;
using namespace cleave::cost;

namespace {

/// A GPT layer as in Korthikanti et al. 2022 (dropout, unfused attention).
ModelConfig korthikantiLayer() {
  ModelConfig m = test::model("megatron-7.5b"); // h 4096, a 32, s 2048
  m.dropout = 0.1;
  return m;
}

ParallelPlan korthikantiPlan(int t, bool sp, Recompute r) {
  ParallelPlan p = test::plan(t, 1, 1);
  p.sequenceParallel = sp;
  p.recompute = r;
  p.attention = AttentionImpl::Unfused;
  p.microBatchSize = 2;
  return p;
}

/// Korthikanti et al. 2022, Table 2: activation bytes per layer.
TEST(MemoryTest, ActivationsMatchKorthikantiTable2) {
  ModelConfig m = korthikantiLayer();
  double s = 2048, b = 2, h = 4096, a = 32, t = 8;
  double sbh = s * b * h;
  struct Case {
    int tp;
    bool sp;
    Recompute r;
    double expected;
  } cases[] = {
      {1, false, Recompute::None, sbh * (34 + 5 * a * s / h)},
      {8, false, Recompute::None, sbh * (10 + 24 / t + 5 * a * s / (h * t))},
      {8, true, Recompute::None, sbh * (34 / t + 5 * a * s / (h * t))},
      {8, true, Recompute::Selective, sbh * 34 / t},
      {8, false, Recompute::Selective, sbh * (10 + 24 / t)},
      {1, false, Recompute::Full, 2 * sbh},
      {8, true, Recompute::Full, 2 * sbh / t},
  };
  for (const Case &c : cases)
    EXPECT_DOUBLE_EQ(layerActivationBytes(m, korthikantiPlan(c.tp, c.sp, c.r)),
                     c.expected)
        << "tp " << c.tp << " sp " << c.sp << " " << toString(c.r);
}

TEST(MemoryTest, FusedAttentionDropsTheScoreTensors) {
  ModelConfig m = korthikantiLayer();
  ParallelPlan p = korthikantiPlan(8, true, Recompute::None);
  p.attention = AttentionImpl::Flash;
  double sbh = 2048.0 * 2 * 4096;
  // 34 s b h / t plus the fp32 log-sum-exp per head and token.
  EXPECT_DOUBLE_EQ(layerActivationBytes(m, p),
                   sbh * 34 / 8 + 4 * 2048.0 * 2 * 32 / 8);
}

/// ZeRO-3 with bf16 and fp32 gradients: 2 + 4 + 12 = 18 bytes per
/// parameter, all divided by the DP size.
TEST(MemoryTest, Zero3ModelStatePerGpu) {
  ModelConfig m = test::model("megatron-1.7b");
  ClusterSpec c = test::preset("dgx-a100-80gb", 8);
  ParallelPlan p = test::plan(1, 1, 64);
  p.zeroStage = 3;
  CostConstants k;
  Workload w = buildWorkload(m, c, p, k);
  double params = double(m.numParameters());
  EXPECT_DOUBLE_EQ(stageParameters(m, p, w, 0), params);
  MemoryBreakdown mem = stageMemory(m, c, p, w, 0, k);
  EXPECT_NEAR(mem.parameters + mem.gradients + mem.optimizerStates,
              18 * params / 64, 1e-6 * params);
  p.dtype = DType::F16; // fp16 gradients: 16 bytes per parameter
  mem = stageMemory(m, c, p, buildWorkload(m, c, p, k), 0, k);
  EXPECT_NEAR(mem.parameters + mem.gradients + mem.optimizerStates,
              16 * params / 64, 1e-6 * params);
  p.dtype = DType::F32;
  p.zeroStage = 0; // fp32 training: 4 + 4 + 8 bytes, unsharded
  mem = stageMemory(m, c, p, buildWorkload(m, c, p, k), 0, k);
  EXPECT_NEAR(mem.parameters + mem.gradients + mem.optimizerStates, 16 * params,
              1e-6 * params);
}

/// Cleave's step keeps ZeRO-3's gathered parameters from their forward use
/// to their backward use: every parameter of the stage is whole at the
/// turn, beside one bucket of unsharded gradients; and its backward pass
/// gathers nothing.
TEST(MemoryTest, Zero3WithoutRegatherKeepsTheGatheredParameters) {
  ModelConfig m = test::model("megatron-1.7b");
  ClusterSpec c = test::preset("dgx-a100-80gb", 8);
  ParallelPlan p = test::plan(1, 1, 64);
  p.zeroStage = 3;
  CostConstants k;
  k.dpBucketParams = 1e6;
  Workload w = buildWorkload(m, c, p, k);
  double params = stageParameters(m, p, w, 0);
  MemoryBreakdown regather = stageMemory(m, c, p, w, 0, k);
  p.regatherForBackward = false;
  MemoryBreakdown kept = stageMemory(m, c, p, w, 0, k);
  double others = params * 63 / 64;
  EXPECT_NEAR(kept.communication - ncclBufferBytes(p, k), others * 2 + 1e6 * 4,
              1e-6 * params);
  EXPECT_LT(regather.communication, kept.communication);
  EXPECT_DOUBLE_EQ(kept.parameters, regather.parameters);
  // The backward pass gathers nothing: half the parameter gathers.
  auto gathers = [&](const ParallelPlan &plan) {
    Program program = buildProgram(m, c, plan, w, k);
    int n = 0;
    for (const Task &t : program.ranks[0].tasks)
      n += t.stream == kDpGatherStream;
    return n;
  };
  int once = gathers(p);
  p.regatherForBackward = true;
  EXPECT_EQ(gathers(p), 2 * once);
  EXPECT_GT(once, 0);
}

/// Cleave's pipelined step sums each micro-batch's gradients after its
/// backward pass: the stage holds the sum and the micro-batch's gradients
/// (one more copy of its gradients, whole even under ZeRO-2, whose
/// reduce-scatter follows the sum); one micro-batch accumulates nothing.
TEST(MemoryTest, GradientSumOutsideTheBackwardPassHoldsTwoCopies) {
  ModelConfig m = test::model("megatron-1.7b");
  ClusterSpec c = test::preset("dgx-a100-80gb", 8);
  CostConstants k;
  for (int zero : {0, 2}) {
    ParallelPlan p = test::plan(1, 2, 4, 8);
    p.zeroStage = zero;
    Workload w = buildWorkload(m, c, p, k);
    double params = stageParameters(m, p, w, 0);
    MemoryBreakdown fused = stageMemory(m, c, p, w, 0, k);
    p.accumulateGradsInPlace = false;
    MemoryBreakdown summed = stageMemory(m, c, p, w, 0, k);
    EXPECT_NEAR(summed.gradients - fused.gradients,
                params * double(bytesOf(p.gradDType())), 1e-9 * params)
        << "zero " << zero;
    EXPECT_DOUBLE_EQ(summed.activations, fused.activations);
  }
  ParallelPlan one = test::plan(1, 2, 4, 1);
  Workload w = buildWorkload(m, c, one, k);
  MemoryBreakdown fused = stageMemory(m, c, one, w, 0, k);
  one.accumulateGradsInPlace = false;
  EXPECT_DOUBLE_EQ(stageMemory(m, c, one, w, 0, k).gradients, fused.gradients);
}

/// A device without a CUDA context or NCCL (a local CPU rank) reserves
/// nothing and has no communicator buffers; a GPU uses the constants.
TEST(MemoryTest, DeviceRuntimeMemoryComesFromTheDevice) {
  ModelConfig m = test::model("megatron-1.7b");
  ClusterSpec c = test::preset("dgx-a100-80gb", 8);
  ParallelPlan p = test::plan(2, 1, 32);
  CostConstants k;
  Workload w = buildWorkload(m, c, p, k);
  MemoryBreakdown gpu = stageMemory(m, c, p, w, 0, k);
  EXPECT_DOUBLE_EQ(gpu.reserved, k.runtimeReservedBytes);
  EXPECT_DOUBLE_EQ(gpu.communication, ncclBufferBytes(p, k));
  c.gpu.runtimeReservedBytes = 0;
  c.gpu.communicatorBufferBytes = 0;
  MemoryBreakdown cpu = stageMemory(m, c, p, w, 0, k);
  EXPECT_EQ(cpu.reserved, 0);
  EXPECT_EQ(cpu.communication, 0);
  EXPECT_DOUBLE_EQ(cpu.activations, gpu.activations);
  Result<ClusterSpec> back = clusterFromJson(clusterToJson(c));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->gpu.runtimeReservedBytes, 0.0);
  EXPECT_EQ(back->gpu.communicatorBufferBytes, 0.0);
}

/// fp8 (Transformer Engine) keeps every layer weight's fp8 casts for the
/// step, row- and column-major: 2 more bytes per layer parameter.
TEST(MemoryTest, Fp8KeepsTheWeightCasts) {
  ModelConfig m = test::model("llama3-8b");
  ClusterSpec c = test::preset("dgx-h100", 1);
  ParallelPlan p = test::plan(2, 2, 2, 4);
  CostConstants k;
  ParallelPlan f8 = p;
  f8.dtype = DType::F8E4M3;
  for (int stage = 0; stage < 2; ++stage) {
    Workload w = buildWorkload(m, c, p, k);
    MemoryBreakdown bf = stageMemory(m, c, p, w, stage, k);
    MemoryBreakdown e8 =
        stageMemory(m, c, f8, buildWorkload(m, c, f8, k), stage, k);
    double layers = double(layersInChunk(m, p, stage));
    EXPECT_NEAR(e8.parameters - bf.parameters, 2 * layers * w.layerParams,
                1e-6 * bf.parameters);
    EXPECT_DOUBLE_EQ(e8.gradients, bf.gradients);
    EXPECT_DOUBLE_EQ(e8.optimizerStates, bf.optimizerStates);
  }
}

TEST(MemoryTest, HigherZeroStagesNeverUseMoreMemory) {
  CostConstants k;
  for (const char *name : {"gpt2-medium", "megatron-18b", "llama3-8b"}) {
    ModelConfig m = test::model(name);
    for (int dp : {2, 8, 64}) {
      ClusterSpec c = test::preset("dgx-h100", dp);
      double previous = 1e300;
      for (int zero = 0; zero <= 3; ++zero) {
        ParallelPlan p = test::plan(8, 1, dp);
        p.zeroStage = zero;
        double total =
            stageMemory(m, c, p, buildWorkload(m, c, p, k), 0, k).total();
        EXPECT_LE(total, previous) << name << " dp " << dp << " zero " << zero;
        previous = total;
      }
    }
  }
}

TEST(MemoryTest, MoreTensorParallelismNeverMoreParameterMemory) {
  CostConstants k;
  ClusterSpec c = test::preset("dgx-h100", 1);
  for (const char *name : {"gpt3-175b", "llama3-70b", "gpt2-medium"}) {
    ModelConfig m = test::model(name);
    double previous = 1e300;
    for (int tp : {1, 2, 4, 8}) {
      ParallelPlan p = test::plan(tp, 1, 1);
      MemoryBreakdown mem =
          stageMemory(m, c, p, buildWorkload(m, c, p, k), 0, k);
      EXPECT_LT(mem.parameters, previous) << name << " tp " << tp;
      previous = mem.parameters;
    }
  }
}

/// Micro-batches alive on a stage: 1F1B keeps pp - stage, GPipe all m,
/// interleaved Megatron's warm-up count + 1 chunks.
TEST(MemoryTest, LiveMicroBatchesFollowTheSchedule) {
  ModelConfig m = test::model("megatron-18b"); // 40 layers
  ParallelPlan p = test::plan(8, 4, 1, 16);
  for (int stage = 0; stage < 4; ++stage)
    EXPECT_DOUBLE_EQ(peakLiveLayerMicroBatches(m, p, stage),
                     (4 - stage) * 10.0);
  p.schedule = Schedule::GPipe;
  EXPECT_DOUBLE_EQ(peakLiveLayerMicroBatches(m, p, 2), 16 * 10.0);
  p.schedule = Schedule::Interleaved1F1B;
  p.virtualStages = 2; // 5 layers per chunk
  EXPECT_DOUBLE_EQ(peakLiveLayerMicroBatches(m, p, 0),
                   ((4 - 1) * 2 + (2 - 1) * 4 + 1) * 5.0);
  p.schedule = Schedule::ZeroBubbleH1;
  p.virtualStages = 1;
  for (int stage = 0; stage < 4; ++stage)
    EXPECT_LE(peakLiveLayerMicroBatches(m, p, stage), 4 * 10.0);
}

TEST(MemoryTest, PeakTracksTheBiggestStage) {
  ModelConfig m = test::model("gpt3-175b");
  ClusterSpec c = test::preset("dgx-a100-80gb", 8);
  ParallelPlan p = test::plan(8, 8, 1, 32);
  p.sequenceParallel = true;
  p.recompute = Recompute::Selective;
  Result<Estimate> e = estimate(m, c, p);
  ASSERT_TRUE(e) << e.error();
  ASSERT_EQ(e->memoryPerStage.size(), 8u);
  for (const MemoryBreakdown &s : e->memoryPerStage)
    EXPECT_LE(s.total(), e->peakMemory().total());
  // Stage 0 keeps the most micro-batches alive under 1F1B.
  EXPECT_GT(e->memoryPerStage[0].activations, e->memoryPerStage[7].activations);
  EXPECT_EQ(e->fits, e->peakMemory().fits());
}

/// NCCL buffers from NCCL's defaults: per collective communicator,
/// `ncclChannels` ring connections with a Simple (4 MiB), LL128 (4,915,200
/// B) and LL (512 KiB) buffer; per pipeline neighbour two channels of one
/// 4 MiB Simple buffer.
TEST(MemoryTest, NcclBuffersFollowNcclDefaults) {
  CostConstants k;
  double connection = 4194304.0 + 4915200 + 524288;
  ParallelPlan p = test::plan(8, 4, 2);
  EXPECT_DOUBLE_EQ(ncclBufferBytes(p, k),
                   2 * 16 * connection + 2 * 2 * 4194304.0);
  p.cp = 2; // a CP communicator; DP x CP is still one
  EXPECT_DOUBLE_EQ(ncclBufferBytes(p, k),
                   3 * 16 * connection + 2 * 2 * 4194304.0);
  k.ncclChannels = 32;
  EXPECT_DOUBLE_EQ(ncclBufferBytes(test::plan(1, 1, 1), k), 0);
  EXPECT_DOUBLE_EQ(ncclBufferBytes(test::plan(1, 1, 8), k), 32 * connection);
}

/// Llama 3 405B ran its 8K-token pre-training on 80 GB H100s at tp 8, pp 16,
/// dp 64 with one layer per virtual stage, separate embedding and loss
/// stages, sharded optimizer state and gradients and no activation
/// checkpointing (Llama 3 paper, Sec. 3.3.2 and Table 4): it must fit, and
/// only just (its activations alone take 75 GB on the second stage).
TEST(MemoryTest, Llama3With405BParametersFitsItsPublishedPlan) {
  ModelConfig m = test::model("llama3-405b");
  m.seqLen = 8192;
  ClusterSpec c = test::preset("dgx-h100", 1024);
  ParallelPlan p = test::plan(8, 16, 64, 32);
  p.sequenceParallel = true;
  p.schedule = Schedule::Interleaved1F1B;
  p.virtualStages = 8;
  p.zeroStage = 2;
  p.layersPerChunk.assign(128, 1);
  p.layersPerChunk.front() = p.layersPerChunk.back() = 0;
  CostConstants k;
  std::vector<MemoryBreakdown> stages =
      memoryPerStage(m, c, p, buildWorkload(m, c, p, k), k);
  double peak = 0;
  for (const MemoryBreakdown &s : stages) {
    EXPECT_TRUE(s.fits()) << s.total() / 1e9 << " GB of " << s.usable() / 1e9;
    peak = std::max(peak, s.total());
  }
  EXPECT_GT(peak, 0.9 * stages[0].usable());
}

} // namespace

/// Under full recomputation a layer's backward pass holds the recomputed
/// layer (every activation it keeps without recomputation, less its input,
/// which the saved activations count as the checkpoint), the gradient of
/// its largest intermediate and the gradient of its output: for the GPT of
/// bench/remat (hidden 256, ffn 1024, seq 256, batch 8, fp32, flash) 31.5 MB
/// + 8.4 MB + 2.1 MB, measured 44.1 MB beside a 2.1 MB checkpoint at the
/// step's peak (docs/recompute.md).
TEST(MemoryTest, FullRecomputeTransientIsTheRecomputedLayer) {
  ModelConfig m = test::model("tiny-gpt");
  m.layers = 4;
  m.hidden = 256;
  m.heads = m.kvHeads = 8;
  m.ffnHidden = 1024;
  m.seqLen = 256;
  m.dropout = 0;
  ParallelPlan p = test::plan(1, 1, 1);
  p.microBatchSize = 8;
  p.dtype = DType::F32;
  p.attention = AttentionImpl::Flash;
  p.recompute = Recompute::Full;
  double tokens = 8 * 256, w = 4;
  double checkpoint = w * tokens * 256;
  EXPECT_DOUBLE_EQ(layerActivationBytes(m, p), checkpoint);
  ParallelPlan none = p;
  none.recompute = Recompute::None;
  // LN inputs 4 T h, Q K V 3 T h, attention output T h, MLP 2 T ffn, and
  // the log-sum-exp (4 bytes per token and head).
  double kept = w * tokens * (8 * 256 + 2 * 1024) + 4 * tokens * 8;
  EXPECT_DOUBLE_EQ(layerActivationBytes(m, none), kept);
  EXPECT_DOUBLE_EQ(largestIntermediateBytes(m, p), w * tokens * 1024);
  EXPECT_DOUBLE_EQ(recomputedLayerTransientBytes(m, p),
                   kept - checkpoint + w * tokens * 1024 + w * tokens * 256);
  // The layer's backward dominates the loss's working set (vocabulary 65),
  // and the recomputed tensors are not counted twice: less than the saved
  // activations of one layer plus a tensor and its gradient of the largest
  // intermediate (the transient without recomputation).
  m.vocab = 65;
  ClusterSpec c = test::preset("dgx-a100-80gb", 1);
  Result<Estimate> e = estimate(m, c, p);
  ASSERT_TRUE(e) << e.error();
  EXPECT_DOUBLE_EQ(e->peakMemory().transient,
                   recomputedLayerTransientBytes(m, p));
  EXPECT_LT(e->peakMemory().transient, kept + 2 * w * tokens * 1024);
}

/// ZB-H1's B pass hands its W pass the gradient of every linear's output
/// (measured on tiny-gpt, pp=2,dp=2,zero=3,schedule=zb-h1,micro=1: 4.7 MiB
/// of stage 1's B outputs, 2.25 MiB per layer plus the logits' gradient).
/// 1F1B has no W pass and keeps none of them.
TEST(MemoryTest, ZeroBubbleKeepsTheLinearOutputGradientsForW) {
  ModelConfig m = test::model("tiny-gpt");
  m.layers = 4;
  m.hidden = 128;
  m.heads = 4;
  m.ffnHidden = 512;
  m.seqLen = 128;
  ClusterSpec c = test::preset("dgx-a100-80gb", 4);
  ParallelPlan p = test::plan(1, 2, 2, 2);
  p.microBatchSize = 4;
  p.dtype = DType::F32;
  CostConstants k;
  double tokens = 4 * 128.0;
  // Q, K, V, the projection, the MLP's up and down projections, fp32.
  double perLayer = 4 * tokens * (3 * 128 + 128 + 512 + 128);
  EXPECT_DOUBLE_EQ(deferredWeightGradInputBytes(m, p), perLayer);
  std::vector<MemoryBreakdown> oneF =
      memoryPerStage(m, c, p, buildWorkload(m, c, p, k), k);
  p.schedule = Schedule::ZeroBubbleH1;
  std::vector<MemoryBreakdown> zb =
      memoryPerStage(m, c, p, buildWorkload(m, c, p, k), k);
  EXPECT_DOUBLE_EQ(zb[0].transient - oneF[0].transient, 2 * perLayer);
  EXPECT_DOUBLE_EQ(zb[1].transient - oneF[1].transient,
                   2 * perLayer + 4 * tokens * double(m.vocab));
}
