//===- MemrefCopyTest.cpp - The runtime's strided memref.copy -------------===//
//
// memrefCopy against an element-by-element reference on layouts that the
// CPU lowering produces: contiguous, transposed, sliced (offsets, strides
// larger than the size), broadcast-like dimensions of size 1, rank 0, and
// element sizes of 1 to 8 bytes (and an odd size).
//
//===----------------------------------------------------------------------===//

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace {

struct UnrankedMemRef {
  int64_t rank;
  void *descriptor;
};

extern "C" void memrefCopy(int64_t elementSize, UnrankedMemRef *src,
                           UnrankedMemRef *dst);

/// A strided view of `buffer`: the ranked descriptor's words.
struct View {
  std::vector<int64_t> words;
  UnrankedMemRef unranked;
  View(char *buffer, int64_t offset, const std::vector<int64_t> &sizes,
       const std::vector<int64_t> &strides) {
    int64_t base = int64_t(reinterpret_cast<intptr_t>(buffer));
    words = {base, base, offset};
    words.insert(words.end(), sizes.begin(), sizes.end());
    words.insert(words.end(), strides.begin(), strides.end());
    unranked = {int64_t(sizes.size()), words.data()};
  }
};

/// Element offsets of every index of `sizes` under `strides` + `offset`,
/// last dimension fastest.
std::vector<int64_t> offsets(const std::vector<int64_t> &sizes,
                             const std::vector<int64_t> &strides,
                             int64_t offset) {
  std::vector<int64_t> out = {offset};
  for (size_t d = 0; d < sizes.size(); ++d) {
    std::vector<int64_t> next;
    for (int64_t o : out)
      for (int64_t i = 0; i < sizes[d]; ++i)
        next.push_back(o + i * strides[d]);
    out = std::move(next);
  }
  return out;
}

/// Row-major strides of `sizes` in a buffer whose dimensions are `alloc`
/// (>= sizes), visited in the order `perm` (outermost first).
std::vector<int64_t> stridesOf(const std::vector<int64_t> &alloc,
                               const std::vector<size_t> &perm) {
  std::vector<int64_t> strides(alloc.size());
  int64_t step = 1;
  for (size_t k = perm.size(); k-- > 0;) {
    strides[perm[k]] = step;
    step *= alloc[perm[k]];
  }
  return strides;
}

void checkCopy(int64_t elementSize, const std::vector<int64_t> &sizes,
               const std::vector<int64_t> &srcStrides, int64_t srcOffset,
               const std::vector<int64_t> &dstStrides, int64_t dstOffset) {
  std::vector<int64_t> so = offsets(sizes, srcStrides, srcOffset),
                       dof = offsets(sizes, dstStrides, dstOffset);
  auto span = [](const std::vector<int64_t> &o) {
    return o.empty() ? 1 : 1 + *std::max_element(o.begin(), o.end());
  };
  int64_t srcSpan = span(so), dstSpan = span(dof);
  std::vector<char> src(size_t(srcSpan * elementSize)),
      dst(size_t(dstSpan * elementSize), char(0x5a));
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = char(i * 131 + 7);
  std::vector<char> expected = dst;
  for (size_t n = 0; n < so.size(); ++n)
    std::memcpy(&expected[size_t(dof[n] * elementSize)],
                &src[size_t(so[n] * elementSize)], size_t(elementSize));
  View s(src.data(), srcOffset, sizes, srcStrides),
      d(dst.data(), dstOffset, sizes, dstStrides);
  memrefCopy(elementSize, &s.unranked, &d.unranked);
  EXPECT_EQ(dst, expected);
}

TEST(MemrefCopyTest, MatchesTheElementwiseCopy) {
  // Contiguous to contiguous (one memcpy), and rank 0.
  checkCopy(4, {3, 5, 7}, {35, 7, 1}, 0, {35, 7, 1}, 0);
  checkCopy(4, {}, {}, 3, {}, 1);
  // A transpose on either side.
  checkCopy(4, {6, 9}, {1, 6}, 0, {9, 1}, 0);
  checkCopy(8, {6, 9}, {9, 1}, 0, {1, 6}, 0);
  // A slice of a larger buffer into a contiguous one, with offsets: rows
  // of 4 contiguous elements, 10 apart.
  checkCopy(4, {3, 4}, {10, 1}, 12, {4, 1}, 2);
  // Dimensions of size 1 with any stride, and a zero-size copy.
  checkCopy(2, {1, 4, 1, 3}, {999, 3, 5, 1}, 0, {0, 3, 0, 1}, 0);
  checkCopy(4, {2, 0, 3}, {3, 3, 1}, 0, {3, 3, 1}, 0);
  // Element sizes 1 and an odd 3, strided innermost.
  checkCopy(1, {4, 5}, {1, 4}, 1, {5, 1}, 0);
  checkCopy(3, {4, 5}, {10, 2}, 0, {5, 1}, 0);
}

TEST(MemrefCopyTest, RandomLayouts) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    size_t rank = 1 + rng() % 4;
    std::vector<int64_t> sizes(rank), srcAlloc(rank), dstAlloc(rank);
    for (size_t d = 0; d < rank; ++d) {
      sizes[d] = 1 + int64_t(rng() % 5);
      srcAlloc[d] = sizes[d] + int64_t(rng() % 2);
      dstAlloc[d] = sizes[d] + int64_t(rng() % 2);
    }
    std::vector<size_t> srcPerm(rank), dstPerm(rank);
    std::iota(srcPerm.begin(), srcPerm.end(), 0);
    std::iota(dstPerm.begin(), dstPerm.end(), 0);
    std::shuffle(srcPerm.begin(), srcPerm.end(), rng);
    if (rng() % 2)
      std::shuffle(dstPerm.begin(), dstPerm.end(), rng);
    int64_t elementSize = int64_t(1) << (rng() % 4);
    checkCopy(elementSize, sizes, stridesOf(srcAlloc, srcPerm),
              int64_t(rng() % 3), stridesOf(dstAlloc, dstPerm),
              int64_t(rng() % 3));
  }
}

} // namespace
