//===- Random.cpp - Philox streams and tensor initialization --------------===//
//
// Element `i` of stream (seed, stream) takes word i % 4 of the Philox block
// with counter philoxCounter(i / 4, stream) and key philoxKey(seed). Normals
// pair words (0, 1) and (2, 3) of a block by Box-Muller. docs/runtime.md
// spells this out for generated code.
//
//===----------------------------------------------------------------------===//

#include "DType.h"
#include "Error.h"
#include "Philox.h"

#include <cmath>
#include <vector>

namespace cleave::rt {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

/// The four values of block `block` for `kind` (before the dtype cast).
void blockValues(int32_t kind, double scale, PhiloxKey key, uint64_t stream,
                 uint64_t block, double out[4]) {
  PhiloxCounter words = philox4x32_10(philoxCounter(block, stream), key);
  if (kind == CLEAVE_INIT_UNIFORM) {
    for (int j = 0; j < 4; ++j)
      out[j] = scale * (2.0 * double(uniform01(words[j])) - 1.0);
    return;
  }
  // Box-Muller on (words[0], words[1]) and (words[2], words[3]).
  for (int pair = 0; pair < 2; ++pair) {
    double u1 = (double(words[2 * pair] >> 8) + 1.0) / 16777216.0; // (0, 1]
    double u2 = double(uniform01(words[2 * pair + 1]));            // [0, 1)
    double radius = std::sqrt(-2.0 * std::log(u1));
    out[2 * pair] = scale * radius * std::cos(kTwoPi * u2);
    out[2 * pair + 1] = scale * radius * std::sin(kTwoPi * u2);
  }
}

/// Stores `value` as element `i` of `out`; uniform values stay below scale.
void storeValue(int32_t dtype, void *out, int64_t i, double value, bool uniform,
                double scale) {
  switch (dtype) {
  case CLEAVE_F64:
    static_cast<double *>(out)[i] = value;
    return;
  case CLEAVE_F32: {
    float f = float(value);
    if (uniform && f >= float(scale) && scale > 0)
      f = std::nextafter(float(scale), 0.0f);
    static_cast<float *>(out)[i] = f;
    return;
  }
  case CLEAVE_BF16:
  case CLEAVE_F16: {
    bool bf = dtype == CLEAVE_BF16;
    uint16_t h = bf ? floatToBf16(float(value)) : floatToHalf(float(value));
    float back = bf ? bf16ToFloat(h) : halfToFloat(h);
    if (uniform && back >= scale && scale > 0)
      h = uint16_t(h - 1); // The next value toward zero (positive h).
    static_cast<uint16_t *>(out)[i] = h;
    return;
  }
  default:
    throw RuntimeError(concat("cannot fill ", dtypeName(dtype)));
  }
}

void fillConstant(int32_t dtype, void *out, int64_t count, double value) {
  switch (dtype) {
  case CLEAVE_I32:
    std::fill_n(static_cast<int32_t *>(out), count, int32_t(value));
    return;
  case CLEAVE_I64:
    std::fill_n(static_cast<int64_t *>(out), count, int64_t(value));
    return;
  default:
    for (int64_t i = 0; i < count; ++i)
      storeValue(dtype, out, i, value, false, 0);
  }
}

void fill(int32_t dtype, void *out, int64_t count, int32_t kind, double scale,
          uint64_t seed, uint64_t stream, int64_t offset) {
  checkDType(dtype);
  require(count >= 0, "count ", count, " is negative");
  require(offset >= 0, "offset ", offset, " is negative");
  require(count == 0 || out, "the output pointer is NULL");
  if (kind == CLEAVE_INIT_ZEROS || kind == CLEAVE_INIT_ONES)
    return fillConstant(dtype, out, count, kind == CLEAVE_INIT_ONES ? 1 : 0);
  require(kind == CLEAVE_INIT_NORMAL || kind == CLEAVE_INIT_UNIFORM,
          "unknown init kind ", kind,
          " (expected 0..3: zeros ones normal uniform)");
  require(isFloatType(dtype),
          "random init needs a floating-point "
          "dtype, not ",
          dtypeName(dtype));
  require(std::isfinite(scale) && scale >= 0, "scale ", scale,
          " must be finite and non-negative");
  PhiloxKey key = philoxKey(seed);
  bool uniform = kind == CLEAVE_INIT_UNIFORM;
  double values[4];
  uint64_t cached = UINT64_MAX;
  for (int64_t i = 0; i < count; ++i) {
    uint64_t global = uint64_t(offset) + uint64_t(i);
    if (global / 4 != cached) {
      cached = global / 4;
      blockValues(kind, scale, key, stream, cached, values);
    }
    storeValue(dtype, out, i, values[global % 4], uniform, scale);
  }
}

} // namespace
} // namespace cleave::rt

using namespace cleave::rt;

extern "C" {

void cleave_rt_philox(uint64_t seed, uint32_t c0, uint32_t c1, uint32_t c2,
                      uint32_t c3, uint32_t out[4]) {
  if (!out)
    return;
  PhiloxCounter r = philox4x32_10({c0, c1, c2, c3}, philoxKey(seed));
  for (int j = 0; j < 4; ++j)
    out[j] = r[j];
}

uint64_t cleave_rt_hash_name(const char *name) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const char *p = name ? name : ""; *p; ++p) {
    hash ^= uint8_t(*p);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

int cleave_rt_fill(int32_t dtype, void *out, int64_t count, int32_t kind,
                   double scale, uint64_t seed, uint64_t stream,
                   int64_t offset) {
  return guard("fill", 1, [&] {
    fill(dtype, out, count, kind, scale, seed, stream, offset);
    return 0;
  });
}

} // extern "C"
