//===- DType.h - Element types, conversions and reductions ------*- C++ -*-===//
//
// Internal to libCleaveRuntime: the element types of the ABI, the 16-bit
// float conversions (round to nearest even) and the element-wise reduction
// kernels the CPU backend hands to Gloo.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_DTYPE_H
#define CLEAVE_LIB_RUNTIME_DTYPE_H

#include "cleave/Runtime/Runtime.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cleave::rt {

/// Bytes per element, 0 for an unknown code.
int64_t dtypeSize(int32_t dtype);
/// "f32", "bf16", ...; "dtype <code>" for an unknown code.
const char *dtypeName(int32_t dtype);
/// "sum", "max", "min", "avg"; "reduction <code>" for an unknown code.
const char *reduceName(int32_t op);
/// True for F32, F64, BF16, F16.
bool isFloatType(int32_t dtype);
/// Throws RuntimeError unless `dtype` is a known code.
void checkDType(int32_t dtype);
/// Throws RuntimeError unless `op` is a known reduction valid for `dtype`
/// (avg needs a floating-point type).
void checkReduction(int32_t dtype, int32_t op);

inline float bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet and a NaN.
    return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

/// IEEE binary16 to float (exact).
float halfToFloat(uint16_t h);
/// float to IEEE binary16, round to nearest even, overflow to infinity.
uint16_t floatToHalf(float f);

/// c[i] = a[i] (op) b[i] for i < n; c may alias a or b. Gloo's signature.
using ReduceFn = void (*)(void *c, const void *a, const void *b, size_t n);

/// The kernel for (dtype, op); AVG maps to SUM (scale afterwards).
ReduceFn reduceFunction(int32_t dtype, int32_t op);

/// data[i] *= factor for floating-point types (used for AVG).
void scaleInPlace(int32_t dtype, void *data, size_t n, double factor);

/// Converts n elements of `dtype` to float / from float.
void toFloat(int32_t dtype, const void *src, float *dst, size_t n);
void fromFloat(int32_t dtype, const float *src, void *dst, size_t n);

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_DTYPE_H
