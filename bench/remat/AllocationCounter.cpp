//===- AllocationCounter.cpp - malloc that counts live bytes --------------===//
//
// glibc exports its allocator as __libc_malloc & co.; the definitions here
// interpose malloc for the whole process (the executable comes first in
// symbol lookup, for shared libraries and JIT-compiled code alike).
//
//===----------------------------------------------------------------------===//

#include "AllocationCounter.h"

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <malloc.h>

extern "C" {
void *__libc_malloc(size_t);
void __libc_free(void *);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);
}

namespace {
std::atomic<int64_t> live{0};
std::atomic<int64_t> peak{0};

void *counted(void *p) {
  if (p) {
    int64_t now = live.fetch_add(int64_t(malloc_usable_size(p))) +
                  int64_t(malloc_usable_size(p));
    int64_t old = peak.load(std::memory_order_relaxed);
    while (now > old && !peak.compare_exchange_weak(old, now))
      ;
  }
  return p;
}

void uncount(void *p) {
  if (p)
    live.fetch_sub(int64_t(malloc_usable_size(p)));
}
} // namespace

int64_t cleave::bench::liveBytes() { return live.load(); }
void cleave::bench::resetPeak() { peak.store(live.load()); }
int64_t cleave::bench::peakBytes() { return peak.load(); }

extern "C" {
void *malloc(size_t n) { return counted(__libc_malloc(n)); }
void free(void *p) {
  uncount(p);
  __libc_free(p);
}
void *calloc(size_t n, size_t size) { return counted(__libc_calloc(n, size)); }
void *realloc(void *p, size_t n) {
  uncount(p);
  return counted(__libc_realloc(p, n));
}
void *memalign(size_t align, size_t n) {
  return counted(__libc_memalign(align, n));
}
void *aligned_alloc(size_t align, size_t n) {
  return counted(__libc_memalign(align, n));
}
int posix_memalign(void **out, size_t align, size_t n) {
  void *p = __libc_memalign(align, n);
  if (!p)
    return ENOMEM;
  *out = counted(p);
  return 0;
}
} // extern "C"
