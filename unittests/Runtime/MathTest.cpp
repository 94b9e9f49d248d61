//===- MathTest.cpp - dtypes, Philox, fill, GEMM --------------------------===//

#include "DType.h"
#include "Philox.h"

#include "cleave/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace cleave::rt;

namespace {

TEST(DTypeTest, SizesAndConversions) {
  EXPECT_EQ(cleave_rt_dtype_size(CLEAVE_F32), 4);
  EXPECT_EQ(cleave_rt_dtype_size(CLEAVE_BF16), 2);
  EXPECT_EQ(cleave_rt_dtype_size(CLEAVE_I64), 8);
  EXPECT_EQ(cleave_rt_dtype_size(42), 0);
  // bf16: round to nearest even, NaN stays NaN.
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(1.00390625f), 0x3f80); // Tie to even (down).
  EXPECT_EQ(floatToBf16(1.01171875f), 0x3f82); // Tie to even (up).
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
  // f16: every finite half round-trips exactly through float.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00)
      continue;
    ASSERT_EQ(floatToHalf(halfToFloat(uint16_t(h))), h) << std::hex << h;
  }
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);           // Overflow to infinity.
  EXPECT_EQ(floatToHalf(1.0f + 1.0f / 2048), 0x3c00); // Tie to even.
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
}

/// Random123's kat_vectors for philox4x32_10 (counter, key, expected).
TEST(PhiloxTest, KnownAnswerVectors) {
  struct Case {
    uint32_t ctr[4];
    uint32_t key[2];
    uint32_t out[4];
  } cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Case &c : cases) {
    uint64_t seed = uint64_t(c.key[0]) | (uint64_t(c.key[1]) << 32);
    uint32_t out[4];
    cleave_rt_philox(seed, c.ctr[0], c.ctr[1], c.ctr[2], c.ctr[3], out);
    for (int j = 0; j < 4; ++j)
      EXPECT_EQ(out[j], c.out[j]) << "word " << j;
  }
}

TEST(PhiloxTest, HashNameIsFnv1a) {
  EXPECT_EQ(cleave_rt_hash_name(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(cleave_rt_hash_name("a"), 0xaf63dc4c8601ec8cull);
}

TEST(FillTest, IndependentOfTheSplit) {
  for (int32_t kind : {CLEAVE_INIT_NORMAL, CLEAVE_INIT_UNIFORM}) {
    std::vector<float> whole(1001), parts(1001);
    ASSERT_EQ(
        cleave_rt_fill(CLEAVE_F32, whole.data(), 1001, kind, 0.5, 7, 3, 10), 0);
    // Odd split points, not multiples of 4.
    int64_t cuts[] = {0, 1, 6, 333, 1000, 1001};
    for (int i = 0; i + 1 < 6; ++i)
      cleave_rt_fill(CLEAVE_F32, parts.data() + cuts[i], cuts[i + 1] - cuts[i],
                     kind, 0.5, 7, 3, 10 + cuts[i]);
    EXPECT_EQ(whole, parts);
    std::vector<float> other(1001);
    cleave_rt_fill(CLEAVE_F32, other.data(), 1001, kind, 0.5, 7, 4, 10);
    EXPECT_NE(whole, other) << "another stream must differ";
  }
}

TEST(FillTest, DocumentedMapping) {
  // Uniform element i: word i%4 of philox(counter (i/4, 0, stream lo, hi)).
  uint64_t seed = 0x1234567890abcdefull, stream = 0x55;
  std::vector<double> u(8), n(8);
  cleave_rt_fill(CLEAVE_F64, u.data(), 8, CLEAVE_INIT_UNIFORM, 2.0, seed,
                 stream, 0);
  cleave_rt_fill(CLEAVE_F64, n.data(), 8, CLEAVE_INIT_NORMAL, 1.0, seed, stream,
                 0);
  for (int i = 0; i < 8; ++i) {
    uint32_t w[4];
    cleave_rt_philox(seed, uint32_t(i / 4), 0, uint32_t(stream), 0, w);
    double expect = 2.0 * (2.0 * ((w[i % 4] >> 8) * 0x1p-24) - 1.0);
    EXPECT_DOUBLE_EQ(u[i], expect);
    int pair = (i % 4) / 2;
    double u1 = ((w[2 * pair] >> 8) + 1.0) * 0x1p-24;
    double u2 = (w[2 * pair + 1] >> 8) * 0x1p-24;
    double r = std::sqrt(-2.0 * std::log(u1));
    double z =
        i % 2 == 0 ? r * std::cos(2 * M_PI * u2) : r * std::sin(2 * M_PI * u2);
    EXPECT_NEAR(n[i], z, 1e-12);
  }
}

TEST(FillTest, StatisticsAndConstants) {
  const int64_t count = 200000;
  std::vector<float> x(count);
  cleave_rt_fill(CLEAVE_F32, x.data(), count, CLEAVE_INIT_NORMAL, 2.0, 1, 2, 0);
  double mean = 0, var = 0;
  for (float v : x)
    mean += v;
  mean /= count;
  for (float v : x)
    var += (v - mean) * (v - mean);
  var /= count;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.02);
  cleave_rt_fill(CLEAVE_F32, x.data(), count, CLEAVE_INIT_UNIFORM, 0.1, 1, 2,
                 0);
  for (float v : x)
    ASSERT_TRUE(v >= -0.1f && v < 0.1f) << v;
  std::vector<uint16_t> h(100);
  cleave_rt_fill(CLEAVE_BF16, h.data(), 100, CLEAVE_INIT_ONES, 0, 0, 0, 0);
  EXPECT_EQ(h[99], 0x3f80);
  std::vector<int64_t> i64(5, 7);
  cleave_rt_fill(CLEAVE_I64, i64.data(), 5, CLEAVE_INIT_ZEROS, 0, 0, 0, 0);
  EXPECT_EQ(i64[4], 0);
  cleave_rt_clear_error();
  EXPECT_NE(
      cleave_rt_fill(CLEAVE_I32, i64.data(), 5, CLEAVE_INIT_NORMAL, 1, 0, 0, 0),
      0);
  EXPECT_NE(std::string(cleave_rt_error_message())
                .find("fill: random init "
                      "needs a floating"),
            std::string::npos)
      << cleave_rt_error_message();
  cleave_rt_clear_error();
}

//===----------------------------------------------------------------------===//
// GEMM against a naive reference
//===----------------------------------------------------------------------===//

double load(int32_t dtype, const std::vector<char> &buf, int64_t i) {
  const char *p = buf.data() + i * dtypeSize(dtype);
  if (dtype == CLEAVE_F32)
    return *reinterpret_cast<const float *>(p);
  if (dtype == CLEAVE_F64)
    return *reinterpret_cast<const double *>(p);
  uint16_t h = *reinterpret_cast<const uint16_t *>(p);
  return dtype == CLEAVE_BF16 ? bf16ToFloat(h) : halfToFloat(h);
}

std::vector<char> randomMatrix(int32_t dtype, int64_t elements, uint64_t seed) {
  std::vector<char> buf(size_t(elements * dtypeSize(dtype)));
  cleave_rt_fill(dtype, buf.data(), elements, CLEAVE_INIT_UNIFORM, 1.0, seed, 0,
                 0);
  return buf;
}

struct GemmCase {
  int32_t dtype;
  bool ta, tb;
  int64_t batch, strideB0; // strideB0: share B (stride 0).
};

void runGemmCase(const GemmCase &g) {
  const int64_t m = 5, n = 7, k = 6, pad = 3, batch = g.batch;
  int64_t lda = (g.ta ? m : k) + pad, ldb = (g.tb ? k : n) + pad, ldc = n + 1;
  int64_t aRows = g.ta ? k : m, bRows = g.tb ? n : k;
  int64_t strideA = aRows * lda, strideB = g.strideB0 ? 0 : bRows * ldb,
          strideC = m * ldc;
  auto a = randomMatrix(g.dtype, strideA * batch, 1);
  auto b =
      randomMatrix(g.dtype, std::max<int64_t>(strideB * batch, bRows * ldb), 2);
  auto c = randomMatrix(g.dtype, strideC * batch, 3);
  auto c0 = c;
  double alpha = 0.75, beta = 0.5;
  cleave_rt_gemm(g.dtype, g.ta, g.tb, batch, m, n, k, alpha, a.data(), lda,
                 strideA, b.data(), ldb, strideB, beta, c.data(), ldc, strideC);
  ASSERT_FALSE(cleave_rt_failed()) << cleave_rt_error_message();
  double tol = g.dtype == CLEAVE_F64    ? 1e-12
               : g.dtype == CLEAVE_F32  ? 1e-5
               : g.dtype == CLEAVE_BF16 ? 2e-2
                                        : 4e-3;
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          int64_t ai = bi * strideA + (g.ta ? p * lda + i : i * lda + p);
          int64_t bj = bi * strideB + (g.tb ? j * ldb + p : p * ldb + j);
          sum += load(g.dtype, a, ai) * load(g.dtype, b, bj);
        }
        int64_t ci = bi * strideC + i * ldc + j;
        double want = alpha * sum + beta * load(g.dtype, c0, ci);
        ASSERT_NEAR(load(g.dtype, c, ci), want, tol * (1 + std::abs(want)))
            << dtypeName(g.dtype) << " ta " << g.ta << " tb " << g.tb
            << " batch " << bi << " (" << i << "," << j << ")";
      }
  // The padding column of C is untouched.
  for (int64_t bi = 0; bi < batch; ++bi)
    EXPECT_EQ(load(g.dtype, c, bi * strideC + n),
              load(g.dtype, c0, bi * strideC + n));
}

TEST(GemmTest, MatchesNaiveReference) {
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_F64, CLEAVE_BF16, CLEAVE_F16})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (int64_t batch : {1, 3})
          for (bool shareB : {false, true})
            runGemmCase({dtype, ta, tb, batch, shareB});
}

TEST(GemmTest, SharedBAsOneTallGemm) {
  // Contiguous A and C stacks with stride_b 0 (the merged path).
  const int64_t batch = 4, m = 3, n = 2, k = 5;
  std::vector<float> a(batch * m * k), b(k * n), c(batch * m * n, 0);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = float(i % 7) - 3;
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = float(i % 5) - 2;
  cleave_rt_gemm(CLEAVE_F32, 0, 0, batch, m, n, k, 1.0, a.data(), k, m * k,
                 b.data(), n, 0, 0.0, c.data(), n, m * n);
  for (int64_t r = 0; r < batch * m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      float want = 0;
      for (int64_t p = 0; p < k; ++p)
        want += a[r * k + p] * b[p * n + j];
      EXPECT_EQ(c[r * n + j], want);
    }
}

TEST(GemmTest, BadArgumentsAreNamed) {
  float x[16] = {0};
  cleave_rt_clear_error();
  cleave_rt_gemm(CLEAVE_F32, 0, 0, 1, 2, 2, 4, 1.0, x, 3, 0, x, 2, 0, 0.0, x, 2,
                 0);
  EXPECT_NE(std::string(cleave_rt_error_message())
                .find("gemm: lda 3 is less than the row length 4 of a"),
            std::string::npos)
      << cleave_rt_error_message();
  cleave_rt_clear_error();
  cleave_rt_gemm(CLEAVE_I32, 0, 0, 1, 2, 2, 2, 1.0, x, 2, 0, x, 2, 0, 0.0, x, 2,
                 0);
  EXPECT_NE(std::string(cleave_rt_error_message()).find("not i32"),
            std::string::npos)
      << cleave_rt_error_message();
  cleave_rt_clear_error();
  cleave_rt_gemm(CLEAVE_F32, 0, 0, 2, 2, 2, 2, 1.0, x, 2, 4, x, 2, 4, 0.0, x, 2,
                 0);
  EXPECT_NE(std::string(cleave_rt_error_message()).find("overlap"),
            std::string::npos)
      << cleave_rt_error_message();
  cleave_rt_clear_error();
}

} // namespace
