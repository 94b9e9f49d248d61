//===- MeasuredTrace.h - A run's measured timeline as a Chrome trace *- C++
//-*-===//
//
// cleave-run --trace: each rank's training steps and communication calls
// (the runtime's flight recorder, with start and end times on one monotonic
// clock), written in the simulator's Chrome-trace format (one process per
// rank, one thread per stream) so that a measured step and a simulated one
// (cleave-estimate --trace) open side by side in Perfetto.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_REPORT_MEASUREDTRACE_H
#define CLEAVE_REPORT_MEASUREDTRACE_H

#include <nlohmann/json.hpp>

#include <map>
#include <utility>
#include <vector>

namespace cleave::report {

/// What one rank measured.
struct MeasuredRank {
  int rank = 0;
  /// Each step's [start, end] in seconds.
  std::vector<std::pair<double, double>> steps;
  /// The runtime's flight-recorder dump: {"entries": [{"op", "group",
  /// "seq", "count", "dtype", "reduce", "peer", "start", "end", "state"}]}.
  nlohmann::json flight;
  /// Which instance of each communicator group this rank's calls run in
  /// (e.g. the group's lowest rank): two tp groups share an id but not
  /// their calls. A group not listed has one instance (the world).
  std::map<int64_t, int64_t> groupInstance;
};

/// The trace: per rank, thread "compute" (each step's time outside
/// communication calls), "communication" (each call from entry to return,
/// waiting for peers included, named by op and group) and "steps"; times in
/// microseconds from the earliest step start. Calls outside every step
/// (set-up) are left out.
nlohmann::json measuredTrace(const std::vector<MeasuredRank> &ranks);

/// The same data as the run report's timeline (cleave-run --report): the
/// last `lastSteps` steps of every rank as tasks [rank, stream, start_s,
/// end_s, label, category, step] on the streams "compute" (0) and
/// "communication" (1), times from the earliest of those steps' starts.
/// A collective call is split at the moment the last rank of its group
/// entered it (the calls of one collective share group, op and sequence
/// number on every rank of one group instance): before it the rank waited for
/// its peers (category "wait"), after it the collective ran (category: the op,
/// e.g. "all_reduce"). A call no other rank recorded (send, recv) is not split.
nlohmann::json measuredTimeline(const std::vector<MeasuredRank> &ranks,
                                size_t lastSteps);

} // namespace cleave::report

#endif // CLEAVE_REPORT_MEASUREDTRACE_H
