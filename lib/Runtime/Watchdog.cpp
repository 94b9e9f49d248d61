//===- Watchdog.cpp - Act on hung ranks, mismatches and deadlocks ---------===//
//
// Run by the heartbeat thread after each publication (State.h has the
// contract). A communication call of this rank that has been blocked for two
// heartbeat intervals waits for some ranks: the group's other members, or
// the peer of a send or receive. The watchdog reads their heartbeats and
// aborts every group of this rank, with a verdict that names them, when one
//   - has been silent for longer than the hang timeout (SIGSTOP, a frozen
//     node): it is hung;
//   - has finalized, or has failed: it will never make the call;
//   - is blocked in a call that needs this rank and can never complete: the
//     same call with other arguments (transport tags carry the arguments, so
//     they never match: Collectives.cpp), or another call this rank has not
//     reached (a deadlock: a send nobody receives, crossing sends, a
//     collective on another group).
// Blocked calls and the ranks they need are read from each rank's published
// status; the call that needs this rank is judged against this rank's own
// counters, which only grow, so a verdict is certain once it is seen twice
// in a row on the same blocked call. Cycles through three or more ranks are
// left to the collective timeout. A call that fails first (a peer's
// watchdog closed its connections) asks hungPeerVerdict() before reporting,
// so every rank waiting for a hung one names it; rank 0, which hosts a tcp
// store, lingers after a verdict until the others have read it.
//
//===----------------------------------------------------------------------===//

#include "State.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

namespace cleave::rt {
namespace {

/// A call of this rank blocked long enough to be judged.
struct Blocked {
  Fingerprint call;
  int64_t sinceMs = 0;
  GroupInfo info;
};

/// A peer's blocked call seen on the previous run (the second sighting
/// confirms it).
struct Suspect {
  int rank = -1;
  int64_t group = 0;
  uint64_t seq = 0;
  int64_t sinceMs = 0;
  bool operator==(const Suspect &o) const {
    return rank == o.rank && group == o.group && seq == o.seq &&
           sinceMs == o.sinceMs;
  }
};

std::string secondsText(int64_t ms) { return concat(double(ms) / 1000.0); }

/// This rank's view of the peer's group `id`: the group, if this rank shares
/// it with `peer` (groups with one id partition the ranks, so a shared id is
/// the same group).
Group *sharedGroup(RuntimeState &state, int64_t id, int peer) {
  Group *group = findGroup(state, id);
  if (!group)
    return nullptr;
  for (int member : group->info.members)
    if (member == peer)
      return group;
  return nullptr;
}

/// Judges `theirs`, a call that `peer` is blocked in, against this rank's
/// blocked call `mine`; returns a verdict if they can never both complete.
std::string judge(RuntimeState &state, const Blocked &mine, int peer,
                  const Fingerprint &theirs) {
  Group *group = sharedGroup(state, theirs.group, peer);
  if (!group)
    return ""; // Does not need this rank.
  int me = group->info.groupRank;
  bool p2p = theirs.isPointToPoint();
  if (p2p && theirs.peer != me)
    return ""; // A transfer with another rank.
  // Whom the peer's call needs: a permute only its pairs (not published:
  // never judged), a broadcast's non-root only the root; the others every
  // member.
  if (theirs.op == OpPermute)
    return "";
  if (theirs.op == OpBroadcast && int(theirs.extra) != theirs.self &&
      int(theirs.extra) != me)
    return "";
  // Has this rank started its side of `theirs` (counters only grow)? Its
  // side of a peer's send is a receive, and the other way round.
  bool started =
      p2p ? group->p2pCalls(theirs.op == OpRecv, theirs.self) > theirs.seq
          : group->seq.load() >= theirs.seq;
  bool current =
      mine.call.group == theirs.group && mine.call.isPointToPoint() == p2p &&
      mine.call.seq == theirs.seq && (!p2p || mine.call.peer == theirs.self);
  auto who = [&](int rank) { return concat("rank ", rank); };
  if (current) {
    bool agree =
        p2p ? mine.call.matchesPeer(theirs) : mine.call.sameCall(theirs);
    if (agree)
      return "";
    return concat(p2p ? "point-to-point" : "collective",
                  " mismatch: ", who(state.options.rank), " issued ",
                  describe(mine.call), " but ", who(peer), " issued ",
                  describe(theirs), " on ", group->info.describe());
  }
  if (started)
    return ""; // This rank has done its side; the peer is finishing.
  return concat("deadlock: ", who(state.options.rank), " waits in ",
                describe(mine.call), " on ", mine.info.describe(), " for ",
                who(peer), ", which waits in ", describe(theirs), " on ",
                group->info.describe(), " for ", who(state.options.rank));
}

/// The ranks `call` on `info` waits for (none known for a permute: its
/// pairs are not recorded).
std::vector<int> awaited(const Fingerprint &call, const GroupInfo &info) {
  std::vector<int> ranks;
  if (call.isPointToPoint()) {
    ranks.push_back(info.members[size_t(call.peer)]);
    return ranks;
  }
  if (call.op == OpPermute)
    return ranks;
  if (call.op == OpBroadcast && int(call.extra) != info.groupRank) {
    ranks.push_back(info.members[size_t(call.extra)]);
    return ranks;
  }
  for (int member : info.members)
    if (member != info.members[size_t(info.groupRank)])
      ranks.push_back(member);
  return ranks;
}

/// The verdict on `peer`, whose last heartbeat (`status`) is `ageMs` old,
/// while this rank waits for it in `call` on `info`.
std::string hungText(RuntimeState &state, int peer, const RankStatus &status,
                     int64_t ageMs, const Fingerprint &call,
                     const GroupInfo &info) {
  return concat("rank ", peer, " is hung: its last heartbeat was ",
                secondsText(ageMs), " s ago (pid ", status.pid, " on ",
                status.host,
                "; CLEAVE_HEARTBEAT_TIMEOUT_MS=", state.hangTimeoutMs,
                ") while rank ", state.options.rank, " waits for it in ",
                describe(call), " on ", info.describe());
}

/// Aborts every group with `verdict` (once); returns when it did.
int64_t trip(RuntimeState &state, Heartbeat &heartbeat,
             const std::string &verdict) {
  {
    std::lock_guard<std::mutex> lock(state.groupsMutex);
    if (!state.watchdogVerdict.empty())
      return 0;
    state.watchdogVerdict = verdict;
    state.failureNote = verdict;
  }
  int64_t when = wallMillis();
  heartbeat.publishNow();
  abortAllGroups(state, verdict);
  return when;
}

/// After a verdict: a call that is still blocked two intervals later is in
/// one of Gloo's own algorithms (large rings, all-to-all), whose waits
/// cannot be interrupted; rather than hang until the timeout, the process
/// ends with the verdict.
void endIfStillBlocked(RuntimeState &state, int64_t sinceMs) {
  if (wallMillis() - sinceMs < 2 * state.heartbeat->intervalMs())
    return;
  std::string where, verdict;
  {
    std::lock_guard<std::mutex> lock(state.groupsMutex);
    verdict = state.watchdogVerdict;
    for (auto &[id, group] : state.groups)
      if (auto running = group->runningCall();
          running && running->second < sinceMs)
        where =
            concat(opName(running->first.op), " on ", group->info.describe());
  }
  if (where.empty())
    return;
  std::cerr << "cleave: rank " << state.options.rank << ": " << where << ": "
            << verdict
            << " (the call cannot be interrupted: ending the process)"
            << std::endl;
  dumpFlightRecorder(state);
  lingerForPeers(state, *state.heartbeat);
  std::_Exit(1);
}

} // namespace

void lingerForPeers(RuntimeState &state, Heartbeat &heartbeat) {
  if (!state.server)
    return;
  double deadline = monotonicSeconds() +
                    double(heartbeat.staleMs() + heartbeat.intervalMs()) / 1e3;
  for (;;) {
    bool waiting = false;
    for (int r = 0; r < state.options.worldSize && !waiting; ++r) {
      if (r == state.options.rank)
        continue;
      std::optional<RankStatus> status;
      try {
        status = heartbeat.read(r);
      } catch (const std::exception &) {
        return;
      }
      // Running with a fresh heartbeat: it may still need the store.
      waiting = status && status->state == "running" &&
                wallMillis() - status->timeMs <= heartbeat.staleMs();
    }
    if (!waiting || monotonicSeconds() >= deadline)
      return;
    std::this_thread::sleep_for(
        std::chrono::milliseconds(heartbeat.intervalMs() / 2));
  }
}

std::string hungPeerVerdict(RuntimeState &state, Heartbeat &heartbeat,
                            const Fingerprint &call, const GroupInfo &info) {
  for (int peer : awaited(call, info)) {
    std::optional<RankStatus> status;
    try {
      status = heartbeat.read(peer);
    } catch (const std::exception &) {
      return ""; // The store is gone: the diagnosis says so.
    }
    int64_t age = status ? wallMillis() - status->timeMs : 0;
    if (status && age > state.hangTimeoutMs)
      return hungText(state, peer, *status, age, call, info);
  }
  return "";
}

void watchForStalls(RuntimeState &state, Heartbeat &heartbeat) {
  static thread_local std::vector<Suspect> previous;
  static thread_local int64_t trippedMs = 0;
  if (state.finalizing)
    return;
  if (trippedMs) {
    endIfStillBlocked(state, trippedMs);
    return;
  }
  if (hasFailed())
    return;
  const int64_t now = wallMillis(), interval = heartbeat.intervalMs();
  std::vector<Blocked> blocked;
  {
    std::lock_guard<std::mutex> lock(state.groupsMutex);
    if (!state.watchdogVerdict.empty())
      return;
    for (auto &[id, group] : state.groups) {
      if (!group->comm || group->info.size() < 2 || !group->broken.empty())
        continue;
      auto running = group->runningCall();
      if (running && now - running->second >= 2 * interval)
        blocked.push_back({running->first, running->second, group->info});
    }
  }
  std::vector<Suspect> suspects;
  std::string verdict;
  for (const Blocked &b : blocked) {
    for (int peer : awaited(b.call, b.info)) {
      std::optional<RankStatus> status;
      try {
        status = heartbeat.read(peer);
      } catch (const std::exception &) {
        return; // The store is gone: the call fails on its own.
      }
      if (!status)
        continue;
      int64_t age = now - status->timeMs;
      if (age > state.hangTimeoutMs) {
        trippedMs = trip(state, heartbeat,
                         hungText(state, peer, *status, age, b.call, b.info));
        return;
      }
      if (status->state == "finalized") {
        trippedMs =
            trip(state, heartbeat,
                 concat("rank ", peer, " has finalized the runtime while rank ",
                        state.options.rank, " waits for it in ",
                        describe(b.call), " on ", b.info.describe(),
                        " (a call that not every rank makes)"));
        return;
      }
      // Only a status published while this call was blocked tells what
      // the peer does meanwhile.
      if (status->timeMs < b.sinceMs)
        continue;
      for (const auto &[id, progress] : status->groups) {
        if (!progress.active || !progress.call ||
            status->timeMs - progress.sinceMs < interval)
          continue;
        std::string text = judge(state, b, peer, *progress.call);
        if (text.empty())
          continue;
        Suspect s{peer, id, progress.call->seq, progress.sinceMs};
        suspects.push_back(s);
        if (verdict.empty() &&
            std::find(previous.begin(), previous.end(), s) != previous.end())
          verdict = text;
      }
    }
  }
  previous = suspects;
  if (!verdict.empty())
    trippedMs = trip(state, heartbeat, verdict);
}

} // namespace cleave::rt
