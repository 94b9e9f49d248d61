//===- Program.h - Per-rank programs the simulator replays ------*- C++ -*-===//
//
// A program is, per simulated rank, a list of tasks in issue order. Each
// task runs on one stream of its rank (the compute stream or a
// communication stream); a stream runs its tasks one at a time in order, a
// task starts when it is at the head of its stream and its dependencies
// (on this rank or another) have finished. Collectives with a group start
// when every member rank has reached its matching collective (the k-th of
// that group on each member). Communication tasks may use shared links
// (the rank's NIC, each direction); tasks sharing a link split its
// bandwidth while they overlap.
//
// Symmetry: ranks of the same pipeline stage run the same program, and
// their TP / CP / DP collectives start and end together, so a program needs
// only one simulated rank per stage (`multiplicity` real ranks each) and
// those collectives need no group. The brute-force form has one simulated
// rank per GPU with real groups; both give the same timeline (tested).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_PROGRAM_H
#define CLEAVE_COSTMODEL_PROGRAM_H

#include "cleave/CostModel/Workload.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::cost {

enum class TaskKind : uint8_t {
  Compute,
  Collective,
  /// Point to point: the sender's task; consumers on the receiving rank
  /// depend on it.
  Send,
};

enum class TaskCategory : uint8_t {
  Forward,
  Backward,
  WeightGrad,
  Optimizer,
  Communication,
};

/// Shared links a communication task uses (bit mask).
enum LinkUse : uint8_t { kNicOut = 1, kNicIn = 2 };

/// Streams of a rank.
enum Stream : uint8_t {
  kComputeStream = 0,
  kDpGatherStream = 1, ///< DP gradient reduction, parameter gathers
  kDpReduceStream = 2, ///< ZeRO-3 gradient reduce-scatters
  kPpStream = 3,       ///< pipeline sends
  kEmbeddingStream = 4,
  kNumStreams = 5,
};

struct TaskRef {
  int32_t rank = -1;
  int32_t task = -1;
};

struct Task {
  TaskKind kind = TaskKind::Compute;
  TaskCategory category = TaskCategory::Forward;
  Axis axis = Axis::TP;
  uint8_t stream = kComputeStream;
  /// Links used on this rank (and, for a send, kNicIn on the peer).
  uint8_t links = 0;
  /// Standalone seconds (no contention, no overlap slowdown).
  double duration = 0;
  /// Seconds of `duration` that are recomputation, exposed TP, CP and EP
  /// communication (compute tasks); the rest is the category's compute.
  double recompute = 0, tp = 0, cp = 0, ep = 0;
  /// CPU seconds of a shared host that this task's communication costs its
  /// rank's process (a send: the sender's and the receiver's), from the
  /// measured collectives (collectiveCpu); 0 on devices.
  double cpu = 0;
  /// Dependencies: Program::deps[depBegin, depBegin + depCount).
  int32_t depBegin = 0, depCount = 0;
  /// Collective group (index into Program::groups), or -1: no partner
  /// (all members behave alike, see the file comment).
  int32_t group = -1;
  /// Send: the receiving rank.
  int32_t peer = -1;
  /// Labels for the timeline: micro-batch, model chunk, layer (-1: n/a).
  int32_t microBatch = -1, chunk = -1, layer = -1;
};

struct RankProgram {
  /// Pipeline stage and (for the brute-force form) the real rank.
  int32_t stage = 0;
  int32_t realRank = -1;
  /// Real ranks this simulated rank stands for.
  int64_t multiplicity = 1;
  std::vector<Task> tasks;
};

struct Program {
  std::vector<RankProgram> ranks;
  std::vector<TaskRef> deps;
  /// Member simulated ranks of each collective group.
  std::vector<std::vector<int32_t>> groups;
  /// Whether the program has one simulated rank per stage.
  bool symmetric = true;
  /// The host's compute, shared by the ranks of a node (ClusterSpec::
  /// hostComputeCapacity; 0: each rank computes on its own device), and
  /// the ranks per node. Every node runs the same share of the simulated
  /// ranks' real ranks (a measured local CPU cluster is one node).
  double hostCapacity = 0;
  int hostRanksPerNode = 0, hostNodes = 1;
  /// The shared host's hardware threads (ClusterSpec::hostCores; 0: no
  /// CPU bound on the step).
  int hostCores = 0;

  /// Appends `task` to rank `rank` with dependencies `deps`; returns its
  /// index on that rank.
  int32_t add(int32_t rank, Task task, const std::vector<TaskRef> &deps);
};

struct ProgramOptions {
  /// One simulated rank per pipeline stage (false: one per GPU; only for
  /// testing, it is tp x cp x dp times bigger).
  bool symmetric = true;
};

/// The training step of `plan` as a program: the schedule's passes with
/// their pipeline sends, data-parallel gradient reduction (overlapped with
/// backward when the plan says so), ZeRO parameter gathers, the tied-
/// embedding synchronization and the optimizer step.
Program buildProgram(const ModelConfig &model, const ClusterSpec &cluster,
                     const ParallelPlan &plan, const Workload &work,
                     const CostConstants &c,
                     const ProgramOptions &options = {});

const char *toString(TaskCategory category);

} // namespace cleave::cost

#endif // CLEAVE_COSTMODEL_PROGRAM_H
