//===- IntraOp.h - The ILP of each pipeline stage ---------------*- C++ -*-===//
//
// Private to the planner: from a chosen plan to the strategy of every node
// per pipeline stage, and the graph-mode search (data x tensor parallel
// meshes priced by their ILPs) for programs the cost model does not cover.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_PLANNER_INTRAOP_H
#define CLEAVE_LIB_PLANNER_INTRAOP_H

#include "cleave/Planner/AutoShard.h"

#include <memory>

namespace cleave::planner::detail {

/// The ILP axes of a plan: dp (the batch), cp, tp, placed tp fastest.
std::vector<MeshAxis> meshAxes(const cost::ParallelPlan &p,
                               const cost::ClusterSpec &cluster);

/// Bytes a device holds per byte of an f32 parameter of the IR: the
/// parameter in the compute type, its gradient and the optimizer state,
/// each divided by what the ZeRO stage shards over.
double parameterStateFactor(const cost::ParallelPlan &p);

/// The pipeline chunk of every block instance: instance t is layer t when
/// the block repeats once per layer, else instances are spread evenly.
std::vector<int> chunkOfInstances(const ForwardView &v,
                                  const ModelConfig &model,
                                  const cost::ParallelPlan &p);

/// Solves the ILP of every pipeline stage of a transformer-mode plan;
/// `best` carries the cost model's memory per stage. Stages with the same
/// solution share one entry.
std::vector<StageSolution>
solveStages(const ShardingGraph &g, const Candidate &best, double memoryLimit,
            const std::vector<int> &chunkOfInstance, double timeLimit);

/// Graph mode: every dp x tp mesh (tp inside a node) and ZeRO stage, each
/// priced by its ILP plus the gradient reduction and the optimizer.
struct GraphModeResult {
  SearchResult search;
  /// The best plan's graph and its solution.
  std::shared_ptr<ShardingGraph> graph;
  std::vector<StageSolution> stages;
};
cost::Result<GraphModeResult> searchGraphMode(const ForwardView &view,
                                              const PlanCluster &cluster,
                                              const PlannerOptions &options,
                                              DType dtype, double timeLimit);

/// Graph mode's price of `plan` alone, as searchGraphMode prices its
/// candidate: `plan` must be a dp x tp mesh of `options.gpus` devices with
/// a ZeRO stage (no pipeline, one micro-batch; the caller checks).
Candidate priceGraphMode(const ForwardView &view, const PlanCluster &cluster,
                         const PlannerOptions &options, DType dtype,
                         const cost::ParallelPlan &plan, double timeLimit);

} // namespace cleave::planner::detail

#endif // CLEAVE_LIB_PLANNER_INTRAOP_H
