//===- LauncherTest.cpp - cleave_launch_local -----------------------------===//

#include "MultiProcess.h"

#include "cleave/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <string>

using namespace cleave::test;

namespace {

bool has(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

/// Runs the launcher in a child (so its output can be captured).
RankResult launch(const std::vector<std::string> &args, int nprocs,
                  int64_t timeoutMs, std::vector<int32_t> *status = nullptr,
                  const char *rendezvous = nullptr) {
  auto body = [&](int) -> int {
    std::vector<char *> argv;
    for (const std::string &a : args)
      argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    cleave_launch_options_t o{};
    o.nprocs = nprocs;
    o.argv = argv.data();
    o.prefix_output = 1;
    o.timeout_ms = timeoutMs;
    o.rendezvous = rendezvous;
    std::vector<int32_t> codes(nprocs, 99);
    o.exit_status = codes.data();
    int rc = cleave_launch(&o);
    std::printf("RC=%d STATUS=", rc);
    for (int32_t c : codes)
      std::printf("%d,", c);
    std::printf("\n");
    return 0;
  };
  RunOptions options;
  options.deadlineSeconds = 30;
  return runRanks(1, body, options)[0];
}

TEST(LauncherTest, SetsTheEnvironmentAndPrefixesOutput) {
  RankResult r = launch({"/bin/sh", "-c",
                         "echo \"r=$RANK w=$WORLD_SIZE l=$LOCAL_RANK "
                         "a=$MASTER_ADDR p=${MASTER_PORT:+set} "
                         "z=$CLEAVE_RENDEZVOUS\"; echo err >&2"},
                        3, 5000);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_TRUE(has(r.output, "RC=0 STATUS=0,0,0,")) << r.output;
  EXPECT_TRUE(has(r.output, "[rank 2] r=2 w=3 l=2 a=127.0.0.1 p=set "
                            "z=file:/"))
      << r.output;
  EXPECT_TRUE(has(r.output, "[rank 0] err")) << r.output;
  r = launch({"/bin/sh", "-c", "echo z=$CLEAVE_RENDEZVOUS"}, 1, 5000, nullptr,
             "tcp");
  EXPECT_TRUE(has(r.output, "[rank 0] z=tcp://127.0.0.1:")) << r.output;
}

TEST(LauncherTest, ReportsFailuresAndEndsTheOthers) {
  // Rank 1 exits with 3; the others would sleep for a minute.
  RankResult r = launch(
      {"/bin/sh", "-c", "if [ $RANK = 1 ]; then exit 3; fi; exec sleep 60"}, 3,
      500);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_TRUE(has(r.output, "cleave_launch_local: rank 1 (pid")) << r.output;
  EXPECT_TRUE(has(r.output, "exited with status 3")) << r.output;
  EXPECT_TRUE(has(r.output, "terminating rank(s) 0, 2")) << r.output;
  EXPECT_TRUE(has(r.output, "RC=3 STATUS=-15,3,-15,")) << r.output;
  EXPECT_LT(r.seconds, 10.0);
}

TEST(LauncherTest, ReportsASignal) {
  RankResult r =
      launch({"/bin/sh", "-c", "if [ $RANK = 0 ]; then kill -9 $$; fi; exit 0"},
             2, 2000);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_TRUE(has(r.output, "rank 0 (pid")) << r.output;
  EXPECT_TRUE(has(r.output, "was killed by signal 9 (Killed)")) << r.output;
  EXPECT_TRUE(has(r.output, "RC=137 STATUS=-9,0,")) << r.output;
}

TEST(LauncherTest, MissingProgram) {
  RankResult r = launch({"/nonexistent/program"}, 1, 1000);
  EXPECT_TRUE(has(r.output, "cannot run /nonexistent/program")) << r.output;
  EXPECT_TRUE(has(r.output, "RC=127")) << r.output;
}

/// The worker executable under the launcher: real collectives over tcp and
/// file rendezvous, bootstrapped from the launcher's environment.
TEST(LauncherTest, RunsRuntimeWorkers) {
  for (const char *mode : {"file", "tcp"}) {
    RankResult r =
        launch({CLEAVE_RUNTIME_WORKER, "allreduce"}, 4, 20000, nullptr, mode);
    ASSERT_EQ(r.exitCode, 0) << r.output;
    EXPECT_TRUE(has(r.output, "RC=0 STATUS=0,0,0,0,")) << mode << r.output;
    EXPECT_TRUE(has(r.output, "[rank 3] worker 3/4: all_reduce ok"))
        << r.output;
  }
}

/// A forked rank's body: reports its environment, fails on rank 1.
int forkedBody(void *arg) {
  const char *rank = std::getenv("RANK");
  std::printf("forked r=%s w=%s tag=%s\n", rank, std::getenv("WORLD_SIZE"),
              static_cast<const char *>(arg));
  return std::string(rank) == "1" ? 5 : 0;
}

TEST(LauncherTest, ForkedRanksRunTheBodyWithTheirEnvironment) {
  auto body = [&](int) -> int {
    static char tag[] = "shared";
    cleave_launch_options_t o{};
    o.nprocs = 2;
    o.prefix_output = 1;
    o.timeout_ms = 2000;
    o.body = forkedBody;
    o.body_arg = tag;
    std::vector<int32_t> codes(2, 99);
    o.exit_status = codes.data();
    int rc = cleave_launch(&o);
    std::printf("RC=%d STATUS=%d,%d\n", rc, codes[0], codes[1]);
    return 0;
  };
  RunOptions options;
  options.deadlineSeconds = 30;
  RankResult r = runRanks(1, body, options)[0];
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_TRUE(has(r.output, "[rank 0] forked r=0 w=2 tag=shared")) << r.output;
  EXPECT_TRUE(has(r.output, "[rank 1] forked r=1 w=2 tag=shared")) << r.output;
  EXPECT_TRUE(has(r.output, "RC=5 STATUS=0,5")) << r.output;
}

} // namespace
