//===- Space.h - Candidate plans and their lower bounds ---------*- C++ -*-===//
//
// Private to the planner: the enumeration of the search space (shared by the
// branch and bound and the exhaustive search, so both see the same
// candidates in the same order), the workload cache, and the lower bound on
// a candidate's step time.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_PLANNER_SPACE_H
#define CLEAVE_LIB_PLANNER_SPACE_H

#include "cleave/Planner/Search.h"

#include <map>
#include <tuple>

namespace cleave::planner::detail {

struct Mesh {
  int tp = 1, cp = 1, dp = 1, pp = 1;
  /// Expert parallelism, carved out of dp (cost::ParallelPlan::ep).
  int ep = 1;
};

/// How a candidate's recomputation is chosen.
enum class RecomputeMode : uint8_t { None, Selective, Full, PerStage };

/// A candidate in compact form; `materialize` makes its plan.
struct Candidate {
  int32_t mesh = 0;
  int64_t microBatch = 1;
  cost::Schedule schedule = cost::Schedule::OneFOneB;
  int8_t virtualStages = 1;
  int8_t zero = 0;
  RecomputeMode recompute = RecomputeMode::None;
  bool sequenceParallel = false;
  bool balanced = false;
  /// Lower bound on the step time, and whether it is final (a coarse bound
  /// is refined once the candidate's stage partition or per-stage
  /// recomputation has been worked out).
  double bound = 0;
  bool exact = false;
  /// Set when refinement shows the candidate duplicates another one or
  /// cannot fit at all.
  bool dropped = false;
  /// Per-stage recomputation (RecomputeMode::PerStage) and balanced stage
  /// partition, once refined.
  std::vector<cost::Recompute> stageRecompute;
  std::vector<int> layers;
};

/// The search space of one problem, with caches shared by its candidates.
class Space {
public:
  Space(const ModelConfig &model, const cost::ClusterSpec &cluster,
        const PlannerOptions &options);

  /// Checks the options; empty if valid.
  std::string validateOptions() const;
  /// Enumerates every candidate with a (possibly coarse) bound.
  void enumerate();

  /// Makes the candidate's exact bound (computing its stage partition and
  /// per-stage recomputation); may drop it.
  void refine(Candidate &c);
  /// The plan of a refined candidate.
  cost::ParallelPlan materialize(const Candidate &c) const;
  /// The workload of a refined candidate's plan.
  const cost::Workload &workloadOf(const Candidate &c,
                                   const cost::ParallelPlan &plan);
  /// Memory per stage of a plan.
  std::vector<cost::MemoryBreakdown> memoryOf(const cost::ParallelPlan &plan,
                                              const cost::Workload &w) const;
  /// The largest per-GPU memory over a plan's stages (and keeps the plan
  /// with the smallest for the diagnosis).
  double peakMemory(const cost::ParallelPlan &plan, const cost::Workload &w);
  /// Keeps an evaluated plan for the diagnosis if it needs the least memory.
  void noteMemory(const planner::Candidate &c);
  /// The full estimate of a refined candidate.
  cost::Result<planner::Candidate> evaluate(const Candidate &c);

  std::vector<Candidate> candidates;
  std::vector<Mesh> meshes;
  SearchStats stats;
  int gpus = 0;
  double memoryLimit = 0;
  std::optional<LeastMemory> smallest;

  const ModelConfig &model;
  const cost::ClusterSpec &cluster;
  const PlannerOptions &options;
  const cost::CostConstants &constants;

private:
  using WorkloadKey = std::tuple<int, int, bool, int64_t, int, bool, bool, int>;

  void enumerateMesh(int32_t mesh);
  /// The expert-parallel sizes to try with `dp` data-parallel ranks.
  std::vector<int> expertSizes(int dp) const;
  void addCandidate(Candidate c);
  cost::ParallelPlan basePlan(const Mesh &m) const;
  /// The workload of `plan`: options.workload, or the preset formulas.
  cost::Workload build(const cost::ParallelPlan &plan) const;
  const cost::Workload &cachedWorkload(const cost::ParallelPlan &plan);
  std::vector<int> balancedLayers(const cost::ParallelPlan &plan,
                                  const cost::Workload &w);
  std::vector<cost::Recompute> lightestFitting(const cost::ParallelPlan &plan);

  std::map<WorkloadKey, cost::Workload> workloads;
  /// Workloads of per-stage plans (their recomputed FLOPs differ).
  std::map<std::string, cost::Workload> exactWorkloads;
};

/// Lower bound on the step time of `plan` with workload `w` (see
/// Search.h): valid for any simulation of the plan.
double lowerBound(const ModelConfig &model, const cost::ClusterSpec &cluster,
                  const cost::ParallelPlan &plan, const cost::Workload &w,
                  const cost::CostConstants &c);

/// A weaker bound that needs no stage partition: the average stage's
/// compute plus the lightest optimizer.
double averageBound(const ModelConfig &model, const cost::ParallelPlan &plan,
                    const cost::Workload &w);

/// True if `a` ranks before `b` (faster; then less memory; then earlier in
/// the enumeration).
bool ranksBefore(const planner::Candidate &a, size_t orderA,
                 const planner::Candidate &b, size_t orderB);

} // namespace cleave::planner::detail

#endif // CLEAVE_LIB_PLANNER_SPACE_H
