//===- RuntimeWorker.cpp - A rank program for launcher tests --------------===//
//
// cleave-runtime-worker allreduce: init from the launcher's environment,
// all-reduce the ranks, check, finalize. Exit 0 on success.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/Runtime.h"

#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char **argv) {
  if (argc < 2 || std::strcmp(argv[1], "allreduce") != 0) {
    std::fprintf(stderr, "usage: %s allreduce\n", argv[0]);
    return 2;
  }
  if (cleave_rt_init(nullptr) != 0) {
    std::fprintf(stderr, "%s\n", cleave_rt_error_message());
    return 1;
  }
  int rank = cleave_rt_rank(), size = cleave_rt_world_size();
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
