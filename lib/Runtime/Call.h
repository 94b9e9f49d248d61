//===- Call.h - What one communication call is ------------------*- C++ -*-===//
//
// Internal to libCleaveRuntime. A call's identity (operation, group, count,
// dtype, reduction, peer) is what must agree across the ranks that make it.
// It is the fingerprint of the debug check, it is mixed into the transport
// tag so that disagreeing calls never exchange data (Gloo would abort or
// silently mix them), and it is published in the heartbeat so that the
// watchdog can name both sides of a mismatch (Watchdog.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_CALL_H
#define CLEAVE_LIB_RUNTIME_CALL_H

#include <cstdint>
#include <string>

namespace cleave::rt {

enum OpCode : int32_t {
  OpAllReduce = 1,
  OpAllGather,
  OpReduceScatter,
  OpAllToAll,
  OpPermute,
  OpSend,
  OpRecv,
  OpBarrier,
  OpBroadcast,
};

/// "all_reduce", ..., "?" for an unknown code.
const char *opName(int32_t op);

/// What a call is; also what the debug check exchanges (no padding).
struct Fingerprint {
  uint64_t seq = 0;
  int64_t group = 0;
  int64_t count = 0;
  uint64_t extra = 0; ///< Hash of permute pairs, broadcast root.
  int32_t op = 0;
  int32_t dtype = -1;
  int32_t reduce = -1;
  int32_t peer = -1; ///< Group rank of the peer (send, recv).
  int32_t self = -1; ///< Group rank of the caller.
  int32_t pad = 0;

  bool isPointToPoint() const { return op == OpSend || op == OpRecv; }
  /// The same collective call (sequence number included).
  bool sameCall(const Fingerprint &o) const {
    return seq == o.seq && group == o.group && count == o.count &&
           extra == o.extra && op == o.op && dtype == o.dtype &&
           reduce == o.reduce;
  }
  /// `o` is the other end of this send or receive.
  bool matchesPeer(const Fingerprint &o) const {
    return o.op == (op == OpSend ? OpRecv : OpSend) && o.group == group &&
           o.seq == seq && o.count == count && o.dtype == dtype &&
           o.peer == self && o.self == peer;
  }
  /// A hash of everything that must agree across the ranks of the call
  /// (for send and recv, what both ends share: sequence, count and dtype).
  uint64_t agreementHash() const;
};

/// "call #3: all_reduce(count 10, f32, sum)".
std::string describe(const Fingerprint &f);

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_CALL_H
