//===- Workload.h - The kernels of a transformer training step --*- C++ -*-===//
//
// What one rank computes for one micro-batch: the kernels of a transformer
// layer (GPT or Llama) with local shapes under tensor, sequence and context
// parallelism, in forward, input-gradient (B) and weight-gradient (W)
// passes, with the tensor-parallel and context-parallel communication that
// sits on the critical path. Layers repeat, so one layer is built once and
// costed once; the first pipeline stage adds the embedding, the last the
// final norm, the output layer and the loss.
//
// This is the per-rank program representation below the schedule: a
// partitioned MLIR module can be converted into the same `WorkItem` lists
// (a kernel per local op, a collective per communication op), which the
// schedule builder then replays per micro-batch (Program.h).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_WORKLOAD_H
#define CLEAVE_COSTMODEL_WORKLOAD_H

#include "cleave/CostModel/Collective.h"
#include "cleave/CostModel/OpCost.h"
#include "cleave/CostModel/Plan.h"

#include <array>
#include <optional>
#include <vector>

namespace cleave::cost {

/// The mesh axis a communication runs over. EP: the expert-parallel group
/// (`ep` consecutive data-parallel ranks), its token all-to-alls.
enum class Axis { TP, CP, DP, PP, EP };
constexpr int kNumAxes = 5;
const char *toString(Axis axis);

enum class Phase { Forward, Backward, WeightGrad };

/// One kernel or one collective of a layer's program.
struct WorkItem {
  const char *name = "";
  Phase phase = Phase::Forward;
  /// Recomputed under selective recompute (the attention core).
  bool attentionCore = false;
  bool isComm = false;
  Kernel kernel;
  CollectiveKind commKind = CollectiveKind::AllReduce;
  double commBytes = 0;
  Axis commAxis = Axis::TP;
  /// The collective runs concurrently with the item before it (Megatron's
  /// sequence-parallel all-gather during the input-gradient GEMM, ring
  /// attention's KV exchange during the attention kernel).
  bool overlapsPrevious = false;
  /// FLOPs by the Megatron convention (full s x s attention, even causal).
  double conventionFlops = 0;
};

/// Time of one pass over one layer (or the embedding / output layer) for
/// one micro-batch on one rank.
struct PassCost {
  double compute = 0;
  /// Exposed communication on the critical path, by axis (TP, CP, EP).
  double tpComm = 0, cpComm = 0, epComm = 0;
  /// CPU seconds the pass's collectives cost the rank's process on a shared
  /// host (collectiveCpu; not time on the critical path, not in total()).
  double commCpu = 0;
  double total() const { return compute + tpComm + cpComm + epComm; }
  PassCost &operator+=(const PassCost &o) {
    compute += o.compute;
    tpComm += o.tpComm;
    cpComm += o.cpComm;
    epComm += o.epComm;
    commCpu += o.commCpu;
    return *this;
  }
  PassCost scaled(double k) const {
    return {compute * k, tpComm * k, cpComm * k, epComm * k, commCpu * k};
  }
};

/// Everything the schedule builder needs about the work of one rank.
struct Workload {
  /// One transformer layer, one micro-batch.
  PassCost layerForward, layerBackward, layerWeightGrad, layerRecompute;
  /// The recompute pass of one layer under each kind (index: Recompute);
  /// `layerRecompute` is the entry of the plan's uniform kind.
  std::array<PassCost, 3> layerRecomputeOf{};
  /// First stage: token (and position) embedding.
  PassCost embeddingForward, embeddingBackward;
  /// Last stage: final norm, output layer, loss.
  PassCost headForward, headBackward, headWeightGrad;
  /// Parameters held by one rank (after TP and EP), before ZeRO sharding.
  double layerParams = 0, embeddingParams = 0, headParams = 0;
  /// Of `layerParams`, the routed experts' (an average layer: MoE layers'
  /// share of the model's layers): split over ep, replicated and reduced
  /// over the dp / ep ranks of the expert-data-parallel group only.
  double layerExpertParams = 0;
  /// Bytes one rank sends to the next pipeline stage per micro-batch.
  double p2pBytes = 0;
  /// Whole step, whole model (Megatron convention, see Estimate.h).
  double modelFlopsPerStep = 0, hardwareFlopsPerStep = 0;
  /// Bytes one rank keeps for the backward pass per micro-batch: one
  /// layer's, the embedding's, the head's (the values its backward ops
  /// read), when the workload comes from the program's ops (the graph path).
  /// Unset: the activations come from Korthikanti's formula (Memory.h).
  std::optional<double> layerActivationBytes, embeddingActivationBytes,
      headActivationBytes;
};

/// The items of one transformer layer on one rank, for plan `plan`
/// (forward, then backward in execution order): a MoE layer if the model
/// has experts (every preset's MoE layers are all its layers).
std::vector<WorkItem> layerItems(const ModelConfig &model,
                                 const ParallelPlan &plan);
/// The items of a dense (`moe` false) or a MoE layer.
std::vector<WorkItem> layerItems(const ModelConfig &model,
                                 const ParallelPlan &plan, bool moe);
/// The share of the model's layers that are MoE layers (0 for dense).
double moeLayerShare(const ModelConfig &model);
/// How many times the mean per-expert load the busiest expert-parallel
/// rank computes and receives: the capacity factor (every expert computes
/// its capacity, empty slots included), or dropless under ep > 1 the prior
/// CostConstants::moeDroplessImbalance, or 1 (dropless, all experts local).
double expertLoadFactor(const ModelConfig &model, const ParallelPlan &plan,
                        const CostConstants &c);
/// The first stage's embedding items.
std::vector<WorkItem> embeddingItems(const ModelConfig &model,
                                     const ParallelPlan &plan);
/// The last stage's final norm, output layer and loss.
std::vector<WorkItem> headItems(const ModelConfig &model,
                                const ParallelPlan &plan);

/// Costs the items of `phase`: kernels on the GPU, collectives on the
/// group of their axis under `plan`'s layout.
PassCost costPhase(const std::vector<WorkItem> &items, Phase phase,
                   const ClusterSpec &cluster, const ParallelPlan &plan,
                   const CostConstants &c);

/// The FLOPs of `phase` by the published convention (WorkItem::
/// conventionFlops), of the attention core only if `coreOnly`.
double conventionFlops(const std::vector<WorkItem> &items, Phase phase,
                       bool coreOnly);

/// The extra forward work that recomputation `kind` runs before the
/// backward pass of a layer made of `items`: all of its forward (full), its
/// attention core (selective) or nothing.
PassCost recomputeCost(const std::vector<WorkItem> &items,
                       const ClusterSpec &cluster, const ParallelPlan &plan,
                       Recompute kind, const CostConstants &c);

/// Builds the workload of `plan`; the plan must be valid (validatePlan).
Workload buildWorkload(const ModelConfig &model, const ClusterSpec &cluster,
                       const ParallelPlan &plan, const CostConstants &c);

/// The communicator group of `axis` under the tp-cp-dp-pp rank order.
/// The DP group spans DP x CP (gradients are reduced over both); the EP
/// group is `ep` consecutive members of the DP axis (stride tp x cp).
GroupPlacement axisGroup(Axis axis, const ParallelPlan &plan,
                         const ClusterSpec &cluster);
/// The group that reduces the expert weights' gradients: the dp / ep ranks
/// (times cp) that hold the same experts, `ep` data-parallel ranks apart.
GroupPlacement expertDpGroup(const ParallelPlan &plan,
                             const ClusterSpec &cluster);
/// Seconds of a data-parallel collective of `bytes` of parameters or
/// gradients of which the share `expertShare` is routed experts': under ep
/// those run over expertDpGroup after the rest over the DP group.
double dataParallelTime(CollectiveKind kind, double bytes, double expertShare,
                        const ParallelPlan &plan, const ClusterSpec &cluster,
                        const CostConstants &c);
/// The CPU seconds the same costs a rank's process on a shared host
/// (collectiveCpu; 0 on devices).
double dataParallelCpu(CollectiveKind kind, double bytes, double expertShare,
                       const ParallelPlan &plan, const ClusterSpec &cluster);
/// Parameters per rank after ZeRO's sharding of `params` of which the share
/// `expertShare` is routed experts' (sharded over dp / ep x cp, the rest
/// over dp x cp); `params` itself if `sharded` is false.
double zeroShard(double params, double expertShare, bool sharded,
                 const ParallelPlan &plan);

} // namespace cleave::cost

#endif // CLEAVE_COSTMODEL_WORKLOAD_H
