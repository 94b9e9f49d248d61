//===- IntraOp.cpp - The ILP of each pipeline stage -----------------------===//

#include "IntraOp.h"

#include "cleave/CostModel/Memory.h"
#include "cleave/Planner/Explain.h"

#include <algorithm>

#include <map>

namespace cleave::planner::detail {

std::vector<MeshAxis> meshAxes(const cost::ParallelPlan &p,
                               const cost::ClusterSpec &cl) {
  int g = cl.gpusPerNode;
  return {{"dp", p.dp, cost::placeGroup(p.dp, p.tp * p.cp, g), true},
          {"cp", p.cp, cost::placeGroup(p.cp, p.tp, g), false},
          {"tp", p.tp, cost::placeGroup(p.tp, 1, g), false}};
}

double parameterStateFactor(const cost::ParallelPlan &p) {
  bool mixed = p.dtype != DType::F32;
  double shard = double(p.dp) * p.cp;
  double param = mixed ? 2 : 4, grad = double(bytesOf(p.gradDType())),
         optimizer = mixed ? 12 : 8;
  return (param / (p.zeroStage >= 3 ? shard : 1) +
          grad / (p.zeroStage >= 2 ? shard : 1) +
          optimizer / (p.zeroStage >= 1 ? shard : 1)) /
         4;
}

std::vector<int> chunkOfInstances(const ForwardView &v,
                                  const ModelConfig &model,
                                  const cost::ParallelPlan &p) {
  int chunks = p.pp * p.chunks();
  std::vector<int> out;
  if (v.count == model.layers) {
    for (int c = 0; c < chunks; ++c)
      for (int64_t l = 0; l < cost::layersInChunk(model, p, c); ++l)
        out.push_back(c);
    return out;
  }
  for (int t = 0; t < v.count; ++t)
    out.push_back(int(int64_t(t) * chunks / std::max(1, v.count)));
  return out;
}

namespace {

/// Solves a stage: first without the memory row; the activation bytes
/// the ILP counts (every saved result) are then scaled so that this
/// solution's equal what the cost model counts for the stage
/// (`activationTarget`, 0: no scaling), and only if the solution does not
/// fit is the ILP solved again under the memory row.
StageSolution solveOne(const ShardingGraph &g, StageSolution s,
                       double activationTarget, double parameter,
                       double timeLimit) {
  IlpOptions o;
  o.timeLimit = timeLimit;
  IlpProblem free = g.problem(s.layers, s.first, s.last, s.memoryLimit, 1.0,
                              parameter);
  free.memory.clear();
  s.ilp = solveIlp(free, o);
  auto [act, par] = g.memoryOf(s.ilp.choice, s.layers, s.first, s.last);
  double activation =
      activationTarget > 0 && act > 0 ? activationTarget / act : 1.0;
  if (act * activation + par * parameter <= s.memoryLimit)
    return s;
  IlpProblem bound = g.problem(s.layers, s.first, s.last, s.memoryLimit,
                               activation, parameter);
  IlpSolution fit = solveIlp(bound, o);
  if (fit.choice.empty())
    s.memoryRelaxed = true; // keep the fastest; the report says so
  else
    s.ilp = fit;
  return s;
}

} // namespace

std::vector<StageSolution>
solveStages(const ShardingGraph &g, const ModelConfig &model,
            const cost::ClusterSpec &cluster, const Candidate &best,
            int64_t /*globalBatch*/, double memoryLimit,
            const std::vector<int> &chunkOfInstance, double timeLimit,
            const cost::CostConstants &c) {
  const cost::ParallelPlan &p = best.plan;
  std::vector<int64_t> layers(size_t(p.pp), 0);
  for (int chunk : chunkOfInstance)
    ++layers[size_t(chunk % p.pp)];
  std::map<std::tuple<int64_t, bool, bool, int64_t>, size_t> seen;
  std::vector<StageSolution> out;
  double parameter = parameterStateFactor(p);
  for (int s = 0; s < p.pp; ++s) {
    const cost::MemoryBreakdown &m = best.memoryPerStage[size_t(s)];
    double budget =
        memoryLimit - (m.transient + m.communication + m.reserved);
    double activation = m.activations;
    // Stages alike in what the ILP sees share one solution.
    auto key = std::make_tuple(layers[size_t(s)], s == 0, s == p.pp - 1,
                               int64_t(activation));
    if (auto it = seen.find(key); it != seen.end()) {
      out[it->second].stages.push_back(s);
      continue;
    }
    StageSolution sol;
    sol.stages = {s};
    sol.layers = layers[size_t(s)];
    sol.first = s == 0;
    sol.last = s == p.pp - 1;
    sol.memoryLimit = budget;
    seen[key] = out.size();
    out.push_back(solveOne(g, sol, activation, parameter, timeLimit));
  }
  (void)cluster;
  (void)c;
  return out;
}

namespace {

struct GraphCandidate {
  Candidate candidate;
  IlpSolution ilp;
  std::shared_ptr<ShardingGraph> graph;
};

/// Data-parallel gradient reduction (and ZeRO gathers) and the optimizer
/// of one device holding `paramBytes` of f32 parameters.
std::pair<double, double> dataParallelTime(const cost::ParallelPlan &p,
                                           const MeshAxis &dp,
                                           double paramBytes,
                                           const cost::ClusterSpec &cl,
                                           const cost::CostConstants &c) {
  double comm = 0;
  auto run = [&](cost::CollectiveKind k, double bytes) {
    comm += cost::collectiveCost(k, bytes, dp.group, cl, c).time;
  };
  double params = paramBytes / 4;
  double grad = params * double(bytesOf(p.gradDType()));
  double weights = params * (p.dtype == DType::F32 ? 4 : 2);
  if (p.dp > 1) {
    if (p.zeroStage == 0)
      run(cost::CollectiveKind::AllReduce, grad);
    else
      run(cost::CollectiveKind::ReduceScatter, grad);
    if (p.zeroStage == 1 || p.zeroStage == 2)
      run(cost::CollectiveKind::AllGather, weights);
    if (p.zeroStage == 3) {
      run(cost::CollectiveKind::AllGather, weights); // forward
      run(cost::CollectiveKind::AllGather, weights); // backward
    }
  }
  double shard = p.zeroStage >= 1 ? double(p.dp) : 1;
  double optimizer = c.kernelOverhead * 8 +
                     cost::memoryTime(params / shard * c.adamBytesPerParam,
                                      cl.gpu);
  return {comm, optimizer};
}

/// The assignment with the least memory (each node's smallest strategy).
std::vector<int> leastMemory(const IlpProblem &p) {
  std::vector<int> choice(size_t(p.numNodes()), 0);
  const IlpProblem::MemoryRow &row = p.memory.front();
  for (size_t n = 0; n < row.bytes.size(); ++n)
    if (!row.bytes[n].empty())
      choice[n] = int(std::min_element(row.bytes[n].begin(),
                                       row.bytes[n].end()) -
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

} // namespace

cost::Result<GraphModeResult>
searchGraphMode(const ForwardView &view, const PlanCluster &pc,
                const PlannerOptions &o, DType dtype, double timeLimit) {
  const cost::ClusterSpec &cl = pc.spec;
  const cost::CostConstants &c = cost::defaultConstants();
  int gpus = o.gpus ? o.gpus : cl.numGpus();
  double limit = cl.gpu.hbmBytes * (1 - o.memoryHeadroom);
  GraphModeResult r;
  r.search.gpus = gpus;
  r.search.memoryLimit = limit;
  std::vector<GraphCandidate> all;
  double flops = 0;
  for (mlir::Operation *op : view.ops)
    if (auto cop = mlir::dyn_cast<mlir::cleave::CostOpInterface>(op))
      flops += 3 * cop.getFlops();
  for (int tp = 1; tp <= gpus; ++tp) {
    if (gpus % tp || (o.fixedTp ? tp != o.fixedTp
                                : (tp > cl.gpusPerNode || cl.gpusPerNode % tp)))
      continue;
    int dp = gpus / tp;
    if (o.globalBatch % dp) {
      ++r.search.stats.rejectedMeshes["dp=" + std::to_string(dp) +
                                      " does not divide the batch of " +
                                      std::to_string(o.globalBatch)];
      continue;
    }
    ++r.search.stats.meshes;
    cost::ParallelPlan plan = o.implementation;
    plan.tp = tp;
    plan.dp = dp;
    plan.pp = plan.cp = 1;
    plan.microBatchSize = o.globalBatch / dp;
    plan.numMicroBatches = 1;
    plan.dtype = dtype;
    std::vector<MeshAxis> axes = meshAxes(plan, cl);
    GraphOptions go;
    go.dtype = dtype;
    auto graph = std::make_shared<ShardingGraph>(
        buildShardingGraph(view, axes, cl, go, c));
    const ShardingGraph &g = *graph;
    for (int zero : o.space.zeroStages) {
      if (zero > 0 && dp == 1)
        continue;
      plan.zeroStage = zero;
      ++r.search.stats.candidates;
      IlpProblem p = g.problem(view.count, true, true,
                               limit - c.runtimeReservedBytes, 1.0,
                               parameterStateFactor(plan));
      IlpOptions io;
      io.timeLimit = timeLimit;
      IlpSolution s = solveIlp(p, io);
      ++r.search.stats.simulated;
      bool fits = !s.choice.empty();
      std::vector<int> memoryChoice = s.choice;
      if (!fits) {
        // The report's numbers: the fastest sharding, and the least memory
        // any sharding needs (memory is a sum over nodes: each node's
        // smallest strategy).
        memoryChoice = leastMemory(p);
        p.memory.clear();
        s = solveIlp(p, io);
      }
      double paramBytes = 0;
      for (size_t n = 0; n < g.nodes.size(); ++n)
        paramBytes += g.nodes[n].strategies[size_t(s.choice[n])]
                          .parameterBytes *
                      (g.nodes[n].region == Region::Block ? view.count : 1);
      auto [dpComm, optimizer] = dataParallelTime(plan, axes[0], paramBytes,
                                                  cl, c);
      auto [compute, comm] = split(p, s.choice);
      GraphCandidate gc;
      Candidate &cand = gc.candidate;
      cand.plan = plan;
      cand.breakdown.forward = compute / 3;
      cand.breakdown.backward = compute * 2 / 3;
      cand.breakdown.exposedComm[size_t(cost::Axis::TP)] = comm;
      cand.breakdown.exposedComm[size_t(cost::Axis::DP)] = dpComm;
      cand.breakdown.optimizer = optimizer;
      cand.stepTime = compute + comm + dpComm + optimizer;
      auto [act, par] = g.memoryOf(memoryChoice, view.count, true, true);
      cost::MemoryBreakdown mb;
      mb.capacity = cl.gpu.hbmBytes;
      mb.reserved = c.runtimeReservedBytes;
      mb.activations = act;
      // The IR's parameters are f32: bytes / 4 parameters.
      bool mixed = dtype != DType::F32;
      double shard = double(dp), params = par / 4;
      mb.parameters = params * (mixed ? 2 : 4) / (zero >= 3 ? shard : 1);
      mb.gradients = params * double(bytesOf(plan.gradDType())) /
                     (zero >= 2 ? shard : 1);
      mb.optimizerStates = params * (mixed ? 12 : 8) / (zero >= 1 ? shard : 1);
      cand.memoryPerStage = {mb};
      cand.peakMemory = mb.total();
      cand.fits = fits && cand.peakMemory <= limit;
      cand.mfu = flops / cand.stepTime / gpus / cl.gpu.peakFlops(dtype);
      cand.tokensPerSecond = 0;
      gc.ilp = s;
      gc.graph = graph;
      all.push_back(std::move(gc));
    }
  }
  r.search.stats.visited = r.search.stats.candidates;
  std::stable_sort(all.begin(), all.end(), [](const auto &a, const auto &b) {
    if (a.candidate.fits != b.candidate.fits)
      return a.candidate.fits;
    if (a.candidate.stepTime != b.candidate.stepTime)
      return a.candidate.stepTime < b.candidate.stepTime;
    return a.candidate.peakMemory < b.candidate.peakMemory;
  });
  for (GraphCandidate &gc : all) {
    if (!r.search.best && gc.candidate.fits) {
      r.search.best = gc.candidate;
      StageSolution st;
      st.stages = {0};
      st.layers = view.count;
      st.first = st.last = true;
      st.memoryLimit = limit - c.runtimeReservedBytes;
      st.ilp = gc.ilp;
      r.stages = {st};
      r.graph = gc.graph;
      continue;
    }
    if (gc.candidate.fits &&
        int(r.search.runnersUp.size()) + 1 < o.topK) {
      gc.candidate.lostBecause =
          explainLoss(gc.candidate, *r.search.best, limit);
      r.search.runnersUp.push_back(gc.candidate);
    }
  }
  if (!r.search.best && !all.empty()) {
    auto smallest = std::min_element(
        all.begin(), all.end(), [](const auto &a, const auto &b) {
          return a.candidate.peakMemory < b.candidate.peakMemory;
        });
    r.search.leastMemory = LeastMemory{smallest->candidate.plan,
                                       smallest->candidate.memoryPerStage[0],
                                       0};
  }
  if (!r.search.best)
  {
    ModelConfig program;
    program.name = "the program";
    r.search.infeasible = explainInfeasible(program, o, r.search);
  }
  return r;
}

} // namespace cleave::planner::detail
