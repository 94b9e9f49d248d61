//===- Simulator.h - Discrete-event replay of per-rank programs -*- C++ -*-===//
//
// Replays a Program on its streams: tasks start when their stream is free
// and their dependencies are done, collectives when all group members
// arrive. Running tasks progress at a rate: 1 alone; a communication task
// sharing a NIC direction with k-1 others gets 1/k of it (processor
// sharing); a compute task slows by CostConstants::overlapSlowdown while a
// communication task runs on its rank. On a shared host (local CPU ranks,
// Program::hostCapacity) compute is priced with every rank of the node
// computing, and a computing rank runs faster while fewer of the node's
// ranks compute: min(n / capacity, n / computing ranks) times its priced
// rate. The simulator reports when every task ran and, per rank, where
// the time of its compute stream went.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_SIMULATOR_H
#define CLEAVE_COSTMODEL_SIMULATOR_H

#include "cleave/CostModel/Program.h"
#include "cleave/CostModel/Result.h"

#include <array>
#include <ostream>

namespace cleave::cost {

/// Where one rank's step time went; the fields add up to the step time.
struct TimeBreakdown {
  double forward = 0, backward = 0, weightGrad = 0, recompute = 0;
  double optimizer = 0;
  /// Communication on the critical path (not hidden behind compute), by
  /// axis (index: Axis).
  std::array<double, kNumAxes> exposedComm{};
  /// Idle time waiting for other pipeline stages (fill, drain, imbalance).
  double bubble = 0;
  /// On a shared host: how much longer the step takes than its schedule
  /// because the ranks' computation and the CPU of their collectives need
  /// more of the host's cores (SimulationResult::hostCpuBound).
  double hostCpu = 0;

  double compute() const {
    return forward + backward + weightGrad + recompute + optimizer;
  }
  double total() const;
};

struct TaskTiming {
  double start = 0, end = 0;
  /// Communication: when the transfer began (after all members arrived).
  double transferStart = 0;
};

struct SimulationResult {
  double stepTime = 0;
  /// Index of the simulated rank that finishes last.
  int32_t criticalRank = 0;
  /// Per simulated rank.
  std::vector<TimeBreakdown> breakdown;
  std::vector<double> rankEnd;
  /// On a shared host with known cores (Program::hostCores): the CPU
  /// seconds a node's ranks need per step (their computation, which with
  /// every rank computing gets cores / ranks of a core each, and the CPU
  /// their collectives cost, hostCommCpuSeconds of it), and the step's lower
  /// bound from it, that over the cores. The step time is at least the
  /// bound. 0 elsewhere.
  double hostCpuSeconds = 0, hostCommCpuSeconds = 0, hostCpuBound = 0;
  /// Per simulated rank, per task; empty unless requested.
  std::vector<std::vector<TaskTiming>> timings;
};

struct SimulationOptions {
  /// Keep every task's timing (for the timeline and the tests).
  bool keepTimings = false;
};

/// Runs `program`. Fails with a message naming the rank and the task if the
/// program cannot finish (a dependency cycle or a collective some member
/// never reaches).
Result<SimulationResult> simulate(const Program &program,
                                  const CostConstants &c,
                                  const SimulationOptions &options = {});

/// Writes the timeline as Chrome trace JSON (Trace Event Format), one
/// process per simulated rank and one thread per stream; open it in
/// Perfetto (ui.perfetto.dev) or chrome://tracing. `result` must have been
/// simulated with keepTimings.
void writeChromeTrace(const Program &program, const SimulationResult &result,
                      std::ostream &out);

/// The name of stream `stream` in timelines ("compute", "dp comm", "pp
/// send", ...).
const char *streamName(int stream);

/// A short label for a task ("F mb3 c1", "B mb0 L5", "all-reduce dp").
std::string taskLabel(const Task &task);

} // namespace cleave::cost

#endif // CLEAVE_COSTMODEL_SIMULATOR_H
