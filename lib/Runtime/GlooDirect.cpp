//===- GlooDirect.cpp - One-round all-reduce and all-gather ---------------===//
//
// Small collectives are latency-bound: Gloo's ring all-reduce takes 2(n-1)
// dependent steps (each a send notification, a receive notification and the
// data, plus a wake-up of the waiting thread on both sides), its all-gather
// n-1. The direct forms post every transfer at once, so a call costs one
// round trip whatever the group size; they move (n-1) x the buffer per rank
// instead of the ring's 2(n-1)/n (all-reduce), so the cpu backend uses them
// below a size threshold only (GlooBackend.cpp, CLEAVE_DIRECT_BYTES).
//
// The direct all-reduce sums the ranks' buffers in rank order on every rank:
// the result is bit-identical on all ranks and to a sequential sum over
// ranks 0..n-1.
//
//===----------------------------------------------------------------------===//

#include "DType.h"
#include "Gloo.h"

#include <cstring>
#include <vector>

namespace cleave::rt {
namespace {

using Buffer = std::unique_ptr<gloo::transport::UnboundBuffer>;

uint64_t directSlot(uint64_t space, uint32_t tag) {
  return space | (uint64_t(tag) << 24);
}

/// Sends `bytes` at `mine` to every other rank and receives rank p's into
/// `blocks + p * bytes` (p != rank); waits for all transfers.
void exchange(const std::shared_ptr<gloo::Context> &ctx, const char *mine,
              char *blocks, size_t bytes, uint64_t slot,
              std::chrono::milliseconds timeout) {
  const int n = ctx->size, r = ctx->rank;
  std::vector<Buffer> recvs(n);
  Buffer send;
  glooCall([&] {
    for (int p = 0; p < n; ++p) {
      if (p == r)
        continue;
      recvs[p] = ctx->createUnboundBuffer(blocks + size_t(p) * bytes, bytes);
      recvs[p]->recv(p, slot);
    }
    send = ctx->createUnboundBuffer(const_cast<char *>(mine), bytes);
    for (int k = 1; k < n; ++k) // Stagger the targets: r+1, r+2, ...
      send->send((r + k) % n, slot);
  });
  for (int p = 0; p < n; ++p)
    if (p != r)
      waitRecvs(*recvs[p], 1, timeout);
  waitSends(*send, n - 1, timeout);
}

} // namespace

void directAllReduce(const std::shared_ptr<gloo::Context> &ctx, const void *in,
                     void *out, size_t count, int32_t dtype, int32_t op,
                     uint32_t tag, std::chrono::milliseconds timeout,
                     char *scratch) {
  const int n = ctx->size, r = ctx->rank;
  const size_t bytes = count * size_t(dtypeSize(dtype));
  // Every rank's buffer lands in scratch, this rank's too (so that `out`
  // may be `in`).
  char *mine = scratch + size_t(r) * bytes;
  std::memcpy(mine, in, bytes);
  exchange(ctx, mine, scratch, bytes, directSlot(kDirectAllReduceSlot, tag),
           timeout);
  const ReduceFn reduce = reduceFunction(dtype, op);
  std::memcpy(out, scratch, bytes);
  for (int p = 1; p < n; ++p)
    reduce(out, out, scratch + size_t(p) * bytes, count);
}

void directAllGather(const std::shared_ptr<gloo::Context> &ctx, const void *in,
                     void *out, size_t bytes, uint32_t tag,
                     std::chrono::milliseconds timeout) {
  char *blocks = static_cast<char *>(out);
  char *mine = blocks + size_t(ctx->rank) * bytes;
  if (in != mine)
    std::memcpy(mine, in, bytes);
  exchange(ctx, mine, blocks, bytes, directSlot(kDirectAllGatherSlot, tag),
           timeout);
}

} // namespace cleave::rt
