//===- Call.cpp - What one communication call is --------------------------===//

#include "Call.h"
#include "DType.h"
#include "Error.h"

namespace cleave::rt {

const char *opName(int32_t op) {
  static const char *names[] = {
      "?",          "all_reduce",         "all_gather", "reduce_scatter",
      "all_to_all", "collective_permute", "send",       "recv",
      "barrier",    "broadcast"};
  return op >= OpAllReduce && op <= OpBroadcast ? names[op] : names[0];
}

uint64_t Fingerprint::agreementHash() const {
  // FNV-1a over the fields, then a final avalanche (splitmix64).
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 0x100000001b3ull; };
  mix(seq);
  mix(uint64_t(count));
  mix(uint64_t(uint32_t(dtype)));
  if (!isPointToPoint()) {
    mix(uint64_t(group));
    mix(extra);
    mix(uint64_t(uint32_t(op)));
    mix(uint64_t(uint32_t(reduce)));
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

std::string describe(const Fingerprint &f) {
  std::string text = concat("call #", f.seq, ": ", opName(f.op), "(");
  if (f.op == OpSend)
    text += concat("to group rank ", f.peer, ", ");
  if (f.op == OpRecv)
    text += concat("from group rank ", f.peer, ", ");
  if (f.op == OpBroadcast)
    text += concat("root ", f.extra, ", ");
  if (f.op == OpPermute)
    text += concat("pairs hash ", f.extra, ", ");
  if (f.op != OpBarrier)
    text += concat("count ", f.count, ", ", dtypeName(f.dtype));
  if (f.reduce >= 0)
    text += concat(", ", reduceName(f.reduce));
  return text + ")";
}

} // namespace cleave::rt
