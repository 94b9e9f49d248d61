//===- CudaBackend.h - The cuda backend's extra calls -----------*- C++ -*-===//
//
// Internal to libCleaveRuntime. The cuda backend lives in its own library,
// libCleaveRuntimeCuda (it links libcuda, NCCL and cuBLASLt), which
// cleave_rt_init loads with dlopen when the options ask for backend "cuda":
// libCleaveRuntime itself needs no CUDA library, so CPU programs and tools
// run on machines without a driver. The C functions of CudaRuntime.h
// forward to this interface.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_CUDABACKEND_H
#define CLEAVE_LIB_RUNTIME_CUDABACKEND_H

#include "Backend.h"

#include <memory>
#include <string>

namespace cleave::rt {

/// What the cuda backend adds to Backend for generated host code.
class CudaBackend : public Backend {
public:
  /// Launches a kernel on the compute stream (module and function handles
  /// cached in the caller's slots).
  virtual void launch(void **function, void **module, const void *image,
                      const char *name, const int64_t grid[3],
                      const int64_t block[3], int32_t sharedBytes,
                      void **args) = 0;
  /// Stream-ordered device memory from the caching pool.
  virtual void *deviceAlloc(int64_t bytes) = 0;
  virtual void deviceFree(void *ptr) = 0;
  /// Brackets a compiled step (see CudaRuntime.h).
  virtual void stepBegin() = 0;
  virtual void synchronize() = 0;
  /// A GEMM (batch 1, beta 0) with a fused epilogue.
  virtual void gemmEpilogue(const GemmArgs &args, int32_t epilogue,
                            const void *bias) = 0;
};

struct CudaBackendOptions {
  int rank = 0;
  /// Selects the device (LOCAL_RANK); a process that sees one device uses
  /// it whatever its local rank (CUDA_VISIBLE_DEVICES per rank).
  int localRank = 0;
  int64_t timeoutMs = 300000;
};

/// Loads libCleaveRuntimeCuda and creates the backend. Throws RuntimeError
/// ("no CUDA device: <why>") when there is no usable driver or device, and
/// when this build has no CUDA support.
std::unique_ptr<Backend> loadCudaBackend(const CudaBackendOptions &options);

/// The active backend if it is the cuda backend, else nullptr.
CudaBackend *currentCudaBackend();

/// The plugin's entry points (extern "C", looked up with dlsym).
using CreateCudaBackendFn = Backend *(*)(const CudaBackendOptions *);
using CudaDeviceCountFn = int (*)(std::string *why);
using CudaDeviceInfoFn = int (*)(int ordinal, std::string *name, int *major,
                                 int *minor, std::string *why);
inline constexpr const char *kCreateCudaBackendSymbol =
    "cleave_rt_cuda_plugin_create_backend";
inline constexpr const char *kCudaDeviceCountSymbol =
    "cleave_rt_cuda_plugin_device_count";
inline constexpr const char *kCudaDeviceInfoSymbol =
    "cleave_rt_cuda_plugin_device_info";

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_CUDABACKEND_H
