//===- AsyncTest.cpp - Start/wait requests on forked ranks ----------------===//
//
// The asynchronous entry points (Async.cpp): results equal the blocking
// calls', starts return before the peers arrive, blocking calls made while
// requests are in flight keep program order, errors raised on the progress
// thread surface at the wait naming rank and op, and bad handles are named.
//
//===----------------------------------------------------------------------===//

#include "MultiProcess.h"

#include "cleave/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace cleave::test;

namespace {

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

#define RT_OK()                                                                \
  RT_CHECK(!cleave_rt_failed(), "runtime error: %s", cleave_rt_error_message())

/// Every asynchronous op on 2 ranks, interleaved with a blocking all_reduce
/// issued while they are in flight; values as the blocking calls give.
int everyOpBody(int rank) {
  if (cleave_rt_init(nullptr) != 0)
    return 1;
  const int64_t n = 1000;
  std::vector<float> x(2 * n), sum(2 * n), gathered(4 * n), scattered(n),
      blocking(8, float(rank + 1)), received(n);
  for (int64_t i = 0; i < 2 * n; ++i)
    x[i] = float(rank * 10000 + i);
  int64_t ar = cleave_rt_all_reduce_start(-1, CLEAVE_F32, CLEAVE_SUM, x.data(),
                                          sum.data(), 2 * n);
  int64_t ag = cleave_rt_all_gather_start(-1, CLEAVE_F32, x.data(),
                                          gathered.data(), 2 * n);
  // A blocking call while requests are pending runs after them.
  cleave_rt_all_reduce(-1, CLEAVE_F32, CLEAVE_MAX, blocking.data(),
                       blocking.data(), 8);
  int64_t rs = cleave_rt_reduce_scatter_start(-1, CLEAVE_F32, CLEAVE_SUM,
                                              x.data(), scattered.data(), n);
  // Point to point in both directions, started in opposite orders.
  int64_t p2p[2];
  if (rank == 0) {
    p2p[0] = cleave_rt_send_start(-1, 1, CLEAVE_F32, x.data(), n);
    p2p[1] = cleave_rt_recv_start(-1, 1, CLEAVE_F32, received.data(), n);
  } else {
    p2p[0] = cleave_rt_recv_start(-1, 0, CLEAVE_F32, received.data(), n);
    p2p[1] = cleave_rt_send_start(-1, 0, CLEAVE_F32, x.data(), n);
  }
  RT_CHECK(ar > 0 && ag > 0 && rs > 0, "handles must be positive");
  // Waited out of order.
  RT_CHECK(cleave_rt_wait(rs, x.data(), scattered.data(), nullptr) == 0,
           "rs: %s", cleave_rt_error_message());
  RT_CHECK(cleave_rt_wait(ag, x.data(), gathered.data(), nullptr) == 0,
           "ag: %s", cleave_rt_error_message());
  RT_CHECK(cleave_rt_wait(ar, nullptr, nullptr, nullptr) == 0, "ar: %s",
           cleave_rt_error_message());
  for (int64_t h : p2p)
    RT_CHECK(cleave_rt_wait(h, nullptr, nullptr, nullptr) == 0, "p2p: %s",
             cleave_rt_error_message());
  RT_OK();
  for (int64_t i = 0; i < 2 * n; ++i) {
    RT_CHECK(sum[i] == float(10000 + 2 * i), "sum[%ld] = %f", long(i), sum[i]);
    RT_CHECK(gathered[i] == float(i) && gathered[2 * n + i] == float(10000 + i),
             "gathered[%ld]", long(i));
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t g = rank * n + i;
    RT_CHECK(scattered[i] == float(10000 + 2 * g), "scattered[%ld]", long(i));
    RT_CHECK(received[i] == float((1 - rank) * 10000 + i), "received[%ld]",
             long(i));
  }
  RT_CHECK(blocking[0] == 2.0f, "blocking max %f", blocking[0]);
  cleave_rt_finalize();
  return 0;
}

TEST(Async, EveryOpEqualsBlocking) {
  auto results = runRanks(2, everyOpBody);
  for (const RankResult &r : results)
    ASSERT_EQ(r.exitCode, 0) << describe(results);
}

TEST(Async, EveryOpEqualsBlockingWithoutThread) {
  RunOptions options;
  options.env["CLEAVE_ASYNC"] = "0";
  auto results = runRanks(2, everyOpBody, options);
  for (const RankResult &r : results)
    ASSERT_EQ(r.exitCode, 0) << describe(results);
}

/// all_to_all and collective_permute started on 3 ranks (a ring shift
/// whose pairs array is overwritten right after the start: the request has
/// its own copy), waited in reverse order; values as the blocking calls.
int exchangeBody(int rank) {
  if (cleave_rt_init(nullptr) != 0)
    return 1;
  const int n = 3;
  const int64_t block = 333;
  std::vector<float> x(n * block), a2a(n * block), shifted(n * block),
      blocking(n * block);
  for (int64_t i = 0; i < n * block; ++i)
    x[i] = float(rank * 100000 + i);
  int64_t pairs[] = {0, 1, 1, 2, 2, 0};
  int64_t a =
      cleave_rt_all_to_all_start(-1, CLEAVE_F32, x.data(), a2a.data(), block);
  int64_t p = cleave_rt_collective_permute_start(
      -1, CLEAVE_F32, x.data(), shifted.data(), n * block, 3, pairs);
  for (int64_t &v : pairs)
    v = -7; // The request must not read these.
  cleave_rt_all_to_all(-1, CLEAVE_F32, x.data(), blocking.data(), block);
  RT_CHECK(cleave_rt_wait(p, x.data(), shifted.data(), nullptr) == 0,
           "permute: %s", cleave_rt_error_message());
  RT_CHECK(cleave_rt_wait(a, x.data(), a2a.data(), nullptr) == 0, "a2a: %s",
           cleave_rt_error_message());
  RT_OK();
  int from = (rank + n - 1) % n;
  for (int64_t i = 0; i < n * block; ++i) {
    // Block j of the result is block `rank` of rank j's input.
    int64_t j = i / block, k = i % block;
    float want = float(j * 100000 + rank * block + k);
    RT_CHECK(a2a[i] == want && blocking[i] == want, "a2a[%ld] = %f, want %f",
             long(i), a2a[i], want);
    RT_CHECK(shifted[i] == float(from * 100000 + i), "shifted[%ld] = %f",
             long(i), shifted[i]);
  }
  cleave_rt_finalize();
  return 0;
}

TEST(Async, AllToAllAndPermuteEqualBlocking) {
  auto results = runRanks(3, exchangeBody);
  for (const RankResult &r : results)
    ASSERT_EQ(r.exitCode, 0) << describe(results);
}

TEST(Async, AllToAllAndPermuteEqualBlockingWithoutThread) {
  RunOptions options;
  options.env["CLEAVE_ASYNC"] = "0";
  auto results = runRanks(3, exchangeBody, options);
  for (const RankResult &r : results)
    ASSERT_EQ(r.exitCode, 0) << describe(results);
}

/// A start returns while its peer is still away; the wait blocks for it.
TEST(Async, StartReturnsBeforeThePeerArrives) {
  auto body = [](int rank) -> int {
    if (cleave_rt_init(nullptr) != 0)
      return 1;
    std::vector<float> x(1 << 16, 1.0f);
    if (rank == 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
    double t0 = cleave_rt_now();
    int64_t r = cleave_rt_all_reduce_start(-1, CLEAVE_F32, CLEAVE_SUM, x.data(),
                                           x.data(), x.size());
    double started = cleave_rt_now() - t0;
    RT_CHECK(cleave_rt_wait(r, x.data(), x.data(), nullptr) == 0, "%s",
             cleave_rt_error_message());
    double waited = cleave_rt_now() - t0;
    RT_CHECK(x[0] == 2.0f, "sum %f", x[0]);
    if (rank == 0) {
      RT_CHECK(started < 0.1, "start took %f s", started);
      RT_CHECK(waited > 0.3, "wait returned after %f s", waited);
    }
    cleave_rt_finalize();
    return 0;
  };
  auto results = runRanks(2, body);
  for (const RankResult &r : results)
    ASSERT_EQ(r.exitCode, 0) << describe(results);
}

/// A timeout on the progress thread: the start returns, the wait fails with
/// the blocking call's wording, and the flight recorder is dumped.
TEST(Async, ErrorOnTheProgressThreadSurfacesAtWait) {
  RunOptions options;
  options.timeoutMs = 1500;
  auto body = [](int rank) -> int {
    if (cleave_rt_init(nullptr) != 0)
      return 1;
    std::vector<float> x(100, 1.0f);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(4));
      std::fflush(nullptr);
      ::_exit(0); // Never starts the all_reduce.
    }
    int64_t r = cleave_rt_all_reduce_start(-1, CLEAVE_F32, CLEAVE_SUM, x.data(),
                                           x.data(), 100);
    RT_OK(); // Nothing failed yet: the start only queued the call.
    RT_CHECK(cleave_rt_wait(r, x.data(), x.data(), nullptr) != 0,
             "wait should fail");
    std::printf("ERROR: %s\n", cleave_rt_error_message());
    // Later starts return completed requests at once.
    double t0 = cleave_rt_now();
    int64_t s =
        cleave_rt_all_gather_start(-1, CLEAVE_F32, x.data(), x.data(), 1);
    RT_CHECK(cleave_rt_wait(s, nullptr, nullptr, nullptr) != 0, "second wait");
    RT_CHECK(cleave_rt_now() - t0 < 0.05, "calls after an error are quick");
    std::fflush(nullptr);
    ::_exit(0);
  };
  auto results = runRanks(2, body, options);
  ASSERT_EQ(results[0].exitCode, 0) << describe(results);
  const std::string &out = results[0].output;
  EXPECT_TRUE(contains(out, "ERROR: rank 0: all_reduce on group -1 (world, "
                            "ranks 0,1) timed out after 1500 ms"))
      << out;
  EXPECT_TRUE(contains(out, "cleave flight recorder, rank 0")) << out;
}

TEST(Async, BadHandlesAreNamed) {
  auto body = [](int rank) -> int {
    if (cleave_rt_init(nullptr) != 0)
      return 1;
    std::vector<float> x(4, 1.0f), y(4);
    RT_CHECK(cleave_rt_wait(77, nullptr, nullptr, nullptr) != 0,
             "unknown handle");
    RT_CHECK(contains(cleave_rt_error_message(),
                      "rank 0: wait: request 77 was never started or is "
                      "already waited"),
             "%s", cleave_rt_error_message());
    cleave_rt_clear_error();
    int64_t r = cleave_rt_all_reduce_start(-1, CLEAVE_F32, CLEAVE_SUM, x.data(),
                                           y.data(), 4);
    RT_CHECK(cleave_rt_wait(r, y.data(), x.data(), nullptr) != 0,
             "swapped buffers");
    RT_CHECK(contains(cleave_rt_error_message(), "(all_reduce) was started "
                                                 "with buffers"),
             "%s", cleave_rt_error_message());
    // The failed wait still let the request finish, and forgot it.
    RT_CHECK(y[0] == 1.0f, "one rank sums to itself");
    cleave_rt_clear_error();
    r = cleave_rt_all_reduce_start(-1, CLEAVE_F32, CLEAVE_SUM, x.data(),
                                   y.data(), 4);
    RT_CHECK(cleave_rt_wait(r, x.data(), y.data(), nullptr) == 0, "%s",
             cleave_rt_error_message());
    RT_CHECK(cleave_rt_wait(r, nullptr, nullptr, nullptr) != 0, "waited twice");
    RT_CHECK(contains(cleave_rt_error_message(), "already waited"), "%s",
             cleave_rt_error_message());
    cleave_rt_finalize();
    return 0;
  };
  auto results = runRanks(1, body);
  ASSERT_EQ(results[0].exitCode, 0) << describe(results);
}

} // namespace
