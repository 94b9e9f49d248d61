//===- Heartbeat.h - Liveness and progress of every rank --------*- C++ -*-===//
//
// Internal to libCleaveRuntime. A background thread publishes this rank's
// status in the rendezvous store (key <prefix>hb/<rank>) every interval: wall
// time, pid, host, state and, per group, how many calls it has started and
// which one is running. After a communication error, diagnose() reads the
// other members' statuses and says who stopped responding, who failed and
// who is behind, e.g. "rank 3 stopped responding (last heartbeat 4.1 s ago)".
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_HEARTBEAT_H
#define CLEAVE_LIB_RUNTIME_HEARTBEAT_H

#include "Backend.h"
#include "Call.h"
#include "Store.h"

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace cleave::rt {

/// Progress on one group: calls started, the last one's name, running?
struct GroupProgress {
  uint64_t seq = 0;
  std::string op;
  bool active = false;
  /// The running call and since when (wall ms), while `active`.
  std::optional<Fingerprint> call;
  int64_t sinceMs = 0;
};

/// What a rank publishes about itself.
struct RankStatus {
  int64_t timeMs = 0;
  int pid = 0;
  std::string host;
  std::string state = "running"; ///< running, failed or finalized.
  std::string error;
  std::map<int64_t, GroupProgress> groups;

  std::string encode() const;
  /// Throws RuntimeError on malformed text.
  static RankStatus decode(const std::string &text);
};

class Heartbeat {
public:
  /// Starts the thread. `store` is a connection of its own. After each
  /// publication the thread calls `watch` (the watchdog), if given.
  Heartbeat(std::unique_ptr<KvStore> store, std::string keyPrefix, int rank,
            int64_t intervalMs, std::function<RankStatus()> snapshot,
            std::function<void(Heartbeat &)> watch = {});
  ~Heartbeat();
  Heartbeat(const Heartbeat &) = delete;
  Heartbeat &operator=(const Heartbeat &) = delete;

  /// Publishes the status now (after a failure, at finalize).
  void publishNow();
  /// Stops the thread (idempotent).
  void stop();
  /// Explains a failed call of `group` whose sequence number is `seq`: the
  /// members that are gone, failed, finalized or behind. May wait up to
  /// staleMs() for a dead rank's heartbeat to go stale.
  std::string diagnose(const GroupInfo &group, uint64_t seq);
  /// A heartbeat older than this means the rank stopped responding.
  int64_t staleMs() const { return 4 * intervalMs_; }
  int64_t intervalMs() const { return intervalMs_; }
  /// What `rank` last published (nullopt: nothing yet). Throws RuntimeError
  /// when the store cannot be read or the status is malformed.
  std::optional<RankStatus> read(int rank);

private:
  void run();
  std::string key(int rank) const;

  std::unique_ptr<KvStore> store_;
  std::string prefix_;
  int rank_;
  int64_t intervalMs_;
  std::function<RankStatus()> snapshot_;
  std::function<void(Heartbeat &)> watch_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool storeLost_ = false;
  std::thread thread_;
};

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_HEARTBEAT_H
