//===- Annotate.h - Writing a plan into a module ----------------*- C++ -*-===//
//
// Private to the planner: the IR side of docs/plans.md.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_PLANNER_ANNOTATE_H
#define CLEAVE_LIB_PLANNER_ANNOTATE_H

#include "cleave/CostModel/Plan.h"
#include "cleave/Planner/ShardingGraph.h"
#include "mlir/IR/BuiltinOps.h"

#include <array>

namespace cleave::planner::detail {

struct PlanAnnotation {
  cost::ParallelPlan plan;
  const ShardingGraph *graph = nullptr;
  /// Pipeline chunk (virtual stage) of each block instance.
  std::vector<int> chunkOfInstance;
  /// Per pipeline stage: the strategy of every node.
  std::vector<std::vector<int>> choice;
  /// Links of the pp, dp, cp and tp mesh axes.
  std::array<mlir::cleave::LinkKind, 4> links;
};

/// Writes the mesh, shardings, constraints, stages and plan attribute.
mlir::LogicalResult annotateModule(mlir::ModuleOp module,
                                   const PlanAnnotation &a, std::string &error);

} // namespace cleave::planner::detail

#endif // CLEAVE_LIB_PLANNER_ANNOTATE_H
