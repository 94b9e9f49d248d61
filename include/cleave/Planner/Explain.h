//===- Explain.h - Why a plan won, why others lost -------------*- C++ -*-===//
//
// The planner's report: the chosen plan with its predicted step time, MFU,
// memory per GPU and where the time goes; the runners-up and the faster
// plans the memory limit ruled out, each with the reason it lost; and, when
// nothing fits, which constraint fails and by how much. Text and JSON.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_EXPLAIN_H
#define CLEAVE_PLANNER_EXPLAIN_H

#include "cleave/Planner/Search.h"

#include <nlohmann/json_fwd.hpp>

namespace cleave::planner {

/// One line on why `loser` lost to `best`: over the memory limit (by how
/// much, on which stage), or slower and where (pipeline bubble, exposed
/// communication by axis, recomputation, compute).
std::string explainLoss(const Candidate &loser, const Candidate &best,
                        double memoryLimit);

/// When no plan fits: every reason, with numbers (meshes the model or the
/// constraints rule out; the smallest memory any plan needs vs the limit).
std::vector<std::string> explainInfeasible(const ModelConfig &model,
                                           const PlannerOptions &options,
                                           const SearchResult &result);

/// The readable report of a search.
std::string formatSearch(const SearchResult &result, const ModelConfig &model,
                         const cost::ClusterSpec &cluster,
                         const PlannerOptions &options);

/// The report as JSON (seconds, bytes, FLOP/s).
nlohmann::json searchToJson(const SearchResult &result,
                            const ModelConfig &model,
                            const cost::ClusterSpec &cluster,
                            const PlannerOptions &options);

/// One plan as JSON: its fields, predicted time, MFU, memory.
nlohmann::json candidateToJson(const Candidate &c);

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_EXPLAIN_H
