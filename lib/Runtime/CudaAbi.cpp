//===- CudaAbi.cpp - CudaRuntime.h and loading the cuda backend -----------===//
//
// Part of libCleaveRuntime in every build. The cuda backend is a separate
// library (see CudaBackend.h) found next to this one; without a driver or
// without CUDA support in the build, asking for it fails with a message
// that starts "no CUDA device: ".
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"
#include "Error.h"
#include "State.h"

#include "cleave/Runtime/CudaRuntime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <string>

namespace cleave::rt {
namespace {

constexpr const char *kPluginName = "libCleaveRuntimeCuda.so";

/// The plugin's handle, or the reason it cannot be loaded.
struct Plugin {
  void *handle = nullptr;
  std::string error;
};

/// Loads the plugin once per process: from the directory of this library
/// first (build and install trees), else through the loader's search path.
const Plugin &plugin() {
  static Plugin loaded;
  static std::once_flag once;
  std::call_once(once, [] {
#ifndef CLEAVE_HAVE_CUDA
    loaded.error = "this build of Cleave has no CUDA support (configure it "
                   "where the CUDA toolkit, NCCL and cuBLASLt are installed; "
                   "see docs/cuda.md)";
#else
    std::string path = kPluginName;
    Dl_info info;
    if (dladdr(reinterpret_cast<void *>(&loadCudaBackend), &info) &&
        info.dli_fname) {
      std::string self = info.dli_fname;
      size_t slash = self.rfind('/');
      if (slash != std::string::npos)
        path = self.substr(0, slash + 1) + kPluginName;
    }
    // Beside this library first; through the loader's search path only if
    // it is not there (the first error is the one worth reporting).
    if (access(path.c_str(), F_OK) != 0)
      path = kPluginName;
    loaded.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!loaded.handle) {
      const char *why = dlerror();
      loaded.error = concat("cannot load the CUDA backend ", path, " (",
                            why ? why : "unknown error",
                            "; is the NVIDIA driver installed?)");
    }
#endif
  });
  return loaded;
}

void *pluginSymbol(const char *name) {
  const Plugin &p = plugin();
  if (!p.handle)
    throw RuntimeError("no CUDA device: " + p.error);
  void *symbol = dlsym(p.handle, name);
  if (!symbol)
    throw RuntimeError(concat("no CUDA device: ", kPluginName, " has no ", name,
                              " (a mismatched build?)"));
  return symbol;
}

/// The cuda backend; the callers' guard() names the call in the message.
CudaBackend &requireCuda() {
  CudaBackend *cuda = currentCudaBackend();
  if (cuda)
    return *cuda;
  Backend *backend = currentBackend();
  if (!backend)
    throw RuntimeError("the runtime is not initialized (call cleave_rt_init "
                       "with backend \"cuda\")");
  throw RuntimeError(concat("this program was compiled for CUDA but the "
                            "runtime's backend is '",
                            backend->name(),
                            "' (call cleave_rt_init with backend \"cuda\")"));
}

} // namespace

std::unique_ptr<Backend> loadCudaBackend(const CudaBackendOptions &options) {
  auto create = reinterpret_cast<CreateCudaBackendFn>(
      pluginSymbol(kCreateCudaBackendSymbol));
  return std::unique_ptr<Backend>(create(&options));
}

CudaBackend *currentCudaBackend() {
  Backend *backend = currentBackend();
  if (!backend || std::strcmp(backend->name(), "cuda") != 0)
    return nullptr;
  return static_cast<CudaBackend *>(backend);
}

} // namespace cleave::rt

using namespace cleave::rt;

extern "C" {

void cleave_rt_cuda_launch(void **function, void **module, const void *image,
                           const char *name, int64_t grid_x, int64_t grid_y,
                           int64_t grid_z, int64_t block_x, int64_t block_y,
                           int64_t block_z, int32_t shared_bytes, void **args) {
  if (hasFailed())
    return;
  guard("cuda_launch", 0, [&] {
    int64_t grid[3] = {grid_x, grid_y, grid_z};
    int64_t block[3] = {block_x, block_y, block_z};
    requireCuda().launch(function, module, image, name, grid, block,
                         shared_bytes, args);
    return 0;
  });
}

void *cleave_rt_cuda_alloc(int64_t bytes) {
  return guard("cuda_alloc", static_cast<void *>(nullptr), [&] {
    require(bytes >= 0, "cannot allocate ", bytes, " bytes");
    return requireCuda().deviceAlloc(bytes);
  });
}

void cleave_rt_cuda_free(void *ptr) {
  if (!ptr)
    return;
  guard("cuda_free", 0, [&] {
    requireCuda().deviceFree(ptr);
    return 0;
  });
}

void cleave_rt_cuda_step_begin(void) {
  guard("cuda_step_begin", 0, [&] {
    requireCuda().stepBegin();
    return 0;
  });
}

void cleave_rt_cuda_synchronize(void) {
  guard("cuda_synchronize", 0, [&] {
    requireCuda().synchronize();
    return 0;
  });
}

int32_t cleave_rt_cuda_device_count(char *why, int64_t why_size) {
  std::string reason;
  int count = -1;
  try {
    auto fn = reinterpret_cast<CudaDeviceCountFn>(
        pluginSymbol(kCudaDeviceCountSymbol));
    count = fn(&reason);
  } catch (const std::exception &e) {
    reason = e.what();
  }
  if (why && why_size > 0) {
    size_t n = std::min<size_t>(reason.size(), size_t(why_size - 1));
    std::memcpy(why, reason.data(), n);
    why[n] = '\0';
  }
  return count;
}

int32_t cleave_rt_cuda_device_info(int32_t ordinal, char *name,
                                   int64_t name_size, int32_t *major,
                                   int32_t *minor) {
  std::string text, why;
  int maj = 0, min = 0, rc = -1;
  try {
    auto fn =
        reinterpret_cast<CudaDeviceInfoFn>(pluginSymbol(kCudaDeviceInfoSymbol));
    rc = fn(ordinal, &text, &maj, &min, &why);
  } catch (const std::exception &e) {
    why = e.what();
  }
  if (rc != 0)
    text = why;
  if (name && name_size > 0) {
    size_t n = std::min<size_t>(text.size(), size_t(name_size - 1));
    std::memcpy(name, text.data(), n);
    name[n] = '\0';
  }
  if (major)
    *major = maj;
  if (minor)
    *minor = min;
  return rc;
}

void cleave_rt_cuda_gemm_epilogue(int32_t dtype, int32_t trans_a,
                                  int32_t trans_b, int64_t m, int64_t n,
                                  int64_t k, const void *a, int64_t lda,
                                  const void *b, int64_t ldb, void *c,
                                  int64_t ldc, int32_t epilogue,
                                  const void *bias) {
  if (hasFailed())
    return;
  guard("gemm_epilogue", 0, [&] {
    require(epilogue >= CLEAVE_EPILOGUE_NONE &&
                epilogue <= CLEAVE_EPILOGUE_GELU_BIAS,
            "unknown epilogue ", epilogue);
    require(epilogue == CLEAVE_EPILOGUE_NONE || bias,
            "the bias pointer is NULL");
    GemmArgs args{dtype,
                  trans_a != 0,
                  trans_b != 0,
                  1,
                  m,
                  n,
                  k,
                  1.0,
                  a,
                  lda,
                  0,
                  b,
                  ldb,
                  0,
                  0.0,
                  c,
                  ldc,
                  0};
    checkGemm(args);
    requireCuda().gemmEpilogue(args, epilogue, bias);
    return 0;
  });
}

} // extern "C"
