//===- GraphWorkload.h - A step's work derived from the module's ops -*- C++
//-*-===//
//
// The graph-derived counterpart of cost::buildWorkload: instead of the
// preset's Megatron layer formulas, the kernels of one rank come from the
// module itself.
//
// 1. Layout: tensor parallelism is laid out Megatron-style from the op
//    graph alone. A weight used by an op whose other operands are whole
//    splits the op's largest factor that only the weight carries (a
//    matmul's output columns, an embedding's vocabulary); the split flows
//    through the sharding rules of the following ops (pass-through factors
//    keep it, a reduction factor leaves a partial sum), and a partial sum
//    is all-reduced (reduce-scattered under sequence parallelism) before an
//    op that needs it whole. Those points are the region entries and exits
//    that carry the tensor-parallel collectives.
// 2. Local shapes: the batch dimension becomes the micro-batch, split
//    factors are divided by tp, float tensors take the plan's precision.
// 3. Backward: the region's ops are cloned on their local types into a
//    scratch function and differentiated there with each op's VJP rule, as
//    the autodiff pass would; weight-gradient ops are those that only feed
//    parameter gradients.
// 4. Work: every forward and backward op reports its work on its local
//    shapes (CostOpInterface::getWork); chains of fusable ops become one
//    memory-bound kernel that reads the chain's inputs and writes what
//    leaves it. GEMMs, fused attention and memory kernels are priced with
//    the cost model's kernel physics (cost::costPhase), so the result plugs
//    into the same program builder and simulator as the formula workload.
//
// 5. Activation memory: the values each region keeps for its backward pass
//    (the forward results and inputs that its backward ops read, on the
//    local shapes and element types), per micro-batch; the memory model
//    takes them instead of Korthikanti's formula when nothing is
//    recomputed.
//
// Not derived from the graph yet: context parallelism (the call fails for
// cp > 1).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_GRAPHWORKLOAD_H
#define CLEAVE_PLANNER_GRAPHWORKLOAD_H

#include "cleave/CostModel/Result.h"
#include "cleave/CostModel/Workload.h"
#include "cleave/Planner/ForwardView.h"

#include <functional>
#include <memory>

namespace cleave::planner {

/// The items of the three regions of a rank's program, as
/// cost::layerItems / embeddingItems / headItems give them for presets.
struct GraphItems {
  std::vector<cost::WorkItem> layer, embedding, head;
  /// Parameters one rank holds (after tensor parallelism).
  double layerParams = 0, embeddingParams = 0, headParams = 0;
  /// Bytes of the layer's output on one rank for one micro-batch.
  double layerOutputBytes = 0;
  /// Bytes each region keeps for its backward pass on one rank for one
  /// micro-batch: the values its backward ops read (RegionBuilder).
  double layerKeptBytes = 0, embeddingKeptBytes = 0, headKeptBytes = 0;
};

/// Derives the items of `plan` (tp, sp, micro-batch size, dtype) from the
/// forward view. The view must have a repeated block (the layers). Fails
/// naming the op when an op has no cost or gradient rule, or the plan uses
/// what the graph path does not derive yet.
cost::Result<GraphItems> deriveGraphItems(const ForwardView &view,
                                          const cost::ParallelPlan &plan);

/// The workload of `plan` from the module's ops, costed with the same
/// kernel and collective physics as cost::buildWorkload. `model` supplies
/// only the layer count, tied embeddings and the schedule's layer split.
cost::Result<cost::Workload>
buildGraphWorkload(const ForwardView &view, const ModelConfig &model,
                   const cost::ClusterSpec &cluster,
                   const cost::ParallelPlan &plan,
                   const cost::CostConstants &constants);

/// The workload of `plan` from items deriveGraphItems made for a plan with
/// the same tp, sequence parallelism, micro-batch size and precision.
cost::Workload workloadFromItems(const GraphItems &items,
                                 const ModelConfig &model,
                                 const cost::ClusterSpec &cluster,
                                 const cost::ParallelPlan &plan,
                                 const cost::CostConstants &constants);

/// PlannerOptions::workload for `view`: items derived once per tp,
/// sequence parallelism and micro-batch size, then costed per plan. The
/// first derivation error goes to `error` (that plan is priced by the
/// formulas of `model` meanwhile; the caller reports the error). `view`
/// must outlive the function.
std::function<cost::Workload(const cost::ParallelPlan &)>
graphWorkloadFunction(const ForwardView &view, const ModelConfig &model,
                      const cost::ClusterSpec &cluster,
                      std::shared_ptr<std::string> error);

/// What the schedule and the activation-memory model need to know about a
/// module whose preset is unknown, read from its ops: layers (instances of
/// the repeated block), sequence length and batch (the token input),
/// vocabulary and width (the token embedding table), heads and key/value
/// heads (the block's attention), the feed-forward width (the block's
/// widest matmul output), the norm (RMS: Llama-like, else GPT-like), tied
/// embeddings (the table read again after the block) and dropout. Fails
/// naming what is missing.
cost::Result<ModelConfig> deriveModelConfig(const ForwardView &view);

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_GRAPHWORKLOAD_H
