//===- CollectiveBench.cpp - Runtime collectives vs raw Gloo --------------===//
//
// cleave-bench-collectives [ranks...]   (default: 2 4)
//
// Launches itself as N local ranks (cleave_launch_local). Every rank inits
// the runtime and also builds a raw Gloo context on its own TCP device; then
// for sizes 1 KB .. 64 MB it times the runtime call and the raw Gloo call
// doing the same work one call of each in turn (so both meet the same
// moments of a shared machine), keeps the best of several rounds' medians,
// and rank 0 prints time, bus bandwidth and runtime/raw bandwidth ratio.
// Reduce-scatter has no raw options-style Gloo call: it is compared with raw
// all-reduce + keeping one block, and Gloo's legacy
// ReduceScatterHalvingDoubling; the runtime's four algorithms (ring, direct,
// halving, allreduce) and `auto` are all measured. All-to-all is compared
// with gloo::alltoall. CLEAVE_BENCH_OPS=all_to_all,reduce_scatter (any of
// all_reduce, all_gather, reduce_scatter, all_to_all) limits the ops;
// CLEAVE_BENCH_MAX_BYTES the sizes; CLEAVE_BENCH_STAT=min times the fastest
// call instead of the median. Ops with one runtime and one raw call also
// print `paired`: the median over all rounds of raw / runtime for each
// pair of adjacent calls, which cancels what the two calls of a pair meet
// alike (a core taken by another rank, a scheduler slice). Prints numbers;
// it is not a test.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/Runtime.h"
#include "cleave/Support/ClosedPipe.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr int kRounds = 6;

using Ctx = std::shared_ptr<gloo::Context>;

void rawAllreduce(const Ctx &ctx, float *p, size_t n, uint32_t tag) {
  gloo::AllreduceOptions o(ctx);
  o.setOutput(p, n);
  o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  o.setReduceFunction(
      static_cast<void (*)(void *, const void *, const void *, size_t)>(
          &gloo::sum<float>));
  o.setTag(tag);
  gloo::allreduce(o);
}

void rawAllgather(const Ctx &ctx, float *in, float *out, size_t n,
                  uint32_t tag) {
  gloo::AllgatherOptions o(ctx);
  o.setInput(in, n);
  o.setOutput(out, n * size_t(ctx->size));
  o.setTag(tag);
  gloo::allgather(o);
}

void rawAlltoall(const Ctx &ctx, float *in, float *out, size_t n,
                 uint32_t tag) {
  gloo::AlltoallOptions o(ctx);
  o.setInput(in, n);
  o.setOutput(out, n);
  o.setTag(tag);
  gloo::alltoall(o);
}

void rawBarrier(const Ctx &ctx) {
  gloo::BarrierOptions o(ctx);
  o.setTag(999);
  gloo::barrier(o);
}

/// Times every function of `fns` `iters` times, one call of each in turn
/// (the order rotating from call to call), so that the runtime and raw Gloo
/// meet the same moments of a shared machine: a scheduling stall or another
/// process's burst falls on both, not on one side's block of calls. Returns
/// each function's median call (each call timed alone), or with
/// CLEAVE_BENCH_STAT=min its fastest call (the uncontended time, for
/// comparisons on a loaded machine, where most calls wait for a core).
/// `sync` runs before and after (every rank calls the same functions in the
/// same order, so the collectives stay matched).
std::vector<double>
timeInterleaved(const std::vector<std::function<void()>> &fns,
                const std::function<void()> &sync, int iters,
                std::vector<std::vector<double>> *calls = nullptr) {
  sync();
  std::vector<std::vector<double>> times(fns.size());
  for (int i = 0; i < iters; ++i)
    for (size_t j = 0; j < fns.size(); ++j) {
      size_t f = (size_t(i) + j) % fns.size();
      double t0 = cleave_rt_now();
      fns[f]();
      times[f].push_back(cleave_rt_now() - t0);
    }
  sync();
  if (calls)
    *calls = times;
  static const bool fastest = [] {
    const char *stat = std::getenv("CLEAVE_BENCH_STAT");
    return stat && std::strcmp(stat, "min") == 0;
  }();
  std::vector<double> result;
  for (std::vector<double> &t : times) {
    if (fastest) {
      result.push_back(*std::min_element(t.begin(), t.end()));
      continue;
    }
    std::nth_element(t.begin(), t.begin() + iters / 2, t.end());
    result.push_back(t[size_t(iters / 2)]);
  }
  return result;
}

struct Row {
  std::string op;
  size_t bytes;
  double runtime, raw;
  double busFactor;
  /// The median over every pair of adjacent calls (the runtime's and raw
  /// Gloo's, one after the other) of raw / runtime; 0: not paired.
  double paired = 0;
};

void printRow(int n, const Row &r, const char *rawName) {
  double rtBw = r.bytes * r.busFactor / r.runtime / 1e9;
  double rawBw = r.bytes * r.busFactor / r.raw / 1e9;
  std::printf("%-24s ranks %d %9zu B  runtime %9.1f us %7.3f GB/s   %-22s "
              "%9.1f us %7.3f GB/s   ratio %.2f",
              r.op.c_str(), n, r.bytes, r.runtime * 1e6, rtBw, rawName,
              r.raw * 1e6, rawBw, r.raw / r.runtime);
  if (r.paired > 0)
    std::printf("  paired %.2f", r.paired);
  std::printf("\n");
}

/// The median of `v` (copied).
double medianOf(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

void printReduceScatter(int n, size_t rsBytes, const double *best, double gBus);

int runRank() {
  if (cleave_rt_init(nullptr) != 0) {
    std::fprintf(stderr, "%s\n", cleave_rt_error_message());
    return 1;
  }
  int rank = cleave_rt_rank(), n = cleave_rt_world_size();
  // Groups over the whole world, one per reduce-scatter algorithm.
  int64_t shape[] = {n};
  cleave_rt_define_mesh(1, shape, nullptr);
  int64_t axis[] = {0};
  const char *algos[] = {"ring", "direct", "allreduce", "auto", "halving"};
  for (int g = 0; g < 5; ++g) {
    ::setenv("CLEAVE_REDUCE_SCATTER", algos[g], 1);
    cleave_rt_define_group(g, 1, axis);
  }
  // Raw Gloo on its own device, through the same rendezvous directory.
  const char *url = std::getenv("CLEAVE_RENDEZVOUS");
  if (!url || std::strncmp(url, "file:", 5) != 0) {
    std::fprintf(stderr, "run under the launcher with file rendezvous\n");
    return 1;
  }
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(url + 5);
  gloo::rendezvous::PrefixStore prefixed("rawgloo", store);
  auto raw = std::make_shared<gloo::rendezvous::Context>(rank, n);
  raw->setTimeout(std::chrono::milliseconds(120000));
  raw->connectFullMesh(prefixed, dev);
  Ctx ctx = raw;
  auto syncRaw = [&] { rawBarrier(ctx); };
  auto syncRt = [&] { cleave_rt_barrier(CLEAVE_WORLD_GROUP); };
  std::string ops = "all_reduce,all_gather,reduce_scatter,all_to_all";
  if (const char *only = std::getenv("CLEAVE_BENCH_OPS"))
    ops = only;
  auto enabled = [&](const char *op) {
    return ("," + ops + ",").find(std::string(",") + op + ",") !=
           std::string::npos;
  };
  std::map<size_t, std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>>>
      hd;
  size_t maxBytes = 64u << 20;
  if (const char *limit = std::getenv("CLEAVE_BENCH_MAX_BYTES"))
    maxBytes = size_t(std::atoll(limit));
  for (size_t bytes = 1024; bytes <= maxBytes; bytes *= 4) {
    size_t count = bytes / sizeof(float);
    size_t per = count / size_t(n);
    std::vector<float> a(count, 1.0f), b(count, 1.0f), out(count);
    int iters = int(std::clamp<size_t>((32u << 20) / bytes, 7, 300));
    double best[13];
    std::fill(best, best + 13, 1e30);
    // Raw / runtime of each pair of adjacent calls, by the runtime case's
    // index (ops with one runtime call and one raw call).
    std::vector<double> paired[13];
    std::vector<int> rs(static_cast<size_t>(n), static_cast<int>(per));
    std::vector<float *> hdPtrs{b.data()};
    if (enabled("reduce_scatter") && !hd.count(bytes))
      hd[bytes] = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
          ctx, hdPtrs, int(per * n), rs);
    // Each op's variants (the runtime's and raw Gloo's) are timed call by
    // call in turn (timeInterleaved); the best of kRounds medians is kept.
    using Case = std::pair<int, std::function<void()>>;
    auto rtReduceScatter = [&](int group) {
      return [&, group] {
        cleave_rt_reduce_scatter(group, CLEAVE_F32, CLEAVE_SUM, a.data(),
                                 out.data(), int64_t(per));
      };
    };
    std::vector<std::pair<const char *, std::vector<Case>>> cases = {
        {"all_reduce",
         {{0,
           [&] {
             cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F32, CLEAVE_SUM,
                                  a.data(), a.data(), int64_t(count));
           }},
          {1, [&] { rawAllreduce(ctx, b.data(), count, 1); }}}},
        {"all_gather",
         {{2,
           [&] {
             cleave_rt_all_gather(CLEAVE_WORLD_GROUP, CLEAVE_F32, a.data(),
                                  out.data(), int64_t(per));
           }},
          {3, [&] { rawAllgather(ctx, b.data(), out.data(), per, 2); }}}},
        {"reduce_scatter",
         {{9, rtReduceScatter(3)},
          {4, rtReduceScatter(0)},
          {5, rtReduceScatter(1)},
          {6, rtReduceScatter(2)},
          {10, rtReduceScatter(4)},
          {7,
           [&] {
             rawAllreduce(ctx, b.data(), per * n, 3);
             std::memcpy(out.data(), b.data() + rank * per, per * 4);
           }},
          {8, [&] { hd[bytes]->run(); }}}},
        {"all_to_all",
         {{11,
           [&] {
             cleave_rt_all_to_all(CLEAVE_WORLD_GROUP, CLEAVE_F32, a.data(),
                                  out.data(), int64_t(per));
           }},
          {12, [&] { rawAlltoall(ctx, b.data(), out.data(), per * n, 4); }}}}};
    auto sync = [&] {
      syncRt();
      syncRaw();
    };
    for (int round = 0; round < kRounds; ++round) {
      for (auto &[name, opCases] : cases) {
        if (!enabled(name))
          continue;
        std::vector<std::function<void()>> fns;
        for (Case &c : opCases)
          fns.push_back(c.second);
        std::vector<std::vector<double>> calls;
        std::vector<double> t = timeInterleaved(fns, sync, iters, &calls);
        for (size_t i = 0; i < opCases.size(); ++i)
          best[opCases[i].first] = std::min(best[opCases[i].first], t[i]);
        if (opCases.size() == 2)
          for (size_t c = 0; c < calls[0].size(); ++c)
            paired[opCases[0].first].push_back(calls[1][c] / calls[0][c]);
      }
      std::fill(a.begin(), a.end(), 1.0f);
      std::fill(b.begin(), b.end(), 1.0f);
    }
    if (cleave_rt_failed()) {
      std::fprintf(stderr, "%s\n", cleave_rt_error_message());
      return 1;
    }
    if (rank != 0)
      continue;
    double arBus = 2.0 * (n - 1) / n, gBus = double(n - 1) / n;
    size_t rsBytes = per * n * 4;
    if (enabled("all_reduce"))
      printRow(
          n,
          {"all_reduce", bytes, best[0], best[1], arBus, medianOf(paired[0])},
          "gloo allreduce");
    if (enabled("all_gather"))
      printRow(n,
               {"all_gather", per * n * 4, best[2], best[3], gBus,
                medianOf(paired[2])},
               "gloo allgather");
    if (enabled("all_to_all"))
      printRow(n,
               {"all_to_all", per * n * 4, best[11], best[12], gBus,
                medianOf(paired[11])},
               "gloo alltoall");
    if (enabled("reduce_scatter"))
      printReduceScatter(n, rsBytes, best, gBus);
    std::fflush(stdout);
  }
  cleave_rt_finalize();
  return 0;
}

/// The reduce-scatter rows: `auto` and each algorithm against raw Gloo.
void printReduceScatter(int n, size_t rsBytes, const double *best,
                        double gBus) {
  printRow(n, {"reduce_scatter auto", rsBytes, best[9], best[7], gBus},
           "gloo allreduce+slice");
  double hdBest = best[8];
  printRow(n, {"reduce_scatter auto", rsBytes, best[9], hdBest, gBus},
           "gloo RS halv.-doubl.");
  printRow(n, {"reduce_scatter ring", rsBytes, best[4], best[7], gBus},
           "gloo allreduce+slice");
  printRow(n, {"reduce_scatter ring", rsBytes, best[4], hdBest, gBus},
           "gloo RS halv.-doubl.");
  printRow(n, {"reduce_scatter direct", rsBytes, best[5], best[7], gBus},
           "gloo allreduce+slice");
  printRow(n, {"reduce_scatter halving", rsBytes, best[10], hdBest, gBus},
           "gloo RS halv.-doubl.");
  printRow(n, {"reduce_scatter allreduce", rsBytes, best[6], best[7], gBus},
           "gloo allreduce+slice");
}

} // namespace

/// The shared layer's cost per call, without communication: all_reduce of
/// one element on a world of one (a copy) through the full entry point
/// (checks, sequence number, flight recorder, progress atomics).
void measureOverhead() {
  cleave_rt_options_t opts;
  cleave_rt_default_options(&opts);
  opts.rank = 0;
  opts.world_size = 1;
  if (cleave_rt_init(&opts) != 0)
    return;
  float x = 1.0f, y = 0.0f;
  const int calls = 1000000;
  double t0 = cleave_rt_now();
  for (int i = 0; i < calls; ++i)
    cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F32, CLEAVE_SUM, &x, &y, 1);
  double perCall = (cleave_rt_now() - t0) / calls;
  std::printf("runtime bookkeeping per call (world of 1, 1 element): %.0f ns"
              "\n",
              perCall * 1e9);
  cleave_rt_finalize();
}

int main(int argc, char **argv) {
  ::cleave::exitQuietlyOnClosedStdoutPosix();
  if (std::getenv("CLEAVE_BENCH_RANK"))
    return runRank();
  std::vector<int> counts;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("usage: %s [ranks...]\n\nTimes the runtime's collectives "
                  "against raw Gloo on each number of local ranks (default: "
                  "2 4).\n",
                  argv[0]);
      return 0;
    }
    char *end = nullptr;
    long n = std::strtol(arg.c_str(), &end, 10);
    if (arg.empty() || *end != '\0' || n < 1) {
      std::fprintf(stderr,
                   "%s: '%s' is not a rank count (a positive integer); "
                   "see --help\n",
                   argv[0], arg.c_str());
      return 1;
    }
    counts.push_back(int(n));
  }
  measureOverhead();
  if (counts.empty())
    counts = {2, 4};
  ::setenv("CLEAVE_BENCH_RANK", "1", 1);
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  char *args[] = {argv[0], nullptr};
  int rc = 0;
  for (int n : counts) {
    const char *stat = std::getenv("CLEAVE_BENCH_STAT");
    std::printf("== %d ranks on 127.0.0.1 (f32, sum; %s call, best of 6 "
                "rounds) ==\n",
                n,
                stat && std::strcmp(stat, "min") == 0 ? "fastest" : "median");
    std::fflush(stdout);
    rc |= cleave_launch_local(n, args, 0, 600000);
  }
  return rc;
}
