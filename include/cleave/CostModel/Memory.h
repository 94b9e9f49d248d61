//===- Memory.h - Per-rank memory of a training step ------------*- C++ -*-===//
//
// Bytes a rank of each pipeline stage holds at its peak:
// - model state: parameters, gradients and Adam state under the precision
//   policy (fp32: 4 + 4 + 8 bytes per parameter; mixed precision: 16-bit
//   parameters, fp32 or 16-bit gradients, fp32 master + two moments = 12)
//   and the ZeRO stage (1 shards the optimizer state over DP x CP, 2 also
//   the gradients, 3 also the parameters; Rajbhandari et al. 2020);
// - activations saved for backward: per layer and micro-batch, Korthikanti
//   et al. 2022 Table 2 generalized (Llama layers, fused attention, GQA,
//   context parallelism), times the layer-micro-batches the schedule keeps
//   alive at once on that stage;
// - transient working memory of one layer's backward and of the loss;
// - NCCL buffers per communicator, ZeRO-3 gathered parameters, and the
//   CUDA context / library workspaces.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_MEMORY_H
#define CLEAVE_COSTMODEL_MEMORY_H

#include "cleave/CostModel/Workload.h"

namespace cleave::cost {

struct MemoryBreakdown {
  double parameters = 0;
  double gradients = 0;
  double optimizerStates = 0;
  /// Saved for backward, over every micro-batch alive at the peak.
  double activations = 0;
  /// Working set of the layer being run backward and of the loss.
  double transient = 0;
  /// NCCL buffers and, under ZeRO-3, the gathered parameters.
  double communication = 0;
  /// CUDA context, cuBLAS workspaces, allocator slack.
  double reserved = 0;
  /// The new parameters and optimizer state of a step that does not
  /// update in place (ParallelPlan::inPlaceUpdate), live beside the old.
  double stateUpdate = 0;
  /// The device's memory, and the fraction of it plans leave free.
  double capacity = 0;
  double headroom = 0;

  double total() const {
    return parameters + gradients + optimizerStates + activations + transient +
           communication + reserved + stateUpdate;
  }
  /// What plans may use: the capacity less the headroom.
  double usable() const { return capacity * (1 - headroom); }
  bool fits() const { return total() <= usable(); }
};

/// Activation bytes one transformer layer saves for backward for one
/// micro-batch on one rank. For a GPT layer with dropout and unfused
/// attention this is Korthikanti et al.'s Table 2: s b h (34 + 5 a s / h)
/// without parallelism, s b h (10 + 24 / t + 5 a s / (h t)) with TP,
/// s b h / t (34 + 5 a s / h) with TP + SP, 34 s b h / t with selective
/// recompute, 2 s b h (/ t with SP) with full recompute.
double layerActivationBytes(const ModelConfig &model, const ParallelPlan &plan);
/// Of a MoE layer, what its feed-forward block keeps for the backward pass
/// on one rank beyond its input: the router's scores, the expert rows this rank
/// computes (tokens x top-k x the load factor: dispatched input, SwiGLU
/// inputs and output, expert output) and the shared experts' SwiGLU.
double moeActivationBytes(const ModelConfig &model, const ParallelPlan &plan);

/// The largest intermediate of one layer on one rank for one micro-batch:
/// the MLP's hidden activation (both SwiGLU inputs on Llama), the hidden
/// state, a MoE rank's expert rows or, unfused, one s x s score tensor.
double largestIntermediateBytes(const ModelConfig &model,
                                const ParallelPlan &plan);
/// Under full recomputation, what the backward pass of a layer holds beyond
/// the saved activations (which count the layer's checkpointed input):
/// every activation the recomputed forward keeps for the layer's backward,
/// except that input, the gradient of the largest intermediate and the
/// gradient of the layer's output (the residual stream) it starts from.
/// The recomputed tensors are not counted a second time: the rest of a
/// layer's backward working set is what it frees of them.
double recomputedLayerTransientBytes(const ModelConfig &model,
                                     const ParallelPlan &plan);

/// Under a zero-bubble schedule (zb-h1), what one layer's B pass hands to
/// its deferred W pass for one micro-batch beyond the saved activations:
/// the gradient of every linear's output (Q, K and V, the attention
/// projection, the MLP's up (gate and up on Llama) and down projections),
/// which the weight gradients read. The split does not shrink the
/// activations (W still reads every linear's input), so these are extra.
double deferredWeightGradInputBytes(const ModelConfig &model,
                                    const ParallelPlan &plan);

/// Layer-micro-batches whose activations one rank of `stage` keeps alive at
/// once under the plan's schedule, computed from the schedule's order (the
/// same order the simulator replays).
double peakLiveLayerMicroBatches(const ModelConfig &model,
                                 const ParallelPlan &plan, int stage);

/// The memory of one rank of pipeline stage `stage`.
MemoryBreakdown stageMemory(const ModelConfig &model,
                            const ClusterSpec &cluster,
                            const ParallelPlan &plan, const Workload &work,
                            int stage, const CostConstants &c);
/// The memory of one rank of every pipeline stage (the schedule computed
/// once).
std::vector<MemoryBreakdown> memoryPerStage(const ModelConfig &model,
                                            const ClusterSpec &cluster,
                                            const ParallelPlan &plan,
                                            const Workload &work,
                                            const CostConstants &c);

/// Bytes of NCCL buffers one rank holds: every collective communicator it
/// belongs to (TP, CP, DP x CP) has `ncclChannels` ring connections with
/// NCCL's default Simple, LL128 and LL buffers (9.2 MiB each); pipeline
/// stages add point-to-point buffers to the previous and the next stage.
double ncclBufferBytes(const ParallelPlan &plan, const CostConstants &c);

/// Parameters one rank of `stage` holds before ZeRO sharding.
double stageParameters(const ModelConfig &model, const ParallelPlan &plan,
                       const Workload &work, int stage);

} // namespace cleave::cost

#endif // CLEAVE_COSTMODEL_MEMORY_H
