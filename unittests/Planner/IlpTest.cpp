//===- IlpTest.cpp - CBC against exhaustive enumeration -------------------===//

#include "cleave/Planner/Ilp.h"

#include <gtest/gtest.h>

#include <random>

using namespace cleave::planner;

namespace {

/// A random strategy-selection problem: `nodes` nodes with 1-4 strategies,
/// random chain and skip edges, and a memory row at `tightness` between
/// the smallest and the largest possible use.
IlpProblem randomProblem(std::mt19937 &rng, int nodes, double tightness) {
  std::uniform_real_distribution<double> cost(0.0, 1.0), bytes(1e8, 4e9);
  IlpProblem p;
  IlpProblem::MemoryRow row;
  row.name = "stage 0";
  double least = 0, most = 0;
  for (int n = 0; n < nodes; ++n) {
    int k = 1 + int(rng() % 4);
    std::vector<double> c, b;
    for (int i = 0; i < k; ++i) {
      c.push_back(cost(rng) * 1e-3);
      b.push_back(bytes(rng));
    }
    least += *std::min_element(b.begin(), b.end());
    most += *std::max_element(b.begin(), b.end());
    p.nodeCost.push_back(c);
    row.bytes.push_back(b);
  }
  for (int n = 1; n < nodes; ++n) {
    for (int from : {n - 1, int(rng() % n)}) {
      IlpProblem::Edge e;
      e.from = from;
      e.to = n;
      for (int i = 0; i < p.strategies(from) * p.strategies(n); ++i)
        e.cost.push_back(rng() % 3 ? cost(rng) * 2e-3 : 0.0);
      p.edges.push_back(e);
    }
  }
  row.limit = least + tightness * (most - least);
  p.memory.push_back(row);
  return p;
}

TEST(IlpTest, CbcFindsTheExhaustiveOptimum) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    IlpProblem p = randomProblem(rng, 3 + trial % 6, 0.2 + 0.1 * (trial % 5));
    IlpSolution all = solveExhaustive(p);
    IlpSolution cbc = solveIlp(p);
    ASSERT_EQ(all.infeasible, cbc.infeasible) << "trial " << trial;
    if (all.infeasible)
      continue;
    EXPECT_TRUE(cbc.optimal);
    EXPECT_TRUE(meetsMemory(p, cbc.choice));
    EXPECT_NEAR(cbc.objective, all.objective, 1e-9) << "trial " << trial;
  }
}

/// A limit below the smallest possible use is reported as infeasible, and
/// the memory row changes the answer when it binds.
TEST(IlpTest, MemoryRowBinds) {
  IlpProblem p;
  // Node 0: fast but big, or slow and small.
  p.nodeCost = {{1e-3, 5e-3}, {1e-3}};
  IlpProblem::MemoryRow row;
  row.bytes = {{8e9, 1e9}, {1e9}};
  row.limit = 20e9;
  p.memory = {row};
  EXPECT_EQ(solveIlp(p).choice, (std::vector<int>{0, 0}));
  p.memory[0].limit = 4e9;
  IlpSolution s = solveIlp(p);
  EXPECT_EQ(s.choice, (std::vector<int>{1, 0}));
  EXPECT_NEAR(s.objective, 6e-3, 1e-12);
  p.memory[0].limit = 1.5e9;
  EXPECT_TRUE(solveIlp(p).infeasible);
  EXPECT_TRUE(solveExhaustive(p).infeasible);
}

/// Edge costs decide between strategies that cost the same alone.
TEST(IlpTest, EdgesCoupleNeighbours) {
  IlpProblem p;
  p.nodeCost = {{1, 1}, {1, 1}, {1, 1}};
  // 0 -> 1 and 1 -> 2 are free when both ends agree, else cost 5.
  for (int n = 0; n < 2; ++n)
    p.edges.push_back({n, n + 1, {0, 5, 5, 0}});
  // Node 2 prefers strategy 1 a little.
  p.nodeCost[2] = {1.5, 1};
  IlpSolution s = solveIlp(p);
  EXPECT_EQ(s.choice, (std::vector<int>{1, 1, 1}));
  EXPECT_DOUBLE_EQ(s.objective, 3);
}

} // namespace
