//===- Collectives.cpp - The communication entry points -------------------===//
//
// Shared by every backend: argument checks, sticky errors, sequence numbers
// and group progress (for heartbeats), the flight recorder, the optional
// fingerprint check (CLEAVE_DEBUG_COLLECTIVES=1) and the wording of errors.
// The device work is one call on the group's Communicator.
//
//===----------------------------------------------------------------------===//

#include "Async.h"
#include "Call.h"
#include "DType.h"
#include "State.h"

#include <cstring>
#include <iostream>
#include <set>

namespace cleave::rt {
namespace {

/// Tag spaces of sendRecv/hostExchange (below 2^48; Gloo adds a prefix).
constexpr uint64_t kP2PTag = 1ull << 40;
constexpr uint64_t kPermuteTag = 2ull << 40;
constexpr uint64_t kFingerprintP2PTag = 3ull << 40;
/// Tag of the fingerprint all-gather (collective tags are sequence numbers).
constexpr uint32_t kFingerprintTag = 0xFFFFFFF0u;

/// Transport tags carry the call's agreement hash (Call.h): calls that
/// disagree in operation, count, dtype or reduction never exchange data, so
/// Gloo neither aborts on a size mismatch nor mixes them; the watchdog names
/// both sides instead.
uint32_t collectiveTag(uint64_t agree) { return uint32_t(agree & 0x7FFFFFFFu); }
uint64_t slotTag(uint64_t space, uint64_t agree) {
  return space | (agree & 0xFFFFFFFFFFull);
}

/// Scratch device memory from the backend.
struct Scratch {
  Scratch(Backend &backend, size_t bytes) : backend(backend) {
    ptr = bytes ? backend.alloc(int64_t(bytes)) : nullptr;
  }
  ~Scratch() {
    if (ptr)
      backend.free(ptr);
  }
  Backend &backend;
  void *ptr;
};

bool overlaps(const void *a, const void *b, size_t bytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return bytes && x < y + bytes && y < x + bytes;
}

void checkBuffers(int64_t count, const void *in, const void *out) {
  require(count >= 0, "count ", count, " is negative");
  require(count == 0 || (in && out), "a buffer pointer is NULL");
}

/// Exchanges fingerprints before the call; throws RuntimeError naming both
/// ranks and both calls on a mismatch.
void checkFingerprint(Group &group, const Fingerprint &mine) {
  const GroupInfo &info = group.info;
  if (mine.op == OpSend || mine.op == OpRecv) {
    Fingerprint theirs;
    group.comm->hostExchange(mine.peer, &mine, &theirs, sizeof(Fingerprint),
                             kFingerprintP2PTag);
    if (!mine.matchesPeer(theirs))
      throw RuntimeError(
          concat("point-to-point mismatch: rank ", info.members[mine.self],
                 " issued ", describe(mine), " but rank ",
                 info.members[mine.peer], " issued ", describe(theirs)));
    return;
  }
  std::vector<Fingerprint> all(info.size());
  group.comm->hostAllGather(&mine, all.data(), sizeof(Fingerprint),
                            kFingerprintTag);
  for (int r = 0; r < info.size(); ++r)
    if (!all[r].sameCall(mine))
      throw RuntimeError(concat("collective mismatch: rank ",
                                info.members[info.groupRank], " issued ",
                                describe(mine), " but rank ", info.members[r],
                                " issued ", describe(all[r])));
}

void failCommunication(RuntimeState &state, Group &group,
                       const std::string &where, const Fingerprint &call,
                       uint64_t seq, const CommError &e) {
  std::string head =
      e.kind == CommError::Timeout
          ? concat(where, " timed out after ", group.info.timeoutMs, " ms")
          : concat(where, " failed");
  std::string verdict;
  {
    std::lock_guard<std::mutex> lock(state.groupsMutex);
    verdict = state.watchdogVerdict;
  }
  // A peer's watchdog that declared a rank hung aborts its connections, and
  // the launcher kills the stopped rank: this call may fail before this
  // rank's own watchdog has looked. If a rank it waits for is hung, that is
  // this rank's verdict too, so that every waiting rank names it.
  std::string hung;
  if (verdict.empty() && state.heartbeat)
    hung = hungPeerVerdict(state, *state.heartbeat, call, group.info);
  bool ownVerdict = false;
  {
    std::lock_guard<std::mutex> lock(state.groupsMutex);
    verdict = state.watchdogVerdict;
    if (verdict.empty() && !hung.empty()) {
      state.watchdogVerdict = verdict = hung;
      ownVerdict = true;
    }
    state.failureNote = verdict.empty() ? head : verdict;
  }
  if (ownVerdict)
    abortAllGroups(state, verdict);
  if (!verdict.empty()) {
    // The watchdog's verdict is the explanation (with the transport's
    // error when the call failed before this rank's watchdog aborted it).
    std::string full = recordError(concat(
        where, ": ", verdict,
        ownVerdict ? concat(" [", state.backend->name(), ": ", e.what(), "]")
                   : ""));
    std::cerr << "cleave: " << full << "\n";
    dumpFlightRecorder(state);
    if (state.heartbeat) {
      state.heartbeat->publishNow();
      lingerForPeers(state, *state.heartbeat);
    }
    return;
  }
  abortAllGroups(state, head);
  std::string diagnosis;
  if (state.heartbeat) {
    state.heartbeat->publishNow();
    diagnosis = state.heartbeat->diagnose(group.info, seq);
  }
  std::string full =
      recordError(concat(head, diagnosis.empty() ? "" : ": " + diagnosis, " [",
                         state.backend->name(), ": ", e.what(), "]"));
  std::cerr << "cleave: " << full << "\n";
  dumpFlightRecorder(state);
  if (state.heartbeat)
    state.heartbeat->publishNow();
}

void failLocal(RuntimeState &state, Group &group, const std::string &where,
               const std::string &message) {
  group.broken = message;
  std::string full = recordError(concat(where, ": ", message));
  std::cerr << "cleave: " << full << "\n";
  dumpFlightRecorder(state);
  if (state.heartbeat)
    state.heartbeat->publishNow();
}

/// Runs one communication call: `prepare(group, fingerprint)` checks the
/// arguments and completes the fingerprint; `body(comm, agree)` communicates
/// with transport tags made from the call's agreement hash.
template <typename Prepare, typename Body>
void runCallNow(Fingerprint call, Prepare &&prepare, Body &&body) {
  if (hasFailed())
    return;
  const char *name = opName(call.op);
  RuntimeState *state = runtimeState();
  if (!state) {
    recordError(concat(name, ": the runtime is not initialized (call "
                             "cleave_rt_init first)"));
    return;
  }
  Group *group = findGroup(*state, call.group);
  if (!group) {
    recordError(concat(name, " on group ", call.group,
                       ": no such group (define it with "
                       "cleave_rt_define_group; -1 is the world)"));
    return;
  }
  // Formatted only when something goes wrong (keeps calls cheap).
  auto where = [&] { return concat(name, " on ", group->info.describe()); };
  if (!group->broken.empty()) {
    recordError(concat(where(),
                       ": the group is unusable after an earlier "
                       "error (",
                       group->broken, ")"));
    return;
  }
  call.self = group->info.groupRank;
  try {
    prepare(*group, call);
  } catch (const std::exception &e) {
    recordError(concat(where(), ": ", e.what()));
    return;
  }
  // Collectives are numbered per group (every member makes them); send and
  // recv per peer and direction, and leave the group's number alone.
  bool p2p = call.op == OpSend || call.op == OpRecv;
  uint64_t seq = p2p ? call.seq : group->seq.load() + 1;
  call.seq = seq;
  group->lastOp = name;
  group->startCall(call);
  if (!p2p)
    group->seq = seq;
  FlightEntry entry;
  entry.seq = seq;
  entry.group = call.group;
  entry.op = name;
  entry.count = call.count;
  entry.dtype = call.dtype;
  entry.reduce = call.reduce;
  entry.peer = call.peer;
  entry.start = monotonicSeconds();
  size_t slot = state->recorder.start(entry);
  try {
    if (state->debugCollectives)
      checkFingerprint(*group, call);
    body(*group->comm, call.agreementHash());
    state->recorder.finish(slot, true);
    group->endCall();
  } catch (const CommError &e) {
    state->recorder.finish(slot, false);
    group->endCall();
    failCommunication(*state, *group, where(), call,
                      p2p ? group->seq.load() : seq, e);
  } catch (const std::exception &e) {
    state->recorder.finish(slot, false);
    group->endCall();
    failLocal(*state, *group, where(), e.what());
  }
}

/// runCallNow, queued behind the asynchronous requests in flight if any
/// (Async.cpp), so that calls run in program order.
template <typename Prepare, typename Body>
void runCall(Fingerprint call, Prepare &&prepare, Body &&body) {
  auto now = [&] { runCallNow(call, prepare, body); };
  if (!forwardToProgressThread(now))
    now();
}

Fingerprint makeCall(int32_t op, int64_t group, int32_t dtype, int32_t reduce,
                     int64_t count) {
  Fingerprint f;
  f.op = op;
  f.group = group;
  f.dtype = dtype;
  f.reduce = reduce;
  f.count = count;
  return f;
}

/// Checks dtype, reduction and buffers of a reducing call.
auto reducingCheck(int32_t dtype, int32_t op, int64_t count, const void *in,
                   const void *out) {
  return [=](Group &, Fingerprint &) {
    checkReduction(dtype, op);
    checkBuffers(count, in, out);
  };
}

auto plainCheck(int32_t dtype, int64_t count, const void *in, const void *out) {
  return [=](Group &, Fingerprint &) {
    checkDType(dtype);
    checkBuffers(count, in, out);
  };
}

void checkPeer(const Group &group, int64_t peer) {
  require(peer >= 0 && peer < group.info.size(), "peer ", peer,
          " is not a group rank (the group has ", group.info.size(), " ranks)");
  require(peer != group.info.groupRank, "peer ", peer, " is this rank itself");
}

/// Sends and receives of a permute, with unique sources and targets.
void checkPairs(const Group &group, int64_t npairs, const int64_t *pairs,
                uint64_t &hash) {
  require(npairs >= 0 && (npairs == 0 || pairs), "npairs ", npairs,
          " with pairs ", pairs ? "given" : "NULL");
  std::set<int64_t> sources, targets;
  hash = 0xcbf29ce484222325ull;
  for (int64_t i = 0; i < npairs; ++i) {
    int64_t s = pairs[2 * i], t = pairs[2 * i + 1];
    require(s >= 0 && s < group.info.size() && t >= 0 && t < group.info.size(),
            "pair ", i, " (", s, ", ", t,
            ") names a rank outside the group of ", group.info.size());
    require(sources.insert(s).second, "group rank ", s,
            " is the source of two pairs");
    require(targets.insert(t).second, "group rank ", t,
            " is the target of two pairs");
    hash = (hash ^ uint64_t(s * 65536 + t)) * 0x100000001b3ull;
  }
}

void permute(Backend &backend, Communicator &comm, const Group &group,
             int32_t dtype, const void *in, void *out, int64_t count,
             int64_t npairs, const int64_t *pairs, uint64_t agree) {
  size_t bytes = size_t(count) * size_t(dtypeSize(dtype));
  int me = group.info.groupRank;
  std::vector<Transfer> sends, recvs;
  bool self = false, target = false;
  for (int64_t i = 0; i < npairs; ++i) {
    int s = int(pairs[2 * i]), t = int(pairs[2 * i + 1]);
    if (s == me && t == me)
      self = target = true;
    else if (s == me)
      sends.push_back({t, const_cast<void *>(in), bytes});
    else if (t == me)
      recvs.push_back({s, out, bytes}), target = true;
  }
  bool useScratch = !recvs.empty() && overlaps(in, out, bytes);
  Scratch scratch(backend, useScratch ? bytes : 0);
  if (useScratch)
    recvs[0].data = scratch.ptr;
  comm.sendRecv(sends, recvs, slotTag(kPermuteTag, agree));
  if (useScratch)
    backend.copy(out, scratch.ptr, bytes);
  if (self && in != out)
    backend.copy(out, in, bytes);
  if (!target)
    backend.zero(out, bytes);
}

} // namespace
} // namespace cleave::rt

using namespace cleave::rt;

extern "C" {

void cleave_rt_all_reduce(int64_t group, int32_t dtype, int32_t op,
                          const void *in, void *out, int64_t count) {
  runCall(makeCall(OpAllReduce, group, dtype, op, count),
          reducingCheck(dtype, op, count, in, out),
          [&](Communicator &comm, uint64_t agree) {
            comm.allReduce(in, out, size_t(count), dtype, op,
                           collectiveTag(agree));
          });
}

void cleave_rt_all_gather(int64_t group, int32_t dtype, const void *in,
                          void *out, int64_t count) {
  runCall(makeCall(OpAllGather, group, dtype, -1, count),
          plainCheck(dtype, count, in, out),
          [&](Communicator &comm, uint64_t agree) {
            comm.allGather(in, out, size_t(count), dtype, collectiveTag(agree));
          });
}

void cleave_rt_reduce_scatter(int64_t group, int32_t dtype, int32_t op,
                              const void *in, void *out, int64_t count) {
  runCall(makeCall(OpReduceScatter, group, dtype, op, count),
          reducingCheck(dtype, op, count, in, out),
          [&](Communicator &comm, uint64_t agree) {
            comm.reduceScatter(in, out, size_t(count), dtype, op,
                               collectiveTag(agree));
          });
}

void cleave_rt_all_to_all(int64_t group, int32_t dtype, const void *in,
                          void *out, int64_t count) {
  runCall(makeCall(OpAllToAll, group, dtype, -1, count),
          plainCheck(dtype, count, in, out),
          [&](Communicator &comm, uint64_t agree) {
            comm.allToAll(in, out, size_t(count), dtype, collectiveTag(agree));
          });
}

void cleave_rt_collective_permute(int64_t group, int32_t dtype, const void *in,
                                  void *out, int64_t count, int64_t npairs,
                                  const int64_t *pairs) {
  Group *target = nullptr;
  runCall(
      makeCall(OpPermute, group, dtype, -1, count),
      [&](Group &g, Fingerprint &f) {
        checkDType(dtype);
        checkBuffers(count, in, out);
        checkPairs(g, npairs, pairs, f.extra);
        target = &g;
      },
      [&](Communicator &comm, uint64_t agree) {
        permute(*runtimeState()->backend, comm, *target, dtype, in, out, count,
                npairs, pairs, agree);
      });
}

void cleave_rt_send(int64_t group, int64_t peer, int32_t dtype, const void *in,
                    int64_t count) {
  Fingerprint call = makeCall(OpSend, group, dtype, -1, count);
  call.peer = int32_t(peer);
  runCall(
      call,
      [&](Group &g, Fingerprint &f) {
        checkDType(dtype);
        checkBuffers(count, in, in);
        checkPeer(g, peer);
        f.seq = g.nextP2P(true, int(peer));
      },
      [&](Communicator &comm, uint64_t agree) {
        size_t bytes = size_t(count) * size_t(dtypeSize(dtype));
        comm.sendRecv({{int(peer), const_cast<void *>(in), bytes}}, {},
                      slotTag(kP2PTag, agree));
      });
}

void cleave_rt_recv(int64_t group, int64_t peer, int32_t dtype, void *out,
                    int64_t count) {
  Fingerprint call = makeCall(OpRecv, group, dtype, -1, count);
  call.peer = int32_t(peer);
  runCall(
      call,
      [&](Group &g, Fingerprint &f) {
        checkDType(dtype);
        checkBuffers(count, out, out);
        checkPeer(g, peer);
        f.seq = g.nextP2P(false, int(peer));
      },
      [&](Communicator &comm, uint64_t agree) {
        size_t bytes = size_t(count) * size_t(dtypeSize(dtype));
        comm.sendRecv({}, {{int(peer), out, bytes}}, slotTag(kP2PTag, agree));
      });
}

void cleave_rt_barrier(int64_t group) {
  runCall(
      makeCall(OpBarrier, group, -1, -1, 0), [](Group &, Fingerprint &) {},
      [&](Communicator &comm, uint64_t agree) {
        comm.barrier(collectiveTag(agree));
      });
}

void cleave_rt_broadcast(int64_t group, int64_t root, int32_t dtype, void *data,
                         int64_t count) {
  runCall(
      makeCall(OpBroadcast, group, dtype, -1, count),
      [&](Group &g, Fingerprint &f) {
        checkDType(dtype);
        checkBuffers(count, data, data);
        require(root >= 0 && root < g.info.size(), "root ", root,
                " is not a group rank (the group has ", g.info.size(),
                " ranks)");
        f.extra = uint64_t(root);
      },
      [&](Communicator &comm, uint64_t agree) {
        comm.broadcast(data, size_t(count), dtype, int(root),
                       collectiveTag(agree));
      });
}

int cleave_rt_flight_recorder_dump(const char *path) {
  return guard("flight_recorder_dump", 1, [&] {
    RuntimeState *state = runtimeState();
    require(state, "the runtime is not initialized");
    if (!path) {
      state->recorder.dumpText(std::cerr, state->options.rank);
      return 0;
    }
    FILE *f = std::fopen(path, "w");
    require(f, "cannot write ", path, ": ", std::strerror(errno));
    std::string json = state->recorder.dumpJson(state->options.rank);
    bool ok = std::fwrite(json.data(), 1, json.size(), f) == json.size();
    ok = std::fclose(f) == 0 && ok;
    require(ok, "cannot write ", path);
    return 0;
  });
}

} // extern "C"
