//===- MeasuredTrace.cpp - A run's measured timeline as a Chrome trace ----===//

#include "cleave/Report/MeasuredTrace.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

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

/// Calls `compute(begin, end)` for each stretch of step `s` of `r` outside
/// communication calls and `call(entry)` for each call inside it, in time
/// order.
template <typename Compute, typename Call>
void walkStep(const MeasuredRank &r, size_t s, Compute compute, Call call) {
  auto [begin, end] = r.steps[s];
  double at = begin;
  for (const json *c : callsIn(r.flight, begin, end)) {
    double from = (*c)["start"], to = (*c)["end"];
    if (from > at)
      compute(at, from);
    call(*c);
    at = std::max(at, to);
  }
  if (end > at)
    compute(at, end);
}

std::string callName(const json &c) {
  return c["op"].get<std::string>() + " g" +
         std::to_string(c["group"].get<int64_t>());
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
    walkStep(
        r, s,
        [&](double from, double to) {
          events.push_back(event("compute", "compute", pid, kCompute, from, to,
                                 origin, {{"step", s}}));
        },
        [&](const json &c) {
          events.push_back(event(callName(c), "communication", pid,
                                 kCommunication, c["start"], c["end"], origin,
                                 {{"step", s},
                                  {"seq", c["seq"]},
                                  {"count", c["count"]},
                                  {"dtype", c["dtype"]},
                                  {"reduce", c["reduce"]},
                                  {"peer", c["peer"]}}));
        });
  }
}

/// One collective on every rank that recorded it: group, its instance,
/// op, sequence number.
using CallKey = std::tuple<int64_t, int64_t, std::string, int64_t>;

CallKey keyOf(const MeasuredRank &r, const json &c) {
  int64_t group = c["group"].get<int64_t>();
  auto instance = r.groupInstance.find(group);
  return {group,
          instance == r.groupInstance.end() ? int64_t(0) : instance->second,
          c["op"].get<std::string>(), c["seq"].get<int64_t>()};
}

/// For each collective, when the last rank entered it and how many did.
std::map<CallKey, std::pair<double, int>>
lastArrivals(const std::vector<MeasuredRank> &ranks) {
  std::map<CallKey, std::pair<double, int>> out;
  for (const MeasuredRank &r : ranks)
    if (r.flight.contains("entries"))
      for (const json &c : r.flight["entries"]) {
        if (c.value("state", "") != "completed")
          continue;
        auto [it, fresh] =
            out.try_emplace(keyOf(r, c), c["start"].get<double>(), 0);
        it->second.first = std::max(it->second.first, c["start"].get<double>());
        ++it->second.second;
      }
  return out;
}

} // namespace

json measuredTimeline(const std::vector<MeasuredRank> &ranks,
                      size_t lastSteps) {
  double origin = std::numeric_limits<double>::infinity();
  for (const MeasuredRank &r : ranks)
    if (r.steps.size() > 0)
      origin = std::min(
          origin,
          r.steps[r.steps.size() - std::min(lastSteps, r.steps.size())].first);
  if (origin == std::numeric_limits<double>::infinity())
    origin = 0;
  std::map<CallKey, std::pair<double, int>> arrivals = lastArrivals(ranks);
  json tasks = json::array(), rankIds = json::array();
  for (const MeasuredRank &r : ranks) {
    rankIds.push_back(r.rank);
    auto add = [&](int stream, double from, double to, const std::string &label,
                   const std::string &category, size_t s) {
      tasks.push_back(json::array(
          {r.rank, stream, from - origin, to - origin, label, category, s}));
    };
    for (size_t s = r.steps.size() - std::min(lastSteps, r.steps.size());
         s < r.steps.size(); ++s)
      walkStep(
          r, s,
          [&](double from, double to) {
            add(kCompute, from, to, "compute", "compute", s);
          },
          [&](const json &c) {
            double from = c["start"], to = c["end"], ran = from;
            auto it = arrivals.find(keyOf(r, c));
            if (it != arrivals.end() && it->second.second > 1)
              ran = std::clamp(it->second.first, from, to);
            std::string name = callName(c);
            if (ran > from)
              add(kCommunication, from, ran, "waits for " + name, "wait", s);
            add(kCommunication, ran, to, name, c["op"], s);
          });
  }
  return {{"ranks", rankIds},
          {"streams", {"compute", "communication"}},
          {"task_fields",
           {"rank", "stream", "start_s", "end_s", "label", "category", "step"}},
          {"tasks", tasks}};
}

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
