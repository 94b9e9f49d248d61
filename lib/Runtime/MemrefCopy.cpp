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

} // namespace

extern "C" void memrefCopy(int64_t elementSize, UnrankedMemRef *src,
                           UnrankedMemRef *dst) {
  int64_t rank = src->rank;
  Ranked s = view(src), d = view(dst);
  int64_t total = 1;
  for (int64_t i = 0; i < rank; ++i)
    total *= s.sizes[i];
  if (total == 0)
    return;
  std::vector<int64_t> index(rank, 0);
  int64_t srcOff = s.offset, dstOff = d.offset;
  for (int64_t n = 0; n < total; ++n) {
    std::memcpy(d.aligned + dstOff * elementSize,
                s.aligned + srcOff * elementSize, elementSize);
    // Odometer over the dimensions, last fastest.
    for (int64_t i = rank - 1; i >= 0; --i) {
      ++index[i];
      srcOff += s.strides[i];
      dstOff += d.strides[i];
      if (index[i] < s.sizes[i])
        break;
      srcOff -= s.strides[i] * s.sizes[i];
      dstOff -= d.strides[i] * d.sizes[i];
      index[i] = 0;
    }
  }
}
