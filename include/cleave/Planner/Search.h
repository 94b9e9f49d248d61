//===- Search.h - The plan search over a transformer's parallelism *- C++
//-*-===//
//
// The outer search of the planner: every way to run one training step of a
// transformer on a cluster that the cost model can price - mesh
// factorizations PP x DP x CP x TP with TP inside a node, micro-batch size
// and count, pipeline schedule (GPipe, 1F1B, interleaved 1F1B with v model
// chunks, ZB-H1), stage partition (even, or balanced by dynamic
// programming over layers with the embedding and the output layer), ZeRO
// stage, sequence parallelism, and recomputation (uniform, or per stage:
// the lightest that fits each stage) - ranked by the step time of
// cost::estimate under a per-GPU memory limit.
//
// The search is exact branch and bound: every candidate gets a lower bound
// on its step time from its workload (each stage's compute stream, the
// pipeline fill before its first forward and drain after its last backward,
// non-overlapped data-parallel communication), candidates are visited in
// order of the bound, and the search stops once the bound exceeds the k-th
// best simulated plan. The result is the same as simulating every candidate
// (searchExhaustive, which the tests compare against).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_SEARCH_H
#define CLEAVE_PLANNER_SEARCH_H

#include "cleave/CostModel/Estimate.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cleave::planner {

/// What the search enumerates besides the mesh.
struct SearchSpace {
  std::vector<cost::Schedule> schedules = {
      cost::Schedule::GPipe, cost::Schedule::OneFOneB,
      cost::Schedule::Interleaved1F1B, cost::Schedule::ZeroBubbleH1};
  /// Model chunks per pipeline rank tried by the interleaved schedule.
  int maxVirtualStages = 4;
  std::vector<int> zeroStages = {0, 1, 2, 3};
  /// ZeRO shards over dp only, as cleave-apply-plan (and so cleave-run)
  /// executes it; otherwise over dp x cp, as Megatron-Core's distributed
  /// optimizer does. Set for local CPU clusters, whose plans are run.
  bool zeroOverDpOnly = false;
  std::vector<cost::Recompute> recomputes = {
      cost::Recompute::None, cost::Recompute::Selective, cost::Recompute::Full};
  /// Also try, for pipelined plans, the lightest recomputation that fits
  /// each stage.
  bool recomputePerStage = true;
  /// Micro-batch sizes: divisors of the per-replica batch up to this.
  int64_t maxMicroBatchSize = 16;
  /// Largest number of micro-batches per step (0: any).
  int64_t maxMicroBatches = 0;
  /// Largest context-parallel size (1: no context parallelism).
  int maxContextParallel = 8;
  /// Expert-parallel sizes tried for a mixture of experts: the divisors of
  /// dp that divide the experts, in [minExpertParallel, maxExpertParallel].
  /// Dense models always get ep = 1.
  int minExpertParallel = 1;
  int maxExpertParallel = 256;
  /// Try sequence parallelism with every tensor-parallel size > 1.
  bool sequenceParallel = true;
  /// Besides the even split, try the stage partition balanced by dynamic
  /// programming over layers (embedding on the first, head on the last).
  bool balancedStages = true;
};

/// Progress of a running search, reported to PlannerOptions::progress.
struct SearchProgress {
  int64_t candidates = 0, visited = 0, simulated = 0;
  /// Best step time found so far (0: none yet).
  double bestStepTime = 0;
  double seconds = 0;
};

struct PlannerOptions {
  /// Sequences per training step (required).
  int64_t globalBatch = 0;
  /// GPUs to use; 0: the whole cluster.
  int gpus = 0;
  /// Tensor-parallel size to use; 0: search.
  int fixedTp = 0;
  /// Largest pipeline-parallel size; 0: up to the layer count.
  int maxPp = 0;
  /// Pipeline-parallel size to use; 0: search (up to maxPp).
  int fixedPp = 0;
  /// Fraction of each GPU's memory to keep free (0.1: plan for 90%).
  double memoryHeadroom = cost::kDefaultMemoryHeadroom;
  /// Implementation choices every plan shares (precision, attention
  /// kernel, overlap flags, gradient reduction type); the plan fields the
  /// search decides are ignored.
  cost::ParallelPlan implementation;
  SearchSpace space;
  /// Plans that fit to keep, ranked (the chosen one and k-1 runners-up).
  int topK = 5;
  /// Cost constants; nullptr: cost::defaultConstants().
  const cost::CostConstants *constants = nullptr;
  /// The workload of a plan; empty: the preset formulas
  /// (cost::buildWorkload). The planner's graph path derives it from the
  /// module's ops (GraphWorkload.h); it must price every plan of the space.
  std::function<cost::Workload(const cost::ParallelPlan &)> workload;
  /// Called about every 0.25 s of a search and once at its end.
  std::function<void(const SearchProgress &)> progress;
};

/// One evaluated plan.
struct Candidate {
  cost::ParallelPlan plan;
  double stepTime = 0, mfu = 0, tokensPerSecond = 0;
  /// The largest per-GPU memory over the pipeline stages, and its stage.
  double peakMemory = 0;
  int peakStage = 0;
  bool fits = false;
  cost::TimeBreakdown breakdown;
  std::vector<cost::MemoryBreakdown> memoryPerStage;
  /// For a plan that lost: why, in one line.
  std::string lostBecause;
};

struct SearchStats {
  int64_t meshes = 0, candidates = 0, workloads = 0, visited = 0,
          memoryChecked = 0, simulated = 0;
  double seconds = 0;
  /// Meshes the model or constraints rule out, by reason.
  std::map<std::string, int64_t> rejectedMeshes;
};

/// The visited plan with the smallest per-GPU memory (for saying by how much
/// nothing fits).
struct LeastMemory {
  cost::ParallelPlan plan;
  /// Its largest stage.
  cost::MemoryBreakdown memory;
  int stage = 0;
};

struct SearchResult {
  /// The fastest plan that fits; empty when none does.
  std::optional<Candidate> best;
  /// The next fitting plans by step time (at most topK - 1).
  std::vector<Candidate> runnersUp;
  /// Plans predicted faster than the best that exceed the memory limit.
  std::vector<Candidate> overMemory;
  /// When nothing fits: every constraint that fails and by how much.
  std::vector<std::string> infeasible;
  std::optional<LeastMemory> leastMemory;
  /// A mixture of experts: why the chosen plan's expert parallelism won,
  /// against the best plan of the other kind (ep = 1 if the chosen has
  /// ep > 1, else ep > 1), or why there is none. Empty for dense models.
  std::string expertParallel;
  /// That best plan of the other kind, with why it lost.
  std::optional<Candidate> expertAlternative;
  /// Bytes per GPU a plan may use (capacity minus headroom).
  double memoryLimit = 0;
  int gpus = 0;
  SearchStats stats;
};

/// Searches the plans of `model` on `cluster` (see the file comment).
/// Fails with a message naming the option when the options are invalid.
cost::Result<SearchResult> searchPlans(const ModelConfig &model,
                                       const cost::ClusterSpec &cluster,
                                       const PlannerOptions &options);

/// The same search space, every candidate simulated (for tests: the
/// branch and bound must choose the same plan).
cost::Result<SearchResult> searchExhaustive(const ModelConfig &model,
                                            const cost::ClusterSpec &cluster,
                                            const PlannerOptions &options);

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_SEARCH_H
