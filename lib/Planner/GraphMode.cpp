//===- GraphMode.cpp - Planning programs the cost model does not cover ----===//
//
// Every data x tensor parallel mesh (tp inside a node) and ZeRO stage, each
// priced by its integer program (compute and resharding of every op) plus
// the data-parallel gradient reduction, the ZeRO gathers and the optimizer,
// none overlapped. No pipeline, one micro-batch.
//
//===----------------------------------------------------------------------===//

#include "IntraOp.h"

#include "cleave/Planner/Explain.h"

#include <algorithm>

namespace cleave::planner::detail {

namespace {

struct GraphCandidate {
  Candidate candidate;
  IlpSolution ilp;
  std::shared_ptr<ShardingGraph> graph;
};

/// The assignment with the least memory (each node's smallest strategy:
/// memory is a sum over nodes).
std::vector<int> leastMemory(const IlpProblem &p) {
  std::vector<int> choice(size_t(p.numNodes()), 0);
  const IlpProblem::MemoryRow &row = p.memory.front();
  for (size_t n = 0; n < row.bytes.size(); ++n)
    if (!row.bytes[n].empty())
      choice[n] =
          int(std::min_element(row.bytes[n].begin(), row.bytes[n].end()) -
              row.bytes[n].begin());
  return choice;
}

/// The ILP's compute and communication parts of an assignment.
std::pair<double, double> split(const IlpProblem &p,
                                const std::vector<int> &choice) {
  double nodes = 0;
  for (int n = 0; n < p.numNodes(); ++n)
    nodes += p.nodeCost[size_t(n)][size_t(choice[size_t(n)])];
  return {nodes, objectiveOf(p, choice) - nodes};
}

class GraphSearch {
public:
  GraphSearch(const ForwardView &view, const PlanCluster &pc,
              const PlannerOptions &o, DType dtype, double timeLimit)
      : view(view), cl(pc.spec), o(o), dtype(dtype),
        c(cost::defaultConstants()) {
    io.timeLimit = timeLimit;
    gpus = o.gpus ? o.gpus : cl.numGpus();
    limit = cl.gpu.hbmBytes * (1 - o.memoryHeadroom);
    // The device's own reservation (none for this machine's processes),
    // as the cost model's memory model takes it.
    reserved = cl.gpu.runtimeReservedBytes.value_or(c.runtimeReservedBytes);
    for (mlir::Operation *op : view.ops)
      if (auto cop = mlir::dyn_cast<mlir::cleave::CostOpInterface>(op))
        flops += 3 * cop.getFlops();
  }

  GraphModeResult run() {
    r.search.gpus = gpus;
    r.search.memoryLimit = limit;
    for (int tp = 1; tp <= gpus; ++tp)
      addMesh(tp);
    r.search.stats.visited = r.search.stats.candidates;
    rank();
    return std::move(r);
  }

  /// The candidate of `plan` alone (a dp x tp mesh and a ZeRO stage), as
  /// the search prices it.
  Candidate price(const cost::ParallelPlan &plan) {
    return evaluate(plan, graphOf(plan)).candidate;
  }

private:
  /// The sharding graph of the mesh of `plan`.
  std::shared_ptr<ShardingGraph> graphOf(const cost::ParallelPlan &plan) const {
    GraphOptions go;
    go.dtype = dtype;
    return std::make_shared<ShardingGraph>(
        buildShardingGraph(view, meshAxes(plan, cl), cl, go, c));
  }

  void addMesh(int tp) {
    bool inNode = tp <= cl.gpusPerNode && cl.gpusPerNode % tp == 0;
    if (gpus % tp || (o.fixedTp ? tp != o.fixedTp : !inNode))
      return;
    int dp = gpus / tp;
    if (o.globalBatch % dp) {
      ++r.search.stats.rejectedMeshes["dp=" + std::to_string(dp) +
                                      " does not divide the batch of " +
                                      std::to_string(o.globalBatch)];
      return;
    }
    ++r.search.stats.meshes;
    cost::ParallelPlan plan = o.implementation;
    plan.tp = tp;
    plan.dp = dp;
    plan.pp = plan.cp = 1;
    plan.microBatchSize = o.globalBatch / dp;
    plan.numMicroBatches = 1;
    plan.dtype = dtype;
    std::shared_ptr<ShardingGraph> graph = graphOf(plan);
    for (int zero : o.space.zeroStages) {
      if (zero > 0 && dp == 1)
        continue;
      plan.zeroStage = zero;
      all.push_back(evaluate(plan, graph));
    }
  }

  GraphCandidate evaluate(const cost::ParallelPlan &plan,
                          std::shared_ptr<ShardingGraph> graph) {
    const ShardingGraph &g = *graph;
    ++r.search.stats.candidates;
    ++r.search.stats.simulated;
    IlpProblem p = g.problem(view.count, true, true, limit - reserved, 1.0,
                             parameterStateFactor(plan));
    IlpSolution s = solveIlp(p, io);
    bool fits = !s.choice.empty();
    std::vector<int> memoryChoice = s.choice;
    if (!fits) {
      // For the report: the fastest sharding and the least memory.
      memoryChoice = leastMemory(p);
      p.memory.clear();
      s = solveIlp(p, io);
    }
    auto [act, par] = g.memoryOf(s.choice, view.count, true, true);
    auto [dpComm, optimizer] = dataParallelTime(plan, g.axes[0], par);
    auto [compute, comm] = split(p, s.choice);
    GraphCandidate gc{Candidate(), s, std::move(graph)};
    Candidate &cand = gc.candidate;
    cand.plan = plan;
    cand.breakdown.forward = compute / 3;
    cand.breakdown.backward = compute * 2 / 3;
    cand.breakdown.exposedComm[size_t(cost::Axis::TP)] = comm;
    cand.breakdown.exposedComm[size_t(cost::Axis::DP)] = dpComm;
    cand.breakdown.optimizer = optimizer;
    cand.stepTime = compute + comm + dpComm + optimizer;
    cand.memoryPerStage = {memoryOf(plan, *gc.graph, memoryChoice)};
    cand.peakMemory = cand.memoryPerStage[0].total();
    cand.fits = fits && cand.peakMemory <= limit;
    cand.mfu = flops / cand.stepTime / gpus / cl.gpu.peakFlops(dtype);
    return gc;
  }

  /// Memory of one device: the ILP's saved results and parameters (f32 in
  /// the IR) with gradients and optimizer state under the ZeRO stage.
  cost::MemoryBreakdown memoryOf(const cost::ParallelPlan &plan,
                                 const ShardingGraph &g,
                                 const std::vector<int> &choice) const {
    auto [act, par] = g.memoryOf(choice, view.count, true, true);
    cost::MemoryBreakdown mb;
    mb.capacity = cl.gpu.hbmBytes;
    mb.reserved = reserved;
    mb.activations = act;
    bool mixed = dtype != DType::F32;
    double shard = double(plan.dp), params = par / 4;
    int zero = plan.zeroStage;
    mb.parameters = params * (mixed ? 2 : 4) / (zero >= 3 ? shard : 1);
    mb.gradients =
        params * double(bytesOf(plan.gradDType())) / (zero >= 2 ? shard : 1);
    mb.optimizerStates = params * (mixed ? 12 : 8) / (zero >= 1 ? shard : 1);
    if (!plan.inPlaceUpdate)
      mb.stateUpdate = mb.parameters + mb.optimizerStates;
    return mb;
  }

  /// Gradient reduction (and ZeRO gathers) and the optimizer of a device
  /// holding `paramBytes` of f32 parameters.
  std::pair<double, double> dataParallelTime(const cost::ParallelPlan &p,
                                             const MeshAxis &dp,
                                             double paramBytes) const {
    double comm = 0;
    auto run = [&](cost::CollectiveKind k, double bytes) {
      comm += cost::collectiveCost(k, bytes, dp.group, cl, c).time;
    };
    double params = paramBytes / 4;
    double grad = params * double(bytesOf(p.gradDType()));
    double weights = params * (p.dtype == DType::F32 ? 4 : 2);
    if (p.dp > 1) {
      run(p.zeroStage == 0 ? cost::CollectiveKind::AllReduce
                           : cost::CollectiveKind::ReduceScatter,
          grad);
      if (p.zeroStage >= 1) // after the update; ZeRO-3 also for backward
        run(cost::CollectiveKind::AllGather, weights);
      if (p.zeroStage == 3 && p.regatherForBackward)
        run(cost::CollectiveKind::AllGather, weights);
    }
    double shard = p.zeroStage >= 1 ? double(p.dp) : 1;
    double optimizer =
        c.kernelOverhead * 8 +
        cost::memoryTime(params / shard * c.adamBytesPerParam, cl.gpu);
    return {comm, optimizer};
  }

  /// The fastest fitting plan, the runners-up, or why nothing fits.
  void rank() {
    std::stable_sort(all.begin(), all.end(), [](const auto &a, const auto &b) {
      const Candidate &x = a.candidate, &y = b.candidate;
      if (x.fits != y.fits)
        return x.fits;
      if (x.stepTime != y.stepTime)
        return x.stepTime < y.stepTime;
      return x.peakMemory < y.peakMemory;
    });
    for (GraphCandidate &gc : all) {
      if (!gc.candidate.fits)
        break;
      if (!r.search.best) {
        r.search.best = gc.candidate;
        StageSolution st;
        st.stages = {0};
        st.layers = view.count;
        st.first = st.last = true;
        st.memoryLimit = limit - reserved;
        st.ilp = gc.ilp;
        r.stages = {st};
        r.graph = gc.graph;
      } else if (int(r.search.runnersUp.size()) + 1 < o.topK) {
        gc.candidate.lostBecause =
            explainLoss(gc.candidate, *r.search.best, limit);
        r.search.runnersUp.push_back(gc.candidate);
      }
    }
    if (r.search.best || all.empty()) {
      if (!r.search.best)
        r.search.infeasible = explainInfeasible(programModel(), o, r.search);
      return;
    }
    auto smallest =
        std::min_element(all.begin(), all.end(), [](auto &a, auto &b) {
          return a.candidate.peakMemory < b.candidate.peakMemory;
        });
    r.search.leastMemory = LeastMemory{
        smallest->candidate.plan, smallest->candidate.memoryPerStage[0], 0};
    r.search.infeasible = explainInfeasible(programModel(), o, r.search);
  }

  static ModelConfig programModel() {
    ModelConfig m;
    m.name = "the program";
    return m;
  }

  const ForwardView &view;
  const cost::ClusterSpec &cl;
  const PlannerOptions &o;
  DType dtype;
  const cost::CostConstants &c;
  IlpOptions io;
  int gpus = 0;
  double limit = 0, reserved = 0, flops = 0;
  std::vector<GraphCandidate> all;
  GraphModeResult r;
};

} // namespace

cost::Result<GraphModeResult> searchGraphMode(const ForwardView &view,
                                              const PlanCluster &cluster,
                                              const PlannerOptions &options,
                                              DType dtype, double timeLimit) {
  return GraphSearch(view, cluster, options, dtype, timeLimit).run();
}

Candidate priceGraphMode(const ForwardView &view, const PlanCluster &cluster,
                         const PlannerOptions &options, DType dtype,
                         const cost::ParallelPlan &plan, double timeLimit) {
  return GraphSearch(view, cluster, options, dtype, timeLimit).price(plan);
}

} // namespace cleave::planner::detail
