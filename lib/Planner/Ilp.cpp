//===- Ilp.cpp - Strategy selection with COIN-OR CBC ----------------------===//

#include "cleave/Planner/Ilp.h"

#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <CoinModel.hpp>
#include <OsiClpSolverInterface.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

namespace cleave::planner {

namespace {

/// CBC works in microseconds and gigabytes: keeps coefficients near 1.
constexpr double kTimeScale = 1e6, kBytesScale = 1e-9;

/// The problem after folding: edges between two free nodes only, merged
/// per node pair and not separable into node costs.
struct Reduced {
  std::vector<std::vector<double>> nodeCost;
  std::vector<bool> fixed; ///< one strategy: always choice 0
  std::map<std::pair<int, int>, std::vector<double>> edges;
  double constant = 0;
};

/// Adds `cost` (row-major from x to) to the edge between free nodes.
void addEdge(Reduced &r, const IlpProblem &p, int from, int to,
             const std::vector<double> &cost) {
  int nf = p.strategies(from), nt = p.strategies(to);
  if (from > to) {
    std::vector<double> t(cost.size());
    for (int k = 0; k < nf; ++k)
      for (int l = 0; l < nt; ++l)
        t[size_t(l * nf + k)] = cost[size_t(k * nt + l)];
    addEdge(r, p, to, from, t);
    return;
  }
  std::vector<double> &e = r.edges[{from, to}];
  if (e.empty())
    e.assign(cost.size(), 0.0);
  for (size_t i = 0; i < cost.size(); ++i)
    e[i] += cost[i];
}

Reduced reduce(const IlpProblem &p) {
  Reduced r;
  r.nodeCost = p.nodeCost;
  for (int n = 0; n < p.numNodes(); ++n)
    r.fixed.push_back(p.strategies(n) == 1);
  for (const IlpProblem::Edge &e : p.edges) {
    int nf = p.strategies(e.from), nt = p.strategies(e.to);
    if (r.fixed[size_t(e.from)] || r.fixed[size_t(e.to)]) {
      // Fold into the free end (or the constant).
      for (int k = 0; k < nf; ++k)
        for (int l = 0; l < nt; ++l) {
          double c = e.cost[size_t(k * nt + l)];
          if (r.fixed[size_t(e.from)] && r.fixed[size_t(e.to)])
            r.constant += c;
          else if (r.fixed[size_t(e.from)])
            r.nodeCost[size_t(e.to)][size_t(l)] += c;
          else
            r.nodeCost[size_t(e.from)][size_t(k)] += c;
        }
      continue;
    }
    addEdge(r, p, e.from, e.to, e.cost);
  }
  // Separable matrices C[k][l] = a[k] + b[l] become node costs.
  for (auto it = r.edges.begin(); it != r.edges.end();) {
    auto [from, to] = it->first;
    const std::vector<double> &c = it->second;
    int nt = p.strategies(to), nf = p.strategies(from);
    double scale = 0;
    for (double v : c)
      scale = std::max(scale, std::fabs(v));
    bool separable = true;
    for (int k = 0; k < nf && separable; ++k)
      for (int l = 0; l < nt && separable; ++l)
        separable = std::fabs(c[size_t(k * nt + l)] - c[size_t(k * nt)] -
                              c[size_t(l)] + c[0]) <= 1e-12 * scale;
    if (!separable) {
      ++it;
      continue;
    }
    for (int k = 0; k < nf; ++k)
      r.nodeCost[size_t(from)][size_t(k)] += c[size_t(k * nt)];
    for (int l = 0; l < nt; ++l)
      r.nodeCost[size_t(to)][size_t(l)] += c[size_t(l)] - c[0];
    it = r.edges.erase(it);
  }
  return r;
}

/// Column indices of the x variables of every node (-1 for fixed nodes).
struct Columns {
  std::vector<int> first;
  int count = 0;
};

Columns addNodeColumns(CoinModel &m, const Reduced &r) {
  Columns cols;
  for (size_t n = 0; n < r.nodeCost.size(); ++n) {
    if (r.fixed[n]) {
      cols.first.push_back(-1);
      continue;
    }
    cols.first.push_back(cols.count);
    std::vector<int> idx;
    std::vector<double> one;
    for (size_t k = 0; k < r.nodeCost[n].size(); ++k) {
      int c = cols.count++;
      m.setColumnBounds(c, 0.0, 1.0);
      m.setObjective(c, r.nodeCost[n][k] * kTimeScale);
      m.setInteger(c);
      idx.push_back(c);
      one.push_back(1.0);
    }
    m.addRow(int(idx.size()), idx.data(), one.data(), 1.0, 1.0);
  }
  return cols;
}

void addEdgeColumns(CoinModel &m, const IlpProblem &p, const Reduced &r,
                    Columns &cols) {
  for (const auto &[key, cost] : r.edges) {
    auto [from, to] = key;
    int nf = p.strategies(from), nt = p.strategies(to);
    int y0 = cols.count;
    for (int kl = 0; kl < nf * nt; ++kl) {
      m.setColumnBounds(cols.count, 0.0, 1.0);
      m.setObjective(cols.count++, cost[size_t(kl)] * kTimeScale);
    }
    // sum_l y[k][l] = x_from[k] and sum_k y[k][l] = x_to[l].
    for (int k = 0; k < nf; ++k) {
      std::vector<int> idx;
      std::vector<double> val;
      for (int l = 0; l < nt; ++l) {
        idx.push_back(y0 + k * nt + l);
        val.push_back(1.0);
      }
      idx.push_back(cols.first[size_t(from)] + k);
      val.push_back(-1.0);
      m.addRow(int(idx.size()), idx.data(), val.data(), 0.0, 0.0);
    }
    for (int l = 0; l < nt; ++l) {
      std::vector<int> idx;
      std::vector<double> val;
      for (int k = 0; k < nf; ++k) {
        idx.push_back(y0 + k * nt + l);
        val.push_back(1.0);
      }
      idx.push_back(cols.first[size_t(to)] + l);
      val.push_back(-1.0);
      m.addRow(int(idx.size()), idx.data(), val.data(), 0.0, 0.0);
    }
  }
}

/// Adds the memory rows; false if the fixed nodes alone exceed one.
bool addMemoryRows(CoinModel &m, const IlpProblem &p, const Reduced &r,
                   const Columns &cols) {
  for (const IlpProblem::MemoryRow &row : p.memory) {
    std::vector<int> idx;
    std::vector<double> val;
    double fixedBytes = 0;
    for (size_t n = 0; n < row.bytes.size(); ++n) {
      if (row.bytes[n].empty())
        continue;
      if (r.fixed[n]) {
        fixedBytes += row.bytes[n][0];
        continue;
      }
      for (size_t k = 0; k < row.bytes[n].size(); ++k)
        if (row.bytes[n][k] != 0) {
          idx.push_back(cols.first[n] + int(k));
          val.push_back(row.bytes[n][k] * kBytesScale);
        }
    }
    double room = (row.limit - fixedBytes) * kBytesScale;
    if (room < 0)
      return false;
    if (!idx.empty())
      m.addRow(int(idx.size()), idx.data(), val.data(), -COIN_DBL_MAX, room);
  }
  return true;
}

void runCbc(CbcModel &model, double timeLimit) {
  CbcSolverUsefulData data;
  data.noPrinting_ = true;
  CbcMain0(model, data);
  std::string seconds = std::to_string(timeLimit);
  const char *argv[] = {"cbc",  "-log",          "0",        "-slog", "0",
                        "-sec", seconds.c_str(), "-threads", "1",     "-ratio",
                        "1e-9", "-solve",        "-quit"};
  CbcMain1(
      int(sizeof(argv) / sizeof(argv[0])), argv, model,
      [](CbcModel *, int) { return 0; }, data);
}

} // namespace

double objectiveOf(const IlpProblem &p, const std::vector<int> &choice) {
  double total = 0;
  for (int n = 0; n < p.numNodes(); ++n)
    total += p.nodeCost[size_t(n)][size_t(choice[size_t(n)])];
  for (const IlpProblem::Edge &e : p.edges)
    total += e.cost[size_t(choice[size_t(e.from)] * p.strategies(e.to) +
                           choice[size_t(e.to)])];
  return total;
}

double memoryOf(const IlpProblem &p, const std::vector<int> &choice, int row) {
  double bytes = 0;
  const IlpProblem::MemoryRow &r = p.memory[size_t(row)];
  for (size_t n = 0; n < r.bytes.size(); ++n)
    if (!r.bytes[n].empty())
      bytes += r.bytes[n][size_t(choice[n])];
  return bytes;
}

bool meetsMemory(const IlpProblem &p, const std::vector<int> &choice) {
  for (size_t r = 0; r < p.memory.size(); ++r)
    if (memoryOf(p, choice, int(r)) > p.memory[r].limit * (1 + 1e-9))
      return false;
  return true;
}

IlpSolution solveIlp(const IlpProblem &p, const IlpOptions &options) {
  auto start = std::chrono::steady_clock::now();
  IlpSolution s;
  Reduced r = reduce(p);
  CoinModel m;
  Columns cols = addNodeColumns(m, r);
  addEdgeColumns(m, p, r, cols);
  s.variables = cols.count;
  bool roomLeft = addMemoryRows(m, p, r, cols);
  s.constraints = m.numberRows();
  auto done = [&] {
    s.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    return s;
  };
  if (!roomLeft) {
    s.infeasible = true;
    return done();
  }
  std::vector<int> choice(size_t(p.numNodes()), 0);
  if (cols.count > 0) {
    OsiClpSolverInterface solver;
    solver.messageHandler()->setLogLevel(0);
    solver.loadFromCoinModel(m);
    CbcModel model(solver);
    model.setLogLevel(0);
    model.messageHandler()->setLogLevel(0);
    runCbc(model, options.timeLimit);
    const double *x = model.bestSolution();
    if (!x) {
      s.infeasible = model.isProvenInfeasible();
      return done();
    }
    for (int n = 0; n < p.numNodes(); ++n)
      if (cols.first[size_t(n)] >= 0)
        for (int k = 0; k < p.strategies(n); ++k)
          if (x[cols.first[size_t(n)] + k] > 0.5)
            choice[size_t(n)] = k;
    s.optimal = model.isProvenOptimal() && !model.isSecondsLimitReached();
  } else {
    s.optimal = true; // every node has one strategy
  }
  s.choice = choice;
  s.objective = objectiveOf(p, choice);
  return done();
}

IlpSolution solveExhaustive(const IlpProblem &p) {
  IlpSolution best;
  best.infeasible = true;
  double bestCost = std::numeric_limits<double>::infinity();
  std::vector<int> choice(size_t(p.numNodes()), 0);
  std::function<void(int)> visit = [&](int n) {
    if (n == p.numNodes()) {
      if (!meetsMemory(p, choice))
        return;
      double c = objectiveOf(p, choice);
      if (c < bestCost) {
        bestCost = c;
        best.choice = choice;
      }
      return;
    }
    for (int k = 0; k < p.strategies(n); ++k) {
      choice[size_t(n)] = k;
      visit(n + 1);
    }
  };
  visit(0);
  if (!best.choice.empty()) {
    best.infeasible = false;
    best.optimal = true;
    best.objective = bestCost;
  }
  return best;
}

} // namespace cleave::planner
