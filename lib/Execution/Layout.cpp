//===- Layout.cpp - Blocks of global tensors on a device mesh -------------===//

#include "cleave/Execution/Layout.h"
#include <algorithm>
#include <cstring>

using namespace mlir::cleave;

Block mlir::cleave::blockOf(const BufferSpec &buffer, const MeshSpec &mesh,
                            int64_t rank) {
  std::vector<int64_t> coords = mesh.coordinates(rank);
  Block block;
  block.sizes = buffer.shape;
  block.offsets.assign(buffer.shape.size(), 0);
  for (size_t d = 0; d < buffer.layout.size(); ++d) {
    // Linear index over the dimension's axes, the first one major.
    int64_t index = 0;
    for (int64_t axis : buffer.layout[d])
      index = index * mesh.shape[axis] + coords[axis];
    block.offsets[d] = index * buffer.shape[d];
  }
  return block;
}

void mlir::cleave::copyBlock(const void *global,
                             const std::vector<int64_t> &globalShape,
                             void *block, const Block &where,
                             int64_t elementBytes, bool intoBlock) {
  int64_t rank = globalShape.size();
  if (rank == 0) {
    if (intoBlock)
      std::memcpy(block, global, elementBytes);
    else
      std::memcpy(const_cast<void *>(global), block, elementBytes);
    return;
  }
  // Row-major strides of the global tensor, in elements.
  std::vector<int64_t> stride(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    stride[d] = stride[d + 1] * globalShape[d + 1];
  int64_t rowBytes = where.sizes[rank - 1] * elementBytes;
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < rank; ++d)
    rows *= where.sizes[d];
  std::vector<int64_t> index(rank, 0);
  auto *g = static_cast<char *>(const_cast<void *>(global));
  auto *b = static_cast<char *>(block);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t offset = 0;
    for (int64_t d = 0; d < rank; ++d)
      offset += (where.offsets[d] + index[d]) * stride[d];
    char *gp = g + offset * elementBytes, *bp = b + row * rowBytes;
    if (intoBlock)
      std::memcpy(bp, gp, rowBytes);
    else
      std::memcpy(gp, bp, rowBytes);
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++index[d] < where.sizes[d])
        break;
      index[d] = 0;
    }
  }
}

/// The intersection of blocks `a` and `b` of one tensor, in global
/// coordinates: [lo, hi) in every dimension; false if it is empty.
static bool intersect(const Block &a, const Block &b, std::vector<int64_t> &lo,
                      std::vector<int64_t> &hi) {
  size_t rank = a.sizes.size();
  lo.assign(rank, 0);
  hi.assign(rank, 0);
  for (size_t d = 0; d < rank; ++d) {
    lo[d] = std::max(a.offsets[d], b.offsets[d]);
    hi[d] = std::min(a.offsets[d] + a.sizes[d], b.offsets[d] + b.sizes[d]);
    if (lo[d] >= hi[d])
      return false;
  }
  return true;
}

int64_t mlir::cleave::copyOverlap(const void *src, const Block &from, void *dst,
                                  const Block &to, int64_t elementBytes) {
  size_t rank = from.sizes.size();
  if (rank == 0) {
    std::memcpy(dst, src, elementBytes);
    return 1;
  }
  std::vector<int64_t> lo, hi;
  if (!intersect(from, to, lo, hi))
    return 0;
  auto offsetIn = [&](const Block &b, const std::vector<int64_t> &at) {
    int64_t offset = 0;
    for (size_t d = 0; d < rank; ++d)
      offset = offset * b.sizes[d] + (at[d] - b.offsets[d]);
    return offset;
  };
  int64_t run = hi[rank - 1] - lo[rank - 1], copied = 0;
  std::vector<int64_t> at = lo;
  for (;;) {
    std::memcpy(static_cast<char *>(dst) + offsetIn(to, at) * elementBytes,
                static_cast<const char *>(src) +
                    offsetIn(from, at) * elementBytes,
                run * elementBytes);
    copied += run;
    size_t d = rank - 1;
    while (d-- > 0) {
      if (++at[d] < hi[d])
        break;
      at[d] = lo[d];
    }
    if (d == size_t(-1))
      return copied;
  }
}

int64_t mlir::cleave::copyOverlapPiece(const void *piece, int64_t begin,
                                       int64_t bytes, const Block &from,
                                       void *dst, const Block &to,
                                       int64_t elementBytes) {
  size_t rank = from.sizes.size();
  if (rank == 0) { // One element: the part of it in the piece.
    int64_t end = std::min(begin + bytes, elementBytes);
    if (begin >= end)
      return 0;
    std::memcpy(static_cast<char *>(dst) + begin, piece, end - begin);
    return end - begin;
  }
  std::vector<int64_t> lo, hi;
  if (!intersect(from, to, lo, hi))
    return 0;
  // Rows of `from` (all but the last dimension fixed) that the piece
  // meets; in each, the bytes of columns [lo, hi) of the last dimension.
  int64_t rowBytes = from.sizes[rank - 1] * elementBytes;
  if (rowBytes == 0 || bytes <= 0)
    return 0;
  int64_t keepBegin = (lo[rank - 1] - from.offsets[rank - 1]) * elementBytes;
  int64_t keepEnd = (hi[rank - 1] - from.offsets[rank - 1]) * elementBytes;
  int64_t end = begin + bytes, copied = 0;
  std::vector<int64_t> at(rank);
  for (int64_t row = begin / rowBytes; row * rowBytes < end; ++row) {
    // The row's global coordinates, last dimension at lo.
    bool inside = true;
    for (int64_t d = int64_t(rank) - 2, r = row; d >= 0; --d) {
      at[d] = from.offsets[d] + r % from.sizes[d];
      r /= from.sizes[d];
      inside = inside && lo[d] <= at[d] && at[d] < hi[d];
    }
    int64_t first = std::max(begin, row * rowBytes + keepBegin);
    int64_t last = std::min(end, row * rowBytes + keepEnd);
    if (!inside || first >= last)
      continue;
    at[rank - 1] = lo[rank - 1];
    int64_t target = 0;
    for (size_t d = 0; d < rank; ++d)
      target = target * to.sizes[d] + (at[d] - to.offsets[d]);
    std::memcpy(static_cast<char *>(dst) + target * elementBytes +
                    (first - row * rowBytes - keepBegin),
                static_cast<const char *>(piece) + (first - begin),
                size_t(last - first));
    copied += last - first;
  }
  return copied;
}
