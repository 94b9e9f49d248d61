//===- Memory.cpp - Per-rank memory: model state, activations, buffers ----===//

#include "cleave/CostModel/Memory.h"
#include "cleave/CostModel/Schedule.h"

#include <algorithm>
#include <cmath>

namespace cleave::cost {
namespace {

/// Local sizes for the activation terms (see Workload.cpp's Dims).
struct ActDims {
  double tokens, tokensSp, h, q, kv, ffn, w, mask;
  double scores; ///< elements of one s x s score tensor set (unfused)
};

ActDims actDims(const ModelConfig &m, const ParallelPlan &p) {
  ActDims d;
  double t = p.tp;
  bool sp = p.sequenceParallel && p.tp > 1;
  d.tokens = double(p.microBatchSize) * m.seqLen / p.cp;
  d.tokensSp = sp ? d.tokens / t : d.tokens;
  d.h = m.hidden;
  d.q = double(m.heads) / t * m.headDim();
  d.kv = std::max(1.0, double(m.kvHeads) / t) * m.headDim();
  d.ffn = double(m.ffnHidden) / t;
  d.w = p.dtype == DType::F32 ? 4 : 2;
  d.mask = m.dropout > 0 ? 1 : 0;
  d.scores = double(p.microBatchSize) * double(m.heads) / t *
             (double(m.seqLen) / p.cp) * m.seqLen;
  return d;
}

} // namespace

double layerActivationBytes(const ModelConfig &m, const ParallelPlan &p) {
  ActDims d = actDims(m, p);
  if (p.recompute == Recompute::Full)
    return d.w * d.tokensSp * d.h; // the checkpointed layer input
  bool flash = p.attention == AttentionImpl::Flash;
  bool llama = m.arch == Architecture::Llama;
  double bytes = 0;
  // Attention block: norm input, QKV input (the norm output, sequence-
  // sharded under SP and re-gathered in backward), Q K V, the output
  // projection's input, the dropout mask after the projection.
  bytes += 2 * d.w * d.tokensSp * d.h;
  bytes += d.w * d.tokens * (d.q + 2 * d.kv);
  // Context parallelism as Cleave runs it (docs/partitioning.md): K and V
  // are all-gathered over cp before the attention, and its backward reads
  // the gathered, whole-sequence K and V (instead of the local blocks).
  bytes += d.w * d.tokens * 2 * d.kv * (p.cp - 1);
  bytes += d.w * d.tokens * d.q;
  bytes += d.mask * d.tokensSp * d.h;
  if (flash) {
    bytes += 4 * d.tokens * (d.q / m.headDim()); // log-sum-exp, fp32
  } else if (p.recompute != Recompute::Selective) {
    // Softmax output, dropout mask and dropout output (5 a s^2 b).
    bytes += d.scores * (d.w + (d.mask ? 1 + d.w : 0));
  }
  // MLP block: norm input, up-projection input, activation input(s) and
  // output, dropout mask.
  bytes += 2 * d.w * d.tokensSp * d.h;
  bytes += d.mask * d.tokensSp * d.h;
  double dense = d.w * d.tokens * d.ffn * (llama ? 3 : 2);
  double share = moeLayerShare(m);
  return bytes + (1 - share) * dense + share * moeActivationBytes(m, p);
}

double moeActivationBytes(const ModelConfig &m, const ParallelPlan &p) {
  ActDims d = actDims(m, p);
  // Every rank holds the expert rows it computes: load x its mean share.
  double slots =
      d.tokens * double(m.topK) * expertLoadFactor(m, p, defaultConstants());
  double f = double(m.expertFfnHidden);
  double shared = double(m.sharedExperts) * f / p.tp;
  // Router: fp32 scores and gates (its input, the norm output, is the
  // up-projection input layerActivationBytes counts).
  double bytes = 8 * d.tokens * double(m.experts);
  // Routed experts: the dispatched input, the SwiGLU's two inputs and its
  // output, the expert output before the combine.
  bytes += d.w * slots * (2 * d.h + 3 * f);
  // Shared experts: the SwiGLU's inputs and output.
  bytes += d.w * d.tokens * shared * 3;
  return bytes;
}

double stageParameters(const ModelConfig &m, const ParallelPlan &p,
                       const Workload &w, int stage) {
  double layers = 0;
  for (int c = 0; c < p.chunks(); ++c)
    layers += double(layersInChunk(m, p, c * p.pp + stage));
  double params = layers * w.layerParams;
  if (stage == 0)
    params += w.embeddingParams;
  if (stage == p.pp - 1)
    params += w.headParams;
  return params;
}

namespace {

/// Peak of (micro-batch, chunk) pairs alive on `stage`, each weighted by
/// `weightOf(chunk)`.
template <typename F>
double peakOnStage(const std::vector<PassRef> &order, const ParallelPlan &p,
                   F weightOf) {
  std::vector<double> weights(p.chunks());
  for (int c = 0; c < p.chunks(); ++c)
    weights[c] = weightOf(c);
  return peakLive(order, p.schedule == Schedule::ZeroBubbleH1, weights);
}

} // namespace

double peakLiveLayerMicroBatches(const ModelConfig &m, const ParallelPlan &p,
                                 int stage) {
  std::vector<std::vector<PassRef>> orders = pipelineOrders(p);
  return peakOnStage(orders[stage], p, [&](int c) {
    return double(layersInChunk(m, p, c * p.pp + stage));
  });
}

double largestIntermediateBytes(const ModelConfig &m, const ParallelPlan &p) {
  ActDims d = actDims(m, p);
  double largest =
      std::max(d.w * d.tokens * d.ffn * (m.arch == Architecture::Llama ? 2 : 1),
               d.w * d.tokens * d.h);
  if (m.isMoE()) // the rank's expert rows entering the down projection
    largest = std::max(largest, d.w * d.tokens * double(m.topK) *
                                    expertLoadFactor(m, p, defaultConstants()) *
                                    2 * double(m.expertFfnHidden));
  if (p.attention == AttentionImpl::Unfused)
    largest = std::max(largest, d.w * d.scores);
  return largest;
}

double recomputedLayerTransientBytes(const ModelConfig &m,
                                     const ParallelPlan &p) {
  ActDims d = actDims(m, p);
  ParallelPlan none = p;
  none.recompute = Recompute::None;
  double checkpoint = layerActivationBytes(m, p);
  return layerActivationBytes(m, none) - checkpoint +
         largestIntermediateBytes(m, p) + d.w * d.tokensSp * d.h;
}

double deferredWeightGradInputBytes(const ModelConfig &m,
                                    const ParallelPlan &p) {
  ActDims d = actDims(m, p);
  double up = d.ffn * (m.arch == Architecture::Llama ? 2 : 1);
  return d.w * d.tokens * (d.q + 2 * d.kv + d.h + up + d.h);
}

namespace {

/// Largest working set beyond the saved activations: one layer's backward
/// or, on the last stage, the loss (16-bit logits, fp32 logits and softmax)
/// less what the head keeps as activations (`headKept`, from the program's
/// ops). The two are not live at once. Without full recomputation a layer's
/// backward holds a tensor and its gradient of the largest intermediate;
/// under full recomputation, the recomputed layer and the gradients its
/// backward pass starts with (recomputedLayerTransientBytes).
double transientBytes(const ModelConfig &m, const ParallelPlan &p,
                      bool lastStage, double headKept) {
  ActDims d = actDims(m, p);
  double layer = p.recompute == Recompute::Full
                     ? recomputedLayerTransientBytes(m, p)
                     : 2 * largestIntermediateBytes(m, p);
  double loss = 0;
  if (lastStage)
    loss = std::max(0.0, d.tokens * std::ceil(double(m.vocab) / p.tp) *
                                 (d.w + 4 + 4) -
                             headKept);
  return std::max(layer, loss);
}

} // namespace

double ncclBufferBytes(const ParallelPlan &p, const CostConstants &c) {
  // NCCL src/init.cc: DEFAULT_BUFFSIZE (Simple, 4 MiB),
  // DEFAULT_LL128_BUFFSIZE (120 elements x 640 threads x 8 steps x 8 B) and
  // DEFAULT_LL_BUFFSIZE (8 lines x 512 threads x 8 steps x 16 B).
  constexpr double kSimple = 4194304, kLL128 = 4915200, kLL = 524288;
  // Point-to-point: NCCL_NCHANNELS_PER_NET_PEER (2) channels per peer, each
  // with one Simple buffer of at most NCCL_BUFFSIZE.
  constexpr double kP2pChannelsPerPeer = 2;
  int collectives = (p.tp > 1) + (p.cp > 1) + (p.dp * p.cp > 1) + (p.ep > 1) +
                    (p.ep > 1 && p.expertDp() * p.cp > 1);
  double perCollective = c.ncclChannels * (kSimple + kLL128 + kLL);
  double p2pPeers = p.pp > 1 ? 2 : 0; // the previous and the next stage
  return collectives * perCollective + p2pPeers * kP2pChannelsPerPeer * kSimple;
}

namespace {

MemoryBreakdown memoryOf(const ModelConfig &m, const ClusterSpec &cl,
                         const ParallelPlan &p, const Workload &w, int stage,
                         const CostConstants &c,
                         const std::vector<std::vector<PassRef>> &orders) {
  MemoryBreakdown mem;
  mem.capacity = cl.gpu.hbmBytes;
  double params = stageParameters(m, p, w, stage);
  bool mixed = p.dtype != DType::F32;
  double paramBytes = mixed ? 2 : 4;
  double gradBytes = double(bytesOf(p.gradDType()));
  double optimizerBytes = mixed ? 12 : 8; // fp32 master + m + v, or m + v
  double shard = double(p.dp) * p.cp;
  // The routed experts' share: split over ep already (Workload), sharded by
  // ZeRO over the dp / ep ranks that hold the same experts.
  double layersHere = 0;
  for (int ch = 0; ch < p.chunks(); ++ch)
    layersHere += double(layersInChunk(m, p, ch * p.pp + stage));
  double expert = params > 0 ? layersHere * w.layerExpertParams / params : 0;
  double expertShard = double(p.expertDp()) * p.cp;
  auto sharded = [&](double total, bool byZero) {
    return byZero ? total * (1 - expert) / shard + total * expert / expertShard
                  : total;
  };
  mem.parameters = sharded(params * paramBytes, p.zeroStage >= 3);
  if (p.dtype == DType::F8E4M3) {
    // Transformer Engine keeps each fp8 linear's weight cast for the step,
    // row- and column-major (1 + 1 bytes per layer parameter).
    double layers = 0;
    for (int ch = 0; ch < p.chunks(); ++ch)
      layers += double(layersInChunk(m, p, ch * p.pp + stage));
    mem.parameters +=
        layers * w.layerParams * 2 / (p.zeroStage >= 3 ? shard : 1);
  }
  mem.gradients = sharded(params * gradBytes, p.zeroStage >= 2);
  if (!p.accumulateGradsInPlace && p.numMicroBatches > 1)
    // The micro-batch's gradients beside their sum (whole: the sum over
    // micro-batches comes before any ZeRO reduce-scatter).
    mem.gradients += params * gradBytes;
  mem.optimizerStates = sharded(params * optimizerBytes, p.zeroStage >= 1);

  double live = peakOnStage(orders[stage], p, [&](int c) {
    return double(layersInChunk(m, p, c * p.pp + stage));
  });
  // Activations and working memory follow this stage's recomputation. A
  // workload from the program's ops states what each region keeps; full
  // and selective recomputation keep what the formula says.
  ParallelPlan own = p.forStage(stage);
  bool fromOps =
      w.layerActivationBytes.has_value() && own.recompute == Recompute::None;
  mem.activations =
      live * (fromOps ? *w.layerActivationBytes : layerActivationBytes(m, own));
  ActDims d = actDims(m, p);
  if (stage == 0 && (d.mask > 0 || w.embeddingActivationBytes)) {
    double mbs =
        peakOnStage(orders[0], p, [](int c) { return c == 0 ? 1.0 : 0.0; });
    // The embedding's dropout masks (formula), or what it keeps.
    mem.activations +=
        mbs * w.embeddingActivationBytes.value_or(d.tokensSp * d.h);
  }
  if (stage == p.pp - 1 && w.headActivationBytes) {
    int last = p.chunks() - 1;
    double mbs = peakOnStage(orders[stage], p,
                             [&](int c) { return c == last ? 1.0 : 0.0; });
    mem.activations += mbs * *w.headActivationBytes;
  }
  mem.transient = transientBytes(m, own, stage == p.pp - 1,
                                 w.headActivationBytes.value_or(0));
  if (p.schedule == Schedule::ZeroBubbleH1) {
    // At the end of a B pass its outputs for the W pass are all alive (the
    // runtime allocates a pass's results before the call): the gradients
    // of the linears' outputs of the stage's layers and, on the last
    // stage, of the logits (the head's weight gradient reads them).
    mem.transient += layersHere * deferredWeightGradInputBytes(m, own);
    if (stage == p.pp - 1)
      mem.transient += d.w * d.tokens * std::ceil(double(m.vocab) / p.tp);
  }

  // A device without NCCL (a local CPU rank) states its own buffers.
  int communicators = (p.tp > 1) + (p.cp > 1) + (p.dp * p.cp > 1) +
                      (p.pp > 1 ? 2 : 0) + (p.ep > 1) +
                      (p.ep > 1 && p.expertDp() * p.cp > 1);
  mem.communication = cl.gpu.communicatorBufferBytes
                          ? communicators * *cl.gpu.communicatorBufferBytes
                          : ncclBufferBytes(p, c);
  if (p.zeroStage >= 3 && !p.regatherForBackward) {
    // Gathered parameters stay live until their backward use: the whole
    // stage's parameters at the turn, beside one bucket of unsharded
    // gradients being reduce-scattered.
    double others = params * (1 - 1 / shard);
    mem.communication +=
        others * paramBytes + std::min(c.dpBucketParams, others) * gradBytes;
  } else if (p.zeroStage >= 3) {
    // ZeRO-3 gathers module by module: the weight in use and the prefetched
    // next one (DeepSpeed's live-parameter limit), never more than what
    // sharding removed.
    double h = m.hidden, f = m.ffnHidden;
    double largest =
        std::max(3 * h * h, (m.arch == Architecture::Llama ? 2 : 1) * f * h) /
        p.tp;
    if (m.isMoE()) // one of the rank's expert weight stacks [E/ep, H, F]
      largest = std::max(largest, double(m.experts) / p.ep * h *
                                      double(m.expertFfnHidden));
    mem.communication += std::min(2 * std::min(largest, w.layerParams),
                                  params * (1 - 1 / shard)) *
                         paramBytes;
  } else if (p.zeroStage == 2) {
    // One bucket of unsharded gradients being reduced.
    mem.communication +=
        std::min(c.dpBucketParams, params * (1 - 1 / shard)) * gradBytes;
  }
  mem.reserved = cl.gpu.runtimeReservedBytes.value_or(c.runtimeReservedBytes);
  if (!p.inPlaceUpdate)
    mem.stateUpdate = mem.parameters + mem.optimizerStates;
  return mem;
}

} // namespace

MemoryBreakdown stageMemory(const ModelConfig &m, const ClusterSpec &cl,
                            const ParallelPlan &p, const Workload &w, int stage,
                            const CostConstants &c) {
  return memoryOf(m, cl, p, w, stage, c, pipelineOrders(p));
}

std::vector<MemoryBreakdown> memoryPerStage(const ModelConfig &m,
                                            const ClusterSpec &cl,
                                            const ParallelPlan &p,
                                            const Workload &w,
                                            const CostConstants &c) {
  std::vector<std::vector<PassRef>> orders = pipelineOrders(p);
  std::vector<MemoryBreakdown> out;
  for (int s = 0; s < p.pp; ++s)
    out.push_back(memoryOf(m, cl, p, w, s, c, orders));
  return out;
}

} // namespace cleave::cost
