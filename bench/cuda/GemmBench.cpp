//===- GemmBench.cpp - GEMM throughput through the runtime ----------------===//
//
// cleave-bench-gemm [--backend cuda|cpu] [--reps N]: times cleave_rt_gemm
// (cuBLASLt on the cuda backend, OpenBLAS on the cpu backend) on the GEMM
// shapes of a GPT-2-small training step (batch 4 x 1024) with each
// transpose the step uses, and a large square one for the peak. Prints one
// row per shape: time per GEMM and TFLOP/s. On the cuda backend the
// repetitions run inside one step (no synchronization between GEMMs), as in
// a training step. Needs only the runtime: scripts/gpu-check.sh carries it.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/CudaRuntime.h"
#include "cleave/Runtime/Runtime.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Shape {
  const char *what;
  int64_t batch, m, n, k;
  bool ta, tb;
  /// 1: C += A B, as the step's GEMMs that are not fused with a bias.
  double beta = 0;
};

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace

int main(int argc, char **argv) {
  std::string backend = "cuda";
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--backend" && i + 1 < argc)
      backend = argv[++i];
    else if (a == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(
          stderr, "usage: cleave-bench-gemm [--backend cuda|cpu] [--reps N]\n");
      return 2;
    }
  }
  bool cuda = backend == "cuda";
  cleave_rt_options_t opts;
  cleave_rt_default_options(&opts);
  opts.backend = backend.c_str();
  opts.rank = 0;
  opts.world_size = 1;
  opts.local_rank = 0;
  if (cleave_rt_init(&opts) != 0) {
    std::fprintf(stderr, "cleave-bench-gemm: %s\n", cleave_rt_error_message());
    return 1;
  }
  const Shape shapes[] = {
      {"qkv/out projection", 1, 4096, 768, 768, false, false},
      {"  same, weight transposed", 1, 4096, 768, 768, false, true},
      {"  same, weight transposed, C +=", 1, 4096, 768, 768, false, true, 1},
      {"  same, input transposed (weight grad)", 1, 768, 768, 4096, true,
       false},
      {"mlp up", 1, 4096, 3072, 768, false, false},
      {"  same, weight transposed", 1, 4096, 3072, 768, false, true},
      {"mlp down", 1, 4096, 768, 3072, false, false},
      {"  same, weight transposed", 1, 4096, 768, 3072, false, true},
      {"attention scores (48 heads)", 48, 1024, 1024, 64, false, true},
      {"attention values (48 heads)", 48, 1024, 64, 1024, false, false},
      {"square 8192 (peak)", 1, 8192, 8192, 8192, false, false},
  };
  std::printf("backend %s, %d repetitions each\n%-40s %7s %28s %10s %10s\n",
              backend.c_str(), reps, "gemm", "dtype", "batch x m x n x k",
              "ms/gemm", "GFLOP/s");
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16}) {
    for (const Shape &s : shapes) {
      if (!cuda && s.m * s.n * s.k * s.batch > (int64_t(1) << 33))
        continue; // too slow for a CPU
      int64_t size = cleave_rt_dtype_size(dtype);
      int64_t ar = s.ta ? s.k : s.m, ac = s.ta ? s.m : s.k;
      int64_t br = s.tb ? s.n : s.k, bc = s.tb ? s.k : s.n;
      void *a = cleave_rt_alloc(s.batch * ar * ac * size);
      void *b = cleave_rt_alloc(s.batch * br * bc * size);
      void *c = cleave_rt_alloc(s.batch * s.m * s.n * size);
      cleave_rt_fill(dtype, c, s.batch * s.m * s.n, CLEAVE_INIT_ZEROS, 0.0, 3,
                     3, 0);
      cleave_rt_fill(dtype, a, s.batch * ar * ac, CLEAVE_INIT_UNIFORM, 1.0, 1,
                     1, 0);
      cleave_rt_fill(dtype, b, s.batch * br * bc, CLEAVE_INIT_UNIFORM, 1.0, 2,
                     2, 0);
      auto run = [&](int n) {
        if (cuda)
          cleave_rt_cuda_step_begin();
        for (int r = 0; r < n; ++r)
          cleave_rt_gemm(dtype, s.ta, s.tb, s.batch, s.m, s.n, s.k, 1.0, a, ac,
                         ar * ac, b, bc, br * bc, s.beta, c, s.n, s.m * s.n);
        if (cuda)
          cleave_rt_cuda_synchronize();
      };
      run(2); // warm-up: algorithm selection, first touch of the memory
      double start = now();
      run(reps);
      double seconds = (now() - start) / reps;
      if (cleave_rt_failed()) {
        std::fprintf(stderr, "cleave-bench-gemm: %s\n",
                     cleave_rt_error_message());
        return 1;
      }
      double flops = 2.0 * s.batch * s.m * s.n * s.k;
      char dims[64];
      std::snprintf(dims, sizeof(dims), "%lld x %lld x %lld x %lld%s%s",
                    (long long)s.batch, (long long)s.m, (long long)s.n,
                    (long long)s.k, s.ta ? " A^T" : "", s.tb ? " B^T" : "");
      std::printf("%-40s %7s %28s %10.4f %10.0f\n", s.what,
                  dtype == CLEAVE_F32 ? "f32" : "bf16", dims, seconds * 1e3,
                  flops / seconds / 1e9);
      std::fflush(stdout);
      cleave_rt_free(a);
      cleave_rt_free(b);
      cleave_rt_free(c);
    }
  }
  cleave_rt_finalize();
  return 0;
}
