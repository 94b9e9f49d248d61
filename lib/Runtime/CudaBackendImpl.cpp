//===- CudaBackendImpl.cpp - The cuda backend -----------------------------===//
//
// libCleaveRuntimeCuda: the Backend of CudaBackend.h on the CUDA driver API
// (kernels, memory, streams), cuBLASLt (GEMMs) and NCCL (groups). Buffers
// that host tools allocate (cleave_rt_alloc) are managed memory preferring
// the device, so hosts fill and read them as on the cpu backend; buffers of
// generated code come from the device's stream-ordered pool, which caches
// freed memory (release threshold: never). Checkpoints move the managed
// buffers to and from pinned host memory in bulk, on a copy stream.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"
#include "CudaGemm.h"
#include "CudaProfile.h"
#include "DType.h"
#include "Env.h"
#include "Error.h"
#include "NcclCommunicator.h"
#include "State.h"

#include "cleave/Runtime/CudaRuntime.h"

#include <cstdint>
#include <iostream>
#include <limits>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

namespace cleave::rt {
namespace {

class CudaBackendImpl final : public CudaBackend, public NcclHost {
public:
  explicit CudaBackendImpl(const CudaBackendOptions &options)
      : options_(options), device_(options.localRank), gemm_(device_),
        profile_(options.rank), watchdog_(device_, options.timeoutMs,
                                          envInt("CLEAVE_NCCL_POLL_MS", 20)) {
    cudaCheck(cuDeviceGetDefaultMemPool(&pool_, device_.device()),
              "getting the device's memory pool");
    // Keep freed memory in the pool: steps allocate the same sizes again.
    uint64_t never = std::numeric_limits<uint64_t>::max();
    cudaCheck(
        cuMemPoolSetAttribute(pool_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &never),
        "configuring the memory pool");
    if (getEnv("NCCL_DEBUG"))
      std::cerr << "cleave: rank " << options.rank << ": cuda backend on "
                << device_.describe() << "\n";
  }

  ~CudaBackendImpl() override {
    try {
      device_.makeCurrent();
      device_.wait(device_.compute(), [] { return hasFailed(); });
      if (copyStream_)
        cuStreamSynchronize(copyStream_);
      device_.destroyStream(copyStream_);
    } catch (const std::exception &) {
    }
  }

  const char *name() const override { return "cuda"; }
  CudaDevice &device() override { return device_; }

  std::unique_ptr<Communicator> connect(const GroupInfo &group, KvStore &store,
                                        const std::string &prefix) override {
    device_.makeCurrent();
    if (group.id == -1) {
      auto world = NcclCommunicator::connectWorld(*this, watchdog_, group,
                                                  store, prefix);
      world_ = world.get();
      return world;
    }
    require(world_, "groups are split from the world communicator, which "
                    "does not exist (world size 1?)");
    return NcclCommunicator::split(*world_, group);
  }

  void gemm(const GemmArgs &args) override {
    checkGemm(args);
    requireGpuOperands(args, nullptr);
    if (profile_.enabled())
      profile_.begin(gemmName(args, "gemm"), device_.compute());
    gemm_.run(args, CLEAVE_EPILOGUE_NONE, nullptr, device_.compute());
    if (profile_.enabled())
      profile_.end(device_.compute());
    afterCall();
  }

  void gemmEpilogue(const GemmArgs &args, int32_t epilogue,
                    const void *bias) override {
    requireGpuOperands(args, bias);
    if (profile_.enabled())
      profile_.begin(gemmName(args, epilogue == CLEAVE_EPILOGUE_BIAS
                                        ? "gemm+bias"
                                        : "gemm+bias+gelu"),
                     device_.compute());
    gemm_.run(args, epilogue, bias, device_.compute());
    if (profile_.enabled())
      profile_.end(device_.compute());
    afterCall();
  }

  /// Host-visible buffers (cleave_rt_alloc): managed memory on the device.
  void *alloc(int64_t bytes) override {
    size_t size = size_t(std::max<int64_t>(bytes, 1));
    CUdeviceptr ptr;
    cudaCheck(cuMemAllocManaged(&ptr, size, CU_MEM_ATTACH_GLOBAL),
              "allocating ", bytes, " bytes of managed memory on ",
              device_.describe());
    CUmemLocation location{};
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = device_.ordinal();
    // Advice only: a failure leaves the memory usable.
    cuMemAdvise(ptr, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, location);
    return reinterpret_cast<void *>(ptr);
  }

  void free(void *ptr) override {
    device_.wait(device_.compute(), [] { return hasFailed(); });
    cuMemFree(reinterpret_cast<CUdeviceptr>(ptr));
  }

  void copy(void *dst, const void *src, size_t bytes) override {
    cudaCheck(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                            reinterpret_cast<CUdeviceptr>(src), bytes,
                            device_.compute()),
              "copying device memory");
    afterCall();
  }

  void zero(void *dst, size_t bytes) override {
    cudaCheck(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(dst), 0, bytes,
                              device_.compute()),
              "zeroing device memory");
    afterCall();
  }

  /// cleave_rt_alloc's buffers are managed memory preferring the device.
  bool buffersOnDevice() const override { return true; }

  /// Page-locked host memory: the copies below are then DMA, asynchronous
  /// to the host, at the bus's bandwidth (pageable memory is staged by the
  /// driver through its own pinned buffers, a chunk at a time).
  void pinHost(void *ptr, size_t bytes) override {
    device_.makeCurrent();
    cudaCheck(cuMemHostRegister(ptr, bytes, 0), "page-locking ", bytes,
              " bytes of host memory at ", ptr, " for copies with ",
              device_.describe());
  }

  void unpinHost(void *ptr) override {
    // Memory that was not pinned (or not by this context) stays as it is.
    try {
      device_.makeCurrent();
    } catch (const std::exception &) {
      return;
    }
    cuMemHostUnregister(ptr);
  }

  /// Checkpoint snapshots and restores: every block on the copy stream, a
  /// stream of its own that first waits (through an event) for the work
  /// enqueued on the compute stream so far, then one wait on the host. The
  /// training thread waits for the copies only.
  void copyHost(const HostCopy *copies, size_t count, bool toHost) override {
    if (count == 0)
      return;
    device_.makeCurrent();
    if (!copyStream_)
      cudaCheck(cuStreamCreate(&copyStream_, CU_STREAM_NON_BLOCKING),
                "creating the copy stream");
    device_.order(device_.compute(), copyStream_);
    const char *direction = toHost ? "to host memory" : "from host memory";
    for (size_t i = 0; i < count; ++i)
      cudaCheck(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(copies[i].dst),
                              reinterpret_cast<CUdeviceptr>(copies[i].src),
                              copies[i].bytes, copyStream_),
                "enqueueing a copy of ", copies[i].bytes, " bytes ", direction,
                " (block ", i, " of ", count, ")");
    // No early exit on another thread's failure: the copies are local and
    // short, and the host memory must not be reused while they run.
    CUresult r = device_.wait(copyStream_, nullptr);
    cudaCheck(r, "copying ", count, " buffers ", direction, " on ",
              device_.describe());
  }

  void launch(void **function, void **module, const void *image,
              const char *name, const int64_t grid[3], const int64_t block[3],
              int32_t sharedBytes, void **args) override {
    // The slots are the generated code's globals; a handle counts only if
    // this backend (this context) put it there, so a program that outlives
    // a cleave_rt_finalize loads its kernels again.
    auto known = functions_.find(function);
    if (known == functions_.end() || known->second != *function)
      lookUp(function, module, image, name);
    if (profile_.enabled())
      profile_.begin(name, device_.compute());
    cudaCheck(
        cuLaunchKernel(static_cast<CUfunction>(*function), unsigned(grid[0]),
                       unsigned(grid[1]), unsigned(grid[2]), unsigned(block[0]),
                       unsigned(block[1]), unsigned(block[2]),
                       unsigned(sharedBytes), device_.compute(), args, nullptr),
        "launching kernel ", name, " (", grid[0], " blocks of ", block[0],
        " threads)");
    if (profile_.enabled())
      profile_.end(device_.compute());
    afterCall();
  }

  void *deviceAlloc(int64_t bytes) override {
    CUdeviceptr ptr;
    cudaCheck(cuMemAllocFromPoolAsync(&ptr, size_t(std::max<int64_t>(bytes, 1)),
                                      pool_, device_.compute()),
              "allocating ", bytes, " bytes on ", device_.describe());
    return reinterpret_cast<void *>(ptr);
  }

  void deviceFree(void *ptr) override {
    if (hasFailed())
      return;
    cudaCheck(
        cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(ptr), device_.compute()),
        "freeing device memory");
  }

  void stepBegin() override {
    device_.makeCurrent();
    inStep_ = true;
    if (profile_.enabled())
      profile_.countStep();
  }

  void synchronize() override {
    inStep_ = false;
    waitCompute();
    if (profile_.enabled())
      profile_.collect();
  }

  /// Outside a step every call completes before it returns.
  void afterCall() override {
    if (!inStep_)
      waitCompute();
  }

  /// Asynchronous requests need no host thread: NCCL calls are enqueued
  /// on their communicator's stream at the start, and the compute stream
  /// waits for them at the wait.
  bool ordersOnDevice() const override { return true; }

  void beginDeferred() override {
    std::lock_guard<std::mutex> lock(deferredMutex_);
    deferring_ = std::this_thread::get_id();
  }

  int64_t endDeferred() override {
    std::lock_guard<std::mutex> lock(deferredMutex_);
    deferring_ = std::thread::id();
    if (deferred_.empty())
      return 0;
    int64_t token = nextToken_++;
    tokens_[token] = std::move(deferred_);
    deferred_.clear();
    return token;
  }

  bool defer(CUstream stream) override {
    std::lock_guard<std::mutex> lock(deferredMutex_);
    if (deferring_ != std::this_thread::get_id())
      return false;
    deferred_.push_back(device_.record(stream));
    return true;
  }

  void awaitDeferred(int64_t token) override {
    std::vector<CUevent> events;
    {
      std::lock_guard<std::mutex> lock(deferredMutex_);
      auto it = tokens_.find(token);
      require(it != tokens_.end(), "no deferred communication with token ",
              token);
      events = std::move(it->second);
      tokens_.erase(it);
    }
    CUresult r = CUDA_SUCCESS;
    for (CUevent e : events) {
      // The wait takes the event's state now: the event can be reused.
      if (r == CUDA_SUCCESS)
        r = cuStreamWaitEvent(device_.compute(), e, 0);
      device_.releaseEvent(e);
    }
    cudaCheck(r, "ordering the compute stream after a request");
    afterCall();
  }

private:
  /// A GEMM's name in the profile: "cuBLASLt gemm bf16 [b x] m x n x k".
  /// Leading dimensions other than the matrix's width, and beta, are named:
  /// they change which algorithm cuBLASLt picks.
  static std::string gemmName(const GemmArgs &g, const char *what) {
    int64_t denseA = g.transA ? g.m : g.k, denseB = g.transB ? g.k : g.n;
    return concat("cuBLASLt ", what, " ", dtypeName(g.dtype), " ",
                  g.batch > 1 ? concat(g.batch, " x ") : std::string(), g.m,
                  " x ", g.n, " x ", g.k, g.transA ? " (A^T)" : "",
                  g.transB ? " (B^T)" : "",
                  g.lda != denseA ? concat(" lda ", g.lda) : std::string(),
                  g.ldb != denseB ? concat(" ldb ", g.ldb) : std::string(),
                  g.ldc != g.n ? concat(" ldc ", g.ldc) : std::string(),
                  g.beta != 0 ? " beta 1" : "");
  }

  /// cuBLASLt reads its operands on the GPU: pageable host memory there is
  /// an illegal address that kills the context, so it is refused first (one
  /// driver query per operand).
  void requireGpuOperands(const GemmArgs &args, const void *bias) {
    std::pair<const char *, const void *> operands[] = {
        {"a", args.a}, {"b", args.b}, {"c", args.c}, {"bias", bias}};
    for (auto [name, ptr] : operands) {
      if (!ptr)
        continue;
      unsigned type = 0;
      CUresult r =
          cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                reinterpret_cast<CUdeviceptr>(ptr));
      require(r == CUDA_SUCCESS, "operand ", name, " at ", ptr,
              " is not GPU memory (host memory? the cuda backend's "
              "buffers come from cleave_rt_alloc or the program's "
              "device allocations)");
    }
  }

  /// Loads the cubin (once per module slot) and looks the kernel up.
  void lookUp(void **function, void **module, const void *image,
              const char *name) {
    auto loaded = modules_.find(module);
    if (loaded == modules_.end() || loaded->second != *module) {
      CUmodule handle;
      cudaCheck(cuModuleLoadData(&handle, image),
                "loading the program's kernels on ", device_.describe(),
                " (a cubin for another GPU?)");
      *module = handle;
      modules_[module] = handle;
    }
    CUfunction handle;
    cudaCheck(
        cuModuleGetFunction(&handle, static_cast<CUmodule>(*module), name),
        "looking up kernel ", name);
    *function = handle;
    functions_[function] = handle;
  }

  void waitCompute() {
    CUresult r = device_.wait(device_.compute(), [] { return hasFailed(); });
    if (watchdog_.fired() && !reported_) {
      // The watchdog recorded the failure; the flight recorder is written
      // from this thread, which owns it.
      reported_ = true;
      if (RuntimeState *state = runtimeState())
        dumpFlightRecorder(*state);
    }
    if (hasFailed())
      throw CommError(CommError::Other, errorText());
    if (r != CUDA_SUCCESS)
      throw RuntimeError(concat("the GPU failed while running the step on ",
                                device_.describe(), ": ", cudaErrorText(r)));
  }

  CudaBackendOptions options_;
  CudaDevice device_;
  CudaGemm gemm_;
  CudaProfile profile_;
  NcclWatchdog watchdog_;
  CUmemoryPool pool_ = nullptr;
  /// The stream of copyHost (created at the first copy).
  CUstream copyStream_ = nullptr;
  NcclCommunicator *world_ = nullptr;
  std::unordered_map<void **, void *> modules_, functions_;
  bool inStep_ = false;
  bool reported_ = false;
  /// Deferred completions (ordersOnDevice): the thread deferring now, the
  /// events of its calls so far, and the events of each token not waited.
  std::mutex deferredMutex_;
  std::thread::id deferring_;
  std::vector<CUevent> deferred_;
  std::unordered_map<int64_t, std::vector<CUevent>> tokens_;
  int64_t nextToken_ = 1;
};

} // namespace
} // namespace cleave::rt

using namespace cleave::rt;

extern "C" {

/// Creates the backend; throws RuntimeError ("no CUDA device: ...").
__attribute__((visibility("default"))) Backend *
cleave_rt_cuda_plugin_create_backend(const CudaBackendOptions *options) {
  return new CudaBackendImpl(*options);
}

__attribute__((visibility("default"))) int
cleave_rt_cuda_plugin_device_count(std::string *why) {
  return cudaDeviceCount(*why);
}

__attribute__((visibility("default"))) int
cleave_rt_cuda_plugin_device_info(int ordinal, std::string *name, int *major,
                                  int *minor, std::string *why) {
  return cudaDeviceInfo(ordinal, *name, *major, *minor, *why) ? 0 : -1;
}

} // extern "C"
