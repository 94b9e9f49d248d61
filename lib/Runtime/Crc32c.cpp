//===- Crc32c.cpp - CRC32C checksums (Castagnoli) -------------------------===//
//
// CRC32C (polynomial 0x1EDC6F41, reflected 0x82F63B78; the checksum of
// iSCSI, ext4, gRPC and Google Cloud Storage): the SSE4.2 instruction where
// the CPU has it, in three interleaved lanes (one 8-byte step per
// instruction and lane, about 3x one lane's speed), else slicing-by-8
// tables. `combine` is zlib's crc32_combine over this
// polynomial: the CRC of A||B from the CRCs of A and B and B's length.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/Runtime.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;

struct Tables {
  uint32_t t[8][256];
  Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? (c >> 1) ^ kPolynomial : c >> 1;
      t[0][i] = c;
    }
    for (int s = 1; s < 8; ++s)
      for (uint32_t i = 0; i < 256; ++i)
        t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
};

/// Slicing-by-8 over the inverted register `c`.
uint32_t software(uint32_t c, const unsigned char *p, size_t n) {
  static const Tables tables;
  const auto &t = tables.t;
  for (; n >= 8; p += 8, n -= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
        t[4][lo >> 24] ^ t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^
        t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  while (n--)
    c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
  return c;
}

/// The register after `Bytes` zero bytes, as a function of the register
/// before (linear over GF(2)): four tables, one per byte of the register.
template <size_t Bytes>
struct ZeroShift {
  uint32_t t[4][256];
  ZeroShift() {
    static const unsigned char zeros[Bytes] = {};
    uint32_t column[32];
    for (int bit = 0; bit < 32; ++bit)
      column[bit] = software(1u << bit, zeros, Bytes);
    for (int k = 0; k < 4; ++k)
      for (uint32_t v = 0; v < 256; ++v) {
        uint32_t sum = 0;
        for (int bit = 0; bit < 8; ++bit)
          if (v >> bit & 1)
            sum ^= column[8 * k + bit];
        t[k][v] = sum;
      }
  }
  uint32_t operator()(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^
           t[3][c >> 24];
  }
};

#if defined(__x86_64__)
/// The crc32 instruction takes 3 cycles but can start every cycle: three
/// lanes of kLane bytes run at once, then are joined by shifting the first
/// two over the bytes after them (about 3x one lane's speed).
__attribute__((target("sse4.2"))) uint32_t hardware(uint32_t c,
                                                    const unsigned char *p,
                                                    size_t n) {
  constexpr size_t kLane = 8192;
  static const ZeroShift<kLane> shift1;
  static const ZeroShift<2 * kLane> shift2;
  uint64_t c64 = c;
  for (; n >= 3 * kLane; p += 3 * kLane, n -= 3 * kLane) {
    uint64_t a = c64, b = 0, d = 0;
    for (size_t i = 0; i < kLane; i += 8) {
      uint64_t va, vb, vd;
      std::memcpy(&va, p + i, 8);
      std::memcpy(&vb, p + kLane + i, 8);
      std::memcpy(&vd, p + 2 * kLane + i, 8);
      a = _mm_crc32_u64(a, va);
      b = _mm_crc32_u64(b, vb);
      d = _mm_crc32_u64(d, vd);
    }
    c64 = shift2(uint32_t(a)) ^ shift1(uint32_t(b)) ^ uint32_t(d);
  }
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
  }
  uint32_t c32 = uint32_t(c64);
  while (n--)
    c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}
#endif

/// The inverted register continued over `n` bytes at `p`.
uint32_t update(uint32_t c, const void *data, size_t n) {
  auto *p = static_cast<const unsigned char *>(data);
#if defined(__x86_64__)
  static const bool sse42 = __builtin_cpu_supports("sse4.2");
  if (sse42)
    return hardware(c, p, n);
#endif
  return software(c, p, n);
}

uint32_t gf2Times(const uint32_t *matrix, uint32_t vector) {
  uint32_t sum = 0;
  for (; vector; vector >>= 1, ++matrix)
    if (vector & 1)
      sum ^= *matrix;
  return sum;
}

void gf2Square(uint32_t *square, const uint32_t *matrix) {
  for (int n = 0; n < 32; ++n)
    square[n] = gf2Times(matrix, matrix[n]);
}

} // namespace

extern "C" {

uint32_t cleave_rt_crc32c(uint32_t crc, const void *data, int64_t bytes) {
  if (bytes <= 0 || !data)
    return crc;
  return ~update(~crc, data, size_t(bytes));
}

uint32_t cleave_rt_copy_crc32c(void *dst, const void *src, int64_t bytes,
                               uint32_t crc) {
  if (bytes <= 0 || !dst || !src)
    return crc;
  // Copy a block, then checksum it while it is still in the cache: one
  // pass over memory, the copy at memcpy's speed.
  constexpr size_t kBlock = 128 << 10;
  uint32_t c = ~crc;
  auto *d = static_cast<char *>(dst);
  auto *s = static_cast<const char *>(src);
  for (size_t left = size_t(bytes); left > 0;) {
    size_t n = std::min(left, kBlock);
    std::memcpy(d, s, n);
    c = update(c, d, n);
    d += n;
    s += n;
    left -= n;
  }
  return ~c;
}

uint32_t cleave_rt_crc32c_combine(uint32_t crc1, uint32_t crc2,
                                  int64_t bytes2) {
  if (bytes2 <= 0)
    return crc1;
  uint32_t even[32], odd[32];
  // The operator of one zero bit, then of 2 and 4.
  odd[0] = kPolynomial;
  for (int n = 1; n < 32; ++n)
    odd[n] = 1u << (n - 1);
  gf2Square(even, odd);
  gf2Square(odd, even);
  // Apply the operators of len2 zero bytes (8 * len2 bits) to crc1.
  uint64_t len = uint64_t(bytes2);
  do {
    gf2Square(even, odd);
    if (len & 1)
      crc1 = gf2Times(even, crc1);
    len >>= 1;
    if (!len)
      break;
    gf2Square(odd, even);
    if (len & 1)
      crc1 = gf2Times(odd, crc1);
    len >>= 1;
  } while (len);
  return crc1 ^ crc2;
}

} // extern "C"
