//===- Search.cpp - Branch and bound over candidate plans -----------------===//

#include "Space.h"

#include "cleave/CostModel/Report.h"
#include "cleave/Planner/Explain.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <queue>
#include <set>

namespace cleave::planner {

using detail::Space;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// The k best fitting plans, with their enumeration order for ties.
class Ranking {
public:
  explicit Ranking(size_t k) : k(k) {}
  void add(Candidate c, size_t order) {
    auto pos = std::find_if(items.begin(), items.end(), [&](const auto &it) {
      return detail::ranksBefore(c, order, it.first, it.second);
    });
    items.insert(pos, {std::move(c), order});
    if (items.size() > k)
      items.pop_back();
  }
  bool full() const { return items.size() == k; }
  double worst() const { return items.back().first.stepTime; }
  std::vector<std::pair<Candidate, size_t>> items;

private:
  size_t k;
};

/// A visited candidate over the memory limit.
struct OverMemory {
  size_t index;
  double bound, peak;
};

/// Fills the result's best plan, runners-up and explanations.
void finish(Space &space, Ranking &ranking, std::vector<OverMemory> over,
            SearchResult &r) {
  if (!ranking.items.empty()) {
    r.best = ranking.items.front().first;
    for (size_t i = 1; i < ranking.items.size(); ++i) {
      Candidate c = ranking.items[i].first;
      c.lostBecause = explainLoss(c, *r.best, r.memoryLimit);
      r.runnersUp.push_back(std::move(c));
    }
    // The most promising plans the memory limit ruled out, one per mesh
    // and micro-batch size, if they would have been faster.
    std::sort(over.begin(), over.end(), [](const auto &a, const auto &b) {
      return a.bound != b.bound ? a.bound < b.bound : a.index < b.index;
    });
    std::set<std::tuple<int32_t, int64_t>> seen;
    for (const OverMemory &o : over) {
      if (r.overMemory.size() >= 3 || o.bound >= r.best->stepTime)
        break;
      const detail::Candidate &c = space.candidates[o.index];
      if (!seen.insert({c.mesh, c.microBatch}).second)
        continue;
      cost::Result<Candidate> e = space.evaluate(c);
      if (!e || e->stepTime >= r.best->stepTime)
        continue;
      e->lostBecause = explainLoss(*e, *r.best, r.memoryLimit);
      r.overMemory.push_back(std::move(*e));
    }
  }
  r.stats = space.stats;
  r.leastMemory = space.smallest;
  if (!r.best)
    r.infeasible = explainInfeasible(space.model, space.options, r);
}

SearchResult emptyResult(const Space &space) {
  SearchResult r;
  r.memoryLimit = space.memoryLimit;
  r.gpus = space.gpus;
  return r;
}

} // namespace

namespace {

/// The branch and bound: candidates in order of their lower bound, refined
/// when first visited, memory checked before simulating, until the bound
/// passes the k-th best simulated plan.
class BranchAndBound {
public:
  BranchAndBound(Space &space, const PlannerOptions &options)
      : space(space), options(options), ranking(size_t(options.topK)) {}

  cost::Result<bool> run() {
    for (size_t i = 0; i < space.candidates.size(); ++i)
      queue.push({space.candidates[i].bound, i});
    while (!queue.empty()) {
      auto [bound, index] = queue.top();
      // Ties are kept: a bound equal to the k-th best may still rank first.
      if (ranking.full() && bound > ranking.worst() * (1 + 1e-9))
        break;
      queue.pop();
      if (cost::Result<bool> r = visit(index); !r)
        return r;
    }
    return true;
  }

  void report() {
    if (!options.progress)
      return;
    const SearchStats &s = space.stats;
    options.progress(
        {s.candidates, s.visited, s.simulated,
         ranking.items.empty() ? 0.0 : ranking.items.front().first.stepTime,
         secondsSince(start)});
  }

  Ranking &result() { return ranking; }
  std::vector<OverMemory> &overMemory() { return over; }

private:
  cost::Result<bool> visit(size_t index) {
    SearchStats &stats = space.stats;
    if ((++stats.visited & 255) == 0 && secondsSince(lastReport) > 0.25) {
      lastReport = Clock::now();
      report();
    }
    detail::Candidate &c = space.candidates[index];
    if (!c.exact) {
      space.refine(c);
      if (!c.dropped)
        queue.push({c.bound, index});
      return true;
    }
    cost::ParallelPlan plan = space.materialize(c);
    double peak = space.peakMemory(plan, space.workloadOf(c, plan));
    if (peak > space.memoryLimit) {
      over.push_back({index, c.bound, peak});
      return true;
    }
    cost::Result<Candidate> e = space.evaluate(c);
    if (!e)
      return cost::Result<bool>::failure(e.error());
    ranking.add(std::move(*e), index);
    return true;
  }

  using Entry = std::pair<double, size_t>;
  Space &space;
  const PlannerOptions &options;
  Ranking ranking;
  std::vector<OverMemory> over;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  Clock::time_point start = Clock::now(), lastReport = Clock::now();
};

/// The branch and bound alone (searchPlans adds the ep explanation).
cost::Result<SearchResult> searchOnce(const ModelConfig &model,
                                      const cost::ClusterSpec &cluster,
                                      const PlannerOptions &options) {
  Clock::time_point start = Clock::now();
  Space space(model, cluster, options);
  if (std::string e = space.validateOptions(); !e.empty())
    return cost::Result<SearchResult>::failure(e);
  space.enumerate();
  SearchResult result = emptyResult(space);
  BranchAndBound search(space, options);
  if (cost::Result<bool> r = search.run(); !r)
    return cost::Result<SearchResult>::failure(r.error());
  finish(space, search.result(), std::move(search.overMemory()), result);
  result.stats.seconds = secondsSince(start);
  search.report();
  return result;
}

/// Whether the search may try plans of the other expert-parallel kind than
/// `chosen` (ep = 1 against ep > 1).
bool otherEpAllowed(const SearchSpace &s, int chosen) {
  return chosen > 1 ? s.minExpertParallel <= 1 : s.maxExpertParallel > 1;
}

/// Searches again with ep restricted to the other kind than the chosen
/// plan's and states why the chosen one won.
void explainExpertParallel(const ModelConfig &model,
                           const cost::ClusterSpec &cluster,
                           const PlannerOptions &options, SearchResult &r) {
  if (!model.isMoE() || !r.best)
    return;
  int ep = r.best->plan.ep;
  std::string chosen = ep > 1 ? "ep=" + std::to_string(ep) + " (experts " +
                                    std::to_string(model.experts / ep) +
                                    " per GPU)"
                              : "no expert parallelism (ep=1)";
  if (!otherEpAllowed(options.space, ep)) {
    r.expertParallel = chosen + "; the search space has no other ep";
    return;
  }
  PlannerOptions other = options;
  other.topK = 1;
  other.progress = nullptr;
  if (ep > 1) {
    other.space.maxExpertParallel = 1;
    other.space.minExpertParallel = 1;
  } else {
    other.space.minExpertParallel = 2;
  }
  cost::Result<SearchResult> alt = searchOnce(model, cluster, other);
  std::string kind = ep > 1 ? "without expert parallelism"
                            : "with expert parallelism (ep > 1)";
  if (!alt || !alt->best) {
    std::string why = !alt                      ? alt.error()
                      : alt->infeasible.empty() ? std::string("none fits")
                                                : alt->infeasible.front();
    r.expertParallel = chosen + "; no plan " + kind + ": " + why;
    return;
  }
  Candidate c = *alt->best;
  c.lostBecause = explainLoss(c, *r.best, r.memoryLimit);
  r.expertParallel = chosen + "; the best plan " + kind + " (" +
                     cost::describe(c.plan) + ") lost: " + c.lostBecause;
  // What expert parallelism costs in the plan that has it: the exposed
  // all-to-alls and the busiest rank's expert load.
  const Candidate &withEp = ep > 1 ? *r.best : c;
  const cost::CostConstants &k =
      options.constants ? *options.constants : cost::defaultConstants();
  r.expertParallel +=
      "; under ep=" + std::to_string(withEp.plan.ep) + " the all-to-alls " +
      "expose " +
      cost::formatSeconds(
          withEp.breakdown.exposedComm[size_t(cost::Axis::EP)]) +
      " and the busiest rank computes " +
      cost::formatPercent(cost::expertLoadFactor(model, withEp.plan, k), 0) +
      " of the mean expert load" +
      (model.capacityFactor > 0 ? " (capacity factor)"
                                : " (dropless: the imbalance prior)");
  r.expertAlternative = std::move(c);
}

} // namespace

cost::Result<SearchResult> searchPlans(const ModelConfig &model,
                                       const cost::ClusterSpec &cluster,
                                       const PlannerOptions &options) {
  cost::Result<SearchResult> r = searchOnce(model, cluster, options);
  if (r)
    explainExpertParallel(model, cluster, options, *r);
  return r;
}

cost::Result<SearchResult> searchExhaustive(const ModelConfig &model,
                                            const cost::ClusterSpec &cluster,
                                            const PlannerOptions &options) {
  Clock::time_point start = Clock::now();
  Space space(model, cluster, options);
  if (std::string e = space.validateOptions(); !e.empty())
    return cost::Result<SearchResult>::failure(e);
  space.enumerate();
  SearchResult result = emptyResult(space);
  Ranking ranking(size_t(options.topK));
  std::vector<OverMemory> over;
  for (size_t i = 0; i < space.candidates.size(); ++i) {
    detail::Candidate &c = space.candidates[i];
    if (!c.exact)
      space.refine(c);
    if (c.dropped)
      continue;
    ++space.stats.visited;
    cost::Result<Candidate> e = space.evaluate(c);
    if (!e)
      return cost::Result<SearchResult>::failure(e.error());
    space.noteMemory(*e);
    if (e->fits)
      ranking.add(std::move(*e), i);
    else
      over.push_back({i, c.bound, e->peakMemory});
  }
  finish(space, ranking, std::move(over), result);
  result.stats.seconds = secondsSince(start);
  return result;
}

} // namespace cleave::planner
