//===- AllocationCounter.h - Bytes malloc'ed by this process ----*- C++ -*-===//
//
// AllocationCounter.cpp defines malloc and friends in the benchmark's
// executable, forwarding to glibc and counting the usable size of every
// live block: the compiled training step allocates its buffers with malloc
// (memref.alloc), so the peak of the count over a step is the step's
// allocator peak, without the compiler's memory that a peak RSS includes.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_BENCH_REMAT_ALLOCATIONCOUNTER_H
#define CLEAVE_BENCH_REMAT_ALLOCATIONCOUNTER_H

#include <cstdint>

namespace cleave::bench {

/// Bytes allocated and not yet freed.
int64_t liveBytes();
/// Starts a new peak at the current live bytes.
void resetPeak();
/// The most bytes live at once since resetPeak().
int64_t peakBytes();

} // namespace cleave::bench

#endif // CLEAVE_BENCH_REMAT_ALLOCATIONCOUNTER_H
