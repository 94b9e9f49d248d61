//===- SetupTest.cpp - Options, meshes, stores, single-rank runtime -------===//

#include "Env.h"
#include "Mesh.h"
#include "Store.h"

#include "cleave/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>
#include <vector>

using namespace cleave::rt;

namespace {

bool has(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

/// Sets variables for one test and restores them afterwards.
class EnvGuard {
public:
  void set(const char *name, const char *value) {
    const char *old = std::getenv(name);
    saved_.emplace_back(name,
                        old ? std::optional<std::string>(old) : std::nullopt);
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~EnvGuard() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }

private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

void clearLauncherEnv(EnvGuard &env) {
  for (const char *name :
       {"RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "MASTER_ADDR",
        "MASTER_PORT", "CLEAVE_RENDEZVOUS", "CLEAVE_TIMEOUT_MS"})
    env.set(name, nullptr);
}

TEST(OptionsTest, TorchrunAndOpenMpiConventions) {
  EnvGuard env;
  clearLauncherEnv(env);
  ResolvedOptions o = resolveOptions(nullptr);
  EXPECT_EQ(o.rank, 0);
  EXPECT_EQ(o.worldSize, 1);
  EXPECT_EQ(o.timeoutMs, 300000);
  env.set("RANK", "2");
  env.set("WORLD_SIZE", "4");
  env.set("LOCAL_RANK", "0");
  env.set("MASTER_ADDR", "node7");
  env.set("MASTER_PORT", "29500");
  o = resolveOptions(nullptr);
  EXPECT_EQ(o.rank, 2);
  EXPECT_EQ(o.worldSize, 4);
  EXPECT_EQ(o.rendezvous, "tcp://node7:29500");
  env.set("CLEAVE_RENDEZVOUS", "file:/shared/x");
  env.set("CLEAVE_TIMEOUT_MS", "1234");
  o = resolveOptions(nullptr);
  EXPECT_EQ(o.rendezvous, "file:/shared/x");
  EXPECT_EQ(o.timeoutMs, 1234);
  clearLauncherEnv(env);
  env.set("OMPI_COMM_WORLD_RANK", "1");
  env.set("OMPI_COMM_WORLD_SIZE", "2");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  env.set("CLEAVE_RENDEZVOUS", "tcp://h:1");
  o = resolveOptions(nullptr);
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.localRank, 1);
  // Explicit options win over the environment.
  cleave_rt_options_t opts;
  cleave_rt_default_options(&opts);
  opts.rank = 0;
  opts.world_size = 1;
  EXPECT_EQ(resolveOptions(&opts).worldSize, 1);
}

TEST(OptionsTest, BadValuesAreNamed) {
  EnvGuard env;
  clearLauncherEnv(env);
  env.set("RANK", "x1");
  env.set("WORLD_SIZE", "2");
  try {
    resolveOptions(nullptr);
    FAIL();
  } catch (const RuntimeError &e) {
    EXPECT_TRUE(has(e.what(), "RANK='x1' is not an integer")) << e.what();
  }
  env.set("RANK", "4");
  EXPECT_THROW(resolveOptions(nullptr), RuntimeError);
  env.set("RANK", "1");
  try {
    resolveOptions(nullptr);
    FAIL();
  } catch (const RuntimeError &e) {
    EXPECT_TRUE(has(e.what(), "no rendezvous")) << e.what();
  }
  EXPECT_THROW(parseRendezvousUrl("http://x"), RuntimeError);
  EXPECT_THROW(parseRendezvousUrl("tcp://host"), RuntimeError);
  EXPECT_THROW(parseRendezvousUrl("file:relative"), RuntimeError);
  RendezvousUrl u = parseRendezvousUrl("tcp://10.0.0.1:29500");
  EXPECT_EQ(u.host, "10.0.0.1");
  EXPECT_EQ(u.port, 29500);
}

TEST(MeshTest, GroupsAreRowMajorOverTheGivenAxes) {
  Mesh mesh({2, 3, 2}, {"pp", "dp", "tp"}, 12);
  // Rank 7 = (1, 0, 1).
  EXPECT_EQ(mesh.coordinates(7), (std::vector<int64_t>{1, 0, 1}));
  Mesh::Group tp = mesh.groupAlong({2}, 7);
  EXPECT_EQ(tp.members, (std::vector<int>{6, 7}));
  EXPECT_EQ(tp.groupRank, 1);
  Mesh::Group dp = mesh.groupAlong({1}, 7);
  EXPECT_EQ(dp.members, (std::vector<int>{7, 9, 11}));
  EXPECT_EQ(dp.groupRank, 0);
  EXPECT_EQ(dp.axesText, "mesh axes [dp]");
  Mesh::Group dpTp = mesh.groupAlong({2, 1}, 7); // tp major, then dp.
  EXPECT_EQ(dpTp.members, (std::vector<int>{6, 8, 10, 7, 9, 11}));
  EXPECT_EQ(dpTp.groupRank, 3);
  // Parallel groups get distinct colors.
  EXPECT_NE(mesh.groupAlong({2}, 0).color, mesh.groupAlong({2}, 2).color);
  EXPECT_THROW(Mesh({2, 2}, {"a", "a"}, 4), RuntimeError);
  EXPECT_THROW(Mesh({2, 3}, {}, 4), RuntimeError);
  EXPECT_THROW(mesh.groupAlong({3}, 0), RuntimeError);
  EXPECT_THROW(mesh.groupAlong({1, 1}, 0), RuntimeError);
}

TEST(StoreTest, TcpStoreSetGetWaitAndTimeouts) {
  TcpStoreServer server(0);
  auto a = connectTcpStore("127.0.0.1", server.port(), 2000);
  auto b = connectTcpStore("127.0.0.1", server.port(), 2000);
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    a->set("k", {'v', '1'});
  });
  std::vector<char> v = b->get("k"); // Blocks until set.
  setter.join();
  EXPECT_EQ(std::string(v.begin(), v.end()), "v1");
  b->put("k", "v2"); // Overwrite (heartbeats).
  EXPECT_EQ(*a->tryGet("k"), "v2");
  EXPECT_FALSE(a->tryGet("missing"));
  try {
    a->wait({"k", "x", "y"}, std::chrono::milliseconds(200));
    FAIL();
  } catch (const StoreTimeout &e) {
    EXPECT_EQ(e.missing, (std::vector<std::string>{"x", "y"}));
  }
  EXPECT_EQ(*b->tryGet("k"), "v2"); // The connection still works.
}

TEST(StoreTest, UnreachableTcpStoreIsNamed) {
  try {
    connectTcpStore("127.0.0.1", 1, 300);
    FAIL();
  } catch (const RuntimeError &e) {
    EXPECT_TRUE(has(e.what(), "cannot reach the rendezvous store "
                              "tcp://127.0.0.1:1 within 300 ms"))
        << e.what();
  }
}

TEST(StoreTest, FileStoreAndReusedDirectory) {
  char t[] = "/tmp/cleave-store-XXXXXX";
  std::string dir = ::mkdtemp(t);
  auto s = openFileStore(dir + "/sub", 1000);
  s->set("a/b", {'x'});
  EXPECT_EQ(s->get("a/b"), std::vector<char>{'x'});
  s->put("hb", "1");
  s->put("hb", "2");
  EXPECT_EQ(*s->tryGet("hb"), "2");
  try {
    s->set("a/b", {'y'});
    FAIL();
  } catch (const RuntimeError &e) {
    EXPECT_TRUE(has(e.what(), "already exists")) << e.what();
    EXPECT_TRUE(has(e.what(), "fresh directory")) << e.what();
  }
  try {
    s->wait({"a/b", "late"}, std::chrono::milliseconds(100));
    FAIL();
  } catch (const StoreTimeout &e) {
    EXPECT_EQ(e.missing, std::vector<std::string>{"late"});
  }
  std::system(("rm -rf " + dir).c_str());
}

TEST(SingleRankTest, CollectivesAreCopiesAndErrorsAreSticky) {
  EnvGuard env;
  clearLauncherEnv(env);
  ASSERT_EQ(cleave_rt_init(nullptr), 0) << cleave_rt_error_message();
  EXPECT_EQ(cleave_rt_world_size(), 1);
  EXPECT_NE(cleave_rt_init(nullptr), 0);
  EXPECT_TRUE(has(cleave_rt_error_message(), "already initialized"));
  cleave_rt_clear_error();
  int64_t shape[] = {1};
  ASSERT_EQ(cleave_rt_define_mesh(1, shape, nullptr), 0);
  int64_t axes[] = {0};
  ASSERT_EQ(cleave_rt_define_group(0, 1, axes), 0) << cleave_rt_error_message();
  float in[3] = {1, 2, 3}, out[3] = {0};
  cleave_rt_all_reduce(0, CLEAVE_F32, CLEAVE_AVG, in, out, 3);
  EXPECT_EQ(out[2], 3.0f);
  cleave_rt_reduce_scatter(0, CLEAVE_F32, CLEAVE_SUM, in, out, 3);
  EXPECT_EQ(out[1], 2.0f);
  EXPECT_FALSE(cleave_rt_failed());
  // Bad arguments name the rank, the call and the group.
  cleave_rt_all_reduce(0, CLEAVE_I32, CLEAVE_AVG, in, out, 3);
  EXPECT_STREQ(cleave_rt_error_message(),
               "rank 0: all_reduce on group 0 (mesh axes [0], ranks 0): avg "
               "is not defined for integer dtype i32; use sum");
  // Sticky: the next call does nothing, even a valid one.
  out[0] = -1;
  cleave_rt_all_reduce(0, CLEAVE_F32, CLEAVE_SUM, in, out, 3);
  EXPECT_EQ(out[0], -1.0f);
  cleave_rt_clear_error();
  cleave_rt_all_gather(5, CLEAVE_F32, in, out, 1);
  EXPECT_TRUE(has(cleave_rt_error_message(), "all_gather on group 5: no such "
                                             "group"));
  cleave_rt_clear_error();
  cleave_rt_send(0, 0, CLEAVE_F32, in, 1);
  EXPECT_TRUE(has(cleave_rt_error_message(), "peer 0 is this rank itself"));
  cleave_rt_clear_error();
  int64_t pairs[] = {0, 0};
  cleave_rt_collective_permute(0, CLEAVE_F32, in, out, 3, 1, pairs);
  EXPECT_EQ(out[2], 3.0f);
  EXPECT_FALSE(cleave_rt_failed()) << cleave_rt_error_message();
  void *p = cleave_rt_alloc(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  cleave_rt_free(p);
  cleave_rt_finalize();
  cleave_rt_all_reduce(0, CLEAVE_F32, CLEAVE_SUM, in, out, 3);
  EXPECT_TRUE(has(cleave_rt_error_message(), "not initialized"));
  cleave_rt_clear_error();
  cleave_rt_options_t opts;
  cleave_rt_default_options(&opts);
  opts.backend = "cuda";
  EXPECT_NE(cleave_rt_init(&opts), 0);
  EXPECT_TRUE(has(cleave_rt_error_message(), "no CUDA device: "))
      << cleave_rt_error_message();
  cleave_rt_clear_error();
  opts.backend = "tpu";
  EXPECT_NE(cleave_rt_init(&opts), 0);
  EXPECT_TRUE(has(cleave_rt_error_message(), "unknown backend 'tpu'"));
  cleave_rt_clear_error();
  double t0 = cleave_rt_now();
  EXPECT_GE(cleave_rt_now(), t0);
}

} // namespace

// The runtime counts the bytes its allocator hands out: live blocks and the
// peak since the last reset, which is what cleave-run reports per rank.
TEST(MemoryTest, AllocatorCountsLiveAndPeakBytes) {
  int64_t live0 = -1, peak0 = -1;
  cleave_rt_memory_stats(&live0, &peak0);
  ASSERT_GE(live0, 0);
  cleave_rt_reset_peak_memory();
  void *a = cleave_rt_alloc(1000);
  void *b = cleave_rt_alloc(3000);
  int64_t live = 0, peak = 0;
  cleave_rt_memory_stats(&live, &peak);
  EXPECT_EQ(live, live0 + 4000);
  EXPECT_EQ(peak, live0 + 4000);
  cleave_rt_free(b);
  void *c = cleave_rt_alloc(500);
  cleave_rt_memory_stats(&live, &peak);
  EXPECT_EQ(live, live0 + 1500);
  EXPECT_EQ(peak, live0 + 4000) << "the peak outlives the free";
  cleave_rt_reset_peak_memory();
  cleave_rt_memory_stats(nullptr, &peak);
  EXPECT_EQ(peak, live0 + 1500);
  cleave_rt_free(a);
  cleave_rt_free(c);
  cleave_rt_free(nullptr);
  cleave_rt_memory_stats(&live, nullptr);
  EXPECT_EQ(live, live0);
}

// Bulk copies between buffers and host memory (checkpoint snapshots and
// restores): memcpys on the cpu backend and before cleave_rt_init, whose
// buffers are host memory; pinning does nothing there.
TEST(MemoryTest, HostCopiesAreMemcpysOnTheCpuBackend) {
  EnvGuard env;
  clearLauncherEnv(env);
  for (bool initialized : {false, true}) {
    SCOPED_TRACE(initialized ? "cpu backend" : "no runtime");
    if (initialized)
      ASSERT_EQ(cleave_rt_init(nullptr), 0) << cleave_rt_error_message();
    EXPECT_EQ(cleave_rt_buffers_on_device(), 0);
    auto *a = static_cast<float *>(cleave_rt_alloc(64 * 4));
    auto *b = static_cast<float *>(cleave_rt_alloc(16 * 4));
    for (int i = 0; i < 64; ++i)
      a[i] = float(i);
    std::vector<float> host(80, -1.0f);
    EXPECT_EQ(cleave_rt_host_pin(host.data(), int64_t(host.size() * 4)), 0)
        << cleave_rt_error_message();
    // Any address inside a buffer; a block of 0 bytes may have no pointers.
    cleave_rt_copy_t out[] = {{host.data(), a + 8, 56 * 4},
                              {host.data() + 56, a, 8 * 4},
                              {nullptr, nullptr, 0}};
    ASSERT_EQ(cleave_rt_copy_to_host(out, 3), 0) << cleave_rt_error_message();
    for (int i = 0; i < 64; ++i)
      EXPECT_EQ(host[i], float(i < 56 ? i + 8 : i - 56)) << i;
    EXPECT_EQ(host[64], -1.0f);
    cleave_rt_copy_t in[] = {{b, host.data() + 4, 16 * 4}};
    ASSERT_EQ(cleave_rt_copy_from_host(in, 1), 0) << cleave_rt_error_message();
    for (int i = 0; i < 16; ++i)
      EXPECT_EQ(b[i], float(i + 12)) << i;
    EXPECT_EQ(cleave_rt_copy_to_host(nullptr, 0), 0);
    cleave_rt_host_unpin(host.data());
    // Bad blocks are named.
    cleave_rt_copy_t bad[] = {{host.data(), a, 4}, {host.data(), nullptr, 4}};
    EXPECT_NE(cleave_rt_copy_to_host(bad, 2), 0);
    EXPECT_TRUE(has(cleave_rt_error_message(),
                    "copy_to_host: block 1: cannot copy 4 bytes from "))
        << cleave_rt_error_message();
    cleave_rt_clear_error();
    EXPECT_NE(cleave_rt_copy_from_host(in, -1), 0);
    EXPECT_TRUE(
        has(cleave_rt_error_message(), "copy_from_host: cannot copy -1 blocks"))
        << cleave_rt_error_message();
    cleave_rt_clear_error();
    cleave_rt_free(a);
    cleave_rt_free(b);
    if (initialized)
      cleave_rt_finalize();
  }
}
