//===- GpuTestUtil.h - Skipping GPU tests where there is no GPU -*- C++ -*-===//
//
// Tests that need CUDA devices ask REQUIRE_GPUS(n) first; on a machine with
// fewer devices (or no driver) they are skipped with the reason, and ctest
// reports them as skipped (SKIP_REGULAR_EXPRESSION in CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_UNITTESTS_CUDA_GPUTESTUTIL_H
#define CLEAVE_UNITTESTS_CUDA_GPUTESTUTIL_H

#include <string>

namespace cleave::test {

struct GpuInfo {
  int count = -1;  ///< -1: no usable driver.
  std::string why; ///< The reason when count <= 0.
};

/// The devices a fresh process sees. Asked in a child process: a parent
/// that initialized CUDA cannot fork ranks that use it.
const GpuInfo &gpus();

} // namespace cleave::test

/// Skips the test unless `n` CUDA devices are present.
#define REQUIRE_GPUS(n)                                                        \
  do {                                                                         \
    const ::cleave::test::GpuInfo &info_ = ::cleave::test::gpus();             \
    if (info_.count < (n))                                                     \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s); "                   \
                   << (info_.count < 0                                         \
                           ? "no CUDA device: " + info_.why                    \
                           : "found " + std::to_string(info_.count));          \
  } while (0)

#endif // CLEAVE_UNITTESTS_CUDA_GPUTESTUTIL_H
