//===- LayoutTest.cpp - Blocks of global tensors --------------------------===//
//
// copyOverlap against a brute-force reference: every pair of blocks of a
// 3-d global tensor (cut several ways, as two different meshes would) moves
// exactly the elements in both, to the right places; copyOverlapPiece, fed
// the saved block in pieces, the same.
//
//===----------------------------------------------------------------------===//

#include "cleave/Execution/Layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

using namespace mlir::cleave;

namespace {

/// The elements of `b` in a global tensor of `shape` whose element at
/// linear index i is i.
std::vector<int32_t> fill(const Block &b, const std::vector<int64_t> &shape) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < b.sizes[0]; ++i)
    for (int64_t j = 0; j < b.sizes[1]; ++j)
      for (int64_t k = 0; k < b.sizes[2]; ++k)
        out.push_back(int32_t(
            ((b.offsets[0] + i) * shape[1] + (b.offsets[1] + j)) * shape[2] +
            (b.offsets[2] + k)));
  return out;
}

/// The blocks of cutting `shape` into `parts` along each dimension.
std::vector<Block> cut(const std::vector<int64_t> &shape,
                       const std::vector<int64_t> &parts) {
  std::vector<Block> blocks;
  for (int64_t a = 0; a < parts[0]; ++a)
    for (int64_t b = 0; b < parts[1]; ++b)
      for (int64_t c = 0; c < parts[2]; ++c) {
        std::vector<int64_t> at{a, b, c}, offsets(3), sizes(3);
        for (int d = 0; d < 3; ++d) {
          sizes[d] = shape[d] / parts[d];
          offsets[d] = at[d] * sizes[d];
        }
        blocks.push_back({offsets, sizes});
      }
  return blocks;
}

TEST(LayoutTest, CopyOverlapMovesExactlyTheSharedElements) {
  std::vector<int64_t> shape{4, 6, 8};
  for (auto from : {std::vector<int64_t>{2, 1, 1}, {1, 3, 2}, {4, 2, 8}})
    for (auto to : {std::vector<int64_t>{1, 1, 1}, {1, 2, 4}, {2, 3, 1}}) {
      std::vector<Block> saved = cut(shape, from), wanted = cut(shape, to);
      for (const Block &w : wanted) {
        std::vector<int32_t> got(size_t(w.sizes[0] * w.sizes[1] * w.sizes[2]),
                                 -1);
        int64_t copied = 0;
        for (const Block &s : saved) {
          std::vector<int32_t> data = fill(s, shape);
          copied += copyOverlap(data.data(), s, got.data(), w, 4);
        }
        EXPECT_EQ(copied, int64_t(got.size()));
        EXPECT_EQ(got, fill(w, shape));
      }
    }
}

TEST(LayoutTest, CopyOverlapPiecesMoveWhatTheWholeBlockMoves) {
  // The saved blocks' bytes cut into pieces of several sizes (a piece may
  // end inside an element or a row, as a file read's pieces can), in
  // reverse order: together they copy exactly what copyOverlap copies.
  std::vector<int64_t> shape{4, 6, 8};
  for (int64_t pieceBytes : {1, 5, 12, 32, 100, 1 << 20})
    for (auto from : {std::vector<int64_t>{2, 1, 1}, {1, 3, 2}, {4, 2, 8}})
      for (auto to : {std::vector<int64_t>{1, 2, 4}, {2, 3, 1}}) {
        for (const Block &w : cut(shape, to)) {
          std::vector<int32_t> got(size_t(w.sizes[0] * w.sizes[1] * w.sizes[2]),
                                   -1);
          int64_t copied = 0;
          for (const Block &s : cut(shape, from)) {
            std::vector<int32_t> data = fill(s, shape);
            int64_t bytes = int64_t(data.size() * 4);
            for (int64_t begin = (bytes - 1) / pieceBytes * pieceBytes;
                 begin >= 0; begin -= pieceBytes)
              copied += copyOverlapPiece(
                  reinterpret_cast<const char *>(data.data()) + begin, begin,
                  std::min(pieceBytes, bytes - begin), s, got.data(), w, 4);
          }
          EXPECT_EQ(copied, int64_t(got.size() * 4)) << pieceBytes;
          EXPECT_EQ(got, fill(w, shape)) << pieceBytes;
        }
      }
  // A scalar: the part of its bytes a piece holds.
  Block scalar{{}, {}};
  int64_t value = 0x0102030405060708, back = 0;
  const char *bytes = reinterpret_cast<const char *>(&value);
  EXPECT_EQ(copyOverlapPiece(bytes + 3, 3, 5, scalar, &back, scalar, 8), 5);
  EXPECT_EQ(copyOverlapPiece(bytes, 0, 3, scalar, &back, scalar, 8), 3);
  EXPECT_EQ(back, value);
}

TEST(LayoutTest, CopyOverlapOfDisjointBlocksCopiesNothing) {
  Block a{{0, 0}, {2, 2}}, b{{2, 0}, {2, 2}};
  std::vector<float> src(4, 1.0f), dst(4, 0.0f);
  EXPECT_EQ(copyOverlap(src.data(), a, dst.data(), b, 4), 0);
  EXPECT_EQ(dst, std::vector<float>(4, 0.0f));
}

} // namespace
