//===- CudaRuntimeTest.cpp - The cuda backend of the runtime --------------===//
//
// Without a GPU: asking for the cuda backend fails with a clear message, and
// CUDA host code refuses to run on the cpu backend. With GPUs (skipped
// elsewhere, with the reason): cuBLASLt GEMMs and epilogues against the CPU
// GEMM, bulk copies between buffers and pinned host memory (checkpoints),
// every collective on 1, 2 and 4 GPUs and on the groups of a 2x2 mesh, and
// a collective that a peer never joins reported by the watchdog.
//
//===----------------------------------------------------------------------===//

#include "GpuTestUtil.h"
#include "MultiProcess.h"

#include "cleave/Runtime/CudaRuntime.h"
#include "cleave/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

using namespace cleave::test;

namespace {

bool has(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

TEST(CudaRuntime, NoDeviceFailsCleanly) {
  if (gpus().count > 0)
    GTEST_SKIP() << "this machine has " << gpus().count
                 << " CUDA device(s): the GPU tests cover initialization";
  EXPECT_FALSE(gpus().why.empty());
  char why[256];
  EXPECT_EQ(cleave_rt_cuda_device_count(why, sizeof(why)), -1);
  EXPECT_TRUE(has(why, "no CUDA device: ")) << why;
  cleave_rt_options_t opts;
  cleave_rt_default_options(&opts);
  opts.backend = "cuda";
  opts.rank = 0;
  opts.world_size = 1;
  EXPECT_NE(cleave_rt_init(&opts), 0);
  EXPECT_TRUE(has(cleave_rt_error_message(), "rank 0: init: no CUDA device: "))
      << cleave_rt_error_message();
  cleave_rt_clear_error();
}

TEST(CudaRuntime, CudaCodeNeedsTheCudaBackend) {
  EXPECT_EQ(cleave_rt_cuda_alloc(16), nullptr);
  EXPECT_TRUE(has(cleave_rt_error_message(), "not initialized"))
      << cleave_rt_error_message();
  cleave_rt_clear_error();
  cleave_rt_options_t opts;
  cleave_rt_default_options(&opts);
  opts.rank = 0;
  opts.world_size = 1;
  ASSERT_EQ(cleave_rt_init(&opts), 0) << cleave_rt_error_message();
  void *slot = nullptr;
  cleave_rt_cuda_launch(&slot, &slot, "", "k", 1, 1, 1, 32, 1, 1, 0, nullptr);
  EXPECT_TRUE(has(cleave_rt_error_message(),
                  "cuda_launch: this program was compiled for CUDA but the "
                  "runtime's backend is 'gloo'"))
      << cleave_rt_error_message();
  cleave_rt_clear_error();
  cleave_rt_cuda_gemm_epilogue(CLEAVE_F32, 0, 0, 2, 2, 2, slot, 2, slot, 2,
                               slot, 2, 7, slot);
  EXPECT_TRUE(has(cleave_rt_error_message(), "unknown epilogue 7"))
      << cleave_rt_error_message();
  cleave_rt_clear_error();
  cleave_rt_finalize();
}

//===----------------------------------------------------------------------===//
// GEMMs (1 GPU)
//===----------------------------------------------------------------------===//

struct GemmCase {
  int32_t dtype;
  bool ta, tb;
  int64_t batch, m, n, k;
  bool sharedB;
  double tolerance;
};

/// Fills `count` elements of `dtype` with values of [-1, 1) from `seed`.
void fillRandom(int32_t dtype, void *data, int64_t count, uint64_t seed) {
  cleave_rt_fill(dtype, data, count, CLEAVE_INIT_UNIFORM, 1.0, seed, 7, 0);
}

double halfToDouble(uint16_t h) {
  int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
  double v = exponent == 0    ? std::ldexp(mantissa, -24)
             : exponent == 31 ? INFINITY
                              : std::ldexp(mantissa + 1024, exponent - 25);
  return sign ? -v : v;
}

/// Element i of a buffer of `dtype`.
double element(int32_t dtype, const void *data, int64_t i) {
  switch (dtype) {
  case CLEAVE_F64:
    return static_cast<const double *>(data)[i];
  case CLEAVE_F32:
    return static_cast<const float *>(data)[i];
  case CLEAVE_F16:
    return halfToDouble(static_cast<const uint16_t *>(data)[i]);
  default: {
    uint32_t bits = uint32_t(static_cast<const uint16_t *>(data)[i]) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  }
}

/// A GEMM's inputs and its result on the CPU.
struct GemmReference {
  GemmCase g;
  int64_t aCount, bCount, cCount, ac, bc, strideA, strideB, strideC;
  std::vector<char> a, b, c;
};

/// The inputs of `g` and C from the CPU GEMM (cleave_rt_gemm before the
/// runtime is initialized).
GemmReference referenceGemm(const GemmCase &g) {
  int64_t size = cleave_rt_dtype_size(g.dtype);
  GemmReference r{g};
  int64_t ar = g.ta ? g.k : g.m, br = g.tb ? g.n : g.k;
  r.ac = g.ta ? g.m : g.k;
  r.bc = g.tb ? g.k : g.n;
  r.strideA = ar * r.ac;
  r.strideB = g.sharedB ? 0 : br * r.bc;
  r.strideC = g.m * g.n;
  r.aCount = g.batch * r.strideA;
  r.bCount = g.sharedB ? br * r.bc : g.batch * r.strideB;
  r.cCount = g.batch * r.strideC;
  r.a.resize(r.aCount * size);
  r.b.resize(r.bCount * size);
  r.c.resize(r.cCount * size);
  fillRandom(g.dtype, r.a.data(), r.aCount, 1);
  fillRandom(g.dtype, r.b.data(), r.bCount, 2);
  cleave_rt_gemm(g.dtype, g.ta, g.tb, g.batch, g.m, g.n, g.k, 1.0, r.a.data(),
                 r.ac, r.strideA, r.b.data(), r.bc, r.strideB, 0.0, r.c.data(),
                 g.n, r.strideC);
  return r;
}

/// C on the GPU (cleave_rt_gemm on the cuda backend, device buffers)
/// against the CPU result.
int checkGemm(const GemmReference &r) {
  const GemmCase &g = r.g;
  void *da = cleave_rt_alloc(r.a.size()), *db = cleave_rt_alloc(r.b.size()),
       *dc = cleave_rt_alloc(r.c.size());
  std::memcpy(da, r.a.data(), r.a.size());
  std::memcpy(db, r.b.data(), r.b.size());
  std::memset(dc, 0, r.c.size());
  cleave_rt_gemm(g.dtype, g.ta, g.tb, g.batch, g.m, g.n, g.k, 1.0, da, r.ac,
                 r.strideA, db, r.bc, r.strideB, 0.0, dc, g.n, r.strideC);
  RT_CHECK(!cleave_rt_failed(), "%s", cleave_rt_error_message());
  for (int64_t i = 0; i < r.cCount; ++i) {
    double want = element(g.dtype, r.c.data(), i),
           got = element(g.dtype, dc, i);
    RT_CHECK(std::fabs(want - got) <= g.tolerance * (1 + std::fabs(want)),
             "dtype %d ta %d tb %d batch %lld: C[%lld] = %g, CPU %g", g.dtype,
             int(g.ta), int(g.tb), (long long)g.batch, (long long)i, got, want);
  }
  cleave_rt_free(da);
  cleave_rt_free(db);
  cleave_rt_free(dc);
  return 0;
}

int initCuda() {
  cleave_rt_options_t opts;
  cleave_rt_default_options(&opts);
  opts.backend = "cuda";
  RT_CHECK(cleave_rt_init(&opts) == 0, "%s", cleave_rt_error_message());
  return 0;
}

TEST(CudaRuntime, GemmsMatchTheCpu) {
  REQUIRE_GPUS(1);
  std::vector<RankResult> results = runRanks(1, [](int) {
    // The references are computed before the runtime is initialized.
    const GemmCase cases[] = {
        {CLEAVE_F32, false, false, 1, 33, 17, 65, false, 1e-5},
        {CLEAVE_F32, false, true, 1, 64, 48, 32, false, 1e-5},
        {CLEAVE_F32, true, false, 3, 16, 24, 40, false, 1e-5},
        {CLEAVE_F32, false, false, 4, 8, 32, 16, true, 1e-5},
        {CLEAVE_F64, true, true, 2, 5, 7, 9, false, 1e-12},
        {CLEAVE_BF16, false, true, 2, 32, 64, 128, false, 2e-2},
        {CLEAVE_F16, false, false, 1, 16, 16, 64, false, 2e-3},
    };
    std::vector<GemmReference> references;
    for (const GemmCase &g : cases)
      references.push_back(referenceGemm(g));
    RT_CHECK(!cleave_rt_failed(), "%s", cleave_rt_error_message());
    if (int rc = initCuda())
      return rc;
    for (const GemmReference &r : references)
      if (int rc = checkGemm(r))
        return rc;
    // Host memory is not an operand of a GPU GEMM: a clear error, not an
    // illegal address.
    const GemmReference &r = references.front();
    std::vector<char> hostC(r.c.size());
    cleave_rt_gemm(r.g.dtype, r.g.ta, r.g.tb, r.g.batch, r.g.m, r.g.n, r.g.k,
                   1.0, r.a.data(), r.ac, r.strideA, r.b.data(), r.bc,
                   r.strideB, 0.0, hostC.data(), r.g.n, r.strideC);
    RT_CHECK(strstr(cleave_rt_error_message(), "operand a at ") &&
                 strstr(cleave_rt_error_message(), "is not GPU memory"),
             "%s", cleave_rt_error_message());
    cleave_rt_finalize();
    return 0;
  });
  EXPECT_EQ(results[0].exitCode, 0) << describe(results);
}

/// One operand of a GEMM on a view, as the tiled attention's tile GEMMs
/// have them (docs/attention.md): rows [off, off + rows) of a
/// [batch, len, cols] buffer, so the pointer is inside the buffer and the
/// batch stride is len * cols, not rows * cols.
struct TileView {
  int64_t len, cols, off;
  int64_t count(int64_t batch) const { return batch * len * cols; }
  int64_t offset() const { return off * cols; }
  int64_t stride() const { return len * cols; }
};

struct TileGemm {
  int32_t dtype;
  bool ta, tb;
  int64_t batch, m, n, k;
  TileView a, b, c;
  double beta, tolerance;
};

/// Runs `g` on `a`, `b`, `c` (whole buffers) through cleave_rt_gemm.
void tileGemm(const TileGemm &g, char *a, char *b, char *c) {
  int64_t size = cleave_rt_dtype_size(g.dtype);
  cleave_rt_gemm(g.dtype, g.ta, g.tb, g.batch, g.m, g.n, g.k, 1.0,
                 a + g.a.offset() * size, g.a.cols, g.a.stride(),
                 b + g.b.offset() * size, g.b.cols, g.b.stride(), g.beta,
                 c + g.c.offset() * size, g.c.cols, g.c.stride());
}

/// `g` on the GPU against the CPU: the whole C buffer, so elements outside
/// the view must be left alone.
int checkTileGemm(const TileGemm &g, uint64_t seed) {
  int64_t size = cleave_rt_dtype_size(g.dtype);
  int64_t counts[3] = {g.a.count(g.batch), g.b.count(g.batch),
                       g.c.count(g.batch)};
  std::vector<char> host[3], want;
  for (int i = 0; i < 3; ++i) {
    host[i].resize(counts[i] * size);
    fillRandom(g.dtype, host[i].data(), counts[i], seed + i);
  }
  want = host[2];
  // The CPU reference (the cuda backend is initialized afterwards).
  tileGemm(g, host[0].data(), host[1].data(), want.data());
  RT_CHECK(!cleave_rt_failed(), "%s", cleave_rt_error_message());
  if (int rc = initCuda())
    return rc;
  char *dev[3];
  for (int i = 0; i < 3; ++i) {
    dev[i] = static_cast<char *>(cleave_rt_alloc(host[i].size()));
    std::memcpy(dev[i], host[i].data(), host[i].size());
  }
  // Outside a step every call is synchronous.
  tileGemm(g, dev[0], dev[1], dev[2]);
  RT_CHECK(!cleave_rt_failed(), "%s", cleave_rt_error_message());
  for (int64_t i = 0; i < counts[2]; ++i) {
    double w = element(g.dtype, want.data(), i),
           got = element(g.dtype, dev[2], i);
    RT_CHECK(std::fabs(w - got) <= g.tolerance * (1 + std::fabs(w)),
             "dtype %d ta %d tb %d beta %g: C[%lld] = %g, CPU %g", g.dtype,
             int(g.ta), int(g.tb), g.beta, (long long)i, got, w);
  }
  for (char *d : dev)
    cleave_rt_free(d);
  cleave_rt_finalize();
  return 0;
}

TEST(CudaRuntime, AttentionTileGemmsMatchTheCpu) {
  REQUIRE_GPUS(1);
  // 3 heads, 24 rows, head dim 16, tiles of 8 rows: S = Q_i K_j^T,
  // acc += P V_j, dV_j += P^T dO_i (into rows of dV), dK_j += dS^T Q_i.
  const TileView q{24, 16, 8}, k{24, 16, 16}, tile{8, 8, 0}, acc{8, 16, 0},
      grad{24, 16, 8};
  const TileGemm cases[] = {
      {CLEAVE_F32, false, true, 3, 8, 8, 16, q, k, tile, 0.0, 1e-5},
      {CLEAVE_F32, false, false, 3, 8, 16, 8, tile, k, acc, 1.0, 1e-5},
      {CLEAVE_F32, true, false, 3, 8, 16, 8, tile, q, grad, 1.0, 1e-5},
      {CLEAVE_BF16, false, true, 3, 8, 8, 16, q, k, tile, 0.0, 2e-2},
      {CLEAVE_BF16, true, false, 3, 8, 16, 8, tile, q, grad, 1.0, 2e-2},
  };
  uint64_t seed = 11;
  for (const TileGemm &g : cases) {
    // One process per case: the reference needs an uninitialized runtime.
    std::vector<RankResult> results =
        runRanks(1, [&](int) { return checkTileGemm(g, seed); });
    EXPECT_EQ(results[0].exitCode, 0) << describe(results);
    seed += 3;
  }
}

TEST(CudaRuntime, GemmEpiloguesAddBiasAndGelu) {
  REQUIRE_GPUS(1);
  std::vector<RankResult> results = runRanks(1, [](int) {
    const int64_t m = 32, n = 48, k = 64;
    std::vector<float> a(m * k), b(k * n), bias(n), c(m * n);
    fillRandom(CLEAVE_F32, a.data(), m * k, 3);
    fillRandom(CLEAVE_F32, b.data(), k * n, 4);
    fillRandom(CLEAVE_F32, bias.data(), n, 5);
    cleave_rt_gemm(CLEAVE_F32, 0, 0, 1, m, n, k, 1.0, a.data(), k, 0, b.data(),
                   n, 0, 0.0, c.data(), n, 0);
    if (int rc = initCuda())
      return rc;
    auto *da = static_cast<float *>(cleave_rt_alloc(m * k * 4));
    auto *db = static_cast<float *>(cleave_rt_alloc(k * n * 4));
    auto *dbias = static_cast<float *>(cleave_rt_alloc(n * 4));
    auto *dc = static_cast<float *>(cleave_rt_alloc(m * n * 4));
    std::memcpy(da, a.data(), a.size() * 4);
    std::memcpy(db, b.data(), b.size() * 4);
    std::memcpy(dbias, bias.data(), bias.size() * 4);
    for (int32_t epilogue : {CLEAVE_EPILOGUE_BIAS, CLEAVE_EPILOGUE_GELU_BIAS}) {
      cleave_rt_cuda_gemm_epilogue(CLEAVE_F32, 0, 0, m, n, k, da, k, db, n, dc,
                                   n, epilogue, dbias);
      RT_CHECK(!cleave_rt_failed(), "%s", cleave_rt_error_message());
      for (int64_t i = 0; i < m * n; ++i) {
        double x = double(c[i]) + bias[i % n];
        if (epilogue == CLEAVE_EPILOGUE_GELU_BIAS)
          x = 0.5 * x *
              (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        RT_CHECK(std::fabs(dc[i] - x) <= 1e-4 * (1 + std::fabs(x)),
                 "epilogue %d: C[%lld] = %g, expected %g", epilogue,
                 (long long)i, double(dc[i]), x);
      }
    }
    cleave_rt_finalize();
    return 0;
  });
  EXPECT_EQ(results[0].exitCode, 0) << describe(results);
}

//===----------------------------------------------------------------------===//
// Host copies (checkpoint snapshots and restores; 1 GPU)
//===----------------------------------------------------------------------===//

/// Buffers written by the GPU go to pinned host memory and back through
/// cleave_rt_copy_to_host / _from_host, in order after the compute stream's
/// work even inside a step (where nothing waited for it yet).
int hostCopies() {
  if (int rc = initCuda())
    return rc;
  RT_CHECK(cleave_rt_buffers_on_device() == 1, "the cuda backend's buffers "
                                               "are not on the device");
  // 48 MiB and an odd size: long enough for a copy that overtook the
  // compute stream to show.
  const int64_t count = (int64_t(12) << 20) + 3;
  const int64_t bytes = count * 4;
  auto *a = static_cast<float *>(cleave_rt_alloc(bytes));
  auto *c = static_cast<float *>(cleave_rt_alloc(bytes));
  for (int64_t i = 0; i < count; ++i)
    a[i] = float(i % 1021) - 510.0f;
  size_t pinnedBytes = (size_t(bytes) + 4095) / 4096 * 4096;
  void *pinned = nullptr;
  RT_CHECK(posix_memalign(&pinned, 4096, pinnedBytes) == 0, "no host memory");
  auto *host = static_cast<float *>(pinned);
  RT_CHECK(cleave_rt_host_pin(pinned, int64_t(pinnedBytes)) == 0, "%s",
           cleave_rt_error_message());
  for (int round = 0; round < 2; ++round) {
    std::memset(c, 0, size_t(bytes));
    std::memset(host, 0xff, size_t(bytes));
    // C = A on the GPU (a world of one copies on the compute stream), then
    // C to the host: inside a step (round 0) the copy must wait for it.
    if (round == 0)
      cleave_rt_cuda_step_begin();
    cleave_rt_all_reduce(-1, CLEAVE_F32, CLEAVE_SUM, a, c, count);
    cleave_rt_copy_t out[] = {{host, c + 5, (count - 5) * 4},
                              {host + count - 5, c, 5 * 4}};
    RT_CHECK(cleave_rt_copy_to_host(out, 2) == 0, "%s",
             cleave_rt_error_message());
    if (round == 0)
      cleave_rt_cuda_synchronize();
    RT_CHECK(!cleave_rt_failed(), "%s", cleave_rt_error_message());
    for (int64_t i = 0; i < count; ++i) {
      float want = a[i < count - 5 ? i + 5 : i - (count - 5)];
      RT_CHECK(host[i] == want, "round %d: host[%lld] = %g, expected %g", round,
               (long long)i, double(host[i]), double(want));
    }
  }
  // Back: host into a buffer, which the GPU then reads (C = B + 0).
  auto *b = static_cast<float *>(cleave_rt_alloc(bytes));
  for (int64_t i = 0; i < count; ++i)
    host[i] = float(i % 777) * 0.5f;
  cleave_rt_copy_t in[] = {{b, host, bytes}};
  RT_CHECK(cleave_rt_copy_from_host(in, 1) == 0, "%s",
           cleave_rt_error_message());
  std::memset(host, 0, size_t(bytes));
  cleave_rt_all_reduce(-1, CLEAVE_F32, CLEAVE_SUM, b, c, count);
  RT_CHECK(!cleave_rt_failed(), "%s", cleave_rt_error_message());
  for (int64_t i = 0; i < count; ++i)
    RT_CHECK(c[i] == float(i % 777) * 0.5f,
             "c[%lld] = %g after the copy "
             "from the host",
             (long long)i, double(c[i]));
  cleave_rt_host_unpin(pinned);
  std::free(pinned);
  cleave_rt_free(a);
  cleave_rt_free(b);
  cleave_rt_free(c);
  cleave_rt_finalize();
  return 0;
}

TEST(CudaRuntime, HostCopiesFollowTheComputeStream) {
  REQUIRE_GPUS(1);
  std::vector<RankResult> results =
      runRanks(1, [](int) { return hostCopies(); });
  EXPECT_EQ(results[0].exitCode, 0) << describe(results);
}

//===----------------------------------------------------------------------===//
// Collectives (1, 2, 4 GPUs)
//===----------------------------------------------------------------------===//

/// A managed buffer of `count` floats.
float *floats(int64_t count) {
  return static_cast<float *>(cleave_rt_alloc(count * 4));
}

/// Every collective of the ABI on the world group of `n` ranks.
int worldCollectives(int rank, int n) {
  const int64_t count = 1000;
  float *in = floats(count * n), *out = floats(count * n);
  for (int64_t i = 0; i < count; ++i)
    in[i] = float(rank + 1) * float(i % 7);
  cleave_rt_all_reduce(-1, CLEAVE_F32, CLEAVE_SUM, in, out, count);
  for (int64_t i = 0; i < count; ++i)
    RT_CHECK(out[i] == float(n * (n + 1) / 2) * float(i % 7),
             "all_reduce: out[%lld] = %g", (long long)i, double(out[i]));
  cleave_rt_all_reduce(-1, CLEAVE_F32, CLEAVE_MAX, in, out, count);
  RT_CHECK(out[3] == float(n) * 3.0f, "max: %g", double(out[3]));
  cleave_rt_all_gather(-1, CLEAVE_F32, in, out, count);
  for (int r = 0; r < n; ++r)
    RT_CHECK(out[r * count + 5] == float(r + 1) * 5.0f, "all_gather block %d",
             r);
  for (int64_t i = 0; i < count * n; ++i)
    in[i] = float(i / count);
  cleave_rt_reduce_scatter(-1, CLEAVE_F32, CLEAVE_SUM, in, out, count);
  RT_CHECK(out[0] == float(n * rank), "reduce_scatter: %g", double(out[0]));
  cleave_rt_all_to_all(-1, CLEAVE_F32, in, out, count);
  for (int r = 0; r < n; ++r)
    RT_CHECK(out[r * count] == float(rank), "all_to_all block %d: %g", r,
             double(out[r * count]));
  in[0] = float(rank == 0 ? 42 : -1);
  cleave_rt_broadcast(-1, 0, CLEAVE_F32, in, 1);
  RT_CHECK(in[0] == 42.0f, "broadcast: %g", double(in[0]));
  if (n > 1) {
    // A ring of sends and receives.
    in[0] = float(rank);
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    if (rank % 2 == 0) {
      cleave_rt_send(-1, next, CLEAVE_F32, in, 1);
      cleave_rt_recv(-1, prev, CLEAVE_F32, out, 1);
    } else {
      cleave_rt_recv(-1, prev, CLEAVE_F32, out, 1);
      cleave_rt_send(-1, next, CLEAVE_F32, in, 1);
    }
    RT_CHECK(out[0] == float(prev), "recv: %g", double(out[0]));
  }
  cleave_rt_barrier(-1);
  RT_CHECK(!cleave_rt_failed(), "%s", cleave_rt_error_message());
  cleave_rt_free(in);
  cleave_rt_free(out);
  return 0;
}

/// Groups along each axis of a 2 x (n/2) mesh, in bf16, inside a step
/// (asynchronous, then synchronized).
int meshCollectives(int rank, int n) {
  int64_t shape[2] = {2, n / 2};
  const char *names[2] = {"dp", "tp"};
  RT_CHECK(cleave_rt_define_mesh(2, shape, names) == 0, "%s",
           cleave_rt_error_message());
  int64_t dp = 0, tp = 1;
  RT_CHECK(cleave_rt_define_group(0, 1, &dp) == 0, "%s",
           cleave_rt_error_message());
  RT_CHECK(cleave_rt_define_group(1, 1, &tp) == 0, "%s",
           cleave_rt_error_message());
  auto *x = static_cast<uint16_t *>(cleave_rt_alloc(2 * 8));
  for (int i = 0; i < 8; ++i)
    x[i] = 0x3F80; // bf16 1.0
  cleave_rt_cuda_step_begin();
  cleave_rt_all_reduce(0, CLEAVE_BF16, CLEAVE_SUM, x, x, 8);
  cleave_rt_all_reduce(1, CLEAVE_BF16, CLEAVE_SUM, x, x, 8);
  cleave_rt_cuda_synchronize();
  RT_CHECK(!cleave_rt_failed(), "%s", cleave_rt_error_message());
  // 1 summed over dp (2 ranks) then over tp (n/2 ranks).
  uint32_t bits = uint32_t(x[3]) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  RT_CHECK(v == float(n), "mesh all_reduce: %g", double(v));
  cleave_rt_free(x);
  return 0;
}

/// The identity matrix of size k (f32, managed).
float *identity(int64_t k) {
  float *id = floats(k * k);
  std::memset(id, 0, size_t(k * k) * 4);
  for (int64_t i = 0; i < k; ++i)
    id[i * k + i] = 1.0f;
  return id;
}

/// Start/wait requests (the device path of Async.cpp). Outside a step the
/// wait completes on the host. Inside a step the compute stream waits for
/// the request at the wait: a GEMM issued after the wait (out x identity, on
/// the compute stream) sees the collective's result, with a blocking call
/// and compute between the start and the wait. Large enough (n x 4 MiB)
/// that the collective still runs when the GEMM is issued.
int asyncCollectives(int rank, int n) {
  const int64_t k = 1024, count = k * k;
  float *in = floats(count * n), *out = floats(count * n),
        *other = floats(count), *copy = floats(count * n), *id = identity(k);
  for (int64_t i = 0; i < count * n; ++i)
    in[i] = float(rank + 1) * float(i % 7);
  int64_t r =
      cleave_rt_all_reduce_start(-1, CLEAVE_F32, CLEAVE_SUM, in, out, count);
  RT_CHECK(r > 0, "all_reduce_start: %s", cleave_rt_error_message());
  RT_CHECK(cleave_rt_wait(r, in, out, out) == 0, "%s",
           cleave_rt_error_message());
  for (int64_t i = 0; i < count; i += 4099)
    RT_CHECK(out[i] == float(n * (n + 1) / 2) * float(i % 7),
             "all_reduce after its wait: out[%lld] = %g", (long long)i,
             double(out[i]));

  cleave_rt_cuda_step_begin();
  int64_t g = cleave_rt_all_gather_start(-1, CLEAVE_F32, in, out, count);
  cleave_rt_all_reduce(-1, CLEAVE_F32, CLEAVE_MAX, in, other, count);
  cleave_rt_gemm(CLEAVE_F32, 0, 0, 1, k, k, k, 1.0, in, k, 0, id, k, 0, 0.0,
                 copy, k, 0);
  RT_CHECK(cleave_rt_wait(g, in, out, out) == 0, "%s",
           cleave_rt_error_message());
  cleave_rt_gemm(CLEAVE_F32, 0, 0, n, k, k, k, 1.0, out, k, count, id, k, 0,
                 0.0, copy, k, count);
  int64_t s = cleave_rt_reduce_scatter_start(-1, CLEAVE_F32, CLEAVE_SUM, copy,
                                             out, count);
  RT_CHECK(cleave_rt_wait(s, copy, out, out) == 0, "%s",
           cleave_rt_error_message());
  cleave_rt_cuda_synchronize();
  RT_CHECK(!cleave_rt_failed(), "%s", cleave_rt_error_message());
  // copy = the gathered blocks: block p element i is (p + 1) (i % 7); the
  // reduce-scatter sums block `rank` of every rank's copy.
  for (int64_t i = 0; i < count; i += 4099) {
    RT_CHECK(other[i] == float(n) * float(i % 7), "max: other[%lld] = %g",
             (long long)i, double(other[i]));
    float want = float(n) * float(rank + 1) * float(i % 7);
    RT_CHECK(out[i] == want,
             "gathered, copied after the wait, scattered: "
             "out[%lld] = %g, expected %g",
             (long long)i, double(out[i]), double(want));
  }
  cleave_rt_free(in);
  cleave_rt_free(out);
  cleave_rt_free(other);
  cleave_rt_free(copy);
  cleave_rt_free(id);
  return 0;
}

/// Runs `body(rank)` on `n` ranks with the cuda backend, one GPU each.
void onGpus(int n, const std::function<int(int)> &body) {
  RunOptions options;
  options.timeoutMs = 60000;
  options.deadlineSeconds = 180;
  std::vector<RankResult> results = runRanks(
      n,
      [&](int rank) {
        if (int rc = initCuda())
          return rc;
        if (int rc = body(rank))
          return rc;
        cleave_rt_finalize();
        return 0;
      },
      options);
  for (const RankResult &r : results)
    EXPECT_EQ(r.exitCode, 0) << describe(results);
}

class CudaCollectives : public ::testing::TestWithParam<int> {};

TEST_P(CudaCollectives, EveryCollective) {
  int n = GetParam();
  REQUIRE_GPUS(n);
  onGpus(n, [n](int rank) {
    if (int rc = worldCollectives(rank, n))
      return rc;
    return n >= 4 && n % 2 == 0 ? meshCollectives(rank, n) : 0;
  });
}

TEST_P(CudaCollectives, AsyncStartWait) {
  int n = GetParam();
  REQUIRE_GPUS(n);
  onGpus(n, [n](int rank) { return asyncCollectives(rank, n); });
}

INSTANTIATE_TEST_SUITE_P(Gpus, CudaCollectives, ::testing::Values(1, 2, 4));

TEST(CudaCollectivesFailure, MissingPeerIsNamed) {
  REQUIRE_GPUS(2);
  RunOptions options;
  options.timeoutMs = 3000;
  options.deadlineSeconds = 120;
  std::vector<RankResult> results = runRanks(
      2,
      [](int rank) {
        if (int rc = initCuda())
          return rc;
        float *x = floats(16);
        if (rank == 1) {
          // Never joins the all_reduce; stays alive past rank 0's timeout.
          std::this_thread::sleep_for(std::chrono::seconds(8));
          return 0;
        }
        cleave_rt_cuda_step_begin();
        cleave_rt_all_reduce(-1, CLEAVE_F32, CLEAVE_SUM, x, x, 16);
        cleave_rt_cuda_synchronize();
        RT_CHECK(cleave_rt_failed(), "the missing peer went unnoticed");
        std::string message = cleave_rt_error_message();
        RT_CHECK(has(message, "rank 0: all_reduce on group -1 (world, ranks "
                              "0,1)"),
                 "%s", message.c_str());
        return 0;
      },
      options);
  EXPECT_EQ(results[0].exitCode, 0) << describe(results);
}

} // namespace
