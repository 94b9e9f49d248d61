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
#include <functional>
#include <queue>
#include <tuple>

namespace cleave::cost {

double TimeBreakdown::total() const {
  double t = compute() + bubble + hostCpu;
  for (double e : exposedComm)
    t += e;
  return t;
}

namespace {

struct Footprint {
  int32_t rank;
  uint8_t links;
};

/// A few elements inline (one task and up to two ranks is the common
/// case), more on the heap (collectives with groups).
template <typename T>
class SmallList {
public:
  void push_back(const T &v) {
    if (n < 2)
      inl[n] = v;
    else
      heap.push_back(v);
    ++n;
  }
  size_t size() const { return n; }
  const T &operator[](size_t i) const { return i < 2 ? inl[i] : heap[i - 2]; }
  template <typename F>
  void forEach(F f) const {
    for (size_t i = 0; i < n; ++i)
      f((*this)[i]);
  }

private:
  T inl[2] = {};
  std::vector<T> heap;
  size_t n = 0;
};

struct Activity {
  SmallList<TaskRef> tasks;
  SmallList<Footprint> footprints;
  bool isComm = false;
  /// A compute task on a shared host computes first (`shared`, counted in
  /// the host's load), then runs its blocking communication (`fixed`
  /// seconds at its own pace).
  bool shared = false;
  double fixed = 0, weight = 0;
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
  const Task &task(TaskRef r) const { return prog.ranks[r.rank].tasks[r.task]; }
  void prepare();
  void tryStart(int32_t rank);
  void post(int32_t rank, int32_t t);
  void startActivity(Activity a);
  void finish(int32_t id);
  double rateOf(const Activity &a) const;
  void rerate(const SmallList<Footprint> &touched, int32_t skip);
  void markDirty(int32_t rank) {
    if (!isDirty[size_t(rank)]) {
      isDirty[size_t(rank)] = 1;
      dirty.push_back(rank);
    }
  }
  void push(int32_t id);
  /// Brings activity `id`'s progress up to now and re-rates it.
  void update(int32_t id);
  /// How much faster than its standalone duration a computing rank runs
  /// on a shared host with the current load.
  double hostSpeed() const;
  void setShared(int32_t id, bool on);
  std::string stallMessage() const;

  const Program &prog;
  const CostConstants &c;
  double now = 0;
  std::vector<size_t> offset;
  std::vector<int32_t> waitingDeps;
  /// Successors of each task (by global id), in CSR form.
  std::vector<int32_t> succBegin, succ, rankOf;
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
  std::vector<char> isDirty;
  size_t finished = 0, total = 0;
  /// Real ranks per node computing on a shared host, and their activities.
  double hostLoad = 0;
  std::vector<int32_t> sharedRunning;
};

void Engine::prepare() {
  size_t n = prog.ranks.size();
  offset.assign(n + 1, 0);
  for (size_t r = 0; r < n; ++r)
    offset[r + 1] = offset[r] + prog.ranks[r].tasks.size();
  total = offset[n];
  waitingDeps.assign(total, 0);
  timing.assign(total, {});
  done.assign(total, false);
  rankOf.resize(total);
  ranks.assign(n, {});
  isDirty.assign(n, 0);
  auto valid = [&](TaskRef d) {
    return d.rank >= 0 && size_t(d.rank) < n && d.task >= 0 &&
           size_t(d.task) < prog.ranks[d.rank].tasks.size();
  };
  // Count successors, then fill them (an unresolvable dependency is never
  // satisfied and is reported as a stall).
  succBegin.assign(total + 1, 0);
  for (size_t r = 0; r < n; ++r) {
    const std::vector<Task> &tasks = prog.ranks[r].tasks;
    for (size_t t = 0; t < tasks.size(); ++t) {
      rankOf[offset[r] + t] = int32_t(r);
      ranks[r].streams[tasks[t].stream].push_back(int32_t(t));
      for (int32_t d = 0; d < tasks[t].depCount; ++d) {
        TaskRef dep = prog.deps[size_t(tasks[t].depBegin + d)];
        ++waitingDeps[offset[r] + t];
        if (valid(dep))
          ++succBegin[gid(dep) + 1];
      }
    }
  }
  for (size_t g = 0; g < total; ++g)
    succBegin[g + 1] += succBegin[g];
  succ.assign(size_t(succBegin[total]), 0);
  std::vector<int32_t> fill(succBegin.begin(), succBegin.end() - 1);
  for (size_t r = 0; r < n; ++r) {
    const std::vector<Task> &tasks = prog.ranks[r].tasks;
    for (size_t t = 0; t < tasks.size(); ++t)
      for (int32_t d = 0; d < tasks[t].depCount; ++d) {
        TaskRef dep = prog.deps[size_t(tasks[t].depBegin + d)];
        if (valid(dep))
          succ[size_t(fill[gid(dep)]++)] = int32_t(offset[r] + t);
      }
  }
  arrivals.assign(prog.groups.size(), {});
  postedPerMember.assign(prog.groups.size(), {});
  for (size_t g = 0; g < prog.groups.size(); ++g)
    postedPerMember[g].assign(prog.groups[g].size(), 0);
}

/// Durations are priced with every rank of a node computing (the measured
/// rates of a local CPU cluster). With `load` ranks computing, each gets
/// min(1, capacity / load) of its rate alone, which is n / capacity times
/// the priced rate for n ranks per node: min(n / capacity, n / load).
double Engine::hostSpeed() const {
  double n = prog.hostRanksPerNode;
  return std::min(n / prog.hostCapacity, n / std::max(hostLoad, 1e-9));
}

double Engine::rateOf(const Activity &a) const {
  if (!a.isComm) {
    const RankState &rs = ranks[a.footprints[0].rank];
    double rate = rs.commRunning > 0 ? 1.0 / (1.0 + c.overlapSlowdown) : 1.0;
    return a.shared ? rate * hostSpeed() : rate;
  }
  double rate = 1;
  a.footprints.forEach([&](const Footprint &f) {
    for (int l = 0; l < 2; ++l)
      if (f.links & (1 << l))
        rate = std::min(rate, 1.0 / std::max(1, ranks[f.rank].linkUse[l]));
  });
  return rate;
}

void Engine::push(int32_t id) {
  Activity &a = activities[id];
  heap.push({now + a.remaining / a.rate, id, a.version});
}

void Engine::update(int32_t id) {
  Activity &a = activities[id];
  a.remaining = std::max(0.0, a.remaining - (now - a.lastUpdate) * a.rate);
  a.lastUpdate = now;
  double rate = rateOf(a);
  if (rate != a.rate) {
    a.rate = rate;
    ++a.version;
    push(id);
  }
}

void Engine::rerate(const SmallList<Footprint> &touched, int32_t skip) {
  for (size_t i = 0; i < touched.size(); ++i)
    for (int32_t id : ranks[touched[i].rank].running)
      if (!activities[id].done && id != skip)
        update(id);
}

/// Counts activity `id` in the host's load, or stops counting it, and
/// re-rates every computing activity (a handful: one per simulated rank).
void Engine::setShared(int32_t id, bool on) {
  Activity &a = activities[id];
  a.shared = on;
  if (on) {
    hostLoad += a.weight;
    sharedRunning.push_back(id);
  } else {
    hostLoad = std::max(0.0, hostLoad - a.weight);
    sharedRunning.erase(
        std::find(sharedRunning.begin(), sharedRunning.end(), id));
  }
  for (int32_t other : sharedRunning)
    if (other != id)
      update(other);
}

void Engine::startActivity(Activity a) {
  int32_t id = int32_t(activities.size());
  a.lastUpdate = now;
  a.tasks.forEach([&](const TaskRef &t) {
    timing[gid(t)].transferStart = now;
    ranks[t.rank].busy[task(t).stream] = true;
  });
  a.footprints.forEach([&](const Footprint &f) {
    RankState &rs = ranks[f.rank];
    rs.running.push_back(id);
    if (a.isComm)
      ++rs.commRunning;
    for (int l = 0; l < 2; ++l)
      rs.linkUse[l] += (f.links >> l) & 1;
  });
  bool shared = a.shared;
  a.shared = false;
  activities.push_back(std::move(a));
  if (shared)
    setShared(id, true);
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
  if (!a.isComm && prog.hostCapacity > 0) {
    a.fixed = std::min(tk.duration, tk.tp + tk.cp + tk.ep);
    a.remaining = tk.duration - a.fixed;
    a.weight = double(prog.ranks[rank].multiplicity) / prog.hostNodes;
    a.shared = a.remaining > 0;
    if (!a.shared)
      std::swap(a.remaining, a.fixed);
  }
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
  size_t index =
      std::find(members.begin(), members.end(), rank) - members.begin();
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
  if (a.shared)
    setShared(id, false);
  a.done = true;
  a.remaining = 0;
  a.footprints.forEach([&](const Footprint &f) {
    RankState &rs = ranks[f.rank];
    rs.running.erase(std::find(rs.running.begin(), rs.running.end(), id));
    if (a.isComm)
      --rs.commRunning;
    for (int l = 0; l < 2; ++l)
      rs.linkUse[l] -= (f.links >> l) & 1;
    markDirty(f.rank);
  });
  a.tasks.forEach([&](const TaskRef &t) {
    size_t g = gid(t);
    timing[g].end = now;
    done[g] = true;
    ++finished;
    RankState &rs = ranks[t.rank];
    uint8_t stream = task(t).stream;
    rs.busy[stream] = false;
    ++rs.cursor[stream];
    markDirty(t.rank);
    for (int32_t i = succBegin[g]; i < succBegin[g + 1]; ++i) {
      --waitingDeps[size_t(succ[size_t(i)])];
      markDirty(rankOf[size_t(succ[size_t(i)])]);
    }
  });
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
      std::string why =
          waitingDeps[g] > 0
              ? std::to_string(waitingDeps[g]) + " unfinished dependencies"
              : "the other members of its collective group";
      return "simulation cannot finish: rank " + std::to_string(r) +
             " (stage " + std::to_string(prog.ranks[r].stage) + ") task " +
             std::to_string(t) + " '" + taskLabel(tk) + "' waits for " + why +
             " at t=" + std::to_string(now) + " s";
    }
  }
  return "simulation cannot finish";
}

/// Adds an idle gap of `gap` seconds before compute task `tk` (starting at
/// `start`, the stream idle since `idleFrom`) to the breakdown: to the
/// communication the task waited for (its transfer time for a send from
/// another rank, the whole wait for one on this rank), else to the bubble.
void attributeGap(TimeBreakdown &b, const Program &prog, size_t rank,
                  const Task &tk, double idleFrom, double start,
                  const std::function<const TaskTiming &(TaskRef)> &timingOf) {
  double gap = start - idleFrom;
  TaskRef wait{-1, -1};
  double waitEnd = idleFrom;
  for (int32_t d = 0; d < tk.depCount; ++d) {
    TaskRef dep = prog.deps[size_t(tk.depBegin + d)];
    if (timingOf(dep).end > waitEnd) {
      waitEnd = timingOf(dep).end;
      wait = dep;
    }
  }
  const Task *w =
      wait.rank >= 0 ? &prog.ranks[wait.rank].tasks[wait.task] : nullptr;
  if (!w || w->kind == TaskKind::Compute) {
    b.bubble += gap;
    return;
  }
  double comm = gap;
  if (size_t(wait.rank) != rank)
    comm = std::max(0.0, std::min(timingOf(wait).end, start) -
                             std::max(timingOf(wait).transferStart, idleFrom));
  b.exposedComm[size_t(w->axis)] += comm;
  b.bubble += gap - comm;
}

/// Adds the busy time of compute task `tk` (stretched by overlap from its
/// standalone duration) to its category and its recompute / TP / CP parts.
void attributeBusy(TimeBreakdown &b, const Task &tk, double busy) {
  double scale = tk.duration > 0 ? busy / tk.duration : 0;
  b.recompute += tk.recompute * scale;
  b.exposedComm[size_t(Axis::TP)] += tk.tp * scale;
  b.exposedComm[size_t(Axis::CP)] += tk.cp * scale;
  b.exposedComm[size_t(Axis::EP)] += tk.ep * scale;
  double rest = busy - (tk.recompute + tk.tp + tk.cp + tk.ep) * scale;
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
}

/// Splits a rank's step into compute categories, exposed communication by
/// axis and bubble by walking its compute stream; the time after its last
/// task goes to the communication that ended last or to the bubble.
TimeBreakdown breakdownOf(const Program &prog, size_t rank,
                          const std::vector<size_t> &offset,
                          const std::vector<TaskTiming> &timing,
                          double stepTime) {
  TimeBreakdown b;
  const std::vector<Task> &tasks = prog.ranks[rank].tasks;
  std::function<const TaskTiming &(TaskRef)> timingOf =
      [&](TaskRef r) -> const TaskTiming & {
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
    if (tasks[i].stream != kComputeStream)
      continue;
    if (ti.start > t)
      attributeGap(b, prog, rank, tasks[i], t, ti.start, timingOf);
    attributeBusy(b, tasks[i], ti.end - ti.start);
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

/// A shared host's CPU per step (Program::hostCores): per node, the
/// ranks' computation, priced with every rank computing, runs on
/// cores / ranks-per-node of a core each, and their collectives cost the
/// processes Task::cpu on top. Returns {CPU seconds, of which collectives'}.
std::pair<double, double> hostCpuSeconds(const Program &prog) {
  if (prog.hostCores <= 0 || prog.hostRanksPerNode <= 0)
    return {0, 0};
  double compute = 0, cpu = 0;
  for (const RankProgram &r : prog.ranks) {
    double weight = double(r.multiplicity) / prog.hostNodes;
    for (const Task &t : r.tasks) {
      cpu += weight * t.cpu;
      if (t.kind == TaskKind::Compute)
        compute +=
            weight * (t.duration - std::min(t.duration, t.tp + t.cp + t.ep));
    }
  }
  return {compute * prog.hostCores / prog.hostRanksPerNode + cpu, cpu};
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
    if (a.shared && a.fixed > 0) {
      // Its computation is done; its blocking communication follows.
      int32_t id = e.activity;
      setShared(id, false);
      Activity &b = activities[id];
      b.remaining = b.fixed;
      b.fixed = 0;
      b.lastUpdate = now;
      b.rate = rateOf(b);
      ++b.version;
      push(id);
      continue;
    }
    finish(e.activity);
    // Ranks in ascending order, as in a sorted pass: deterministic.
    std::sort(dirty.begin(), dirty.end());
    for (size_t i = 0; i < dirty.size(); ++i) {
      isDirty[size_t(dirty[i])] = 0;
      tryStart(dirty[i]);
    }
    dirty.clear();
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
    res.breakdown.push_back(breakdownOf(prog, r, offset, timing, res.stepTime));
  std::tie(res.hostCpuSeconds, res.hostCommCpuSeconds) = hostCpuSeconds(prog);
  if (prog.hostCores > 0)
    res.hostCpuBound = res.hostCpuSeconds / prog.hostCores;
  if (res.hostCpuBound > res.stepTime) {
    for (TimeBreakdown &b : res.breakdown)
      b.hostCpu = res.hostCpuBound - res.stepTime;
    res.stepTime = res.hostCpuBound;
  }
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
