//===- Trace.cpp - Chrome trace (Perfetto) timelines ----------------------===//
//
// Trace Event Format: complete events ("ph": "X") with microsecond
// timestamps, one process per simulated rank and one thread per stream,
// named with metadata events ("ph": "M").
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Simulator.h"

#include <nlohmann/json.hpp>

namespace cleave::cost {

std::string taskLabel(const Task &t) {
  std::string s;
  switch (t.kind) {
  case TaskKind::Compute:
    switch (t.category) {
    case TaskCategory::Forward:
      s = "F";
      break;
    case TaskCategory::Backward:
      s = "B";
      break;
    case TaskCategory::WeightGrad:
      s = "W";
      break;
    default:
      return "optimizer";
    }
    break;
  case TaskKind::Send:
    s = "send";
    break;
  case TaskKind::Collective:
    s = t.stream == kDpReduceStream    ? "reduce-scatter"
        : t.stream == kEmbeddingStream ? "embedding all-reduce"
                                       : "dp collective";
    break;
  }
  if (t.microBatch >= 0)
    s += " mb" + std::to_string(t.microBatch);
  if (t.chunk >= 0)
    s += " c" + std::to_string(t.chunk);
  if (t.layer >= 0)
    s += " L" + std::to_string(t.layer);
  return s;
}

const char *streamName(int s) {
  switch (s) {
  case kComputeStream:
    return "compute";
  case kDpGatherStream:
    return "dp comm";
  case kDpReduceStream:
    return "dp reduce-scatter";
  case kPpStream:
    return "pp send";
  case kEmbeddingStream:
    return "embedding sync";
  }
  return "?";
}

namespace {

nlohmann::json metadata(const char *what, int pid, int tid,
                        const std::string &name) {
  return {{"name", what},
          {"ph", "M"},
          {"pid", pid},
          {"tid", tid},
          {"args", {{"name", name}}}};
}

} // namespace

void writeChromeTrace(const Program &prog, const SimulationResult &res,
                      std::ostream &out) {
  nlohmann::json events = nlohmann::json::array();
  for (size_t r = 0; r < prog.ranks.size(); ++r) {
    const RankProgram &rp = prog.ranks[r];
    std::string pname = prog.symmetric
                            ? "stage " + std::to_string(rp.stage) + " (x" +
                                  std::to_string(rp.multiplicity) + " ranks)"
                            : "rank " + std::to_string(rp.realRank) +
                                  " (stage " + std::to_string(rp.stage) + ")";
    events.push_back(metadata("process_name", int(r), 0, pname));
    events.push_back({{"name", "process_sort_index"},
                      {"ph", "M"},
                      {"pid", int(r)},
                      {"args", {{"sort_index", int(r)}}}});
    for (int s = 0; s < kNumStreams; ++s)
      events.push_back(metadata("thread_name", int(r), s, streamName(s)));
    if (r >= res.timings.size())
      continue;
    for (size_t i = 0; i < rp.tasks.size(); ++i) {
      const Task &t = rp.tasks[i];
      const TaskTiming &ti = res.timings[r][i];
      double begin = t.kind == TaskKind::Compute ? ti.start : ti.transferStart;
      nlohmann::json args = {{"standalone_us", t.duration * 1e6}};
      if (t.kind != TaskKind::Compute)
        args["axis"] = toString(t.axis);
      if (t.recompute > 0)
        args["recompute_us"] = t.recompute * 1e6;
      if (t.tp > 0)
        args["tp_comm_us"] = t.tp * 1e6;
      if (t.ep > 0)
        args["ep_comm_us"] = t.ep * 1e6;
      events.push_back({{"name", taskLabel(t)},
                        {"cat", toString(t.category)},
                        {"ph", "X"},
                        {"pid", int(r)},
                        {"tid", int(t.stream)},
                        {"ts", begin * 1e6},
                        {"dur", std::max(0.0, ti.end - begin) * 1e6},
                        {"args", args}});
    }
  }
  nlohmann::json trace = {
      {"traceEvents", events},
      {"displayTimeUnit", "ms"},
      {"otherData",
       {{"generator", "cleave cost model"}, {"step_time_s", res.stepTime}}}};
  out << trace.dump() << "\n";
}

} // namespace cleave::cost
