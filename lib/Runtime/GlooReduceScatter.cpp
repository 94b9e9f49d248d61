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
//  halving  recursive halving (the reduce-scatter half of Rabenseifner's
//          halving-doubling): log2(p) steps over p = the largest power of
//          two <= n; in step k a rank exchanges half of what it still
//          reduces with the rank 2^k away. Ranks p..n-1 first fold their
//          whole input into rank r-p and get their block back at the end.
//          Fewest rounds for a bandwidth-optimal volume: auto uses it
//          below a measured size (GlooBackend.cpp).
//
// (The last choice, all-reduce then keep one block, moves twice the data;
// it lives in GlooBackend.cpp.) bench/runtime measures all of them.
//
//===----------------------------------------------------------------------===//

#include "DType.h"
#include "Gloo.h"

#include <algorithm>
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

namespace {

/// Blocks [lo, hi) of the virtual ranks of recursive halving over p ranks
/// in a buffer of n blocks: virtual rank v owns blocks v and v + p (the
/// latter when v + p < n), so a range is at most two runs of blocks.
struct BlockRuns {
  size_t offset[2], length[2];
  int count = 0;
  BlockRuns(int lo, int hi, int p, int n, size_t blockBytes) {
    add(lo, hi, blockBytes);
    if (p + lo < n)
      add(p + lo, std::min(p + hi, n), blockBytes);
  }
  void add(int first, int end, size_t blockBytes) {
    offset[count] = size_t(first) * blockBytes;
    length[count++] = size_t(end - first) * blockBytes;
  }
};

} // namespace

void halvingReduceScatter(const std::shared_ptr<gloo::Context> &ctx,
                          const void *in, void *out, size_t count,
                          int32_t dtype, int32_t op, uint32_t tag,
                          std::chrono::milliseconds timeout, char *scratch) {
  const int n = ctx->size, r = ctx->rank;
  const size_t esz = size_t(dtypeSize(dtype)), bytes = count * esz,
               total = bytes * size_t(n);
  const ReduceFn reduce = reduceFunction(dtype, op);
  int p = 1;
  while (2 * p <= n)
    p *= 2;
  const char *input = static_cast<const char *>(in);
  char *acc = scratch, *recvArea = scratch + total;
  // Slots: 0 the fold, 1 the block handed back, 2 + 2 step + run the steps.
  Buffer ubIn, ubAcc, ubRecv, ubOut;
  glooCall([&] {
    ubIn = ctx->createUnboundBuffer(const_cast<char *>(input), total);
    ubAcc = ctx->createUnboundBuffer(acc, total);
    ubRecv = ctx->createUnboundBuffer(recvArea, total);
  });
  if (r >= p) { // Fold into rank r - p, get the block back.
    glooCall([&] {
      ubOut = ctx->createUnboundBuffer(out, bytes);
      ubOut->recv(r - p, rsSlot(tag, 1));
      ubIn->send(r - p, rsSlot(tag, 0));
    });
    waitSends(*ubIn, 1, timeout);
    waitRecvs(*ubOut, 1, timeout);
    return;
  }
  const char *cur = input;
  gloo::transport::UnboundBuffer *ubCur = ubIn.get();
  if (r + p < n) { // Rank r + p folds its input into this one.
    glooCall([&] { ubRecv->recv(r + p, rsSlot(tag, 0)); });
    waitRecvs(*ubRecv, 1, timeout);
    reduce(acc, input, recvArea, count * size_t(n));
    cur = acc;
    ubCur = ubAcc.get();
  }
  // Sends from the input and from `acc`. Later steps write `acc` only
  // inside the half they keep, which no earlier send reads: every send may
  // run until the end.
  int sendsIn = 0, sendsAcc = 0, lo = 0, size = p, step = 0;
  for (int mask = p / 2; mask >= 1; mask /= 2, ++step) {
    const int half = size / 2, partner = r ^ mask;
    const int keepLo = r < lo + half ? lo : lo + half;
    const int giveLo = keepLo == lo ? lo + half : lo;
    BlockRuns keep(keepLo, keepLo + half, p, n, bytes),
        give(giveLo, giveLo + half, p, n, bytes);
    glooCall([&] {
      for (int j = 0; j < keep.count; ++j)
        ubRecv->recv(partner, rsSlot(tag, 2 + 2 * step + j), keep.offset[j],
                     keep.length[j]);
      for (int j = 0; j < give.count; ++j)
        ubCur->send(partner, rsSlot(tag, 2 + 2 * step + j), give.offset[j],
                    give.length[j]);
    });
    (cur == input ? sendsIn : sendsAcc) += give.count;
    waitRecvs(*ubRecv, keep.count, timeout);
    // The last step writes this rank's own block straight into `out`.
    for (int j = 0; j < keep.count; ++j) {
      char *dst =
          mask == 1 && j == 0 ? static_cast<char *>(out) : acc + keep.offset[j];
      reduce(dst, cur + keep.offset[j], recvArea + keep.offset[j],
             keep.length[j] / esz);
    }
    cur = acc;
    ubCur = ubAcc.get();
    lo = keepLo;
    size = half;
  }
  if (p == 1)
    std::memcpy(out, input, bytes);
  waitSends(*ubIn, sendsIn, timeout);
  waitSends(*ubAcc, sendsAcc, timeout);
  if (r + p < n) { // Hand rank r + p its block.
    glooCall([&] {
      ubAcc->send(r + p, rsSlot(tag, 1), size_t(r + p) * bytes, bytes);
    });
    waitSends(*ubAcc, 1, timeout);
  }
}

} // namespace cleave::rt
