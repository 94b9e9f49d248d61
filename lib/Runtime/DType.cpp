//===- DType.cpp - Element types, conversions and reductions --------------===//

#include "DType.h"
#include "Error.h"
#include "cleave/Runtime/DTypeTable.h"

#include <algorithm>
#include <cmath>

namespace cleave::rt {

int64_t dtypeSize(int32_t dtype) {
  const DTypeInfo *info = lookupDType(dtype);
  return info ? info->bytes : 0;
}

const char *dtypeName(int32_t dtype) {
  if (const DTypeInfo *info = lookupDType(dtype))
    return info->name.data();
  static thread_local char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "dtype %d", dtype);
  return buffer;
}

const char *reduceName(int32_t op) {
  static const char *names[] = {"sum", "max", "min", "avg"};
  if (op >= 0 && op <= CLEAVE_AVG)
    return names[op];
  static thread_local char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "reduction %d", op);
  return buffer;
}

bool isFloatType(int32_t dtype) {
  const DTypeInfo *info = lookupDType(dtype);
  return info && info->isFloat;
}

void checkDType(int32_t dtype) {
  if (lookupDType(dtype))
    return;
  std::string known;
  for (const DTypeInfo &info : kDTypeTable)
    known += concat(known.empty() ? "" : ", ", info.code, " ", info.name);
  throw RuntimeError(
      concat("unknown dtype code ", dtype, " (expected ", known, ")"));
}

void checkReduction(int32_t dtype, int32_t op) {
  checkDType(dtype);
  if (op < CLEAVE_SUM || op > CLEAVE_AVG)
    throw RuntimeError(concat("unknown reduction code ", op,
                              " (expected 0..3: sum max min avg)"));
  if (op == CLEAVE_AVG && !isFloatType(dtype))
    throw RuntimeError(concat("avg is not defined for integer dtype ",
                              dtypeName(dtype), "; use sum"));
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else { // Subnormal: value = mantissa * 2^-24, exact in float.
    float value = std::ldexp(float(mantissa), -24);
    return sign ? -value : value;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  uint32_t absBits = bits & 0x7fffffffu;
  if (absBits > 0x7f800000u)
    return sign | 0x7e00u;    // NaN
  if (absBits >= 0x477ff000u) // >= 65520 rounds to infinity.
    return sign | 0x7c00u;
  if (absBits < 0x38800000u) { // Below 2^-14: subnormal or zero.
    // Scale to units of 2^-24 and round to nearest even in float.
    float scaled = std::fabs(f) * 16777216.0f;
    float rounded = std::nearbyint(scaled);
    return sign | uint16_t(rounded);
  }
  uint32_t mantissa = absBits & 0x7fffffu;
  uint32_t exponent = (absBits >> 23) - 112;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
    ++half; // May carry into the exponent, which is still correct.
  return sign | uint16_t(half);
}

namespace {

template <typename T>
struct Sum {
  static T apply(T a, T b) { return a + b; }
};
template <typename T>
struct Max {
  static T apply(T a, T b) { return std::max(a, b); }
};
template <typename T>
struct Min {
  static T apply(T a, T b) { return std::min(a, b); }
};

template <typename T, template <typename> class Op>
void reduceNative(void *c, const void *a, const void *b, size_t n) {
  T *out = static_cast<T *>(c);
  const T *x = static_cast<const T *>(a);
  const T *y = static_cast<const T *>(b);
  for (size_t i = 0; i < n; ++i)
    out[i] = Op<T>::apply(x[i], y[i]);
}

template <float (*Load)(uint16_t), uint16_t (*Store)(float),
          template <typename> class Op>
void reduceHalf(void *c, const void *a, const void *b, size_t n) {
  uint16_t *out = static_cast<uint16_t *>(c);
  const uint16_t *x = static_cast<const uint16_t *>(a);
  const uint16_t *y = static_cast<const uint16_t *>(b);
  for (size_t i = 0; i < n; ++i)
    out[i] = Store(Op<float>::apply(Load(x[i]), Load(y[i])));
}

template <template <typename> class Op>
ReduceFn kernelFor(int32_t dtype) {
  switch (dtype) {
  case CLEAVE_F32:
    return &reduceNative<float, Op>;
  case CLEAVE_F64:
    return &reduceNative<double, Op>;
  case CLEAVE_I32:
    return &reduceNative<int32_t, Op>;
  case CLEAVE_I64:
    return &reduceNative<int64_t, Op>;
  case CLEAVE_BF16:
    return &reduceHalf<bf16ToFloat, floatToBf16, Op>;
  case CLEAVE_F16:
    return &reduceHalf<halfToFloat, floatToHalf, Op>;
  default:
    return nullptr;
  }
}

} // namespace

ReduceFn reduceFunction(int32_t dtype, int32_t op) {
  switch (op) {
  case CLEAVE_SUM:
  case CLEAVE_AVG:
    return kernelFor<Sum>(dtype);
  case CLEAVE_MAX:
    return kernelFor<Max>(dtype);
  case CLEAVE_MIN:
    return kernelFor<Min>(dtype);
  default:
    return nullptr;
  }
}

void toFloat(int32_t dtype, const void *src, float *dst, size_t n) {
  const uint16_t *h = static_cast<const uint16_t *>(src);
  switch (dtype) {
  case CLEAVE_F32:
    std::memcpy(dst, src, n * sizeof(float));
    return;
  case CLEAVE_BF16:
    for (size_t i = 0; i < n; ++i)
      dst[i] = bf16ToFloat(h[i]);
    return;
  case CLEAVE_F16:
    for (size_t i = 0; i < n; ++i)
      dst[i] = halfToFloat(h[i]);
    return;
  default:
    throw RuntimeError(concat("cannot convert ", dtypeName(dtype), " to f32"));
  }
}

void fromFloat(int32_t dtype, const float *src, void *dst, size_t n) {
  uint16_t *h = static_cast<uint16_t *>(dst);
  switch (dtype) {
  case CLEAVE_F32:
    std::memcpy(dst, src, n * sizeof(float));
    return;
  case CLEAVE_BF16:
    for (size_t i = 0; i < n; ++i)
      h[i] = floatToBf16(src[i]);
    return;
  case CLEAVE_F16:
    for (size_t i = 0; i < n; ++i)
      h[i] = floatToHalf(src[i]);
    return;
  default:
    throw RuntimeError(concat("cannot convert f32 to ", dtypeName(dtype)));
  }
}

void scaleInPlace(int32_t dtype, void *data, size_t n, double factor) {
  switch (dtype) {
  case CLEAVE_F32: {
    float *p = static_cast<float *>(data);
    float f = float(factor);
    for (size_t i = 0; i < n; ++i)
      p[i] *= f;
    return;
  }
  case CLEAVE_F64: {
    double *p = static_cast<double *>(data);
    for (size_t i = 0; i < n; ++i)
      p[i] *= factor;
    return;
  }
  case CLEAVE_BF16:
  case CLEAVE_F16: {
    uint16_t *p = static_cast<uint16_t *>(data);
    bool bf = dtype == CLEAVE_BF16;
    float f = float(factor);
    for (size_t i = 0; i < n; ++i)
      p[i] = bf ? floatToBf16(bf16ToFloat(p[i]) * f)
                : floatToHalf(halfToFloat(p[i]) * f);
    return;
  }
  default:
    throw RuntimeError(concat("cannot scale ", dtypeName(dtype)));
  }
}

} // namespace cleave::rt

extern "C" int64_t cleave_rt_dtype_size(int32_t dtype) {
  return cleave::rt::dtypeSize(dtype);
}

extern "C" const char *cleave_rt_dtype_name(int32_t dtype) {
  const cleave::rt::DTypeInfo *info = cleave::rt::lookupDType(dtype);
  return info ? info->name.data() : nullptr;
}
