//===- Gemm.cpp - Batched GEMM on OpenBLAS --------------------------------===//
//
// Row-major C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b]. f32 and f64 call
// cblas directly; bf16 and f16 operands are converted to packed f32, computed
// with sgemm and rounded back. A batch whose A and C are one contiguous stack
// and whose B is shared (stride 0, the usual linear layer) runs as a single
// GEMM with batch * m rows.
//
//===----------------------------------------------------------------------===//

#include "Backend.h"
#include "DType.h"
#include "Error.h"
#include "State.h"

#include <cblas.h>

#include <climits>
#include <cstdlib>
#include <thread>
#include <vector>

namespace cleave::rt {
namespace {

/// Rows and columns of A, B as stored (before op()).
void storedShape(bool trans, int64_t rows, int64_t cols, int64_t &r,
                 int64_t &c) {
  r = trans ? cols : rows;
  c = trans ? rows : cols;
}

void checkOperand(const char *name, bool trans, int64_t rows, int64_t cols,
                  int64_t ld, int64_t stride, const void *ptr, int64_t batch) {
  int64_t r, c;
  storedShape(trans, rows, cols, r, c);
  require(ld >= std::max<int64_t>(1, c), "ld", name, " ", ld,
          " is less than the row length ", c, " of ", name, " (stored ", r,
          " x ", c, trans ? ", transposed)" : ", not transposed)");
  require(stride >= 0, "stride_", name, " ", stride, " is negative");
  require(ptr || r * c == 0 || batch == 0, "the pointer to ", name, " is NULL");
  require(ld <= INT_MAX && r <= INT_MAX, name,
          " is too large for a 32-bit BLAS");
}

/// Packs a rows x cols 16-bit matrix with leading dimension ld into f32.
void packToFloat(int32_t dtype, const void *src, int64_t rows, int64_t cols,
                 int64_t ld, std::vector<float> &dst) {
  dst.resize(size_t(rows * cols));
  const uint16_t *base = static_cast<const uint16_t *>(src);
  for (int64_t i = 0; i < rows; ++i)
    toFloat(dtype, base + i * ld, dst.data() + i * cols, size_t(cols));
}

void gemmOne(const GemmArgs &g, const void *a, const void *b, void *c) {
  CBLAS_TRANSPOSE ta = g.transA ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = g.transB ? CblasTrans : CblasNoTrans;
  int m = int(g.m), n = int(g.n), k = int(g.k);
  if (g.dtype == CLEAVE_F32) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, float(g.alpha),
                static_cast<const float *>(a), int(g.lda),
                static_cast<const float *>(b), int(g.ldb), float(g.beta),
                static_cast<float *>(c), int(g.ldc));
    return;
  }
  if (g.dtype == CLEAVE_F64) {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, g.alpha,
                static_cast<const double *>(a), int(g.lda),
                static_cast<const double *>(b), int(g.ldb), g.beta,
                static_cast<double *>(c), int(g.ldc));
    return;
  }
  // bf16 / f16: convert the operands, accumulate in f32, round back.
  int64_t ar, ac, br, bc;
  storedShape(g.transA, g.m, g.k, ar, ac);
  storedShape(g.transB, g.k, g.n, br, bc);
  std::vector<float> fa, fb, fc(size_t(g.m * g.n), 0.0f);
  packToFloat(g.dtype, a, ar, ac, g.lda, fa);
  packToFloat(g.dtype, b, br, bc, g.ldb, fb);
  if (g.beta != 0.0)
    packToFloat(g.dtype, c, g.m, g.n, g.ldc, fc);
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, float(g.alpha), fa.data(),
              int(std::max<int64_t>(1, ac)), fb.data(),
              int(std::max<int64_t>(1, bc)), float(g.beta), fc.data(),
              int(std::max<int64_t>(1, g.n)));
  uint16_t *out = static_cast<uint16_t *>(c);
  for (int64_t i = 0; i < g.m; ++i)
    fromFloat(g.dtype, fc.data() + i * g.n, out + i * g.ldc, size_t(g.n));
}

} // namespace

void checkGemm(const GemmArgs &g) {
  require(isFloatType(g.dtype), "gemm supports f32, f64, bf16 and f16, not ",
          dtypeName(g.dtype));
  require(g.batch >= 0 && g.m >= 0 && g.n >= 0 && g.k >= 0,
          "negative size: batch ", g.batch, ", m ", g.m, ", n ", g.n, ", k ",
          g.k);
  require(g.m <= INT_MAX && g.n <= INT_MAX && g.k <= INT_MAX,
          "m, n or k is too large for a 32-bit BLAS");
  checkOperand("a", g.transA, g.m, g.k, g.lda, g.strideA, g.a, g.batch);
  checkOperand("b", g.transB, g.k, g.n, g.ldb, g.strideB, g.b, g.batch);
  checkOperand("c", false, g.m, g.n, g.ldc, g.strideC, g.c, g.batch);
  if (g.batch > 1 && g.m > 0 && g.n > 0)
    require(g.strideC >= (g.m - 1) * g.ldc + g.n, "stride_c ", g.strideC,
            " makes the ", g.m, " x ", g.n,
            " C matrices of the batch overlap (ldc ", g.ldc, ")");
}

void cpuGemm(const GemmArgs &given) {
  checkGemm(given);
  GemmArgs g = given;
  if (g.batch == 0 || g.m == 0 || g.n == 0)
    return;
  // A contiguous stack of A and C with a shared B is one tall GEMM.
  if (g.batch > 1 && g.strideB == 0 && !g.transA && g.strideA == g.m * g.lda &&
      g.strideC == g.m * g.ldc && g.batch * g.m <= INT_MAX) {
    g.m *= g.batch;
    g.batch = 1;
  }
  int64_t size = dtypeSize(g.dtype);
  for (int64_t b = 0; b < g.batch; ++b) {
    const char *a = static_cast<const char *>(g.a) + b * g.strideA * size;
    const char *bm = static_cast<const char *>(g.b) + b * g.strideB * size;
    char *c = static_cast<char *>(g.c) + b * g.strideC * size;
    gemmOne(g, a, bm, c);
  }
}

} // namespace cleave::rt

using namespace cleave::rt;

extern "C" void cleave_rt_gemm(int32_t dtype, int32_t trans_a, int32_t trans_b,
                               int64_t batch, int64_t m, int64_t n, int64_t k,
                               double alpha, const void *a, int64_t lda,
                               int64_t stride_a, const void *b, int64_t ldb,
                               int64_t stride_b, double beta, void *c,
                               int64_t ldc, int64_t stride_c) {
  guard("gemm", 0, [&] {
    require((trans_a == 0 || trans_a == 1) && (trans_b == 0 || trans_b == 1),
            "trans_a ", trans_a, " and trans_b ", trans_b, " must be 0 or 1");
    GemmArgs args{
        dtype, trans_a != 0, trans_b != 0, batch, m,   n,        k,    alpha,
        a,     lda,          stride_a,     b,     ldb, stride_b, beta, c,
        ldc,   stride_c};
    if (Backend *backend = currentBackend())
      backend->gemm(args);
    else
      cpuGemm(args);
    return 0;
  });
}

void cleave::rt::shareCpuCores(int localRanks) {
  if (localRanks <= 1 || std::getenv("OPENBLAS_NUM_THREADS") ||
      std::getenv("OMP_NUM_THREADS"))
    return;
  int cores = int(std::thread::hardware_concurrency());
  openblas_set_num_threads(std::max(1, cores / localRanks));
}
