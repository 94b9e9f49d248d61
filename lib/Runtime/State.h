//===- State.h - The process-wide runtime state -----------------*- C++ -*-===//
//
// Internal to libCleaveRuntime: what cleave_rt_init builds and the C entry
// points use. Communication calls come from one thread at a time; the
// heartbeat thread reads group progress through atomics and the groups map
// under `groupsMutex`.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_STATE_H
#define CLEAVE_LIB_RUNTIME_STATE_H

#include "Backend.h"
#include "Env.h"
#include "FlightRecorder.h"
#include "Heartbeat.h"
#include "Mesh.h"
#include "Store.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace cleave::rt {

/// A defined group: its members, communicator and progress counters.
struct Group {
  GroupInfo info;
  std::unique_ptr<Communicator> comm;
  std::atomic<uint64_t> seq{0};             ///< Calls started on this group.
  std::atomic<const char *> lastOp{""};     ///< Name of the last call.
  std::atomic<bool> active{false};          ///< A call is running.
  std::map<int, uint64_t> sendSeq, recvSeq; ///< Point-to-point counters.
  std::string broken; ///< Why the group is unusable ("" if usable).
};

struct RuntimeState {
  ResolvedOptions options;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<TcpStoreServer> server; ///< Rank 0 of a tcp:// world.
  std::unique_ptr<KvStore> store;
  std::unique_ptr<Heartbeat> heartbeat;
  std::string keyPrefix; ///< Namespace of this run's keys in the store.
  Mesh mesh;
  std::mutex groupsMutex;
  std::map<int64_t, std::unique_ptr<Group>> groups;
  std::map<int64_t, int> generations; ///< Times each group id was defined.
  FlightRecorder recorder{64};
  bool debugCollectives = false;
  std::string flightRecorderDir;
  std::string failureNote; ///< "failed" while diagnosing (groupsMutex).
  std::atomic<bool> finalizing{false};
};

/// The state, or nullptr when the runtime is not initialized.
RuntimeState *runtimeState();
/// The active backend, or nullptr when not initialized.
Backend *currentBackend();
/// The group `id`, or nullptr.
Group *findGroup(RuntimeState &state, int64_t id);

/// A size-1 group: copies instead of communication.
std::unique_ptr<Communicator> createLocalCommunicator(Backend &backend);

/// Connects `info` under store prefix `prefix` (a local communicator for a
/// group of one); a rendezvous timeout names the ranks that did not come.
std::unique_ptr<Communicator> connectGroup(RuntimeState &state,
                                           const GroupInfo &info,
                                           const std::string &prefix);

/// Closes every group's connections (after a communication error, so that
/// peers fail fast) and marks the groups unusable with `why`.
void abortAllGroups(RuntimeState &state, const std::string &why);

/// Writes the flight recorder to stderr and, if CLEAVE_FLIGHT_RECORDER_DIR
/// is set, to <dir>/cleave-flight-rank<R>.json. Returns the file written.
std::string dumpFlightRecorder(RuntimeState &state);

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_STATE_H
