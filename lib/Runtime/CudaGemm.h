//===- CudaGemm.h - GEMMs on cuBLASLt ---------------------------*- C++ -*-===//
//
// Internal to libCleaveRuntimeCuda. Row-major GEMMs of the runtime ABI as
// cuBLASLt matmuls on the column-major transposes (C^T = op(B)^T op(A)^T),
// f32 accumulation for 16-bit types, optional TF32 (CLEAVE_CUDA_TF32=1),
// bias and GELU epilogues. A plan (descriptors, layouts, the heuristic's
// algorithm) is built once per shape, layout and pointer alignment.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_CUDAGEMM_H
#define CLEAVE_LIB_RUNTIME_CUDAGEMM_H

#include "Backend.h"
#include "CudaDevice.h"

#include <cublasLt.h>

#include <array>
#include <map>

namespace cleave::rt {

class CudaGemm {
public:
  /// Creates the cuBLASLt handle and the workspace on `device`.
  explicit CudaGemm(CudaDevice &device);
  ~CudaGemm();
  CudaGemm(const CudaGemm &) = delete;
  CudaGemm &operator=(const CudaGemm &) = delete;

  /// Enqueues C = alpha op(A) op(B) + beta C (then the epilogue, a
  /// cleave_epilogue_t) on `stream`.
  void run(const GemmArgs &args, int32_t epilogue, const void *bias,
           CUstream stream);

private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::array<int64_t, 20>;
  Plan &plan(const GemmArgs &args, int32_t epilogue, const Key &key);
  void destroy(Plan &plan);

  CudaDevice &device_;
  cublasLtHandle_t handle_ = nullptr;
  CUdeviceptr workspace_ = 0;
  size_t workspaceBytes_;
  bool tf32_;
  std::map<Key, Plan> plans_;
};

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_CUDAGEMM_H
