//===- Workload.cpp - Transformer layers as kernels and collectives -------===//
//
// The kernel lists follow Megatron-LM's implementation (fused bias-GeLU,
// fused bias-dropout-add, fused scale-mask-softmax, sequence parallelism as
// all-gather / reduce-scatter around the column- and row-parallel GEMMs;
// Korthikanti et al. 2022 Fig. 5) and, for Llama, the same structure with
// RMSNorm, rotary embeddings, grouped-query attention and SwiGLU.
// Memory-bound kernels count the bytes they read and write.
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Workload.h"

#include <algorithm>
#include <cmath>

namespace cleave::cost {

const char *toString(Axis axis) {
  switch (axis) {
  case Axis::TP:
    return "tp";
  case Axis::CP:
    return "cp";
  case Axis::DP:
    return "dp";
  case Axis::PP:
    return "pp";
  case Axis::EP:
    return "ep";
  }
  return "?";
}

GroupPlacement axisGroup(Axis axis, const ParallelPlan &p,
                         const ClusterSpec &cl) {
  int g = cl.gpusPerNode;
  switch (axis) {
  case Axis::TP:
    return placeGroup(p.tp, 1, g);
  case Axis::CP:
    return placeGroup(p.cp, p.tp, g);
  case Axis::DP:
    return placeGroup(p.dp * p.cp, p.tp, g);
  case Axis::PP:
    return placeGroup(p.pp, p.tp * p.cp * p.dp, g);
  case Axis::EP:
    return placeGroup(p.ep, p.tp * p.cp, g);
  }
  return {};
}

GroupPlacement expertDpGroup(const ParallelPlan &p, const ClusterSpec &cl) {
  if (p.ep <= 1)
    return axisGroup(Axis::DP, p, cl);
  // dp / ep members ep ranks apart on the DP axis; under cp the cp ranks
  // beside each (an approximation: a group at the wider stride, which
  // spans at least as many nodes as the real one).
  return placeGroup(p.expertDp() * p.cp, p.tp * p.ep, cl.gpusPerNode);
}

double dataParallelTime(CollectiveKind kind, double bytes, double expert,
                        const ParallelPlan &p, const ClusterSpec &cl,
                        const CostConstants &c) {
  GroupPlacement dp = axisGroup(Axis::DP, p, cl);
  if (p.ep <= 1 || expert <= 0)
    return collectiveCost(kind, bytes, dp, cl, c).time;
  return collectiveCost(kind, bytes * (1 - expert), dp, cl, c).time +
         collectiveCost(kind, bytes * expert, expertDpGroup(p, cl), cl, c).time;
}

double dataParallelCpu(CollectiveKind kind, double bytes, double expert,
                       const ParallelPlan &p, const ClusterSpec &cl) {
  GroupPlacement dp = axisGroup(Axis::DP, p, cl);
  if (p.ep <= 1 || expert <= 0)
    return collectiveCpu(kind, bytes, dp, cl);
  return collectiveCpu(kind, bytes * (1 - expert), dp, cl) +
         collectiveCpu(kind, bytes * expert, expertDpGroup(p, cl), cl);
}

double zeroShard(double params, double expert, bool sharded,
                 const ParallelPlan &p) {
  if (!sharded)
    return params;
  return params * (1 - expert) / (double(p.dp) * p.cp) +
         params * expert / (double(p.expertDp()) * p.cp);
}

double moeLayerShare(const ModelConfig &m) {
  if (!m.isMoE() || m.layers <= 0)
    return 0;
  int64_t moe = 0;
  for (int64_t l = 0; l < m.layers; ++l)
    moe += m.isMoELayer(l);
  return double(moe) / double(m.layers);
}

double expertLoadFactor(const ModelConfig &m, const ParallelPlan &p,
                        const CostConstants &c) {
  // C = min(S, c S k / E) slots per expert and sequence: at most E / k
  // times the mean share (every expert takes every token).
  if (m.capacityFactor > 0)
    return std::min(m.capacityFactor, double(m.experts) / double(m.topK));
  return p.ep > 1 ? c.moeDroplessImbalance : 1.0;
}

namespace {

/// Local sizes of one rank for one micro-batch.
struct Dims {
  double b, s, sq, tokens, tokensSp, h, heads, kvHeads, headDim, ffn, vocab;
  double act; ///< bytes per activation element
  /// Share of the causal scores the busiest context-parallel rank computes.
  double causalShare;
  double tp;
  /// Mixture of experts: experts, top-k, expert width, shared experts'
  /// width per TP rank, expert parallelism, the load factor.
  double experts, topK, expertFfn, sharedFfn, ep, load;
  DType dtype;
  bool sp, dropout, flash, llama;
};

Dims dimsOf(const ModelConfig &m, const ParallelPlan &p) {
  Dims d;
  d.b = double(p.microBatchSize);
  d.s = double(m.seqLen);
  d.sq = d.s / p.cp;
  // Contiguous blocks: the last rank's queries see (2cp-1)/2cp of the keys
  // on average, and every rank waits for it at the next collective.
  d.causalShare =
      p.cp > 1 && !p.cpBalanced ? (2.0 * p.cp - 1) / (2.0 * p.cp) : 0.5;
  d.tokens = d.b * d.sq;
  d.tp = p.tp;
  d.sp = p.sequenceParallel && p.tp > 1;
  d.tokensSp = d.sp ? d.tokens / p.tp : d.tokens;
  d.h = double(m.hidden);
  d.headDim = double(m.headDim());
  d.heads = double(m.heads) / p.tp;
  d.kvHeads = std::max(1.0, double(m.kvHeads) / p.tp);
  d.ffn = double(m.ffnHidden) / p.tp;
  d.vocab = std::ceil(double(m.vocab) / p.tp);
  d.act = p.dtype == DType::F32 ? 4 : 2;
  d.dtype = p.dtype;
  d.dropout = m.dropout > 0;
  d.flash = p.attention == AttentionImpl::Flash;
  d.llama = m.arch == Architecture::Llama;
  d.experts = double(m.experts);
  d.topK = double(m.topK);
  d.expertFfn = double(m.expertFfnHidden);
  d.sharedFfn = double(m.sharedExperts * m.expertFfnHidden) / p.tp;
  d.ep = p.ep;
  d.load = 1;
  return d;
}

/// Appends items with their Megatron-convention FLOPs.
class Builder {
public:
  explicit Builder(Dims d) : d(d) {}

  /// fp8 plans run Transformer Engine's fp8 linear layers; attention and
  /// the output layer stay in bf16 (Megatron-Core with TE).
  bool fp8Linears = true;
  DType gemmType(bool core) const {
    bool f8 = d.dtype == DType::F8E4M3;
    return f8 && (core || !fp8Linears) ? DType::BF16 : d.dtype;
  }

  void gemm(const char *name, Phase phase, double m, double n, double k,
            double batch = 1, bool core = false) {
    WorkItem it = base(name, phase, core);
    it.kernel = Kernel::makeGemm({m, n, k, batch}, gemmType(core));
    it.conventionFlops = 2 * m * n * k * batch;
    items.push_back(it);
  }
  /// The forward GEMM x[T, K] W[K, N], or its two backward GEMMs. In fp8,
  /// Transformer Engine first casts the 16-bit operand that changes every
  /// micro-batch with its fused cast-transpose kernel (read 16-bit, write
  /// fp8 row- and column-major for the backward GEMMs, amax reduced in the
  /// same kernel): x in forward, dY in backward. The weights' casts are
  /// once per step (ProgramBuilder, with the optimizer).
  void linear(const char *name, bool backward, double n, double k) {
    bool f8 = gemmType(false) == DType::F8E4M3;
    if (!backward) {
      if (f8)
        memory("fp8_cast_transpose", Phase::Forward,
               d.tokens * k * (d.act + 2));
      return gemm(name, Phase::Forward, d.tokens, n, k);
    }
    if (f8)
      memory("fp8_cast_transpose", Phase::Backward, d.tokens * n * (d.act + 2));
    gemm(name, Phase::Backward, d.tokens, k, n);   // dX = dY W^T
    gemm(name, Phase::WeightGrad, k, n, d.tokens); // dW = X^T dY
  }
  void memory(const char *name, Phase phase, double bytes, bool core = false) {
    WorkItem it = base(name, phase, core);
    it.kernel = Kernel::makeMemory(bytes);
    items.push_back(it);
  }
  void comm(const char *name, Phase phase, CollectiveKind kind, double bytes,
            Axis axis, bool overlapsPrevious = false) {
    WorkItem it = base(name, phase, false);
    it.isComm = true;
    it.commKind = kind;
    it.commBytes = bytes;
    it.commAxis = axis;
    it.overlapsPrevious = overlapsPrevious;
    items.push_back(it);
  }
  void flash(bool backward) {
    AttentionShape a{d.b, d.heads, d.sq, d.s, d.headDim, true, d.causalShare};
    WorkItem it =
        base("attention", backward ? Phase::Backward : Phase::Forward, true);
    it.kernel = Kernel::makeAttention(a, backward, DType::BF16);
    it.kernel.dtype = d.dtype;
    double fwd = 4 * d.b * d.heads * d.sq * d.s * d.headDim;
    it.conventionFlops = backward ? 2 * fwd : fwd;
    items.push_back(it);
  }

  const Dims d;
  std::vector<WorkItem> items;

private:
  WorkItem base(const char *name, Phase phase, bool core) {
    WorkItem it;
    it.name = name;
    it.phase = phase;
    it.attentionCore = core;
    return it;
  }
};

/// The attention core between the QKV and output projections.
void attentionCore(Builder &b, bool backward) {
  const Dims &d = b.d;
  double scores = d.b * d.heads * d.sq * d.s;
  Phase ph = backward ? Phase::Backward : Phase::Forward;
  // Context parallelism as cleave-run executes it (docs/partitioning.md):
  // K and V all-gathered over cp before the attention, on its critical
  // path (the attention needs them at once), and dK, dV reduce-scattered
  // back after its backward. Sizes are the whole (gathered) K and V. With
  // the load-balanced layout (the default) every rank does the average
  // causal work below; with the contiguous one the last rank does most
  // (Dims::causalShare).
  double cp = d.s / d.sq;
  double kvBytesFull = 2 * d.b * d.s * d.kvHeads * d.headDim * d.act;
  if (cp > 1 && !backward)
    b.comm("cp_kv_all_gather", ph, CollectiveKind::AllGather, kvBytesFull,
           Axis::CP);
  if (d.flash) {
    b.flash(backward);
  } else if (!backward) {
    double bh = d.b * d.heads;
    b.gemm("attention_scores", ph, d.sq, d.s, d.headDim, bh, true);
    b.memory("softmax", ph, scores * 2 * d.act, true);
    if (d.dropout)
      b.memory("attention_dropout", ph, scores * (2 * d.act + 1), true);
    b.gemm("attention_context", ph, d.sq, d.headDim, d.s, bh, true);
    b.memory("context_transpose", ph,
             2 * d.tokens * d.heads * d.headDim * d.act, true);
  } else {
    double bh = d.b * d.heads;
    b.memory("context_transpose", ph,
             2 * d.tokens * d.heads * d.headDim * d.act, true);
    b.gemm("attention_context_dgrad", ph, d.sq, d.s, d.headDim, bh, true);
    b.gemm("attention_context_vgrad", ph, d.s, d.headDim, d.sq, bh, true);
    if (d.dropout)
      b.memory("attention_dropout", ph, scores * (2 * d.act + 1), true);
    b.memory("softmax", ph, scores * 3 * d.act, true);
    b.gemm("attention_scores_qgrad", ph, d.sq, d.headDim, d.s, bh, true);
    b.gemm("attention_scores_kgrad", ph, d.s, d.headDim, d.sq, bh, true);
  }
  if (cp > 1 && backward)
    b.comm("cp_kv_grad_reduce_scatter", ph, CollectiveKind::ReduceScatter,
           kvBytesFull, Axis::CP);
}

/// Entering a tensor-parallel region: SP all-gathers the sequence shards.
void enterTp(Builder &b, const char *name, bool backward) {
  const Dims &d = b.d;
  double full = d.tokens * d.h * d.act;
  if (d.tp <= 1)
    return;
  if (!backward) {
    if (d.sp)
      b.comm(name, Phase::Forward, CollectiveKind::AllGather, full, Axis::TP);
    return;
  }
  // Backward of the entry: all-reduce (TP) or reduce-scatter (SP) of the
  // input gradient.
  b.comm(name, Phase::Backward,
         d.sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, full,
         Axis::TP);
}

/// Leaving a tensor-parallel region: all-reduce, or reduce-scatter with SP.
void exitTp(Builder &b, const char *name, bool backward) {
  const Dims &d = b.d;
  double full = d.tokens * d.h * d.act;
  if (d.tp <= 1)
    return;
  if (!backward)
    b.comm(name, Phase::Forward,
           d.sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce,
           full, Axis::TP);
  else if (d.sp)
    b.comm(name, Phase::Backward, CollectiveKind::AllGather, full, Axis::TP);
}

/// Norm + residual bookkeeping on the (possibly sequence-sharded) stream.
void norm(Builder &b, const char *name, bool backward) {
  const Dims &d = b.d;
  double x = d.tokensSp * d.h * d.act;
  b.memory(name, backward ? Phase::Backward : Phase::Forward,
           backward ? 3 * x : 2 * x);
}

void residual(Builder &b, const char *name, bool backward) {
  const Dims &d = b.d;
  double x = d.tokensSp * d.h * d.act;
  double mask = d.dropout ? d.tokensSp * d.h : 0;
  b.memory(name, backward ? Phase::Backward : Phase::Forward,
           (backward ? 2 * x : 3 * x) + mask);
}

void attentionBlock(Builder &b, bool backward) {
  const Dims &d = b.d;
  double qkvWidth = (d.heads + 2 * d.kvHeads) * d.headDim;
  double projIn = d.heads * d.headDim;
  double rope = 2 * d.tokens * (d.heads + d.kvHeads) * d.headDim * d.act;
  if (!backward) {
    norm(b, "attention_norm", false);
    enterTp(b, "qkv_all_gather", false);
    b.linear("qkv", false, qkvWidth, d.h);
    if (d.llama)
      b.memory("rotary", Phase::Forward, rope);
    attentionCore(b, false);
    b.linear("attention_output", false, d.h, projIn);
    exitTp(b, "attention_output_reduce", false);
    residual(b, "attention_residual", false);
    return;
  }
  residual(b, "attention_residual", true);
  exitTp(b, "attention_output_grad_all_gather", true);
  b.linear("attention_output", true, d.h, projIn);
  attentionCore(b, true);
  if (d.llama)
    b.memory("rotary", Phase::Backward, rope);
  b.linear("qkv", true, qkvWidth, d.h);
  if (d.sp) // re-gather the norm output for the weight gradient
    b.comm("qkv_input_all_gather", Phase::Backward, CollectiveKind::AllGather,
           d.tokens * d.h * d.act, Axis::TP, true);
  enterTp(b, "qkv_input_grad_reduce", true);
  norm(b, "attention_norm", true);
}

void mlpBlock(Builder &b, bool backward) {
  const Dims &d = b.d;
  double up = d.llama ? 2 * d.ffn : d.ffn;
  double actIn = d.tokens * up * d.act, actOut = d.tokens * d.ffn * d.act;
  if (!backward) {
    norm(b, "mlp_norm", false);
    enterTp(b, "mlp_all_gather", false);
    b.linear("mlp_up", false, up, d.h);
    b.memory(d.llama ? "swiglu" : "bias_gelu", Phase::Forward, actIn + actOut);
    b.linear("mlp_down", false, d.h, d.ffn);
    exitTp(b, "mlp_down_reduce", false);
    residual(b, "mlp_residual", false);
    return;
  }
  residual(b, "mlp_residual", true);
  exitTp(b, "mlp_down_grad_all_gather", true);
  b.linear("mlp_down", true, d.h, d.ffn);
  b.memory(d.llama ? "swiglu" : "bias_gelu", Phase::Backward,
           2 * actIn + actOut);
  b.linear("mlp_up", true, up, d.h);
  if (d.sp)
    b.comm("mlp_input_all_gather", Phase::Backward, CollectiveKind::AllGather,
           d.tokens * d.h * d.act, Axis::TP, true);
  enterTp(b, "mlp_input_grad_reduce", true);
  norm(b, "mlp_norm", true);
}

/// The shared experts: one dense SwiGLU of width sharedExperts x F, split
/// over tp like the dense MLP.
void sharedExperts(Builder &b, bool backward) {
  const Dims &d = b.d;
  if (d.sharedFfn <= 0)
    return;
  double actIn = d.tokens * 2 * d.sharedFfn * d.act,
         actOut = d.tokens * d.sharedFfn * d.act;
  if (!backward) {
    b.linear("shared_expert_up", false, 2 * d.sharedFfn, d.h);
    b.memory("shared_expert_swiglu", Phase::Forward, actIn + actOut);
    b.linear("shared_expert_down", false, d.h, d.sharedFfn);
    return;
  }
  b.linear("shared_expert_down", true, d.h, d.sharedFfn);
  b.memory("shared_expert_swiglu", Phase::Backward, 2 * actIn + actOut);
  b.linear("shared_expert_up", true, 2 * d.sharedFfn, d.h);
}

/// The routed experts' SwiGLU on one rank: its ep-th of the experts, each
/// with `load` x its mean share of the tokens (grouped GEMMs, batch = local
/// experts). Convention FLOPs: the routed tokens (top-k per token), without
/// the load factor.
void expertGemms(Builder &b, bool backward) {
  const Dims &d = b.d;
  double local = d.experts / d.ep;
  double slots = d.tokens * d.topK * d.load; // this rank's expert rows
  double rows = slots / local, f = d.expertFfn, h = d.h;
  double useful = 1 / d.load;
  auto gemm = [&](const char *name, Phase ph, double m, double n, double k) {
    b.gemm(name, ph, m, n, k, local);
    b.items.back().conventionFlops *= useful;
  };
  double actIn = slots * 2 * f * d.act, actOut = slots * f * d.act;
  if (!backward) {
    gemm("expert_up", Phase::Forward, rows, 2 * f, h);
    b.memory("expert_swiglu", Phase::Forward, actIn + actOut);
    gemm("expert_down", Phase::Forward, rows, h, f);
    return;
  }
  gemm("expert_down", Phase::Backward, rows, f, h);
  gemm("expert_down", Phase::WeightGrad, f, h, rows);
  b.memory("expert_swiglu", Phase::Backward, 2 * actIn + actOut);
  gemm("expert_up", Phase::Backward, rows, h, 2 * f);
  gemm("expert_up", Phase::WeightGrad, h, 2 * f, rows);
}

/// A MoE feed-forward block as the executor runs it (docs/moe.md): the
/// router and the routed experts are not split over tp (every TP rank
/// routes and computes the whole micro-batch's tokens; under SP they are
/// gathered first), the shared experts are. Under ep each rank holds
/// experts / ep experts and exchanges the dispatched tokens with one
/// all-to-all over the EP group before the experts and one after them,
/// forward and backward: tokens x top-k x load x hidden each.
void moeBlock(Builder &b, bool backward) {
  const Dims &d = b.d;
  double slots = d.tokens * d.topK * d.load;
  double buffer = slots * d.h * d.act;
  double logits = d.tokens * d.experts;
  bool tpRegion = d.sharedFfn > 0; // partial sums to reduce over tp
  Phase ph = backward ? Phase::Backward : Phase::Forward;
  if (!backward) {
    norm(b, "mlp_norm", false);
    enterTp(b, "moe_all_gather", false);
    sharedExperts(b, false);
    b.linear("router", false, d.experts, d.h);
    // fp32 softmax (or sigmoid) and top-k over the logits.
    b.memory("router_top_k", ph, logits * (d.act + 4 + 4));
    b.memory("moe_dispatch", ph, 2 * buffer);
    if (d.ep > 1)
      b.comm("moe_dispatch_all_to_all", ph, CollectiveKind::AllToAll, buffer,
             Axis::EP);
    expertGemms(b, false);
    if (d.ep > 1)
      b.comm("moe_combine_all_to_all", ph, CollectiveKind::AllToAll, buffer,
             Axis::EP);
    b.memory("moe_combine", ph, 2 * buffer + d.tokens * d.h * d.act);
    if (tpRegion)
      exitTp(b, "moe_output_reduce", false);
    residual(b, "mlp_residual", false);
    return;
  }
  residual(b, "mlp_residual", true);
  if (tpRegion)
    exitTp(b, "moe_output_grad_all_gather", true);
  // The expert outputs' gradient (gates times dY) and the gates' (dY . out).
  b.memory("moe_combine", ph, 3 * buffer);
  if (d.ep > 1)
    b.comm("moe_combine_grad_all_to_all", ph, CollectiveKind::AllToAll, buffer,
           Axis::EP);
  expertGemms(b, true);
  if (d.ep > 1)
    b.comm("moe_dispatch_grad_all_to_all", ph, CollectiveKind::AllToAll, buffer,
           Axis::EP);
  b.memory("moe_dispatch", ph, 2 * buffer + d.tokens * d.h * d.act);
  b.memory("router_top_k", ph, logits * (4 + 4 + d.act));
  b.linear("router", true, d.experts, d.h);
  sharedExperts(b, true);
  if (d.sp)
    b.comm("moe_input_all_gather", Phase::Backward, CollectiveKind::AllGather,
           d.tokens * d.h * d.act, Axis::TP, true);
  if (tpRegion || d.sp)
    enterTp(b, "moe_input_grad_reduce", true);
  norm(b, "mlp_norm", true);
}

/// A dense or MoE layer with the expert load factor `load`.
std::vector<WorkItem> layerItemsOf(const ModelConfig &m, const ParallelPlan &p,
                                   bool moe, double load) {
  Dims d = dimsOf(m, p);
  d.load = load;
  Builder b(d);
  auto ffn = moe ? moeBlock : mlpBlock;
  attentionBlock(b, false);
  ffn(b, false);
  ffn(b, true);
  attentionBlock(b, true);
  return std::move(b.items);
}

} // namespace

std::vector<WorkItem> layerItems(const ModelConfig &m, const ParallelPlan &p,
                                 bool moe) {
  return layerItemsOf(m, p, moe,
                      moe ? expertLoadFactor(m, p, defaultConstants()) : 1.0);
}

std::vector<WorkItem> layerItems(const ModelConfig &m, const ParallelPlan &p) {
  return layerItems(m, p, m.isMoE());
}

std::vector<WorkItem> embeddingItems(const ModelConfig &m,
                                     const ParallelPlan &p) {
  Builder b(dimsOf(m, p));
  const Dims &d = b.d;
  double x = d.tokens * d.h * d.act;
  b.memory("embedding_lookup", Phase::Forward,
           2 * x + (m.arch == Architecture::GPT ? 2 * x : 0));
  if (d.tp > 1) // vocabulary-parallel embedding: sum the partial lookups
    b.comm("embedding_reduce", Phase::Forward,
           d.sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, x,
           Axis::TP);
  if (d.dropout)
    b.memory("embedding_dropout", Phase::Forward,
             d.tokensSp * d.h * (2 * d.act + 1));
  if (d.sp)
    b.comm("embedding_grad_all_gather", Phase::Backward,
           CollectiveKind::AllGather, x, Axis::TP);
  // Scatter-add into the fp32 gradient of the (vocab / tp) x h table.
  b.memory("embedding_grad", Phase::WeightGrad, d.tokens * d.h * (d.act + 8));
  return std::move(b.items);
}

std::vector<WorkItem> headItems(const ModelConfig &m, const ParallelPlan &p) {
  Builder b(dimsOf(m, p));
  b.fp8Linears = false; // Megatron's output layer is not a TE module
  const Dims &d = b.d;
  double logits = d.tokens * d.vocab;
  norm(b, "final_norm", false);
  enterTp(b, "logits_all_gather", false);
  b.linear("logits", false, d.vocab, d.h);
  // Megatron's vocabulary-parallel cross entropy, pass by pass over the
  // logits: cast to fp32 (read 16-bit, write 4), max (read), subtract (read,
  // write), exp (read, write), sum (read), normalize into the saved softmax
  // (read, write): 2 + 4 + 4 + 8 + 8 + 4 + 8 = 38 bytes per logit with
  // 16-bit activations. Backward: scale the softmax by the loss gradient
  // (read, write) and cast back (read 4, write 16-bit).
  b.memory("cross_entropy", Phase::Forward, logits * (d.act + 36));
  if (d.tp > 1)
    b.comm("cross_entropy_reduce", Phase::Forward, CollectiveKind::AllReduce,
           3 * d.tokens * 4, Axis::TP);
  b.memory("cross_entropy", Phase::Backward, logits * (12 + d.act));
  b.linear("logits", true, d.vocab, d.h);
  enterTp(b, "logits_input_grad_reduce", true);
  norm(b, "final_norm", true);
  return std::move(b.items);
}

PassCost costPhase(const std::vector<WorkItem> &items, Phase phase,
                   const ClusterSpec &cl, const ParallelPlan &p,
                   const CostConstants &c) {
  PassCost cost;
  double previous = 0;
  for (const WorkItem &it : items) {
    if (it.phase != phase)
      continue;
    if (!it.isComm) {
      previous = kernelTime(it.kernel, cl.gpu, c);
      cost.compute += previous;
      continue;
    }
    GroupPlacement g = axisGroup(it.commAxis, p, cl);
    double t;
    if (it.commKind == CollectiveKind::SendRecv) {
      int steps = std::max(1, g.size - 1);
      t = steps * p2pTime(it.commBytes / steps, g.nodes > 1, cl, c);
      cost.commCpu += steps * p2pCpu(it.commBytes / steps, g.nodes > 1, cl);
    } else {
      t = collectiveCost(it.commKind, it.commBytes, g, cl, c).time;
      cost.commCpu += collectiveCpu(it.commKind, it.commBytes, g, cl);
    }
    double exposed = t;
    if (it.overlapsPrevious)
      exposed = std::max(0.0, t - previous) +
                c.overlapSlowdown * std::min(t, previous);
    else if (p.overlapTpComm && it.commAxis == Axis::TP)
      exposed = t * c.tpOverlapExposed;
    (it.commAxis == Axis::CP   ? cost.cpComm
     : it.commAxis == Axis::EP ? cost.epComm
                               : cost.tpComm) += exposed;
  }
  return cost;
}

double conventionFlops(const std::vector<WorkItem> &items, Phase phase,
                       bool coreOnly) {
  double f = 0;
  for (const WorkItem &it : items)
    if (it.phase == phase && (!coreOnly || it.attentionCore))
      f += it.conventionFlops;
  return f;
}

PassCost recomputeCost(const std::vector<WorkItem> &items,
                       const ClusterSpec &cl, const ParallelPlan &p,
                       Recompute kind, const CostConstants &c) {
  if (kind == Recompute::Full)
    return costPhase(items, Phase::Forward, cl, p, c);
  if (kind == Recompute::None)
    return {};
  std::vector<WorkItem> core;
  for (const WorkItem &it : items)
    if (it.phase == Phase::Forward && it.attentionCore && !it.isComm)
      core.push_back(it);
  return costPhase(core, Phase::Forward, cl, p, c);
}

namespace {

/// Parameters of one layer on one rank (after TP); norms and the biases of
/// row-parallel layers are replicated. A MoE layer's are its attention, its
/// router (replicated), its shared experts (split over tp) and
/// `expertParams`.
double layerParamsPerRank(const ModelConfig &m, const ParallelPlan &p,
                          bool moe) {
  double h = m.hidden, f = m.ffnHidden, t = p.tp, d = m.headDim();
  if (m.arch == Architecture::GPT)
    return (4 * h * h + 3 * h + 2 * h * f + f) / t + 6 * h;
  double kv = std::max(1.0, double(m.kvHeads) / t) * d;
  double attention = 2 * h * m.heads * d / t + 2 * h * kv + 2 * h;
  if (!moe)
    return attention + 3 * h * f / t;
  double fe = double(m.expertFfnHidden);
  return attention + double(m.experts) * h +
         3 * h * fe * double(m.sharedExperts) / t;
}

/// The routed experts' parameters of a MoE layer on one rank: experts / ep
/// whole SwiGLUs (the executor does not split them over tp).
double expertParamsPerRank(const ModelConfig &m, const ParallelPlan &p) {
  return double(m.experts) / p.ep * 3 * double(m.hidden) *
         double(m.expertFfnHidden);
}

void setFlops(Workload &w, const ModelConfig &m, const ParallelPlan &p) {
  // Whole-model FLOPs: the items of an unsplit layer for one sequence.
  ParallelPlan whole = p;
  whole.tp = whole.cp = 1;
  whole.sequenceParallel = false;
  whole.microBatchSize = 1;
  whole.ep = 1;
  double share = moeLayerShare(m);
  std::vector<WorkItem> layer = layerItems(m, whole, false);
  std::vector<WorkItem> head = headItems(m, whole);
  double layerFwd = conventionFlops(layer, Phase::Forward, false);
  if (share > 0) // MoE layers: routed experts' top-k, shared, router
    layerFwd = (1 - share) * layerFwd +
               share * conventionFlops(layerItems(m, whole, true),
                                       Phase::Forward, false);
  double headFwd = conventionFlops(head, Phase::Forward, false);
  double perSeq = 3 * (m.layers * layerFwd + headFwd);
  auto recomputeFlops = [&](Recompute kind) {
    return kind == Recompute::Full ? layerFwd
           : kind == Recompute::Selective
               ? conventionFlops(layer, Phase::Forward, true)
               : 0;
  };
  // Recomputed layers: every layer of each stage under that stage's kind.
  double recomputed = 0;
  for (int s = 0; s < p.pp; ++s)
    for (int ch = 0; ch < p.chunks(); ++ch)
      recomputed += double(layersInChunk(m, p, ch * p.pp + s)) *
                    recomputeFlops(p.recomputeOf(s));
  double batch = double(p.globalBatch());
  w.modelFlopsPerStep = batch * perSeq;
  w.hardwareFlopsPerStep = batch * (perSeq + recomputed);
}

} // namespace

Workload buildWorkload(const ModelConfig &m, const ClusterSpec &cl,
                       const ParallelPlan &p, const CostConstants &c) {
  Workload w;
  bool splitW = p.schedule == Schedule::ZeroBubbleH1;
  // An average layer: MoE layers weighted by their share of the layers.
  double share = moeLayerShare(m);
  for (bool moe : {false, true}) {
    double weight = moe ? share : 1 - share;
    if (weight <= 0)
      continue;
    std::vector<WorkItem> layer =
        layerItemsOf(m, p, moe, moe ? expertLoadFactor(m, p, c) : 1.0);
    w.layerForward += costPhase(layer, Phase::Forward, cl, p, c).scaled(weight);
    w.layerBackward +=
        costPhase(layer, Phase::Backward, cl, p, c).scaled(weight);
    w.layerWeightGrad +=
        costPhase(layer, Phase::WeightGrad, cl, p, c).scaled(weight);
    for (Recompute kind :
         {Recompute::None, Recompute::Selective, Recompute::Full})
      w.layerRecomputeOf[size_t(kind)] +=
          recomputeCost(layer, cl, p, kind, c).scaled(weight);
    w.layerParams += weight * layerParamsPerRank(m, p, moe);
    if (moe)
      w.layerExpertParams = weight * expertParamsPerRank(m, p);
  }
  w.layerParams += w.layerExpertParams;
  w.layerRecompute = w.layerRecomputeOf[size_t(p.recompute)];
  std::vector<WorkItem> embed = embeddingItems(m, p);
  w.embeddingForward = costPhase(embed, Phase::Forward, cl, p, c);
  w.embeddingBackward = costPhase(embed, Phase::Backward, cl, p, c);
  w.embeddingBackward += costPhase(embed, Phase::WeightGrad, cl, p, c);
  std::vector<WorkItem> head = headItems(m, p);
  w.headForward = costPhase(head, Phase::Forward, cl, p, c);
  w.headBackward = costPhase(head, Phase::Backward, cl, p, c);
  w.headWeightGrad = costPhase(head, Phase::WeightGrad, cl, p, c);
  if (!splitW) {
    w.layerBackward += w.layerWeightGrad;
    w.layerWeightGrad = {};
    w.headBackward += w.headWeightGrad;
    w.headWeightGrad = {};
  }
  double h = m.hidden, vt = std::ceil(double(m.vocab) / p.tp);
  w.embeddingParams =
      vt * h + (m.arch == Architecture::GPT ? double(m.seqLen) * h : 0);
  double norms = m.arch == Architecture::GPT ? 2 * h : h;
  // The last stage owns the output layer; with tied embeddings and several
  // stages it keeps its own copy (Megatron syncs the two every step).
  bool ownOutput = !m.tiedEmbeddings || p.pp > 1;
  w.headParams = norms + (ownOutput ? vt * h : 0);
  double act = p.dtype == DType::F32 ? 4 : 2;
  double tokens = double(p.microBatchSize) * m.seqLen / p.cp;
  bool shard = p.sequenceParallel || p.scatterGatherP2p;
  w.p2pBytes = tokens * h * act / (shard ? p.tp : 1);
  setFlops(w, m, p);
  return w;
}

} // namespace cleave::cost
