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
#include "Call.h"
#include "Env.h"
#include "FlightRecorder.h"
#include "Heartbeat.h"
#include "Mesh.h"
#include "Store.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace cleave::rt {

/// A defined group: its members, communicator and progress counters.
struct Group {
  GroupInfo info;
  std::unique_ptr<Communicator> comm;
  std::atomic<uint64_t> seq{0};         ///< Calls started on this group.
  std::atomic<const char *> lastOp{""}; ///< Name of the last call.
  std::atomic<bool> active{false};      ///< A call is running.
  std::string broken; ///< Why the group is unusable ("" if usable).

  /// The sequence number of the next send to (`send`) or receive from group
  /// rank `peer`, counted from 0; advances the counter.
  uint64_t nextP2P(bool send, int peer) {
    std::lock_guard<std::mutex> lock(callMutex);
    return (send ? sendSeq : recvSeq)[peer]++;
  }
  /// How many sends to (`send`) or receives from `peer` were started.
  uint64_t p2pCalls(bool send, int peer) {
    std::lock_guard<std::mutex> lock(callMutex);
    auto &counts = send ? sendSeq : recvSeq;
    auto it = counts.find(peer);
    return it == counts.end() ? 0 : it->second;
  }

  /// Marks `call` as running (for the heartbeat and the watchdog).
  void startCall(const Fingerprint &call) {
    std::lock_guard<std::mutex> lock(callMutex);
    current = call;
    currentSinceMs = wallMillis();
    active = true;
  }
  void endCall() {
    std::lock_guard<std::mutex> lock(callMutex);
    active = false;
  }
  /// The running call and since when (wall ms); nullopt when idle.
  std::optional<std::pair<Fingerprint, int64_t>> runningCall() {
    std::lock_guard<std::mutex> lock(callMutex);
    if (!active)
      return std::nullopt;
    return std::make_pair(current, currentSinceMs);
  }

private:
  std::mutex callMutex;
  std::map<int, uint64_t> sendSeq, recvSeq; ///< Point-to-point counters.
  Fingerprint current;
  int64_t currentSinceMs = 0;
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
  /// What the watchdog found (a hung rank, a mismatch, a deadlock), which
  /// made it abort every group; "" if nothing (groupsMutex).
  std::string watchdogVerdict;
  int64_t hangTimeoutMs = 30000; ///< CLEAVE_HEARTBEAT_TIMEOUT_MS.
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

/// The watchdog (Watchdog.cpp), run by the heartbeat thread after each
/// publication: while a call of this rank has been blocked for a while, it
/// reads the heartbeats of the ranks the call waits for and aborts every
/// group, with a verdict naming them, when one is hung (silent for longer
/// than CLEAVE_HEARTBEAT_TIMEOUT_MS), has failed or finalized, or is blocked
/// in a call that can never match this one (a mismatch or a deadlock).
void watchForStalls(RuntimeState &state, Heartbeat &heartbeat);

/// The watchdog's verdict "rank 2 is hung: ..." when a rank that `call` on
/// `info` waits for has been silent for longer than
/// CLEAVE_HEARTBEAT_TIMEOUT_MS; "" when none is (or the store is gone). A
/// call that fails because a peer's watchdog aborted it names the hung rank
/// with it, as its own watchdog would have a moment later.
std::string hungPeerVerdict(RuntimeState &state, Heartbeat &heartbeat,
                            const Fingerprint &call, const GroupInfo &info);

/// On the rank that hosts the tcp store (rank 0), after a watchdog verdict:
/// waits until every other rank has failed, finalized or gone silent, at
/// most staleMs() plus an interval, so that the ranks still waiting can read
/// the heartbeats (and name the hung rank) before this process ends and
/// takes the store with it. Returns at once elsewhere.
void lingerForPeers(RuntimeState &state, Heartbeat &heartbeat);

/// Writes the flight recorder to stderr and, if CLEAVE_FLIGHT_RECORDER_DIR
/// is set, to <dir>/cleave-flight-rank<R>.json. Returns the file written.
std::string dumpFlightRecorder(RuntimeState &state);

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_STATE_H
