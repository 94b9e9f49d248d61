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

/// Solves the stage programs. The ILP counts every saved result as
/// activation memory; its bytes are scaled so that the fastest solution's
/// equal what the cost model counts for the stage. That solution (one per
/// layer count and first/last role) is kept for every stage it fits; only a
/// stage it does not fit is solved again under its memory row.
class StageSolver {
public:
  StageSolver(const ShardingGraph &g, double parameter, double timeLimit)
      : g(g), parameter(parameter) {
    options.timeLimit = timeLimit;
  }

  /// Solves stage `s`; `key` receives what makes two stages' solutions
  /// the same.
  StageSolution solve(StageSolution s, double activationTarget,
                      std::string &key) {
    auto role = std::make_tuple(s.layers, s.first, s.last);
    auto it = fastest.find(role);
    if (it == fastest.end()) {
      IlpProblem p = g.problem(s.layers, s.first, s.last, 0, 1.0, parameter);
      p.memory.clear();
      it = fastest.emplace(role, solveIlp(p, options)).first;
    }
    s.ilp = it->second;
    key = std::to_string(s.layers) + (s.first ? "f" : "") + (s.last ? "l" : "");
    auto [act, par] = g.memoryOf(s.ilp.choice, s.layers, s.first, s.last);
    double scale =
        activationTarget > 0 && act > 0 ? activationTarget / act : 1.0;
    if (act * scale + par * parameter <= s.memoryLimit)
      return s;
    key += "/" + std::to_string(int64_t(activationTarget)) + "/" +
           std::to_string(int64_t(s.memoryLimit));
    IlpSolution fit = solveIlp(
        g.problem(s.layers, s.first, s.last, s.memoryLimit, scale, parameter),
        options);
    if (fit.choice.empty())
      s.memoryRelaxed = true; // keep the fastest; the report says so
    else
      s.ilp = fit;
    return s;
  }

private:
  const ShardingGraph &g;
  double parameter;
  IlpOptions options;
  std::map<std::tuple<int64_t, bool, bool>, IlpSolution> fastest;
};

} // namespace

std::vector<StageSolution>
solveStages(const ShardingGraph &g, const Candidate &best, double memoryLimit,
            const std::vector<int> &chunkOfInstance, double timeLimit) {
  const cost::ParallelPlan &p = best.plan;
  std::vector<int64_t> layers(size_t(p.pp), 0);
  for (int chunk : chunkOfInstance)
    ++layers[size_t(chunk % p.pp)];
  StageSolver solver(g, parameterStateFactor(p), timeLimit);
  std::map<std::string, size_t> seen;
  std::vector<StageSolution> out;
  for (int s = 0; s < p.pp; ++s) {
    const cost::MemoryBreakdown &m = best.memoryPerStage[size_t(s)];
    StageSolution sol;
    sol.stages = {s};
    sol.layers = layers[size_t(s)];
    sol.first = s == 0;
    sol.last = s == p.pp - 1;
    sol.memoryLimit =
        memoryLimit - (m.transient + m.communication + m.reserved);
    std::string key;
    sol = solver.solve(sol, m.activations, key);
    if (auto it = seen.find(key); it != seen.end()) {
      out[it->second].stages.push_back(s);
      continue;
    }
    seen[key] = out.size();
    out.push_back(sol);
  }
  return out;
}

} // namespace cleave::planner::detail
