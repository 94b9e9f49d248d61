//===- RuntimeWorker.cpp - A rank program for launcher tests --------------===//
//
// cleave-runtime-worker allreduce: init from the launcher's environment,
// all-reduce the ranks, check, finalize. Exit 0 on success.
// cleave-runtime-worker stop-rank-2: all-reduce in a loop; rank 2 stops
// itself (SIGSTOP) at the fourth; the others print their error, exit 1.
// Rank 1 starts 100 ms late (its heartbeats are out of phase with rank 0's).
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/Runtime.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <vector>

/// The stop-rank-2 mode.
static int stopRank2(int rank) {
  std::vector<float> x(1 << 16, 1.0f);
  for (int it = 0; it < 1000; ++it) {
    if (rank == 2 && it == 3)
      std::raise(SIGSTOP);
    cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F32, CLEAVE_SUM, x.data(),
                         x.data(), int64_t(x.size()));
    if (cleave_rt_failed()) {
      std::printf("worker %d: %s\n", rank, cleave_rt_error_message());
      return 1;
    }
  }
  std::printf("worker %d: never stopped\n", rank);
  return 0;
}

int main(int argc, char **argv) {
  bool stop = argc == 2 && std::strcmp(argv[1], "stop-rank-2") == 0;
  if (argc < 2 || (!stop && std::strcmp(argv[1], "allreduce") != 0)) {
    std::fprintf(stderr, "usage: %s allreduce|stop-rank-2\n", argv[0]);
    return 2;
  }
  // Stopping: rank 1 starts 100 ms late, so its watchdog does not run at the
  // same moments as rank 0's (as with ranks started at different times).
  const char *rankVar = std::getenv("RANK");
  if (stop && rankVar && std::strcmp(rankVar, "1") == 0)
    ::usleep(100000);
  if (cleave_rt_init(nullptr) != 0) {
    std::fprintf(stderr, "%s\n", cleave_rt_error_message());
    return 1;
  }
  int rank = cleave_rt_rank(), size = cleave_rt_world_size();
  if (stop)
    return stopRank2(rank);
  std::vector<double> x(1000, double(rank + 1));
  cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F64, CLEAVE_SUM, x.data(),
                       x.data(), 1000);
  if (cleave_rt_failed() || x[999] != size * (size + 1) / 2.0) {
    std::fprintf(stderr, "worker %d: %s (got %g)\n", rank,
                 cleave_rt_error_message(), x[999]);
    return 1;
  }
  std::printf("worker %d/%d: all_reduce ok\n", rank, size);
  cleave_rt_finalize();
  return 0;
}
