//===- Memory.cpp - Allocation and time -----------------------------------===//
//
// Every allocation of the runtime's users goes through cleave_rt_alloc:
// the trainer's parameters and state, and the buffers of compiled CPU
// programs, which are lowered with MLIR's generic allocation functions
// (_mlir_memref_to_llvm_alloc/free, defined below). The sizes of live
// blocks are kept, so the program's memory can be reported exactly:
// cleave-run's peak memory is the peak of these bytes, and is what the cost
// model's memory prediction is compared with. Bulk copies between the
// buffers and host memory (checkpoints) go through the backend: memcpys on
// the cpu backend, DMA on the cuda backend's copy stream.
//
//===----------------------------------------------------------------------===//

#include "Env.h"
#include "Error.h"
#include "State.h"

#include "cleave/Runtime/Runtime.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

using namespace cleave::rt;

namespace {

/// Live bytes by block, and their peak. Allocations are few per step
/// (whole buffers, not elements), so one mutex is cheap.
class Accounting {
public:
  void added(void *ptr, int64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    sizes_[ptr] = bytes;
    live_ += bytes;
    peak_ = std::max(peak_, live_);
  }
  void removed(void *ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sizes_.find(ptr);
    if (it == sizes_.end())
      return;
    live_ -= it->second;
    sizes_.erase(it);
  }
  void stats(int64_t *live, int64_t *peak) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (live)
      *live = live_;
    if (peak)
      *peak = peak_;
  }
  void resetPeak() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_ = live_;
  }

private:
  std::mutex mutex_;
  std::unordered_map<void *, int64_t> sizes_;
  int64_t live_ = 0, peak_ = 0;
};

Accounting &accounting() {
  // Never destroyed: blocks may be freed by static destructors.
  static auto *instance = new Accounting;
  return *instance;
}

/// The copies of cleave_rt_copy_to_host / _from_host: memcpys without a
/// backend (as on the cpu backend), else the backend's.
int copyHost(const char *what, const cleave_rt_copy_t *copies, int64_t count,
             bool toHost) {
  return guard(what, -1, [&] {
    require(count >= 0 && (copies || count == 0), "cannot copy ", count,
            " blocks");
    std::vector<HostCopy> blocks;
    blocks.reserve(size_t(count));
    for (int64_t i = 0; i < count; ++i) {
      const cleave_rt_copy_t &c = copies[i];
      require(c.bytes >= 0 && ((c.dst && c.src) || c.bytes == 0), "block ", i,
              ": cannot copy ", c.bytes, " bytes from ", c.src, " to ", c.dst);
      if (c.bytes > 0)
        blocks.push_back({c.dst, c.src, size_t(c.bytes)});
    }
    if (Backend *backend = currentBackend())
      backend->copyHost(blocks.data(), blocks.size(), toHost);
    else
      for (const HostCopy &b : blocks)
        std::memcpy(b.dst, b.src, b.bytes);
    return 0;
  });
}

} // namespace

extern "C" {

void *cleave_rt_alloc(int64_t bytes) {
  return guard("alloc", static_cast<void *>(nullptr), [&]() -> void * {
    require(bytes >= 0, "cannot allocate ", bytes, " bytes");
    void *ptr;
    if (Backend *backend = currentBackend()) {
      ptr = backend->alloc(bytes);
    } else {
      size_t rounded = (size_t(std::max<int64_t>(bytes, 1)) + 63) & ~size_t(63);
      ptr = std::aligned_alloc(64, rounded);
      require(ptr, "cannot allocate ", bytes, " bytes");
    }
    accounting().added(ptr, bytes);
    return ptr;
  });
}

void cleave_rt_free(void *ptr) {
  if (!ptr)
    return;
  accounting().removed(ptr);
  if (Backend *backend = currentBackend())
    backend->free(ptr);
  else
    std::free(ptr);
}

void cleave_rt_memory_stats(int64_t *live, int64_t *peak) {
  accounting().stats(live, peak);
}

void cleave_rt_reset_peak_memory(void) { accounting().resetPeak(); }

/// What memref.alloc and memref.dealloc call in CPU programs lowered with
/// finalize-memref-to-llvm{use-generic-functions}. A failed allocation
/// returns null, as malloc would; the error is recorded for the trainer.
void *_mlir_memref_to_llvm_alloc(size_t bytes) {
  return cleave_rt_alloc(int64_t(bytes));
}
void _mlir_memref_to_llvm_free(void *ptr) { cleave_rt_free(ptr); }

double cleave_rt_now(void) { return monotonicSeconds(); }

int32_t cleave_rt_buffers_on_device(void) {
  Backend *backend = currentBackend();
  return backend && backend->buffersOnDevice() ? 1 : 0;
}

int cleave_rt_host_pin(void *ptr, int64_t bytes) {
  return guard("host_pin", -1, [&] {
    require(ptr && bytes >= 0, "cannot pin ", bytes,
            " bytes of host memory at ", ptr);
    if (Backend *backend = currentBackend())
      backend->pinHost(ptr, size_t(bytes));
    return 0;
  });
}

void cleave_rt_host_unpin(void *ptr) {
  if (Backend *backend = currentBackend(); backend && ptr)
    backend->unpinHost(ptr);
}

int cleave_rt_copy_to_host(const cleave_rt_copy_t *copies, int64_t count) {
  return copyHost("copy_to_host", copies, count, /*toHost=*/true);
}

int cleave_rt_copy_from_host(const cleave_rt_copy_t *copies, int64_t count) {
  return copyHost("copy_from_host", copies, count, /*toHost=*/false);
}

} // extern "C"
