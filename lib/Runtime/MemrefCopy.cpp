//===- MemrefCopy.cpp - Strided copies for generated code -----------------===//
//
// MLIR lowers `memref.copy` between non-contiguous memrefs to a call to
// `memrefCopy` with unranked descriptors (the symbol Debian ships only in
// libmlir_c_runner_utils). The runtime provides it so that compiled programs
// need nothing but libCleaveRuntime.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

/// MLIR's unranked memref descriptor: a rank and a pointer to the ranked
/// descriptor {allocated, aligned, offset, sizes[rank], strides[rank]}.
struct UnrankedMemRef {
  int64_t rank;
  void *descriptor;
};

struct Ranked {
  char *aligned;
  int64_t offset;
  const int64_t *sizes;
  const int64_t *strides;
};

Ranked view(const UnrankedMemRef *m) {
  auto *words = static_cast<int64_t *>(m->descriptor);
  Ranked r;
  r.aligned = reinterpret_cast<char *>(words[1]);
  r.offset = words[2];
  r.sizes = words + 3;
  r.strides = words + 3 + m->rank;
  return r;
}

/// One dimension of a copy: its size and both strides, in elements.
struct Dim {
  int64_t size, srcStride, dstStride;
};

/// Copies `n` elements of sizeof(T) bytes with element strides `ss`, `ds`.
template <typename T>
void copyStrided(char *dst, const char *src, int64_t n, int64_t ss,
                 int64_t ds) {
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(dst + i * ds * int64_t(sizeof(T)),
                src + i * ss * int64_t(sizeof(T)), sizeof(T));
}

void copyRow(char *dst, const char *src, int64_t elementSize, const Dim &row) {
  if (row.srcStride == 1 && row.dstStride == 1) {
    std::memcpy(dst, src, size_t(row.size * elementSize));
    return;
  }
  switch (elementSize) {
  case 1:
    return copyStrided<uint8_t>(dst, src, row.size, row.srcStride,
                                row.dstStride);
  case 2:
    return copyStrided<uint16_t>(dst, src, row.size, row.srcStride,
                                 row.dstStride);
  case 4:
    return copyStrided<uint32_t>(dst, src, row.size, row.srcStride,
                                 row.dstStride);
  case 8:
    return copyStrided<uint64_t>(dst, src, row.size, row.srcStride,
                                 row.dstStride);
  default:
    for (int64_t i = 0; i < row.size; ++i)
      std::memcpy(dst + i * row.dstStride * elementSize,
                  src + i * row.srcStride * elementSize, size_t(elementSize));
  }
}

} // namespace

/// Dimensions of size 1 are dropped and a dimension that steps over the
/// whole of the next one in both memrefs is merged into it, so that the
/// innermost run is as long as the layouts allow: one memcpy per
/// contiguous run, a strided loop otherwise, an odometer over the rest.
extern "C" void memrefCopy(int64_t elementSize, UnrankedMemRef *src,
                           UnrankedMemRef *dst) {
  int64_t rank = src->rank;
  Ranked s = view(src), d = view(dst);
  std::vector<Dim> dims;
  for (int64_t i = 0; i < rank; ++i) {
    if (s.sizes[i] == 0)
      return;
    if (s.sizes[i] != 1)
      dims.push_back({s.sizes[i], s.strides[i], d.strides[i]});
  }
  // Merge from the innermost dimension outwards.
  std::vector<Dim> merged;
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    if (!merged.empty()) {
      Dim &inner = merged.back();
      if (it->srcStride == inner.srcStride * inner.size &&
          it->dstStride == inner.dstStride * inner.size) {
        inner.size *= it->size;
        continue;
      }
    }
    merged.push_back(*it);
  }
  // merged[0] is the innermost run; the rest, outer dimensions, innermost
  // first.
  Dim row = merged.empty() ? Dim{1, 1, 1} : merged.front();
  size_t outer = merged.empty() ? 0 : merged.size() - 1;
  std::vector<int64_t> index(outer, 0);
  char *srcBase = s.aligned + s.offset * elementSize;
  char *dstBase = d.aligned + d.offset * elementSize;
  int64_t srcOff = 0, dstOff = 0;
  while (true) {
    copyRow(dstBase + dstOff * elementSize, srcBase + srcOff * elementSize,
            elementSize, row);
    // Odometer over the outer dimensions, innermost fastest.
    size_t k = 0;
    for (; k < outer; ++k) {
      const Dim &dim = merged[k + 1];
      ++index[k];
      srcOff += dim.srcStride;
      dstOff += dim.dstStride;
      if (index[k] < dim.size)
        break;
      srcOff -= dim.srcStride * dim.size;
      dstOff -= dim.dstStride * dim.size;
      index[k] = 0;
    }
    if (k == outer)
      return;
  }
}
