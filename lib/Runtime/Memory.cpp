//===- Memory.cpp - Allocation and time -----------------------------------===//

#include "Env.h"
#include "Error.h"
#include "State.h"

#include <cstdlib>

using namespace cleave::rt;

extern "C" {

void *cleave_rt_alloc(int64_t bytes) {
  return guard("alloc", static_cast<void *>(nullptr), [&]() -> void * {
    require(bytes >= 0, concat("cannot allocate ", bytes, " bytes"));
    if (Backend *backend = currentBackend())
      return backend->alloc(bytes);
    size_t rounded = (size_t(std::max<int64_t>(bytes, 1)) + 63) & ~size_t(63);
    void *ptr = std::aligned_alloc(64, rounded);
    require(ptr, concat("cannot allocate ", bytes, " bytes"));
    return ptr;
  });
}

void cleave_rt_free(void *ptr) {
  if (!ptr)
    return;
  if (Backend *backend = currentBackend())
    backend->free(ptr);
  else
    std::free(ptr);
}

double cleave_rt_now(void) { return monotonicSeconds(); }

} // extern "C"
