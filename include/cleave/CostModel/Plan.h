//===- Plan.h - A parallelization plan for a training step -----*- C++ -*-===//
//
// How one training step is split: the mesh (tensor, context, data and
// pipeline parallel sizes), the micro-batching and pipeline schedule,
// ZeRO sharding, activation recomputation, precision, and the
// implementation choices that change costs (fused attention, which
// communication overlaps). Ranks are numbered Megatron-style with TP
// fastest, then CP, then DP, then PP ("tp-cp-dp-pp"), so TP groups are
// consecutive GPUs of one node and PP stages are furthest apart. Expert
// parallelism (`ep`) is carved out of the data-parallel ranks: `dp` counts
// every replica of the dense weights, `ep` consecutive ones of them split
// the experts (cleave-apply-plan's mesh (pp, dp, ep, cp, tp) with its
// dp = dp / ep here).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_PLAN_H
#define CLEAVE_COSTMODEL_PLAN_H

#include "cleave/CostModel/Cluster.h"
#include "cleave/ModelConfig/ModelConfig.h"

#include <optional>
#include <string>
#include <vector>

namespace cleave::cost {

enum class Schedule {
  /// All forwards, then all backwards (Huang et al. 2019).
  GPipe,
  /// One-forward-one-backward (PipeDream-Flush; Narayanan et al. 2021).
  OneFOneB,
  /// 1F1B over `virtualStages` model chunks per rank (Narayanan et al.
  /// 2021, Sec. 2.2.2); needs numMicroBatches to be a multiple of pp.
  Interleaved1F1B,
  /// ZB-H1 (Qi et al. 2023): backward split into input-gradient (B) and
  /// weight-gradient (W) passes, W deferred into the bubbles, 1F1B memory.
  ZeroBubbleH1,
};

enum class Recompute {
  None,
  /// Only the attention core (Korthikanti et al. 2022).
  Selective,
  /// The whole layer from its input (checkpoint every layer).
  Full,
};

enum class AttentionImpl {
  /// Fused kernels (FlashAttention, cuDNN): no s x s tensors in memory.
  Flash,
  /// Batched GEMMs plus softmax and dropout kernels over s x s scores
  /// (Megatron-LM before 2023).
  Unfused,
};

struct ParallelPlan {
  int tp = 1, pp = 1, dp = 1, cp = 1;
  /// Expert parallelism (mixtures of experts): the experts of each MoE layer
  /// are split over `ep` consecutive data-parallel ranks, which exchange
  /// their tokens with all-to-alls; `ep` divides `dp` and the experts. The
  /// dense weights stay replicated over all `dp` ranks, the expert weights
  /// over the `dp / ep` ranks that hold the same experts (Megatron-Core's
  /// expert-model-parallel with its expert-data-parallel group). As the
  /// executor runs it, every one of the `dp` ranks takes its own share of
  /// the batch, `ep` included (named plan `ep=E,dp=D` = `dp=D*E ep=E`).
  int ep = 1;
  /// The sequence layout over cp: load-balanced (rank r holds chunks r and
  /// 2cp-1-r, cleave-run's default for causal programs) or contiguous
  /// (rank r holds block r; the last rank does the most causal work).
  bool cpBalanced = true;
  bool sequenceParallel = false;
  int64_t microBatchSize = 1;
  /// Micro-batches per data-parallel replica per step.
  int64_t numMicroBatches = 1;
  Schedule schedule = Schedule::OneFOneB;
  /// Model chunks per pipeline rank (interleaved schedule only).
  int virtualStages = 1;
  /// 0: plain data parallelism; 1: optimizer state sharded (Megatron's
  /// distributed optimizer); 2: + gradients; 3: + parameters.
  int zeroStage = 0;
  Recompute recompute = Recompute::None;
  /// Recomputation of each pipeline stage (pp entries); empty: `recompute`
  /// everywhere. Early stages keep more micro-batches alive under 1F1B, so
  /// they may recompute while later stages do not.
  std::vector<Recompute> recomputePerStage;
  /// Compute precision. f32: pure fp32 training; bf16/f16: mixed precision
  /// with fp32 master weights and Adam moments; f8e4m3: fp8 linear layers
  /// (Transformer Engine), everything else bf16.
  DType dtype = DType::BF16;

  //===--- Implementation choices
  //------------------------------------------===//
  AttentionImpl attention = AttentionImpl::Flash;
  /// Precision of the data-parallel gradient reduction; unset: fp32 for
  /// bf16/fp8/fp32 compute (Megatron's main grads), fp16 for fp16.
  std::optional<DType> gradReduceDType;
  /// Reduce gradients bucket by bucket during the last backward pass.
  bool overlapGradReduce = false;
  /// ZeRO-1/2: gather updated parameters during the next forward pass.
  bool overlapParamGather = false;
  /// Overlap TP collectives with the neighbouring GEMMs.
  bool overlapTpComm = false;
  /// Megatron's scatter/gather optimization: pipeline sends of 1/tp of the
  /// activation per TP rank, then an all-gather inside the node.
  bool scatterGatherP2p = true;
  /// Global-norm gradient clipping before the optimizer (cleave-autodiff
  /// grad-clip): every rank reads its gradient shard once for the sum of
  /// squares (in CostConstants::adamBytesPerParam), and the partial sums
  /// meet in one scalar all-reduce over all ranks. On by default: published
  /// LLM runs clip (Megatron-LM's default clip-grad is 1.0); cleave-run
  /// --plan auto sets it from --grad-clip.
  bool clipGradients = true;
  /// fp16 with dynamic loss scaling (cleave-autodiff loss-scaling): the
  /// gradients are unscaled (one pass over each rank's gradient shard, read
  /// and written) and checked for infinities and NaNs through the same
  /// global sum of squares as clipping: one scalar all-reduce over all
  /// ranks, shared with clipping when both are on. cleave-run sets it from
  /// --loss-scale (dynamic by default for f16).
  bool dynamicLossScaling = false;
  /// The optimizer updates the parameters and its state in place (Megatron,
  /// DeepSpeed). False: the step returns the new parameters and optimizer
  /// state while its arguments still hold the old ones, and both are live
  /// at the step's peak (Cleave's compiled step, as cleave-run runs it;
  /// the planner sets it for this machine's processes).
  bool inPlaceUpdate = true;
  /// What the forward pass gathers is gathered again for the backward pass
  /// and freed after each use: ZeRO-3's parameters (DeepSpeed, FSDP) and a
  /// tensor-parallel region's input under sequence parallelism (Megatron).
  /// False: a gathered value stays live from its forward use to its
  /// backward use, so every ZeRO-3 parameter of the stage is whole at the
  /// turn of the step and the sequence-parallel region inputs are kept
  /// whole, and the backward pass gathers neither (Cleave's compiled step,
  /// whose gathered values are SSA values that the backward reads; the
  /// planner sets it for this machine's processes).
  bool regatherForBackward = true;
  /// Each micro-batch's backward pass adds its weight gradients into the
  /// accumulated ones (Megatron's gradient-accumulation fusion into
  /// main_grad). False: a micro-batch's backward pass returns its gradients
  /// and the sum over micro-batches is formed after it, so between backward
  /// passes the stage holds its gradients twice, the sum and the
  /// micro-batch's (Cleave's pipelined step; the planner sets it for this
  /// machine's processes). Only matters with more than one micro-batch.
  bool accumulateGradsInPlace = true;

  /// Layers of each pipeline chunk (pp x chunks() entries, in model order,
  /// each >= 1, summing to the model's layers); empty: an even split with
  /// the remainder on the first chunks. The planner sets it to balance the
  /// embedding and the output layer against the transformer layers.
  std::vector<int> layersPerChunk;

  int numGpus() const { return tp * pp * dp * cp; }
  /// Ranks that hold the same experts and reduce their gradients: dp / ep.
  int expertDp() const { return dp / ep; }
  int64_t globalBatch() const { return microBatchSize * numMicroBatches * dp; }
  DType gradDType() const;
  /// Model chunks per pipeline rank actually used by the schedule.
  int chunks() const {
    return schedule == Schedule::Interleaved1F1B ? virtualStages : 1;
  }
  /// The recomputation of pipeline stage `stage`.
  Recompute recomputeOf(int stage) const {
    return recomputePerStage.empty() ? recompute
                                     : recomputePerStage[size_t(stage)];
  }
  /// This plan with stage `stage`'s recomputation as the uniform one.
  ParallelPlan forStage(int stage) const;
};

/// Empty if `plan` can run `model` on `cluster`; otherwise a message naming
/// the plan field: "plan.tp: 3 does not divide the 32 attention heads".
std::string validatePlan(const ParallelPlan &plan, const ModelConfig &model,
                         const ClusterSpec &cluster);

/// Layers of pipeline chunk `chunk` (0 .. pp*chunks-1, in model order):
/// `plan.layersPerChunk[chunk]` if set, else an even split with the
/// remainder spread over the first chunks.
int64_t layersInChunk(const ModelConfig &model, const ParallelPlan &plan,
                      int chunk);

const char *toString(Schedule s);
const char *toString(Recompute r);
const char *toString(AttentionImpl a);
/// "gpipe", "1f1b", "interleaved", "zb-h1".
std::optional<Schedule> parseSchedule(const std::string &name);
/// "none", "selective", "full".
std::optional<Recompute> parseRecompute(const std::string &name);
/// "flash", "unfused".
std::optional<AttentionImpl> parseAttention(const std::string &name);
/// One line: "tp=8 pp=4 dp=32 cp=1 sp mbs=1 m=56 interleaved(v=3) zero=1 ...",
/// with " ep=N" after dp when the plan has expert parallelism.
std::string describe(const ParallelPlan &plan);

} // namespace cleave::cost

#endif // CLEAVE_COSTMODEL_PLAN_H
