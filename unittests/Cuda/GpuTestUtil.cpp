//===- GpuTestUtil.cpp - Skipping GPU tests where there is no GPU ---------===//

#include "GpuTestUtil.h"
#include "MultiProcess.h"

#include "cleave/Runtime/CudaRuntime.h"

#include <cstdio>

namespace cleave::test {

const GpuInfo &gpus() {
  static const GpuInfo info = [] {
    GpuInfo g;
    std::vector<RankResult> results = runRanks(1, [](int) {
      char why[512] = {};
      int n = cleave_rt_cuda_device_count(why, sizeof(why));
      std::printf("%s", why);
      std::fflush(stdout);
      return n < 0 ? 255 : std::min(n, 64);
    });
    const RankResult &r = results.front();
    g.count = r.exitCode == 255 || r.exitCode < 0 ? -1 : r.exitCode;
    g.why = r.output;
    while (!g.why.empty() && (g.why.back() == '\n' || g.why.back() == ' '))
      g.why.pop_back();
    if (r.exitCode < 0)
      g.why = "probing the driver crashed: " + r.output;
    return g;
  }();
  return info;
}

} // namespace cleave::test
