//===- GlooReduceScatter.cpp - Reduce-scatter on Gloo unbound buffers -----===//
//
// Gloo has no options-style reduce-scatter, so the cpu backend has its own:
//
//  ring    n-1 steps; in step s rank r sends its running sum of block
//          (r-s-1) mod n to r+1 and adds what r-1 sends to its own block
//          (r-s-2) mod n. Each block is cut into segments that are sent as
//          soon as they are reduced, so the reduction of one segment
//          overlaps the transfer of the next. Every rank sends and receives
//          (n-1)/n of the input: the bandwidth optimum.
//  direct  every rank sends block p to rank p at once and reduces the n-1
//          blocks it receives in rank order. Same volume, n-1 concurrent
//          transfers, no pipelining.
//
// (The third choice, all-reduce then keep one block, moves twice the data;
// it lives in GlooBackend.cpp.) bench/runtime measures all three.
//
//===----------------------------------------------------------------------===//

#include "DType.h"
#include "Gloo.h"

#include <cstring>
#include <vector>

namespace cleave::rt {
namespace {

using Buffer = std::unique_ptr<gloo::transport::UnboundBuffer>;

uint64_t rsSlot(uint32_t tag, uint64_t index) {
  return kReduceScatterSlot | (uint64_t(tag) << 24) | (index & 0xFFFFFFu);
}

/// How a block of `count` elements is cut into segments.
struct Segments {
  size_t elems; ///< Elements per segment.
  size_t count; ///< Number of segments.
  Segments(size_t total, size_t esz, size_t segmentBytes, int steps) {
    elems = std::max<size_t>(1, segmentBytes / esz);
    // Slots have 24 bits for (step, segment).
    size_t maxSegments = (size_t(1) << 24) / size_t(std::max(steps, 1)) - 1;
    if ((total + elems - 1) / elems > maxSegments)
      elems = (total + maxSegments - 1) / maxSegments;
    count = (total + elems - 1) / elems;
  }
};

} // namespace

void ringReduceScatter(const std::shared_ptr<gloo::Context> &ctx,
                       const void *in, void *out, size_t count, int32_t dtype,
                       int32_t op, uint32_t tag,
                       std::chrono::milliseconds timeout, size_t segmentBytes,
                       char *scratch) {
  const int n = ctx->size, r = ctx->rank, steps = n - 1;
  const size_t esz = size_t(dtypeSize(dtype)), bytes = count * esz;
  const ReduceFn reduce = reduceFunction(dtype, op);
  const Segments seg(count, esz, segmentBytes, steps);
  const int right = (r + 1) % n, left = (r - 1 + n) % n;
  const char *input = static_cast<const char *>(in);
  char *recvArea = scratch, *accArea = scratch + 2 * bytes;
  Buffer ubIn, ubR[2], ubA[2];
  size_t pendingA[2] = {0, 0};
  auto offset = [&](size_t j) { return j * seg.elems * esz; };
  auto length = [&](size_t j) {
    return std::min(seg.elems, count - j * seg.elems) * esz;
  };
  auto slot = [&](int s, size_t j) {
    return rsSlot(tag, uint64_t(s) * seg.count + j);
  };
  auto postRecvs = [&](int s) {
    for (size_t j = 0; j < seg.count; ++j)
      ubR[s % 2]->recv(left, slot(s, j), offset(j), length(j));
  };
  glooCall([&] {
    ubIn = ctx->createUnboundBuffer(const_cast<char *>(input), bytes * n);
    for (int i = 0; i < 2; ++i) {
      ubR[i] = ctx->createUnboundBuffer(recvArea + i * bytes, bytes);
      ubA[i] = ctx->createUnboundBuffer(accArea + i * bytes, bytes);
    }
    postRecvs(0);
    size_t first = size_t((r - 1 + n) % n) * bytes;
    for (size_t j = 0; j < seg.count; ++j)
      ubIn->send(right, slot(0, j), first + offset(j), length(j));
  });
  for (int s = 0; s < steps; ++s) {
    if (s + 1 < steps)
      glooCall([&] { postRecvs(s + 1); });
    const char *own = input + size_t((r - s - 2 + 2 * n) % n) * bytes;
    char *received = recvArea + (s % 2) * bytes;
    char *acc =
        s == steps - 1 ? static_cast<char *>(out) : accArea + (s % 2) * bytes;
    for (size_t j = 0; j < seg.count; ++j) {
      waitRecvs(*ubR[s % 2], 1, timeout);
      reduce(acc + offset(j), own + offset(j), received + offset(j),
             length(j) / esz);
      if (s + 1 < steps) {
        glooCall([&] {
          ubA[s % 2]->send(right, slot(s + 1, j), offset(j), length(j));
        });
        ++pendingA[s % 2];
      }
    }
    // The sends that read the accumulator we overwrite next step must end.
    if (s == 0) {
      waitSends(*ubIn, int(seg.count), timeout);
    } else {
      waitSends(*ubA[(s + 1) % 2], int(pendingA[(s + 1) % 2]), timeout);
      pendingA[(s + 1) % 2] = 0;
    }
  }
  for (int i = 0; i < 2; ++i)
    waitSends(*ubA[i], int(pendingA[i]), timeout);
}

void directReduceScatter(const std::shared_ptr<gloo::Context> &ctx,
                         const void *in, void *out, size_t count, int32_t dtype,
                         int32_t op, uint32_t tag,
                         std::chrono::milliseconds timeout, char *scratch) {
  const int n = ctx->size, r = ctx->rank;
  const size_t bytes = count * size_t(dtypeSize(dtype));
  const ReduceFn reduce = reduceFunction(dtype, op);
  const char *input = static_cast<const char *>(in);
  char *received = scratch;
  std::vector<Buffer> recvs(n);
  Buffer ubIn;
  const uint64_t slot = rsSlot(tag, 0);
  glooCall([&] {
    for (int p = 0; p < n; ++p) {
      if (p == r)
        continue;
      recvs[p] = ctx->createUnboundBuffer(received + p * bytes, bytes);
      recvs[p]->recv(p, slot);
    }
    ubIn = ctx->createUnboundBuffer(const_cast<char *>(input), bytes * n);
    for (int k = 1; k < n; ++k) { // Stagger the targets: r+1, r+2, ...
      int p = (r + k) % n;
      ubIn->send(p, slot, size_t(p) * bytes, bytes);
    }
  });
  for (int p = 0; p < n; ++p)
    if (p != r)
      waitRecvs(*recvs[p], 1, timeout);
  waitSends(*ubIn, n - 1, timeout);
  // Reduce in rank order so that every rank's result is bit-identical to a
  // sequential sum over ranks 0..n-1.
  auto block = [&](int p) {
    return p == r ? input + size_t(r) * bytes : received + p * bytes;
  };
  std::memcpy(out, block(0), bytes);
  for (int p = 1; p < n; ++p)
    reduce(out, out, block(p), count);
}

} // namespace cleave::rt
