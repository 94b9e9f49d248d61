//===- StagePartition.cpp - Layers to pipeline chunks by DP ---------------===//
//
// best[k][j]: the smallest possible largest chunk cost when chunks 0..k hold
// layers 0..j-1. best[k][j] = min over i of max(best[k-1][i], cost(i, j)),
// where best[k-1][i] grows with i and cost(i, j) shrinks with it, so the
// minimum sits where the two cross: a binary search instead of a scan.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/StagePartition.h"

#include <algorithm>
#include <limits>

namespace cleave::planner {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Costs {
  std::vector<double> prefix; ///< prefix[i]: cost of layers 0..i-1
  double first, last;
  int layers, chunks;

  /// Cost of chunk `k` holding layers i..j-1.
  double chunk(int k, int i, int j) const {
    double c = prefix[j] - prefix[i];
    if (k == 0)
      c += first;
    if (k == chunks - 1)
      c += last;
    return c;
  }
};

/// best[k][j] for every k, j (kInf where infeasible).
std::vector<std::vector<double>> solve(const Costs &c) {
  std::vector<std::vector<double>> best(
      c.chunks, std::vector<double>(c.layers + 1, kInf));
  for (int j = 1; j <= c.layers; ++j)
    best[0][j] = c.chunk(0, 0, j);
  for (int k = 1; k < c.chunks; ++k) {
    // Chunks 0..k need k+1 layers; later chunks need one each.
    for (int j = k + 1; j <= c.layers - (c.chunks - 1 - k); ++j) {
      // i in [k, j-1]: smallest i with best[k-1][i] >= cost(i, j).
      int lo = k, hi = j - 1;
      while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (best[k - 1][mid] >= c.chunk(k, mid, j))
          hi = mid;
        else
          lo = mid + 1;
      }
      double v = std::max(best[k - 1][lo], c.chunk(k, lo, j));
      if (lo > k)
        v = std::min(v, std::max(best[k - 1][lo - 1], c.chunk(k, lo - 1, j)));
      best[k][j] = v;
    }
  }
  return best;
}

} // namespace

std::vector<int> balancedPartition(const std::vector<double> &layerCosts,
                                   double firstExtra, double lastExtra,
                                   int chunks) {
  int layers = int(layerCosts.size());
  if (chunks < 1 || chunks > layers)
    return {};
  Costs c{{0.0}, firstExtra, lastExtra, layers, chunks};
  for (double x : layerCosts)
    c.prefix.push_back(c.prefix.back() + x);
  std::vector<std::vector<double>> best = solve(c);
  double target = best[chunks - 1][layers];
  double slack = 1e-12 * std::max(1.0, target);
  // From the last chunk back, give each chunk as many layers as the optimum
  // allows (the earliest start whose prefix can still be split in time).
  std::vector<int> counts(chunks);
  int j = layers;
  for (int k = chunks - 1; k > 0; --k) {
    int i = k;
    while (i < j - 1 && (c.chunk(k, i, j) > target + slack ||
                         best[k - 1][i] > target + slack))
      ++i;
    counts[k] = j - i;
    j = i;
  }
  counts[0] = j;
  return counts;
}

double bottleneck(const std::vector<double> &layerCosts, double firstExtra,
                  double lastExtra, const std::vector<int> &partition) {
  double worst = 0;
  size_t layer = 0;
  for (size_t k = 0; k < partition.size(); ++k) {
    double cost = k == 0 ? firstExtra : 0;
    if (k + 1 == partition.size())
      cost += lastExtra;
    for (int n = 0; n < partition[k]; ++n)
      cost += layerCosts[layer++];
    worst = std::max(worst, cost);
  }
  return worst;
}

} // namespace cleave::planner
