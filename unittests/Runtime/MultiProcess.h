//===- MultiProcess.h - Run a test body as N forked ranks -------*- C++ -*-===//
//
// runRanks() forks one child per rank with RANK / WORLD_SIZE / LOCAL_RANK and
// CLEAVE_RENDEZVOUS set (a fresh directory, or tcp on a free port), runs the
// body there, and collects each child's exit status and output. A hard
// deadline kills children that hang, so a broken runtime fails the test
// instead of hanging ctest.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_UNITTESTS_RUNTIME_MULTIPROCESS_H
#define CLEAVE_UNITTESTS_RUNTIME_MULTIPROCESS_H

#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace cleave::test {

struct RankResult {
  int exitCode = -1; ///< -1 when killed by a signal.
  int signal = 0;
  bool hung = false;  ///< Killed by the harness deadline.
  double seconds = 0; ///< Wall time until the child ended.
  std::string output; ///< stdout and stderr, interleaved.
};

struct RunOptions {
  bool tcp = false;            ///< tcp://127.0.0.1:port instead of file:.
  int64_t timeoutMs = 5000;    ///< CLEAVE_TIMEOUT_MS of the ranks.
  double deadlineSeconds = 60; ///< Harness kill deadline.
  std::map<std::string, std::string> env; ///< Extra variables.
};

/// Runs `body(rank)` in `n` children; its return value is the exit code.
std::vector<RankResult> runRanks(int n, const std::function<int(int)> &body,
                                 const RunOptions &options = {});

/// Prints every rank's output (for test failure messages).
std::string describe(const std::vector<RankResult> &results);

/// In a child: prints the message and returns 1 when `cond` is false.
#define RT_CHECK(cond, ...)                                                    \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "CHECK FAILED %s:%d: %s: ", __FILE__, __LINE__,     \
                   #cond);                                                     \
      std::fprintf(stderr, __VA_ARGS__);                                       \
      std::fprintf(stderr, "\n");                                              \
      return 1;                                                                \
    }                                                                          \
  } while (0)

} // namespace cleave::test

#endif // CLEAVE_UNITTESTS_RUNTIME_MULTIPROCESS_H
