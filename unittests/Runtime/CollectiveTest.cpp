//===- CollectiveTest.cpp - Collectives on 2 and 4 forked ranks -----------===//
//
// Every collective on every dtype and reduction, on the world, on the groups
// of a 2x2 mesh, with both rendezvous stores and every reduce-scatter
// algorithm; then the failure paths: a rank that never calls, a killed rank,
// mismatched collectives, a rank that never starts.
//
//===----------------------------------------------------------------------===//

#include "DType.h"
#include "MultiProcess.h"

#include "cleave/Runtime/Runtime.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sched.h>
#include <sstream>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace cleave::test;
using cleave::rt::dtypeSize;

namespace {

/// Element i of a buffer of `dtype`, as a double.
double get(int32_t dtype, const std::vector<char> &buf, int64_t i) {
  const char *p = buf.data() + i * dtypeSize(dtype);
  switch (dtype) {
  case CLEAVE_F32: {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case CLEAVE_F64: {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  case CLEAVE_I32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case CLEAVE_I64: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return double(v);
  }
  default: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return dtype == CLEAVE_BF16 ? cleave::rt::bf16ToFloat(h)
                                : cleave::rt::halfToFloat(h);
  }
  }
}

void set(int32_t dtype, std::vector<char> &buf, int64_t i, double v) {
  char *p = buf.data() + i * dtypeSize(dtype);
  switch (dtype) {
  case CLEAVE_F32: {
    float x = float(v);
    std::memcpy(p, &x, 4);
    return;
  }
  case CLEAVE_F64:
    std::memcpy(p, &v, 8);
    return;
  case CLEAVE_I32: {
    int32_t x = int32_t(v);
    std::memcpy(p, &x, 4);
    return;
  }
  case CLEAVE_I64: {
    int64_t x = int64_t(v);
    std::memcpy(p, &x, 8);
    return;
  }
  default: {
    uint16_t h = dtype == CLEAVE_BF16 ? cleave::rt::floatToBf16(float(v))
                                      : cleave::rt::floatToHalf(float(v));
    std::memcpy(p, &h, 2);
  }
  }
}

std::vector<char> buffer(int32_t dtype, int64_t count) {
  return std::vector<char>(size_t(count * dtypeSize(dtype)), 0);
}

/// Small integers: exact in every dtype, sums too.
double value(int rank, int64_t i) {
  return double((rank * 7 + i * 3) % 11 + 1);
}

int initRuntime() {
  if (cleave_rt_init(nullptr) != 0) {
    std::fprintf(stderr, "init failed: %s\n", cleave_rt_error_message());
    return 1;
  }
  return 0;
}

#define RT_OK()                                                                \
  RT_CHECK(!cleave_rt_failed(), "runtime error: %s", cleave_rt_error_message())

/// all_reduce with every dtype and reduction on `group` (members given).
int checkAllReduce(int64_t group, const std::vector<int> &members) {
  const int64_t count = 37;
  int me = int(cleave_rt_group_rank(group));
  for (int32_t dtype = 0; dtype <= CLEAVE_I64; ++dtype) {
    for (int32_t op = 0; op <= CLEAVE_AVG; ++op) {
      if (op == CLEAVE_AVG && !cleave::rt::isFloatType(dtype))
        continue;
      std::vector<char> in = buffer(dtype, count), out = buffer(dtype, count);
      for (int64_t i = 0; i < count; ++i)
        set(dtype, in, i, value(members[me], i));
      bool inPlace = (dtype + op) % 2 == 0;
      if (inPlace)
        out = in;
      cleave_rt_all_reduce(group, dtype, op, inPlace ? out.data() : in.data(),
                           out.data(), count);
      RT_OK();
      for (int64_t i = 0; i < count; ++i) {
        double sum = 0, mx = -1e9, mn = 1e9;
        for (int m : members) {
          sum += value(m, i);
          mx = std::max(mx, value(m, i));
          mn = std::min(mn, value(m, i));
        }
        double want = op == CLEAVE_SUM   ? sum
                      : op == CLEAVE_MAX ? mx
                      : op == CLEAVE_MIN ? mn
                                         : sum / double(members.size());
        RT_CHECK(std::abs(get(dtype, out, i) - want) < 1e-2 * (1 + want),
                 "all_reduce %s %s element %ld: %g, want %g",
                 cleave::rt::dtypeName(dtype), cleave::rt::reduceName(op),
                 long(i), get(dtype, out, i), want);
      }
    }
  }
  return 0;
}

/// all_gather, reduce_scatter, all_to_all, broadcast, barrier.
int checkDataMovement(int64_t group, const std::vector<int> &members) {
  const int64_t count = 29;
  const int n = int(members.size());
  int me = int(cleave_rt_group_rank(group));
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_I64, CLEAVE_F16}) {
    // all_gather (out of place, then in place).
    std::vector<char> in = buffer(dtype, count), out = buffer(dtype, n * count);
    for (int64_t i = 0; i < count; ++i)
      set(dtype, in, i, value(members[me], i));
    cleave_rt_all_gather(group, dtype, in.data(), out.data(), count);
    RT_OK();
    std::vector<char> inplace = buffer(dtype, n * count);
    std::memcpy(inplace.data() + me * in.size(), in.data(), in.size());
    cleave_rt_all_gather(group, dtype, inplace.data() + me * in.size(),
                         inplace.data(), count);
    RT_OK();
    RT_CHECK(inplace == out, "in-place all_gather differs");
    for (int j = 0; j < n; ++j)
      for (int64_t i = 0; i < count; ++i)
        RT_CHECK(get(dtype, out, j * count + i) == value(members[j], i),
                 "all_gather block %d element %ld", j, long(i));
    // reduce_scatter: block b of rank m holds value(m, b * count + i).
    std::vector<char> rsIn = buffer(dtype, n * count),
                      rsOut = buffer(dtype, count);
    for (int64_t i = 0; i < n * count; ++i)
      set(dtype, rsIn, i, value(members[me], i));
    for (int32_t op : {CLEAVE_SUM, CLEAVE_MAX}) {
      cleave_rt_reduce_scatter(group, dtype, op, rsIn.data(), rsOut.data(),
                               count);
      RT_OK();
      for (int64_t i = 0; i < count; ++i) {
        double want = op == CLEAVE_SUM ? 0 : -1e9;
        for (int m : members)
          want = op == CLEAVE_SUM ? want + value(m, me * count + i)
                                  : std::max(want, value(m, me * count + i));
        RT_CHECK(get(dtype, rsOut, i) == want,
                 "reduce_scatter %s element %ld: %g, want %g",
                 cleave::rt::reduceName(op), long(i), get(dtype, rsOut, i),
                 want);
      }
    }
    // all_to_all: block j of rank m holds 100 m + j.
    std::vector<char> aIn = buffer(dtype, n * count),
                      aOut = buffer(dtype, n * count);
    for (int j = 0; j < n; ++j)
      for (int64_t i = 0; i < count; ++i)
        set(dtype, aIn, j * count + i, 10 * me + j + (i % 3));
    cleave_rt_all_to_all(group, dtype, aIn.data(), aOut.data(), count);
    RT_OK();
    for (int j = 0; j < n; ++j)
      for (int64_t i = 0; i < count; ++i)
        RT_CHECK(get(dtype, aOut, j * count + i) == 10 * j + me + (i % 3),
                 "all_to_all block %d element %ld", j, long(i));
    // broadcast from the last group rank.
    std::vector<char> b = buffer(dtype, count);
    for (int64_t i = 0; i < count; ++i)
      set(dtype, b, i, me == n - 1 ? value(99, i) : 0);
    cleave_rt_broadcast(group, n - 1, dtype, b.data(), count);
    RT_OK();
    for (int64_t i = 0; i < count; ++i)
      RT_CHECK(get(dtype, b, i) == value(99, i), "broadcast element %ld",
               long(i));
  }
  cleave_rt_barrier(group);
  RT_OK();
  return 0;
}

/// collective_permute (a shift with one rank left out) and send/recv.
int checkPointToPoint(int64_t group, const std::vector<int> &members) {
  const int n = int(members.size());
  const int64_t count = 1000;
  int me = int(cleave_rt_group_rank(group));
  std::vector<int64_t> pairs;
  for (int s = 0; s < n - 1; ++s) // s -> s+1; rank 0 gets nothing.
    pairs.insert(pairs.end(), {s, s + 1});
  std::vector<float> in(count), out(count, -1.0f);
  for (int64_t i = 0; i < count; ++i)
    in[i] = float(members[me] * 1000 + i);
  cleave_rt_collective_permute(group, CLEAVE_F32, in.data(), out.data(), count,
                               int64_t(pairs.size() / 2), pairs.data());
  RT_OK();
  for (int64_t i = 0; i < count; ++i) {
    float want = me == 0 ? 0.0f : float(members[me - 1] * 1000 + i);
    RT_CHECK(out[i] == want, "permute element %ld: %g, want %g", long(i),
             out[i], want);
  }
  // In place: every rank sends to the next (a full ring).
  pairs.clear();
  for (int s = 0; s < n; ++s)
    pairs.insert(pairs.end(), {s, (s + 1) % n});
  std::vector<float> ring = in;
  cleave_rt_collective_permute(group, CLEAVE_F32, ring.data(), ring.data(),
                               count, n, pairs.data());
  RT_OK();
  RT_CHECK(ring[5] == float(members[(me + n - 1) % n] * 1000 + 5),
           "in-place permute");
  // send/recv: even group ranks send to the next odd one, twice.
  for (int round = 0; round < 2; ++round) {
    std::vector<int64_t> data(count);
    if (me % 2 == 0 && me + 1 < n) {
      for (int64_t i = 0; i < count; ++i)
        data[i] = int64_t(round) * 1000000 + members[me] * 1000 + i;
      cleave_rt_send(group, me + 1, CLEAVE_I64, data.data(), count);
    } else if (me % 2 == 1) {
      cleave_rt_recv(group, me - 1, CLEAVE_I64, data.data(), count);
      RT_OK();
      RT_CHECK(data[count - 1] == int64_t(round) * 1000000 +
                                      members[me - 1] * 1000 + count - 1,
               "recv round %d", round);
    }
    RT_OK();
  }
  return 0;
}

int worldBody(int) {
  if (initRuntime())
    return 1;
  std::vector<int> world;
  for (int r = 0; r < cleave_rt_world_size(); ++r)
    world.push_back(r);
  RT_CHECK(cleave_rt_group_size(CLEAVE_WORLD_GROUP) == int64_t(world.size()),
           "world size");
  if (checkAllReduce(CLEAVE_WORLD_GROUP, world) ||
      checkDataMovement(CLEAVE_WORLD_GROUP, world) ||
      checkPointToPoint(CLEAVE_WORLD_GROUP, world))
    return 1;
  if (std::getenv("CLEAVE_TEST_DUMP"))
    cleave_rt_flight_recorder_dump(nullptr);
  cleave_rt_finalize();
  RT_OK(); // The finalize barrier passed.
  return 0;
}

struct WorldCase {
  int ranks;
  bool tcp;
  const char *reduceScatter;
  /// CLEAVE_DIRECT_BYTES: "0" sends every all-reduce and all-gather through
  /// Gloo's ring; null keeps the default (these small calls go direct).
  const char *directBytes = nullptr;
};

class WorldCollectives : public ::testing::TestWithParam<WorldCase> {};

TEST_P(WorldCollectives, EveryCollectiveIsCorrect) {
  RunOptions options;
  options.tcp = GetParam().tcp;
  options.env["CLEAVE_REDUCE_SCATTER"] = GetParam().reduceScatter;
  options.env["CLEAVE_RS_SEGMENT_BYTES"] = "24"; // Many segments per block.
  if (GetParam().directBytes)
    options.env["CLEAVE_DIRECT_BYTES"] = GetParam().directBytes;
  if (std::getenv("CLEAVE_TEST_DUMP"))
    options.env["CLEAVE_TEST_DUMP"] = "1";
  auto results = runRanks(GetParam().ranks, worldBody, options);
  if (std::getenv("CLEAVE_TEST_DUMP"))
    std::printf("%s", describe(results).c_str());
  for (const RankResult &r : results)
    ASSERT_EQ(r.exitCode, 0) << describe(results);
}

INSTANTIATE_TEST_SUITE_P(
    Runtime, WorldCollectives,
    ::testing::Values(
        WorldCase{2, false, "ring", "0"}, WorldCase{4, false, "ring", "0"},
        WorldCase{2, true, "direct"}, WorldCase{4, true, "direct"},
        WorldCase{4, false, "allreduce"}, WorldCase{4, false, "allreduce", "0"},
        WorldCase{3, true, "ring", "0"}, WorldCase{2, false, "auto"},
        WorldCase{3, true, "auto"}, WorldCase{4, true, "auto", "0"},
        WorldCase{2, false, "halving"}, WorldCase{3, false, "halving"},
        WorldCase{4, false, "halving"}, WorldCase{6, false, "halving"}),
    [](const auto &info) {
      return std::to_string(info.param.ranks) + "ranks_" +
             (info.param.tcp ? "tcp_" : "file_") + info.param.reduceScatter +
             (info.param.directBytes ? "_gloo" : "");
    });

/// Groups of a 2x2 mesh (dp, tp): along tp, along dp, both, both reversed.
TEST(MeshGroups, SubgroupsOfA2x2Mesh) {
  auto body = [](int rank) -> int {
    if (initRuntime())
      return 1;
    int64_t shape[] = {2, 2};
    const char *names[] = {"dp", "tp"};
    RT_CHECK(cleave_rt_define_mesh(2, shape, names) == 0, "%s",
             cleave_rt_error_message());
    int64_t tp[] = {1}, dp[] = {0}, both[] = {0, 1}, reversed[] = {1, 0};
    RT_CHECK(cleave_rt_define_group(0, 1, tp) == 0, "%s",
             cleave_rt_error_message());
    RT_CHECK(cleave_rt_define_group(1, 1, dp) == 0, "tp");
    RT_CHECK(cleave_rt_define_group(2, 2, both) == 0, "both");
    RT_CHECK(cleave_rt_define_group(3, 2, reversed) == 0, "reversed");
    int d = rank / 2, t = rank % 2;
    std::vector<std::vector<int>> members = {
        {2 * d, 2 * d + 1}, {t, t + 2}, {0, 1, 2, 3}, {0, 2, 1, 3}};
    std::vector<int64_t> myIndex = {t, d, rank, t * 2 + d};
    for (int64_t g = 0; g < 4; ++g) {
      RT_CHECK(cleave_rt_group_rank(g) == myIndex[g], "group %ld rank %ld",
               long(g), long(cleave_rt_group_rank(g)));
      RT_CHECK(cleave_rt_group_size(g) == int64_t(members[g].size()),
               "group size");
      std::vector<int32_t> gathered(members[g].size());
      int32_t mine = rank;
      cleave_rt_all_gather(g, CLEAVE_I32, &mine, gathered.data(), 1);
      RT_OK();
      for (size_t i = 0; i < members[g].size(); ++i)
        RT_CHECK(gathered[i] == members[g][i], "group %ld member %zu is %d",
                 long(g), i, gathered[i]);
      if (checkAllReduce(g, members[g]) || checkDataMovement(g, members[g]) ||
          checkPointToPoint(g, members[g]))
        return 1;
    }
    cleave_rt_finalize();
    RT_OK(); // The finalize barrier passed.
    return 0;
  };
  auto results = runRanks(4, body);
  for (const RankResult &r : results)
    ASSERT_EQ(r.exitCode, 0) << describe(results);
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

/// Rank 1 never calls: rank 0 fails naming rank, op, group; later calls
/// return at once; the flight recorder is dumped.
TEST(CollectiveFailures, TimeoutNamesRankOpAndGroup) {
  char dirTemplate[] = "/tmp/cleave-fr-XXXXXX";
  std::string frDir = ::mkdtemp(dirTemplate);
  RunOptions options;
  options.timeoutMs = 1500;
  options.env["CLEAVE_FLIGHT_RECORDER_DIR"] = frDir;
  auto body = [](int rank) -> int {
    if (initRuntime())
      return 1;
    std::vector<float> x(100, 1.0f);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(4));
      std::fflush(nullptr);
      ::_exit(0); // Never calls all_reduce.
    }
    cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F32, CLEAVE_SUM, x.data(),
                         x.data(), 100);
    RT_CHECK(cleave_rt_failed(), "all_reduce should have failed");
    std::printf("ERROR: %s\n", cleave_rt_error_message());
    double t0 = cleave_rt_now();
    cleave_rt_all_gather(CLEAVE_WORLD_GROUP, CLEAVE_F32, x.data(), x.data(), 1);
    cleave_rt_barrier(CLEAVE_WORLD_GROUP);
    RT_CHECK(cleave_rt_now() - t0 < 0.05, "calls after an error must return "
                                          "at once");
    std::fflush(nullptr);
    ::_exit(0);
  };
  auto results = runRanks(2, body, options);
  ASSERT_EQ(results[0].exitCode, 0) << describe(results);
  const std::string &out = results[0].output;
  EXPECT_TRUE(contains(out, "ERROR: rank 0: all_reduce on group -1 (world, "
                            "ranks 0,1) timed out after 1500 ms"))
      << out;
  EXPECT_TRUE(contains(out, "rank 1 is alive")) << out;
  EXPECT_TRUE(contains(out, "has not reached call #1")) << out;
  EXPECT_LT(results[0].seconds, 1.5 + 3.0) << out;
  // The flight recorder went to stderr and to the directory.
  EXPECT_TRUE(contains(out, "cleave flight recorder, rank 0")) << out;
  std::ifstream file(frDir + "/cleave-flight-rank0.json");
  std::stringstream json;
  json << file.rdbuf();
  EXPECT_TRUE(contains(json.str(), "\"op\": \"all_reduce\"")) << json.str();
  EXPECT_TRUE(contains(json.str(), "\"state\": \"failed\"")) << json.str();
  ::unlink((frDir + "/cleave-flight-rank0.json").c_str());
  ::rmdir(frDir.c_str());
}

/// A rank killed mid-collective: the others fail naming it.
TEST(CollectiveFailures, KilledRankIsNamed) {
  RunOptions options;
  options.timeoutMs = 3000;
  auto body = [](int rank) -> int {
    if (initRuntime())
      return 1;
    std::vector<float> x(1 << 18, 1.0f);
    for (int it = 0; it < 1000; ++it) {
      if (rank == 2 && it == 3)
        ::raise(SIGKILL);
      cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F32, CLEAVE_SUM, x.data(),
                           x.data(), int64_t(x.size()));
      if (cleave_rt_failed())
        break;
      std::fill(x.begin(), x.end(), 1.0f);
    }
    RT_CHECK(cleave_rt_failed(), "the loop should have failed");
    std::printf("ERROR: %s\n", cleave_rt_error_message());
    std::fflush(nullptr);
    ::_exit(0);
  };
  auto results = runRanks(3, body, options);
  EXPECT_EQ(results[2].signal, SIGKILL) << describe(results);
  for (int r : {0, 1}) {
    ASSERT_EQ(results[r].exitCode, 0) << describe(results);
    const std::string &out = results[r].output;
    EXPECT_TRUE(contains(out, "ERROR: rank " + std::to_string(r) +
                                  ": all_reduce on group -1 (world, ranks "
                                  "0,1,2)"))
        << out;
    EXPECT_TRUE(contains(out, "rank 2 stopped responding")) << out;
    EXPECT_LT(results[r].seconds, 3.0 + 4.0) << out;
  }
}

/// CLEAVE_DEBUG_COLLECTIVES=1 turns mismatched collectives into an error
/// naming both ranks and both calls.
TEST(CollectiveFailures, FingerprintMismatchNamesBothRanks) {
  RunOptions options;
  options.timeoutMs = 3000;
  options.env["CLEAVE_DEBUG_COLLECTIVES"] = "1";
  auto body = [](int rank) -> int {
    if (initRuntime())
      return 1;
    std::vector<float> x(20, 1.0f), y(20);
    cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F32, CLEAVE_SUM, x.data(),
                         x.data(), 10); // Matched: passes.
    RT_OK();
    if (rank == 0)
      cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F32, CLEAVE_MAX, x.data(),
                           x.data(), 10);
    else
      cleave_rt_all_gather(CLEAVE_WORLD_GROUP, CLEAVE_F32, x.data(), y.data(),
                           10);
    RT_CHECK(cleave_rt_failed(), "the mismatch should fail");
    std::printf("ERROR: %s\n", cleave_rt_error_message());
    std::fflush(nullptr);
    ::_exit(0);
  };
  auto results = runRanks(2, body, options);
  for (int r : {0, 1}) {
    ASSERT_EQ(results[r].exitCode, 0) << describe(results);
    const std::string &out = results[r].output;
    EXPECT_TRUE(contains(out, "collective mismatch")) << out;
    EXPECT_TRUE(contains(out, "all_reduce(count 10, f32, max)")) << out;
    EXPECT_TRUE(contains(out, "all_gather(count 10, f32)")) << out;
    EXPECT_TRUE(contains(out, "rank 0 issued") ||
                contains(out, "rank 1 issued"))
        << out;
    EXPECT_TRUE(contains(out, "but rank " + std::to_string(1 - r))) << out;
  }
}

/// The JSON flight recorder a failed rank wrote to `dir`, or null.
nlohmann::json readFlightRecorder(const std::string &dir, int rank) {
  std::ifstream file(dir + "/cleave-flight-rank" + std::to_string(rank) +
                     ".json");
  if (!file)
    return nullptr;
  return nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
}

/// Both ranks send first. A send completes only once its peer has posted
/// the matching recv (a rendezvous: the model cleave-verify-collectives
/// assumes), so this program cannot complete; the watchdog sees both ranks
/// blocked in sends to each other, both fail naming the sends, and each
/// flight recorder (stderr and JSON) holds the
/// completed all_reduce before it and the failed send, with its peer.
TEST(CollectiveFailures, SendSendDeadlockDumpsFlightRecorder) {
  char dirTemplate[] = "/tmp/cleave-fr-XXXXXX";
  std::string frDir = ::mkdtemp(dirTemplate);
  RunOptions options;
  options.timeoutMs = 1500;
  options.env["CLEAVE_FLIGHT_RECORDER_DIR"] = frDir;
  auto body = [](int rank) -> int {
    if (initRuntime())
      return 1;
    std::vector<float> x(4, 1.0f);
    cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F32, CLEAVE_SUM, x.data(),
                         x.data(), 4);
    RT_OK();
    double t0 = cleave_rt_now();
    cleave_rt_send(CLEAVE_WORLD_GROUP, 1 - rank, CLEAVE_F32, x.data(), 4);
    RT_CHECK(cleave_rt_failed(), "both ranks sending first must not complete");
    // The watchdog sees both ranks blocked in sends to each other and ends
    // the calls before the timeout.
    RT_CHECK(cleave_rt_now() - t0 < 1.4, "the watchdog did not end the send");
    std::printf("ERROR: %s\n", cleave_rt_error_message());
    std::fflush(nullptr);
    ::_exit(0);
  };
  auto results = runRanks(2, body, options);
  if (std::getenv("CLEAVE_TEST_DUMP"))
    std::printf("%s", describe(results).c_str());
  for (int r : {0, 1}) {
    ASSERT_EQ(results[r].exitCode, 0) << describe(results);
    const std::string &out = results[r].output;
    // The first rank to time out aborts its connections; the other may see
    // its peer fail before its own timeout.
    EXPECT_TRUE(contains(out, "ERROR: rank " + std::to_string(r) +
                                  ": send on group -1 (world, ranks 0,1)"))
        << out;
    EXPECT_TRUE(contains(out, "point-to-point mismatch") ||
                contains(out, "failed: rank " + std::to_string(1 - r) +
                                  " failed: point-to-point mismatch"))
        << out;
    // The text dump lists the completed all_reduce, then the failed send.
    std::string head = "cleave flight recorder, rank " + std::to_string(r);
    ASSERT_TRUE(contains(out, head)) << out;
    std::string dump = out.substr(out.find(head));
    size_t reduce = dump.find("all_reduce"), send = dump.find("send ");
    EXPECT_NE(reduce, std::string::npos) << dump;
    EXPECT_NE(send, std::string::npos) << dump;
    EXPECT_LT(reduce, send) << dump;
    EXPECT_TRUE(contains(dump, "completed")) << dump;
    EXPECT_TRUE(contains(dump, "failed")) << dump;
    // The JSON dump: rank, then both calls in order with their fields.
    nlohmann::json json = readFlightRecorder(frDir, r);
    ASSERT_TRUE(json.is_object()) << "no flight recorder for rank " << r;
    EXPECT_EQ(json["rank"], r);
    const nlohmann::json &entries = json["entries"];
    ASSERT_EQ(entries.size(), 2u) << json.dump(1);
    EXPECT_EQ(entries[0]["op"], "all_reduce");
    EXPECT_EQ(entries[0]["seq"], 1);
    EXPECT_EQ(entries[0]["count"], 4);
    EXPECT_EQ(entries[0]["dtype"], "f32");
    EXPECT_EQ(entries[0]["reduce"], "sum");
    EXPECT_EQ(entries[0]["state"], "completed");
    EXPECT_EQ(entries[1]["op"], "send");
    EXPECT_EQ(entries[1]["peer"], 1 - r);
    EXPECT_EQ(entries[1]["count"], 4);
    EXPECT_EQ(entries[1]["state"], "failed");
    EXPECT_GE(double(entries[1]["end"]) - double(entries[1]["start"]), 0.0);
    ::unlink(
        (frDir + "/cleave-flight-rank" + std::to_string(r) + ".json").c_str());
  }
  ::rmdir(frDir.c_str());
}

/// CLEAVE_DEBUG_COLLECTIVES=1 also checks send/recv against the peer's
/// call: a recv of another count, and two ranks that both send first (the
/// deadlock above), fail at once naming both ranks and both calls.
TEST(CollectiveFailures, PointToPointMismatchNamesBothRanks) {
  RunOptions options;
  options.timeoutMs = 5000;
  options.env["CLEAVE_DEBUG_COLLECTIVES"] = "1";
  auto body = [](int rank) -> int {
    if (initRuntime())
      return 1;
    int64_t shape[] = {2};
    const char *names[] = {"pp"};
    int64_t pp[] = {0};
    RT_CHECK(cleave_rt_define_mesh(1, shape, names) == 0 &&
                 cleave_rt_define_group(0, 1, pp) == 0,
             "%s", cleave_rt_error_message());
    std::vector<float> x(8, 1.0f);
    double t0 = cleave_rt_now();
    if (rank == 0)
      cleave_rt_send(0, 1, CLEAVE_F32, x.data(), 4);
    else
      cleave_rt_recv(0, 0, CLEAVE_F32, x.data(), 8);
    RT_CHECK(cleave_rt_failed(), "the count mismatch should fail");
    std::printf("COUNT: %s\n", cleave_rt_error_message());
    cleave_rt_clear_error();
    cleave_rt_send(CLEAVE_WORLD_GROUP, 1 - rank, CLEAVE_F32, x.data(), 4);
    RT_CHECK(cleave_rt_failed(), "both sending should fail");
    std::printf("CYCLE: %s\n", cleave_rt_error_message());
    RT_CHECK(cleave_rt_now() - t0 < 2.5, "mismatches must not wait for the "
                                         "timeout");
    std::fflush(nullptr);
    ::_exit(0);
  };
  auto results = runRanks(2, body, options);
  for (int r : {0, 1}) {
    ASSERT_EQ(results[r].exitCode, 0) << describe(results);
    const std::string &out = results[r].output;
    std::string me = std::to_string(r), peer = std::to_string(1 - r);
    EXPECT_TRUE(contains(out, "COUNT: rank " + me + ": " +
                                  (r ? "recv" : "send") +
                                  " on group 0 (mesh axes [pp], ranks 0,1)"))
        << out;
    EXPECT_TRUE(contains(out, "point-to-point mismatch: rank " + me +
                                  " issued call #0: "))
        << out;
    EXPECT_TRUE(contains(out, "send(to group rank 1, count 4, f32)")) << out;
    EXPECT_TRUE(contains(out, "recv(from group rank 0, count 8, f32)")) << out;
    EXPECT_TRUE(contains(out, "CYCLE: rank " + me + ": send on group -1"))
        << out;
    EXPECT_TRUE(contains(out, "issued call #0: send(to group rank " + peer +
                                  ", count 4, f32) but rank " + peer +
                                  " issued call #0: send(to group rank " + me +
                                  ", count 4, f32)"))
        << out;
  }
}

/// A reduce-scatter setting that names no algorithm, a negative
/// crossover, or a scheduling policy of Gloo's event loop that is not
/// batch or normal, fails the connection of the group with the variable
/// named.
TEST(CollectiveFailures, BadCommunicationSettingsAreNamed) {
  struct Case {
    const char *var, *value, *message;
  };
  for (Case c :
       {Case{"CLEAVE_REDUCE_SCATTER", "halfing",
             "CLEAVE_REDUCE_SCATTER='halfing' is not one of auto, ring, "
             "direct, halving, allreduce"},
        Case{"CLEAVE_RS_HALVING_BYTES", "-1",
             "CLEAVE_RS_HALVING_BYTES must not be negative"},
        Case{"CLEAVE_GLOO_LOOP_SCHED", "idle",
             "CLEAVE_GLOO_LOOP_SCHED='idle' is not one of batch, normal"}}) {
    RunOptions options;
    options.env[c.var] = c.value;
    auto body = [](int) -> int {
      RT_CHECK(cleave_rt_init(nullptr) != 0, "init should fail");
      std::printf("ERROR: %s\n", cleave_rt_error_message());
      return 0;
    };
    auto results = runRanks(2, body, options);
    for (const RankResult &r : results) {
      ASSERT_EQ(r.exitCode, 0) << describe(results);
      EXPECT_TRUE(contains(r.output, c.message)) << r.output;
    }
  }
}

/// Gloo's event-loop thread is scheduled as CLEAVE_GLOO_LOOP_SCHED says
/// (default batch): after init exactly one thread of each rank is
/// SCHED_BATCH, and with `normal` none is (a bad value: above).
TEST(GlooLoopThread, IsScheduledAsConfigured) {
  if (::sched_getscheduler(0) != SCHED_OTHER)
    GTEST_SKIP() << "the test does not run under SCHED_OTHER";
  for (const char *sched : {"", "batch", "normal"}) {
    RunOptions options;
    options.env["CLEAVE_GLOO_LOOP_SCHED"] = sched;
    int want = std::string(sched) == "normal" ? 0 : 1;
    auto body = [want](int) -> int {
      RT_CHECK(cleave_rt_init(nullptr) == 0, "init: %s",
               cleave_rt_error_message());
      int batch = 0, others = 0;
      for (const auto &entry :
           std::filesystem::directory_iterator("/proc/self/task")) {
        pid_t tid = pid_t(std::stol(entry.path().filename().string()));
        int policy = ::sched_getscheduler(tid);
        RT_CHECK(policy >= 0, "sched_getscheduler(%d) failed", int(tid));
        if (policy == SCHED_BATCH)
          ++batch;
        else if (policy != SCHED_OTHER)
          ++others;
      }
      RT_CHECK(batch == want && others == 0,
               "%d thread(s) SCHED_BATCH (want %d), %d under another policy",
               batch, want, others);
      cleave_rt_finalize();
      return 0;
    };
    auto results = runRanks(2, body, options);
    for (const RankResult &r : results)
      EXPECT_EQ(r.exitCode, 0) << "CLEAVE_GLOO_LOOP_SCHED='" << sched << "'\n"
                               << describe(results);
  }
}

/// A rank that never starts: init fails naming it.
TEST(CollectiveFailures, MissingRankAtRendezvous) {
  RunOptions options;
  options.timeoutMs = 1000;
  options.tcp = true;
  auto body = [](int rank) -> int {
    if (rank == 1)
      return 0;
    RT_CHECK(cleave_rt_init(nullptr) != 0, "init should fail");
    std::printf("ERROR: %s\n", cleave_rt_error_message());
    return 0;
  };
  auto results = runRanks(2, body, options);
  ASSERT_EQ(results[0].exitCode, 0) << describe(results);
  EXPECT_TRUE(contains(results[0].output,
                       "ERROR: rank 0: init: timed out after 1000 ms waiting "
                       "for rank(s) 1 to join"))
      << results[0].output;
}

} // namespace
