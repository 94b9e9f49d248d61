//===- MeasuredTrace.cpp - A run's measured timeline as a Chrome trace ----===//

#include "cleave/Report/MeasuredTrace.h"

#include <algorithm>
#include <limits>

namespace cleave::report {

using nlohmann::json;

namespace {

enum Thread { kCompute = 0, kCommunication = 1, kSteps = 2 };

json metadata(const char *what, int pid, int tid, const std::string &name) {
  return {{"name", what},
          {"ph", "M"},
          {"pid", pid},
          {"tid", tid},
          {"args", {{"name", name}}}};
}

json event(const std::string &name, const char *cat, int pid, int tid,
           double begin, double end, double origin, json args) {
  return {{"name", name},
          {"cat", cat},
          {"ph", "X"},
          {"pid", pid},
          {"tid", tid},
          {"ts", (begin - origin) * 1e6},
          {"dur", std::max(0.0, end - begin) * 1e6},
          {"args", std::move(args)}};
}

/// The completed calls of `flight` inside [begin, end], by start time.
std::vector<const json *> callsIn(const json &flight, double begin,
                                  double end) {
  std::vector<const json *> out;
  if (!flight.contains("entries"))
    return out;
  for (const json &e : flight["entries"])
    if (e.value("state", "") == "completed" &&
        e["start"].get<double>() >= begin && e["end"].get<double>() <= end)
      out.push_back(&e);
  std::sort(out.begin(), out.end(), [](const json *a, const json *b) {
    return (*a)["start"].get<double>() < (*b)["start"].get<double>();
  });
  return out;
}

void addRank(json &events, const MeasuredRank &r, double origin) {
  int pid = r.rank;
  events.push_back(metadata("process_name", pid, 0,
                            "rank " + std::to_string(r.rank) + " (measured)"));
  events.push_back(metadata("thread_name", pid, kCompute, "compute"));
  events.push_back(
      metadata("thread_name", pid, kCommunication, "communication"));
  events.push_back(metadata("thread_name", pid, kSteps, "steps"));
  for (size_t s = 0; s < r.steps.size(); ++s) {
    auto [begin, end] = r.steps[s];
    events.push_back(event("step " + std::to_string(s), "step", pid, kSteps,
                           begin, end, origin, {{"step", s}}));
    double at = begin;
    for (const json *c : callsIn(r.flight, begin, end)) {
      double from = (*c)["start"], to = (*c)["end"];
      if (from > at)
        events.push_back(event("compute", "compute", pid, kCompute, at, from,
                               origin, {{"step", s}}));
      std::string name = (*c)["op"].get<std::string>() + " g" +
                         std::to_string((*c)["group"].get<int64_t>());
      events.push_back(event(name, "communication", pid, kCommunication, from,
                             to, origin,
                             {{"step", s},
                              {"seq", (*c)["seq"]},
                              {"count", (*c)["count"]},
                              {"dtype", (*c)["dtype"]},
                              {"reduce", (*c)["reduce"]},
                              {"peer", (*c)["peer"]}}));
      at = std::max(at, to);
    }
    if (end > at)
      events.push_back(event("compute", "compute", pid, kCompute, at, end,
                             origin, {{"step", s}}));
  }
}

} // namespace

json measuredTrace(const std::vector<MeasuredRank> &ranks) {
  double origin = std::numeric_limits<double>::infinity();
  for (const MeasuredRank &r : ranks)
    if (!r.steps.empty())
      origin = std::min(origin, r.steps.front().first);
  if (origin == std::numeric_limits<double>::infinity())
    origin = 0;
  json events = json::array();
  for (const MeasuredRank &r : ranks)
    addRank(events, r, origin);
  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"generator", "cleave-run (measured)"}}}};
}

} // namespace cleave::report
