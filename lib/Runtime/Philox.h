//===- Philox.h - Philox-4x32-10 counter-based generator --------*- C++ -*-===//
//
// Philox-4x32 with 10 rounds (Salmon, Moraes, Dror, Shaw, "Parallel random
// numbers: as easy as 1, 2, 3", SC 2011), with the constants of Random123,
// cuRAND and JAX. Header-only so that hot loops inline it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_PHILOX_H
#define CLEAVE_LIB_RUNTIME_PHILOX_H

#include <array>
#include <cstdint>

namespace cleave::rt {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

/// One Philox-4x32-10 block: 10 rounds, the key bumped between rounds.
inline PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    uint64_t p0 = uint64_t(kMul0) * ctr[0];
    uint64_t p1 = uint64_t(kMul1) * ctr[2];
    ctr = {uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], uint32_t(p1),
           uint32_t(p0 >> 32) ^ ctr[3] ^ key[1], uint32_t(p0)};
  }
  return ctr;
}

/// The key of a 64-bit seed: (low word, high word).
inline PhiloxKey philoxKey(uint64_t seed) {
  return {uint32_t(seed), uint32_t(seed >> 32)};
}

/// The counter of element block `block` of stream `stream` (see
/// docs/runtime.md): (block lo, block hi, stream lo, stream hi).
inline PhiloxCounter philoxCounter(uint64_t block, uint64_t stream) {
  return {uint32_t(block), uint32_t(block >> 32), uint32_t(stream),
          uint32_t(stream >> 32)};
}

/// A uniform float in [0, 1) from the top 24 bits of `word` (exact).
inline float uniform01(uint32_t word) {
  return float(word >> 8) * (1.0f / 16777216.0f);
}

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_PHILOX_H
