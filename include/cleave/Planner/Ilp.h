//===- Ilp.h - Strategy selection as an integer program ---------*- C++ -*-===//
//
// The intra-op sharding problem in its abstract form: every node picks one
// of its strategies; a node's strategy costs time (and memory), an edge
// costs the resharding between the strategies of its two ends, and the
// memory of the chosen strategies must stay under per-stage limits.
//
//   minimize  sum_n c_n . x_n + sum_(u,v) x_u^T C_uv x_v
//   subject to x_n one-hot, sum_n m_rn . x_n <= M_r for every memory row r
//
// solved exactly with COIN-OR CBC in the tight formulation (one variable
// y_uv,kl per strategy pair of an edge, with marginals sum_l y_kl = x_uk and
// sum_k y_kl = x_vl), after folding edges into nodes with one strategy and
// merging parallel edges. No MLIR here: the graph builder (ShardingGraph.h)
// fills the problem from IR.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_ILP_H
#define CLEAVE_PLANNER_ILP_H

#include <string>
#include <vector>

namespace cleave::planner {

struct IlpProblem {
  /// Per node, the cost of each strategy (seconds).
  std::vector<std::vector<double>> nodeCost;
  struct Edge {
    int from = 0, to = 0;
    /// Row-major: cost[k * strategies(to) + l] (seconds).
    std::vector<double> cost;
  };
  std::vector<Edge> edges;
  struct MemoryRow {
    std::string name;
    /// Per node, per strategy: bytes (empty vector: the node uses none).
    std::vector<std::vector<double>> bytes;
    double limit = 0;
  };
  std::vector<MemoryRow> memory;

  int numNodes() const { return int(nodeCost.size()); }
  int strategies(int node) const { return int(nodeCost[size_t(node)].size()); }
};

struct IlpSolution {
  /// Strategy of every node; empty if no solution was found.
  std::vector<int> choice;
  double objective = 0;
  bool optimal = false;
  /// No assignment meets the memory rows.
  bool infeasible = false;
  double seconds = 0;
  /// Size of the program handed to CBC.
  int variables = 0, constraints = 0;
};

struct IlpOptions {
  /// CBC time limit; the best solution found so far is returned after it.
  double timeLimit = 60;
};

/// Solves `p` with CBC.
IlpSolution solveIlp(const IlpProblem &p, const IlpOptions &options = {});

/// Solves `p` by enumerating every assignment (tests; small problems only).
IlpSolution solveExhaustive(const IlpProblem &p);

/// The objective of an assignment, and whether it meets the memory rows.
double objectiveOf(const IlpProblem &p, const std::vector<int> &choice);
bool meetsMemory(const IlpProblem &p, const std::vector<int> &choice);
/// The bytes of an assignment in memory row `row`.
double memoryOf(const IlpProblem &p, const std::vector<int> &choice, int row);

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_ILP_H
