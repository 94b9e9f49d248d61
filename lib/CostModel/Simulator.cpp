//===- Simulator.cpp - Discrete-event replay with shared links ------------===//
//
// Activities (a running task, or a collective's tasks on all its members)
// progress at rates that change only when an activity starts or ends on a
// rank they touch; each change re-rates the activities of the touched
// ranks and pushes their new finish times on a heap (stale entries are
// skipped by version). Cost: O(tasks x log tasks) plus, per event, the
// activities of the ranks it touches (a handful).
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Simulator.h"

#include <algorithm>
#include <cmath>
#include <queue>

namespace cleave::cost {

double TimeBreakdown::total() const {
  double t = compute() + bubble;
  for (double e : exposedComm)
    t += e;
  return t;
}

namespace {

struct Footprint {
  int32_t rank;
  uint8_t links;
};

struct Activity {
  std::vector<TaskRef> tasks;
  std::vector<Footprint> footprints;
  bool isComm = false;
  double remaining = 0, rate = 1, lastUpdate = 0;
  uint32_t version = 0;
  bool done = false;
};

struct HeapEntry {
  double time;
  int32_t activity;
  uint32_t version;
  bool operator>(const HeapEntry &o) const {
    return time != o.time ? time > o.time : activity > o.activity;
  }
};

class Engine {
public:
  Engine(const Program &prog, const CostConstants &c) : prog(prog), c(c) {}
  Result<SimulationResult> run(bool keepTimings);

private:
  struct RankState {
    std::array<std::vector<int32_t>, kNumStreams> streams;
    std::array<size_t, kNumStreams> cursor{};
    std::array<bool, kNumStreams> busy{};
    std::vector<int32_t> running; ///< activities touching this rank
    int commRunning = 0;
    std::array<int, 2> linkUse{}; ///< NIC out, NIC in
  };

  size_t gid(TaskRef r) const { return offset[r.rank] + r.task; }
  const Task &task(TaskRef r) const {
    return prog.ranks[r.rank].tasks[r.task];
  }
  void prepare();
  void tryStart(int32_t rank);
  void post(int32_t rank, int32_t t);
  void startActivity(Activity a);
  void finish(int32_t id);
  double rateOf(const Activity &a) const;
  void rerate(const std::vector<Footprint> &touched, int32_t skip);
  void push(int32_t id);
  std::string stallMessage() const;

  const Program &prog;
  const CostConstants &c;
  double now = 0;
  std::vector<size_t> offset;
  std::vector<int32_t> waitingDeps;
  std::vector<std::vector<int32_t>> successors; ///< by global id, as gids
  std::vector<TaskTiming> timing;
  std::vector<bool> done;
  std::vector<RankState> ranks;
  std::vector<Activity> activities;
  std::priority_queue<HeapEntry, std::vector<HeapEntry>,
                      std::greater<HeapEntry>>
      heap;
  /// Collective groups: arrivals per instance.
  std::vector<std::vector<std::vector<TaskRef>>> arrivals;
  std::vector<std::vector<int64_t>> postedPerMember;
  std::vector<int32_t> dirty;
  size_t finished = 0, total = 0;
};

void Engine::prepare() {
  size_t n = prog.ranks.size();
  offset.assign(n + 1, 0);
  for (size_t r = 0; r < n; ++r)
    offset[r + 1] = offset[r] + prog.ranks[r].tasks.size();
  total = offset[n];
  waitingDeps.assign(total, 0);
  successors.assign(total, {});
  timing.assign(total, {});
  done.assign(total, false);
  ranks.assign(n, {});
  for (size_t r = 0; r < n; ++r) {
    const std::vector<Task> &tasks = prog.ranks[r].tasks;
    for (size_t t = 0; t < tasks.size(); ++t) {
      const Task &tk = tasks[t];
      ranks[r].streams[tk.stream].push_back(int32_t(t));
      size_t me = offset[r] + t;
      for (int32_t d = 0; d < tk.depCount; ++d) {
        TaskRef dep = prog.deps[size_t(tk.depBegin + d)];
        if (dep.rank < 0 || size_t(dep.rank) >= n || dep.task < 0 ||
            size_t(dep.task) >= prog.ranks[dep.rank].tasks.size())
          continue; // an unresolvable dependency is reported as a stall
        ++waitingDeps[me];
        successors[gid(dep)].push_back(int32_t(me));
      }
    }
  }
  arrivals.assign(prog.groups.size(), {});
  postedPerMember.assign(prog.groups.size(), {});
  for (size_t g = 0; g < prog.groups.size(); ++g)
    postedPerMember[g].assign(prog.groups[g].size(), 0);
}

double Engine::rateOf(const Activity &a) const {
  if (!a.isComm) {
    const RankState &rs = ranks[a.footprints[0].rank];
    return rs.commRunning > 0 ? 1.0 / (1.0 + c.overlapSlowdown) : 1.0;
  }
  double rate = 1;
  for (const Footprint &f : a.footprints)
    for (int l = 0; l < 2; ++l)
      if (f.links & (1 << l))
        rate = std::min(rate, 1.0 / std::max(1, ranks[f.rank].linkUse[l]));
  return rate;
}

void Engine::push(int32_t id) {
  Activity &a = activities[id];
  heap.push({now + a.remaining / a.rate, id, a.version});
}

void Engine::rerate(const std::vector<Footprint> &touched, int32_t skip) {
  for (const Footprint &f : touched) {
    for (int32_t id : ranks[f.rank].running) {
      Activity &a = activities[id];
      if (a.done || id == skip)
        continue;
      a.remaining = std::max(0.0, a.remaining - (now - a.lastUpdate) * a.rate);
      a.lastUpdate = now;
      double rate = rateOf(a);
      if (rate != a.rate) {
        a.rate = rate;
        ++a.version;
        push(id);
      }
    }
  }
}

void Engine::startActivity(Activity a) {
  int32_t id = int32_t(activities.size());
  a.lastUpdate = now;
  for (const TaskRef &t : a.tasks) {
    timing[gid(t)].transferStart = now;
    ranks[t.rank].busy[task(t).stream] = true;
  }
  for (const Footprint &f : a.footprints) {
    RankState &rs = ranks[f.rank];
    rs.running.push_back(id);
    if (a.isComm)
      ++rs.commRunning;
    for (int l = 0; l < 2; ++l)
      rs.linkUse[l] += (f.links >> l) & 1;
  }
  activities.push_back(std::move(a));
  Activity &act = activities[id];
  act.rate = rateOf(act);
  push(id);
  rerate(act.footprints, id);
}

/// The task at the head of a stream is ready: start it, or wait for the
/// other members of its collective group.
void Engine::post(int32_t rank, int32_t t) {
  const Task &tk = prog.ranks[rank].tasks[t];
  TaskRef me{rank, t};
  timing[gid(me)].start = now;
  ranks[rank].busy[tk.stream] = true;
  Activity a;
  a.remaining = tk.duration;
  a.isComm = tk.kind != TaskKind::Compute;
  if (tk.kind != TaskKind::Collective || tk.group < 0) {
    a.tasks.push_back(me);
    a.footprints.push_back({rank, tk.links});
    if (tk.kind == TaskKind::Send && tk.peer >= 0 && tk.peer != rank)
      a.footprints.push_back(
          {tk.peer, uint8_t(tk.links & kNicOut ? kNicIn : 0)});
    startActivity(std::move(a));
    return;
  }
  const std::vector<int32_t> &members = prog.groups[tk.group];
  size_t index = std::find(members.begin(), members.end(), rank) -
                 members.begin();
  int64_t instance = postedPerMember[tk.group][index]++;
  std::vector<std::vector<TaskRef>> &inst = arrivals[tk.group];
  if (inst.size() <= size_t(instance))
    inst.resize(size_t(instance) + 1);
  inst[instance].push_back(me);
  if (inst[instance].size() < members.size())
    return;
  for (const TaskRef &m : inst[instance]) {
    const Task &mt = task(m);
    a.tasks.push_back(m);
    a.footprints.push_back({m.rank, mt.links});
    a.remaining = std::max(a.remaining, mt.duration);
  }
  inst[instance].clear();
  startActivity(std::move(a));
}

void Engine::tryStart(int32_t rank) {
  RankState &rs = ranks[rank];
  for (int s = 0; s < kNumStreams; ++s) {
    if (rs.busy[s] || rs.cursor[s] >= rs.streams[s].size())
      continue;
    int32_t t = rs.streams[s][rs.cursor[s]];
    if (waitingDeps[offset[rank] + t] == 0)
      post(rank, t);
  }
}

void Engine::finish(int32_t id) {
  Activity &a = activities[id];
  a.done = true;
  a.remaining = 0;
  for (const Footprint &f : a.footprints) {
    RankState &rs = ranks[f.rank];
    rs.running.erase(std::find(rs.running.begin(), rs.running.end(), id));
    if (a.isComm)
      --rs.commRunning;
    for (int l = 0; l < 2; ++l)
      rs.linkUse[l] -= (f.links >> l) & 1;
    dirty.push_back(f.rank);
  }
  for (const TaskRef &t : a.tasks) {
    size_t g = gid(t);
    timing[g].end = now;
    done[g] = true;
    ++finished;
    RankState &rs = ranks[t.rank];
    uint8_t stream = task(t).stream;
    rs.busy[stream] = false;
    ++rs.cursor[stream];
    dirty.push_back(t.rank);
    for (int32_t succ : successors[g]) {
      --waitingDeps[size_t(succ)];
      int32_t r = int32_t(std::upper_bound(offset.begin(), offset.end(),
                                           size_t(succ)) -
                          offset.begin() - 1);
      dirty.push_back(r);
    }
  }
  rerate(a.footprints, id);
}

std::string Engine::stallMessage() const {
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankState &rs = ranks[r];
    for (int s = 0; s < kNumStreams; ++s) {
      if (rs.cursor[s] >= rs.streams[s].size())
        continue;
      int32_t t = rs.streams[s][rs.cursor[s]];
      const Task &tk = prog.ranks[r].tasks[t];
      size_t g = offset[r] + t;
      std::string why = waitingDeps[g] > 0
                            ? std::to_string(waitingDeps[g]) +
                                  " unfinished dependencies"
                            : "the other members of its collective group";
      return "simulation cannot finish: rank " + std::to_string(r) +
             " (stage " + std::to_string(prog.ranks[r].stage) +
             ") task " + std::to_string(t) + " '" + taskLabel(tk) +
             "' waits for " + why + " at t=" + std::to_string(now) + " s";
    }
  }
  return "simulation cannot finish";
}

/// Splits a rank's step into compute categories, exposed communication by
/// axis and bubble, by walking its compute stream: busy time goes to the
/// task's parts, an idle gap to the communication the next task waited for
/// (its transfer time; on this rank, the whole wait) or else to the bubble.
TimeBreakdown breakdownOf(const Program &prog, size_t rank,
                          const std::vector<size_t> &offset,
                          const std::vector<TaskTiming> &timing,
                          double stepTime) {
  TimeBreakdown b;
  const std::vector<Task> &tasks = prog.ranks[rank].tasks;
  auto timingOf = [&](TaskRef r) -> const TaskTiming & {
    return timing[offset[r.rank] + r.task];
  };
  double t = 0, rankEnd = 0;
  int32_t lastEnding = -1;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskTiming &ti = timing[offset[rank] + i];
    if (ti.end >= rankEnd) {
      rankEnd = ti.end;
      lastEnding = int32_t(i);
    }
    const Task &tk = tasks[i];
    if (tk.stream != kComputeStream)
      continue;
    double gap = ti.start - t;
    if (gap > 0) {
      TaskRef wait{-1, -1};
      double waitEnd = t;
      for (int32_t d = 0; d < tk.depCount; ++d) {
        TaskRef dep = prog.deps[size_t(tk.depBegin + d)];
        if (timingOf(dep).end > waitEnd) {
          waitEnd = timingOf(dep).end;
          wait = dep;
        }
      }
      const Task *w = wait.rank >= 0 ? &prog.ranks[wait.rank].tasks[wait.task]
                                     : nullptr;
      if (w && w->kind != TaskKind::Compute) {
        double comm = gap;
        if (size_t(wait.rank) != rank)
          comm = std::max(0.0, std::min(timingOf(wait).end, ti.start) -
                                   std::max(timingOf(wait).transferStart, t));
        b.exposedComm[size_t(w->axis)] += comm;
        b.bubble += gap - comm;
      } else {
        b.bubble += gap;
      }
    }
    double dur = ti.end - ti.start;
    double scale = tk.duration > 0 ? dur / tk.duration : 0;
    double parts = (tk.recompute + tk.tp + tk.cp) * scale;
    b.recompute += tk.recompute * scale;
    b.exposedComm[size_t(Axis::TP)] += tk.tp * scale;
    b.exposedComm[size_t(Axis::CP)] += tk.cp * scale;
    double rest = dur - parts;
    switch (tk.category) {
    case TaskCategory::Forward:
      b.forward += rest;
      break;
    case TaskCategory::Backward:
      b.backward += rest;
      break;
    case TaskCategory::WeightGrad:
      b.weightGrad += rest;
      break;
    default:
      b.optimizer += rest;
      break;
    }
    t = ti.end;
  }
  if (rankEnd > t && lastEnding >= 0 &&
      tasks[lastEnding].kind != TaskKind::Compute)
    b.exposedComm[size_t(tasks[lastEnding].axis)] += rankEnd - t;
  else
    b.bubble += std::max(0.0, rankEnd - t);
  b.bubble += std::max(0.0, stepTime - std::max(rankEnd, t));
  return b;
}

Result<SimulationResult> Engine::run(bool keepTimings) {
  prepare();
  for (size_t r = 0; r < ranks.size(); ++r)
    tryStart(int32_t(r));
  while (!heap.empty()) {
    HeapEntry e = heap.top();
    heap.pop();
    Activity &a = activities[e.activity];
    if (a.done || e.version != a.version)
      continue;
    now = std::max(now, e.time);
    finish(e.activity);
    std::vector<int32_t> todo;
    todo.swap(dirty);
    std::sort(todo.begin(), todo.end());
    todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
    for (int32_t r : todo)
      tryStart(r);
  }
  if (finished != total)
    return Result<SimulationResult>::failure(stallMessage());
  SimulationResult res;
  size_t n = prog.ranks.size();
  res.rankEnd.assign(n, 0);
  for (size_t r = 0; r < n; ++r)
    for (size_t g = offset[r]; g < offset[r + 1]; ++g)
      res.rankEnd[r] = std::max(res.rankEnd[r], timing[g].end);
  for (size_t r = 0; r < n; ++r) {
    if (res.rankEnd[r] > res.stepTime) {
      res.stepTime = res.rankEnd[r];
      res.criticalRank = int32_t(r);
    }
  }
  res.breakdown.reserve(n);
  for (size_t r = 0; r < n; ++r)
    res.breakdown.push_back(
        breakdownOf(prog, r, offset, timing, res.stepTime));
  if (keepTimings) {
    res.timings.resize(n);
    for (size_t r = 0; r < n; ++r)
      res.timings[r].assign(timing.begin() + offset[r],
                            timing.begin() + offset[r + 1]);
  }
  return res;
}

} // namespace

Result<SimulationResult> simulate(const Program &program,
                                  const CostConstants &c,
                                  const SimulationOptions &options) {
  return Engine(program, c).run(options.keepTimings);
}

} // namespace cleave::cost
