//===- Selftest.h - Check a GPU machine with a bundle --------------*- C++
//-*-===//
//
// `DIR/run --selftest`: the GPUs, the collectives on them, training steps of
// the cuda build against the cpu build of the same program, a checkpoint
// round trip (resumed on cuda bit for bit, and across the two builds), and
// a throughput run against the cost model's prediction for the GPU kind, as
// a table (docs/cuda.md, "Running on a GPU cluster").
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TOOLS_SELFTEST_H
#define CLEAVE_TOOLS_SELFTEST_H

#include "BundleInfo.h"
#include <cstdint>

namespace cleave::bundle {

struct SelftestOptions {
  /// This runner (argv[0]): the training checks run it as child processes.
  const char *self;
  /// -n of the run (0: one rank or the launcher's).
  int nprocs;
  int64_t steps, throughputSteps;
  uint64_t seed;
};

/// The collectives check, run by the child process of --selftest (hidden
/// flag --selftest-collectives): "" or the first failure.
std::string selftestCollectives();

/// Runs the checks and prints the table; returns the exit status (1 if a
/// check failed).
int runSelftest(const BundleInfo &bundle, const SelftestOptions &options);

} // namespace cleave::bundle

#endif // CLEAVE_TOOLS_SELFTEST_H
