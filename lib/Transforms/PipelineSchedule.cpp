//===- PipelineSchedule.cpp - Passes and transfers of every rank ----------===//
//
// Each rank runs its passes in the order cost::pipelineOrders gives (the
// order the simulator replays). Between passes it sends and receives the
// per-micro-batch values other ranks need. Sends are blocking rendezvous,
// so the order of transfers matters: we time the schedule (as soon as
// possible, with unit costs) and give every transfer the time its value is
// produced. Every rank issues its transfers sorted by that time (ties broken
// alike everywhere), i.e. in one global order; then each transfer finds
// both of its ranks done with all earlier ones, so none can wait forever
// (collectives inside a pass involve only ranks of the same stage, which run
// the same program in lockstep). The time of a transfer is the end of the
// pass producing it, which is after that pass starts and no later than the
// start of any pass needing it, so sorting by time also keeps every rank's
// passes in schedule order and after the values they need.
//
//===----------------------------------------------------------------------===//

#include "Pipeline.h"

#include <map>
#include <tuple>

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::pipeline;

namespace {

using GroupKey = std::pair<Phase, int64_t>;
/// (time, 0 transfer / 1 pass, source rank, source pass index, value index,
/// destination rank): one order for all ranks.
using EventKey = std::tuple<int64_t, int, int64_t, int64_t, int64_t, int64_t>;

const char *passName(cost::PassKind kind) {
  switch (kind) {
  case cost::PassKind::Forward:
    return "forward";
  case cost::PassKind::Backward:
    return "backward";
  case cost::PassKind::WeightGrad:
    return "weight-gradient";
  }
  return "?";
}

class Orderer {
public:
  Orderer(const Analysis &a, const PassGroups &groups)
      : a(a), plan(a.plan), groups(groups) {}
  FailureOr<std::vector<std::vector<Event>>> run();

private:
  int64_t stageOf(int64_t rank, const cost::PassRef &p) const {
    return p.chunk * plan.pp + rank;
  }
  GroupKey groupOf(int64_t rank, const cost::PassRef &p) const {
    return {phaseOf(p.kind), stageOf(rank, p)};
  }
  int64_t duration(cost::PassKind kind) const {
    return kind == cost::PassKind::Backward && !plan.splitsWeightGrad() ? 2 : 1;
  }
  void findProducers();
  LogicalResult simulate();
  void collectEvents();

  const Analysis &a;
  const Plan &plan;
  const PassGroups &groups;
  std::vector<std::vector<cost::PassRef>> orders;
  /// The group producing each per-micro-batch value (not arguments).
  DenseMap<Value, GroupKey> producer;
  /// For a group, the groups whose values it needs.
  std::map<GroupKey, SmallVector<GroupKey>> needs;
  /// Start and end of pass (group, micro-batch); index in its rank's order.
  std::map<std::pair<GroupKey, int64_t>, std::tuple<int64_t, int64_t, int64_t>>
      timing;
  std::vector<std::vector<std::pair<EventKey, Event>>> keyed;
};

void Orderer::findProducers() {
  for (auto &[key, g] : groups)
    for (Value v : g.outputs)
      producer[v] = key;
  for (auto &[key, g] : groups) {
    SmallVector<GroupKey> &list = needs[key];
    for (Value v : g.inputs)
      if (auto it = producer.find(v);
          it != producer.end() && !llvm::is_contained(list, it->second))
        list.push_back(it->second);
  }
}

LogicalResult Orderer::simulate() {
  std::vector<size_t> next(plan.pp, 0);
  std::vector<int64_t> freeAt(plan.pp, 0);
  size_t remaining = 0;
  for (auto &order : orders)
    remaining += order.size();
  while (remaining > 0) {
    bool progress = false;
    for (int64_t r = 0; r < plan.pp; ++r) {
      while (next[r] < orders[r].size()) {
        const cost::PassRef &p = orders[r][next[r]];
        GroupKey key = groupOf(r, p);
        int64_t start = freeAt[r];
        bool ready = true;
        for (const GroupKey &dep : needs[key]) {
          auto it = timing.find({dep, p.microBatch});
          if (it != timing.end()) {
            start = std::max(start, std::get<1>(it->second));
            continue;
          }
          if (plan.rankOf(dep.second) == r)
            return a.func.emitError()
                   << "cleave-pipeline: the schedule runs the "
                   << passName(p.kind) << " pass of stage " << key.second
                   << " on micro-batch " << p.microBatch << " before the "
                   << passName(passKindOf(dep.first)) << " pass of stage "
                   << dep.second << " it needs, on the same rank";
          ready = false;
          break;
        }
        if (!ready)
          break;
        int64_t end = start + duration(p.kind);
        timing[{key, p.microBatch}] = {start, end, int64_t(next[r])};
        freeAt[r] = end;
        ++next[r];
        --remaining;
        progress = true;
      }
    }
    if (!progress) {
      int64_t r = 0;
      while (next[r] == orders[r].size())
        ++r;
      const cost::PassRef &p = orders[r][next[r]];
      return a.func.emitError()
             << "cleave-pipeline: the schedule cannot run this program: rank "
             << r << " waits forever before the " << passName(p.kind)
             << " pass of stage " << stageOf(r, p) << " on micro-batch "
             << p.microBatch;
    }
  }
  return success();
}

void Orderer::collectEvents() {
  keyed.assign(plan.pp, {});
  for (int64_t r = 0; r < plan.pp; ++r)
    for (const cost::PassRef &p : orders[r]) {
      GroupKey key = groupOf(r, p);
      auto [start, end, index] = timing[{key, p.microBatch}];
      keyed[r].push_back({{start, 1, r, index, 0, 0},
                          Event{Event::Kind::Pass, p, Value(), -1}});
      const PassGroup &g = groups.find(key)->second;
      for (auto [vi, v] : llvm::enumerate(g.outputs)) {
        // One transfer per rank that runs a pass reading the value.
        SmallVector<int64_t> dests;
        for (Operation *user : v.getUsers()) {
          Phase ur = a.region.lookup(user);
          if (!isPerMicroBatch(ur))
            continue;
          int64_t d = plan.rankOf(a.stage.lookup(user));
          if (d != r && !llvm::is_contained(dests, d))
            dests.push_back(d);
        }
        llvm::sort(dests);
        for (int64_t d : dests) {
          EventKey k{end, 0, r, index, int64_t(vi), d};
          keyed[r].push_back({k, Event{Event::Kind::Send, p, v, d}});
          keyed[d].push_back({k, Event{Event::Kind::Recv, p, v, r}});
        }
      }
    }
}

FailureOr<std::vector<std::vector<Event>>> Orderer::run() {
  cost::ParallelPlan costPlan;
  costPlan.pp = plan.pp;
  costPlan.numMicroBatches = plan.numMicroBatches;
  costPlan.schedule = plan.schedule;
  costPlan.virtualStages = plan.virtualStages;
  orders = cost::pipelineOrders(costPlan);
  findProducers();
  if (failed(simulate()))
    return failure();
  collectEvents();
  std::vector<std::vector<Event>> events(plan.pp);
  for (int64_t r = 0; r < plan.pp; ++r) {
    llvm::stable_sort(keyed[r], [](const auto &x, const auto &y) {
      return x.first < y.first;
    });
    for (auto &[key, event] : keyed[r])
      events[r].push_back(event);
  }
  return events;
}

} // namespace

FailureOr<std::vector<std::vector<Event>>>
pipeline::orderEvents(const Analysis &analysis, const PassGroups &groups) {
  return Orderer(analysis, groups).run();
}
