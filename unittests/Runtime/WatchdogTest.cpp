//===- WatchdogTest.cpp - Mismatches and hung ranks, without debug flags --===//
//
// Calls that disagree across ranks, made through the C ABI on forked ranks
// with the default settings (no CLEAVE_DEBUG_COLLECTIVES) and a collective
// timeout of 30 s: every scenario must end on every rank with the runtime's
// named error, well before the timeout, without a crash and without
// finishing as if nothing happened. A stopped rank (SIGSTOP) is declared
// hung after the heartbeat timeout by every rank that waits for it, with or
// without the launcher (which kills it).
//
//===----------------------------------------------------------------------===//

#include "MultiProcess.h"

#include "cleave/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <functional>
#include <ostream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace cleave::test;

namespace {

bool has(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

/// The first line of `text` that starts with `prefix` ("" if none).
std::string lineWith(const std::string &text, const std::string &prefix) {
  for (size_t start = 0; start < text.size();) {
    size_t end = std::min(text.find('\n', start), text.size());
    if (text.compare(start, prefix.size(), prefix) == 0)
      return text.substr(start, end - start);
    start = end + 1;
  }
  return "";
}

/// Collective timeout of the scenarios: a verdict must come long before.
constexpr int64_t kTimeoutMs = 30000;

/// One scenario: `calls(rank)` makes this rank's (disagreeing) calls on a
/// world of `ranks`, after a matched all-reduce. Every rank must fail with a
/// message holding each of `expect` (with "{r}" replaced by the rank).
struct Scenario {
  const char *name;
  int ranks;
  std::function<void(int)> calls;
  std::vector<std::string> expect;
};

/// gtest prints a scenario by its name (not its bytes).
void PrintTo(const Scenario &s, std::ostream *os) { *os << s.name; }

/// Defines mesh [a = world] and groups 0 and 1 over axis a (the same ranks).
void defineTwoGroupsOverOneAxis(int world) {
  int64_t shape[] = {world};
  const char *names[] = {"a"};
  int64_t axis[] = {0};
  cleave_rt_define_mesh(1, shape, names);
  cleave_rt_define_group(0, 1, axis);
  cleave_rt_define_group(1, 1, axis);
}

std::vector<Scenario> scenarios() {
  auto allReduce = [](int32_t dtype, int32_t op, int64_t count) {
    static std::vector<double> x(64, 1.0);
    cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, dtype, op, x.data(), x.data(),
                         count);
  };
  static std::vector<double> x(64, 1.0), y(256, 0.0);
  return {
      {"OnlySomeRanksCall",
       3,
       [=](int rank) {
         if (rank < 2)
           allReduce(CLEAVE_F32, CLEAVE_SUM, 8);
         else
           cleave_rt_barrier(CLEAVE_WORLD_GROUP);
       },
       {"collective mismatch", "all_reduce(count 8, f32, sum)", "barrier("}},
      {"DifferentKinds",
       2,
       [=](int rank) {
         if (rank == 0)
           allReduce(CLEAVE_F32, CLEAVE_SUM, 8);
         else
           cleave_rt_all_gather(CLEAVE_WORLD_GROUP, CLEAVE_F32, x.data(),
                                y.data(), 8);
       },
       {"collective mismatch", "all_reduce(count 8, f32, sum)",
        "all_gather(count 8, f32)"}},
      {"DifferentCounts",
       2,
       [=](int rank) { allReduce(CLEAVE_F32, CLEAVE_SUM, rank ? 6 : 8); },
       {"collective mismatch", "all_reduce(count 8, f32, sum)",
        "all_reduce(count 6, f32, sum)"}},
      {"DifferentDTypesOfEqualSize",
       2,
       [=](int rank) {
         allReduce(rank ? CLEAVE_I32 : CLEAVE_F32, CLEAVE_SUM, 8);
       },
       {"collective mismatch", "all_reduce(count 8, f32, sum)",
        "all_reduce(count 8, i32, sum)"}},
      {"DifferentCountsInGloosRing",
       2,
       [=](int rank) {
         // Above the direct-algorithm size: inside Gloo's ring, whose waits
         // cannot be interrupted; the tripping rank ends its process.
         static std::vector<float> big(1 << 20, 1.0f);
         cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F32, CLEAVE_SUM,
                              big.data(), big.data(),
                              rank ? (1 << 20) - 64 : 1 << 20);
       },
       {"collective mismatch", "all_reduce(count 1048576, f32, sum)",
        "all_reduce(count 1048512, f32, sum)"}},
      {"DifferentReductions",
       2,
       [=](int rank) {
         allReduce(CLEAVE_F32, rank ? CLEAVE_MAX : CLEAVE_SUM, 8);
       },
       {"collective mismatch", "all_reduce(count 8, f32, sum)",
        "all_reduce(count 8, f32, max)"}},
      {"DifferentGroups",
       2,
       [=](int rank) {
         defineTwoGroupsOverOneAxis(2);
         cleave_rt_all_reduce(rank, CLEAVE_F32, CLEAVE_SUM, x.data(), x.data(),
                              8);
       },
       {"deadlock: rank {r} waits in call #1: all_reduce(count 8, f32, sum) "
        "on group {r}",
        "which waits in call #1: all_reduce(count 8, f32, sum) on group"}},
      {"BroadcastRoots",
       2,
       [=](int rank) {
         cleave_rt_broadcast(CLEAVE_WORLD_GROUP, rank, CLEAVE_F64, x.data(), 8);
       },
       {"collective mismatch", "broadcast(root 0, count 8, f64)",
        "broadcast(root 1, count 8, f64)"}},
      {"SendWithoutRecv",
       2,
       [=](int rank) {
         if (rank == 0)
           cleave_rt_send(CLEAVE_WORLD_GROUP, 1, CLEAVE_F32, x.data(), 4);
         else
           cleave_rt_barrier(CLEAVE_WORLD_GROUP);
       },
       {"deadlock: rank {r} waits in call #", "send(to group rank 1",
        "barrier("}},
      {"CrossingSends",
       2,
       [=](int rank) {
         cleave_rt_send(CLEAVE_WORLD_GROUP, 1 - rank, CLEAVE_F32, x.data(), 4);
       },
       {"point-to-point mismatch: rank {r} issued call #0: send(",
        "issued call #0: send(to group rank {r}"}},
      {"RecvOfTheWrongSize",
       2,
       [=](int rank) {
         if (rank == 0)
           cleave_rt_send(CLEAVE_WORLD_GROUP, 1, CLEAVE_F32, x.data(), 4);
         else
           cleave_rt_recv(CLEAVE_WORLD_GROUP, 0, CLEAVE_F32, y.data(), 8);
       },
       {"point-to-point mismatch", "send(to group rank 1, count 4, f32)",
        "recv(from group rank 0, count 8, f32)"}},
      {"RecvOfTheWrongDType",
       2,
       [=](int rank) {
         if (rank == 0)
           cleave_rt_send(CLEAVE_WORLD_GROUP, 1, CLEAVE_F32, x.data(), 4);
         else
           cleave_rt_recv(CLEAVE_WORLD_GROUP, 0, CLEAVE_I32, y.data(), 4);
       },
       {"point-to-point mismatch", "send(to group rank 1, count 4, f32)",
        "recv(from group rank 0, count 4, i32)"}},
      {"RecvFromTheWrongPeer",
       3,
       [=](int rank) {
         // Rank 0 sends to 1, which receives from 2, which is in a barrier.
         if (rank == 0)
           cleave_rt_send(CLEAVE_WORLD_GROUP, 1, CLEAVE_F32, x.data(), 4);
         else if (rank == 1)
           cleave_rt_recv(CLEAVE_WORLD_GROUP, 2, CLEAVE_F32, y.data(), 4);
         else
           cleave_rt_barrier(CLEAVE_WORLD_GROUP);
       },
       {"deadlock", "recv(from group rank 2, count 4, f32)", "barrier("}},
  };
}

class Mismatch : public ::testing::TestWithParam<Scenario> {};

TEST_P(Mismatch, EveryRankEndsWithANamedErrorBeforeTheTimeout) {
  const Scenario &s = GetParam();
  RunOptions options;
  options.timeoutMs = kTimeoutMs;
  options.deadlineSeconds = 25;
  options.env["CLEAVE_HEARTBEAT_MS"] = "200";
  auto body = [&](int rank) -> int {
    if (cleave_rt_init(nullptr) != 0) {
      std::fprintf(stderr, "init failed: %s\n", cleave_rt_error_message());
      return 1;
    }
    std::vector<float> warm(16, 1.0f);
    cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F32, CLEAVE_SUM,
                         warm.data(), warm.data(), 16);
    RT_CHECK(!cleave_rt_failed(), "%s", cleave_rt_error_message());
    s.calls(rank);
    if (!cleave_rt_failed()) {
      std::printf("FINISHED WITHOUT ERROR\n");
      std::fflush(nullptr);
      ::_exit(3);
    }
    std::printf("ERROR: %s\n", cleave_rt_error_message());
    std::fflush(nullptr);
    ::_exit(0);
  };
  auto results = runRanks(s.ranks, body, options);
  // Ranks that need a peer which already failed may also see it fail
  // (the peer closes its connections): every rank fails by name, and at
  // least one states the verdict.
  int verdicts = 0;
  for (int r = 0; r < s.ranks; ++r) {
    const RankResult &result = results[size_t(r)];
    // 0: the call returned the error; 1: the watchdog ended the process
    // because the call could not be interrupted (saying so).
    ASSERT_TRUE(result.exitCode == 0 ||
                (result.exitCode == 1 &&
                 has(result.output, "the call cannot be interrupted")))
        << describe(results);
    EXPECT_LT(result.seconds, 10.0) << describe(results);
    const std::string &out = result.output;
    EXPECT_TRUE(has(out, "rank " + std::to_string(r) + ": ")) << out;
    bool all = true;
    for (std::string part : s.expect) {
      size_t at = part.find("{r}");
      while (at != std::string::npos) {
        part.replace(at, 3, std::to_string(r));
        at = part.find("{r}");
      }
      all = all && has(out, part);
    }
    verdicts += all;
  }
  EXPECT_GE(verdicts, 1) << describe(results);
}

INSTANTIATE_TEST_SUITE_P(Watchdog, Mismatch, ::testing::ValuesIn(scenarios()),
                         [](const ::testing::TestParamInfo<Scenario> &info) {
                           return std::string(info.param.name);
                         });

/// A stopped rank (SIGSTOP) is declared hung by the others within the
/// heartbeat timeout; they exit naming it, and the launcher kills it.
TEST(Watchdog, StoppedRankIsDeclaredHung) {
  // Over the tcp store too, which rank 0 hosts: it must outlive the others'
  // verdicts.
  for (const char *rendezvous : {"file", "tcp"}) {
    auto body = [&](int) -> int {
      char *argv[] = {const_cast<char *>(CLEAVE_RUNTIME_WORKER),
                      const_cast<char *>("stop-rank-2"), nullptr};
      cleave_launch_options_t o{};
      o.nprocs = 3;
      o.argv = argv;
      o.prefix_output = 1;
      o.timeout_ms = kTimeoutMs;
      o.rendezvous = rendezvous;
      double t0 = cleave_rt_now();
      int rc = cleave_launch(&o);
      std::printf("RC=%d SECONDS=%.1f\n", rc, cleave_rt_now() - t0);
      return 0;
    };
    RunOptions options;
    options.deadlineSeconds = 25;
    options.env["CLEAVE_TIMEOUT_MS"] = std::to_string(kTimeoutMs);
    options.env["CLEAVE_HEARTBEAT_MS"] = "200";
    options.env["CLEAVE_HEARTBEAT_TIMEOUT_MS"] = "2000";
    RankResult r = runRanks(1, body, options)[0];
    ASSERT_EQ(r.exitCode, 0) << rendezvous << ": " << r.output;
    // Each waiting rank names rank 2 itself, not only the first to see it.
    for (int rank : {0, 1}) {
      std::string prefix = "[rank " + std::to_string(rank) + "] worker " +
                           std::to_string(rank) + ": rank " +
                           std::to_string(rank) + ": all_reduce on group -1";
      EXPECT_TRUE(has(lineWith(r.output, prefix),
                      "rank 2 is hung: its last heartbeat was"))
          << rendezvous << ": " << r.output;
    }
    EXPECT_TRUE(has(r.output, "rank 2 (pid")) << r.output;
    EXPECT_TRUE(has(r.output, "is stopped; killing it")) << r.output;
    EXPECT_TRUE(has(r.output, "RC=1 ")) << r.output;
    // Heartbeat timeout (2 s) plus 5 s.
    EXPECT_LT(r.seconds, 7.0) << r.output;
  }
}

/// The same without a launcher (as under torchrun: each rank a process of
/// its own, nobody kills the stopped one): the first waiting rank to see the
/// stale heartbeat aborts its connections, and the other, whose call fails
/// on them, names rank 2 too.
TEST(Watchdog, StoppedRankIsNamedByEveryWaitingRankWithoutLauncher) {
  for (bool tcp : {false, true}) {
    RunOptions options;
    options.tcp = tcp;
    options.timeoutMs = kTimeoutMs;
    // The stopped rank is killed by the harness at this deadline.
    options.deadlineSeconds = 6;
    options.env["CLEAVE_HEARTBEAT_MS"] = "200";
    options.env["CLEAVE_HEARTBEAT_TIMEOUT_MS"] = "2000";
    auto body = [&](int rank) -> int {
      // Ranks started at different times look at heartbeats at different
      // times: rank 1's watchdog runs half an interval after rank 0's, so
      // rank 0 is the first to see the stale heartbeat.
      if (rank == 1)
        ::usleep(100000);
      RT_CHECK(cleave_rt_init(nullptr) == 0, "%s", cleave_rt_error_message());
      std::vector<float> x(1 << 16, 1.0f);
      for (int it = 0; it < 1000; ++it) {
        if (rank == 2 && it == 3)
          std::raise(SIGSTOP);
        cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F32, CLEAVE_SUM,
                             x.data(), x.data(), int64_t(x.size()));
        if (cleave_rt_failed()) {
          std::printf("ERROR: %s\n", cleave_rt_error_message());
          return 1;
        }
      }
      return 0;
    };
    auto results = runRanks(3, body, options);
    EXPECT_TRUE(results[2].hung) << describe(results);
    for (int rank : {0, 1}) {
      const RankResult &result = results[size_t(rank)];
      EXPECT_EQ(result.exitCode, 1) << describe(results);
      EXPECT_TRUE(has(lineWith(result.output, "ERROR: "),
                      "rank 2 is hung: its last heartbeat was"))
          << (tcp ? "tcp: " : "file: ") << describe(results);
      // Heartbeat timeout (2 s) plus 5 s.
      EXPECT_LT(result.seconds, 7.0) << describe(results);
    }
  }
}

} // namespace
