//===- MeasureLocalCpu.cpp - The local-cpu cluster, measured --------------===//
//
// cleave-measure-local-cpu [--ranks 1,2,4,8] [--out DIR] [--quick]
//                          [--between N]
//
// Measures what the cost model needs to price N processes sharing this
// machine, with all N ranks running at once (as in a real step, they share
// the cores):
//   - GEMM rate per rank by shape (f32, the runtime's cleave_rt_gemm, i.e.
//     OpenBLAS with one thread per rank as cleave-run sets it);
//   - the node's compute capacity: the N ranks' summed GEMM rate over one
//     rank's rate alone (the others idle), in ranks computing alone;
//   - streaming memory bandwidth per rank (a STREAM-style triad);
//   - the runtime's all-reduce, all-gather and reduce-scatter on groups of
//     every size that divides N (2, 4, ..., N consecutive ranks; all the
//     groups at once, as a mesh axis's groups run in a step), and
//     point-to-point (ping-pong within every pair at once), from 1 KB to
//     16 MB, each point the mean of 4 interleaved turns (1 with --quick),
//     with the CPU time (user + system, all threads) a call costs each
//     rank's process; each op also fitted to t = latency + bytes /
//     bandwidth (relative least squares) with the bytes that the ring
//     algorithm moves per rank. As in a training step, each call follows
//     computation (an N x N x N GEMM on every rank, N = 256 unless
//     --between says otherwise; 0: calls back to back), whose own time and
//     CPU, timed alone, are taken off: the ranks arrive apart and the
//     buffers are out of the caches, which back-to-back calls never see.
// Prints a table and writes DIR/local-cpu-measured.json (every measured
// point and fit) and DIR/local-cpu-N.json, a cluster file for each N (with
// the measured GEMM rates and collective times as tables, "measured") that
// `--cluster` of cleave-plan, cleave-estimate and cleave-auto-shard reads,
// and that `cleave-run --plan auto` uses when CLEAVE_LOCAL_CPU_SPEC names
// DIR (docs/planner.md). Prints numbers; it is not a test.
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Cluster.h"
#include "cleave/Runtime/Runtime.h"
#include "cleave/Support/ClosedPipe.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using nlohmann::json;

namespace {

struct Config {
  std::vector<int> ranks = {1, 2, 4, 8};
  std::string outDir = ".";
  bool quick = false;
  /// Side of the square GEMM each rank runs before every timed collective
  /// call (0: calls back to back).
  int64_t between = 256;
  /// Seconds each timed case runs for at least.
  double minSeconds() const { return quick ? 0.02 : 0.15; }
  /// Turns in which each collective's point is timed (interleaved).
  int rounds() const { return quick ? 1 : 4; }
};

struct GemmShape {
  int64_t m, n, k;
};

/// Square GEMMs, and the shapes of small transformer layers (tokens x
/// hidden x hidden, tokens x 4 hidden x hidden, attention scores and their
/// product with V, weight gradients hidden x hidden x tokens), also split
/// by tensor parallelism (a quarter of the heads or of the FFN) and by
/// context parallelism (attention over a quarter of the sequence): the cost
/// model prices a GEMM at the rate of the nearest measured shape.
const GemmShape kGemmShapes[] = {
    {64, 64, 64},       {128, 128, 128},   {256, 256, 256},   {512, 512, 512},
    {1024, 1024, 1024}, {256, 64, 64},     {256, 256, 64},    {256, 64, 256},
    {1024, 256, 256},   {1024, 1024, 256}, {1024, 256, 1024}, {128, 128, 32},
    {128, 32, 128},     {256, 128, 128},   {512, 128, 128},   {1024, 128, 128},
    {1024, 512, 128},   {1024, 128, 512},  {128, 128, 1024},  {128, 512, 1024},
    {1024, 32, 128},    {1024, 96, 128},   {1024, 128, 32},   {96, 128, 1024},
    {32, 128, 1024},    {256, 384, 128},   {384, 128, 256},   {128, 384, 256},
    {128, 32, 32},      {32, 128, 32},     {32, 32, 32},      {32, 32, 64},
    {64, 64, 32},
};

/// 512 KiB: the runtime's largest direct all-reduce (CLEAVE_DIRECT_BYTES).
const int64_t kMessageBytes[] = {1 << 10,  4 << 10,   16 << 10,
                                 64 << 10, 256 << 10, 512 << 10,
                                 1 << 20,  4 << 20,   16 << 20};

/// Median of `samples` (copied).
double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  size_t n = samples.size();
  return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

/// User and system CPU seconds of this process so far, all its threads
/// (the runtime's communication threads too).
double processCpuSeconds() {
  struct rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval &t) { return t.tv_sec + 1e-6 * t.tv_usec; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

/// Runs `body` on every rank together, in batches of doubling size, until
/// the batches have taken `minSeconds` on the slowest rank (and at least
/// `minCalls` calls); returns this rank's seconds per call, and in
/// `cpuPerCall` its process's CPU seconds per call. The ranks agree
/// after each batch (one all-reduce, not timed), so collectives inside
/// `body` stay matched and a slow call cannot make the case run for long.
template <typename F>
double timeCalls(F &&body, double minSeconds, int minCalls = 3,
                 double *cpuPerCall = nullptr) {
  body(); // warm-up
  double total = 0, cpu = 0;
  long calls = 0;
  for (long batch = 1;; batch *= 2) {
    cleave_rt_barrier(CLEAVE_WORLD_GROUP);
    double c0 = processCpuSeconds(), t0 = cleave_rt_now();
    for (long i = 0; i < batch; ++i)
      body();
    total += cleave_rt_now() - t0;
    cpu += processCpuSeconds() - c0;
    calls += batch;
    double slowest = 0;
    cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F64, CLEAVE_MAX, &total,
                         &slowest, 1);
    if (slowest >= minSeconds && calls >= minCalls) {
      if (cpuPerCall)
        *cpuPerCall = cpu / double(calls);
      return total / double(calls);
    }
  }
}

/// All ranks' values of `x`, on every rank.
std::vector<double> gatherAll(double x) {
  std::vector<double> all(cleave_rt_world_size());
  cleave_rt_all_gather(CLEAVE_WORLD_GROUP, CLEAVE_F64, &x, all.data(), 1);
  return all;
}

json measureGemm(const Config &cfg) {
  json rows = json::array();
  for (const GemmShape &s : kGemmShapes) {
    std::vector<float> a(s.m * s.k, 0.5f), b(s.k * s.n, 0.25f),
        c(s.m * s.n, 0.0f);
    double sec = timeCalls(
        [&] {
          cleave_rt_gemm(CLEAVE_F32, 0, 0, 1, s.m, s.n, s.k, 1.0, a.data(), s.k,
                         0, b.data(), s.n, 0, 0.0, c.data(), s.n, 0);
        },
        cfg.minSeconds());
    double rate = 2.0 * s.m * s.n * s.k / sec;
    std::vector<double> all = gatherAll(rate);
    rows.push_back(
        {{"m", s.m},
         {"n", s.n},
         {"k", s.k},
         {"gflops_per_rank", median(all) / 1e9},
         {"gflops_min_rank", *std::min_element(all.begin(), all.end()) / 1e9}});
  }
  return rows;
}

/// The node's compute capacity: how many ranks computing alone the N ranks
/// computing at once equal. Rank 0 times the large GEMM shapes alone, the
/// others waiting in a barrier (asleep), against `rows`, the rates with
/// every rank computing; the median over the shapes of N x the rate at
/// once over the rate alone, between 1 and N. 1 on this machine's 2
/// virtual cores: two ranks GEMM at half the rate of one.
json measureCapacity(const Config &cfg, const json &rows) {
  int world = cleave_rt_world_size();
  std::vector<double> ratios;
  json shapes = json::array();
  for (const GemmShape &s : kGemmShapes) {
    if (s.m < 256 || s.n < 256 || s.k < 256)
      continue;
    double alone = 0;
    if (cleave_rt_rank() == 0) {
      std::vector<float> a(s.m * s.k, 0.5f), b(s.k * s.n, 0.25f),
          c(s.m * s.n, 0.0f);
      auto gemm = [&] {
        cleave_rt_gemm(CLEAVE_F32, 0, 0, 1, s.m, s.n, s.k, 1.0, a.data(), s.k,
                       0, b.data(), s.n, 0, 0.0, c.data(), s.n, 0);
      };
      gemm(); // warm-up
      long calls = 0;
      double t0 = cleave_rt_now(), sec = 0;
      for (long batch = 1; sec < cfg.minSeconds() || calls < 3; batch *= 2) {
        for (long i = 0; i < batch; ++i)
          gemm();
        calls += batch;
        sec = cleave_rt_now() - t0;
      }
      alone = 2.0 * s.m * s.n * s.k * double(calls) / sec;
    }
    cleave_rt_barrier(CLEAVE_WORLD_GROUP);
    double atOnce = 0;
    for (const json &row : rows)
      if (row["m"] == s.m && row["n"] == s.n && row["k"] == s.k)
        atOnce = double(row["gflops_per_rank"]) * 1e9;
    if (cleave_rt_rank() == 0 && alone > 0) {
      ratios.push_back(world * atOnce / alone);
      shapes.push_back({{"m", s.m},
                        {"n", s.n},
                        {"k", s.k},
                        {"gflops_alone", alone / 1e9},
                        {"ranks_equivalent", ratios.back()}});
    }
  }
  double capacity = ratios.empty()
                        ? double(world)
                        : std::clamp(median(ratios), 1.0, double(world));
  return {{"ranks_equivalent", capacity}, {"shapes", shapes}};
}

json measureMemory(const Config &cfg) {
  // 3 arrays of 16 MB each per rank: well above the caches of this machine.
  size_t n = size_t(4) << 20;
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
  double sec = timeCalls(
      [&] {
        for (size_t i = 0; i < n; ++i)
          c[i] = a[i] + 1.5f * b[i];
        // Keep the loop from being removed.
        if (c[n / 2] == -1.0f)
          std::abort();
      },
      cfg.minSeconds());
  double bandwidth = 3.0 * n * sizeof(float) / sec;
  std::vector<double> all = gatherAll(bandwidth);
  return {{"triad_gb_per_s_per_rank", median(all) / 1e9},
          {"triad_gb_per_s_min_rank",
           *std::min_element(all.begin(), all.end()) / 1e9}};
}

/// Fits t = alpha + x / beta to (x, t) minimising the relative error.
std::pair<double, double> fitLatencyBandwidth(const std::vector<double> &x,
                                              const std::vector<double> &t) {
  // Weighted least squares with weights 1 / t^2 on [1, x] . [alpha, 1/beta].
  double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double w = 1.0 / (t[i] * t[i]);
    s11 += w;
    s12 += w * x[i];
    s22 += w * x[i] * x[i];
    r1 += w * t[i];
    r2 += w * x[i] * t[i];
  }
  double det = s11 * s22 - s12 * s12;
  double alpha = (r1 * s22 - r2 * s12) / det;
  double invBeta = (s11 * r2 - s12 * r1) / det;
  if (alpha < 0 || invBeta <= 0) {
    // Degenerate (noise): latency from the smallest message, bandwidth
    // from the largest.
    alpha = std::max(0.0, t.front());
    invBeta = std::max(1e-15, (t.back() - alpha) / x.back());
  }
  return {alpha, 1.0 / invBeta};
}

/// Seconds per call of `op` ("all_reduce", "all_gather", "reduce_scatter"
/// or "p2p") on `group` (`size` members; every group of the mesh runs it at
/// once) with a buffer of `bytes`, timed for `seconds`; `moved` is set to
/// the bytes the ring algorithm moves per rank, and `cpu` to the CPU seconds
/// a call costs a member rank's process (the mean over the ranks; p2p: per
/// message, sender and receiver each).
double timeCollective(const std::string &op, int64_t group, int size,
                      int64_t bytes, double seconds, int64_t between,
                      double &moved, double &cpu) {
  int rank = int(cleave_rt_group_rank(group));
  // `bytes` is the full buffer: the all-reduce's, the all-gather's
  // result, the reduce-scatter's input, the p2p message.
  int64_t count = bytes / 4, block = std::max<int64_t>(1, count / size);
  std::vector<float> in(count, 1.0f), out(count, 0.0f);
  // As in a step, every call follows computation: the ranks arrive at it
  // apart, and its buffers are no longer in the caches. The computation's
  // own time and CPU, timed the same way alone, are taken off.
  int64_t g = between;
  std::vector<float> a(g * g, 0.5f), b(g * g, 0.25f), c(g * g, 0.0f);
  auto compute = [&] {
    if (g > 0)
      cleave_rt_gemm(CLEAVE_F32, 0, 0, 1, g, g, g, 1.0, a.data(), g, 0,
                     b.data(), g, 0, 0.0, c.data(), g, 0);
  };
  double computeCpu = 0,
         computeSec = g > 0 ? timeCalls(compute, seconds, 3, &computeCpu) : 0;
  double sec = 0;
  if (op == "all_reduce") {
    sec = timeCalls(
        [&] {
          compute();
          cleave_rt_all_reduce(group, CLEAVE_F32, CLEAVE_SUM, in.data(),
                               out.data(), count);
        },
        seconds, 3, &cpu);
    moved = 2.0 * (size - 1) / size * bytes;
  } else if (op == "all_gather") {
    sec = timeCalls(
        [&] {
          compute();
          cleave_rt_all_gather(group, CLEAVE_F32, in.data(), out.data(), block);
        },
        seconds, 3, &cpu);
    moved = double(size - 1) * block * 4;
  } else if (op == "reduce_scatter") {
    sec = timeCalls(
        [&] {
          compute();
          cleave_rt_reduce_scatter(group, CLEAVE_F32, CLEAVE_SUM, in.data(),
                                   out.data(), block);
        },
        seconds, 3, &cpu);
    moved = double(size - 1) * block * 4;
  } else {
    // Ping-pong between group ranks 0 and 1 of every pair: one-way time
    // is half a round trip.
    int64_t peer = 1 - rank;
    sec = timeCalls(
              [&] {
                compute();
                if (rank == 0) {
                  cleave_rt_send(group, peer, CLEAVE_F32, in.data(), count);
                  cleave_rt_recv(group, peer, CLEAVE_F32, out.data(), count);
                } else {
                  cleave_rt_recv(group, peer, CLEAVE_F32, out.data(), count);
                  cleave_rt_send(group, peer, CLEAVE_F32, in.data(), count);
                }
              },
              seconds, 3, &cpu) /
          2;
    cpu /= 2;
    // One computation per round trip, two messages.
    computeSec /= 2;
    computeCpu /= 2;
    moved = double(bytes);
  }
  sec = std::max(0.0, sec - computeSec);
  cpu = std::max(0.0, cpu - computeCpu);
  if (cleave_rt_failed()) {
    std::fprintf(stderr, "[rank %d] %s: %s\n", cleave_rt_rank(), op.c_str(),
                 cleave_rt_error_message());
    std::exit(1);
  }
  // The slowest rank bounds a collective (for p2p: the slowest pair's
  // sender).
  std::vector<double> cpus = gatherAll(cpu);
  cpu = 0;
  for (double c : cpus)
    cpu += c / double(cpus.size());
  std::vector<double> all = gatherAll(sec);
  return *std::max_element(all.begin(), all.end());
}

/// The points of one op and group size (the mean over the rounds of each
/// size's time, and of its CPU per rank) and their alpha-beta fit.
json collectiveJson(const std::string &op, int size,
                    const std::vector<std::vector<double>> &rounds,
                    const std::vector<std::vector<double>> &cpuRounds,
                    const std::vector<double> &moved) {
  json points = json::array();
  std::vector<double> ts;
  auto mean = [](const std::vector<std::vector<double>> &turns, size_t i) {
    double sum = 0;
    for (const std::vector<double> &turn : turns)
      sum += turn[i];
    return sum / double(turns.size());
  };
  for (size_t i = 0; i < moved.size(); ++i) {
    ts.push_back(mean(rounds, i));
    json each = json::array();
    for (const std::vector<double> &round : rounds)
      each.push_back(round[i] * 1e6);
    points.push_back({{"bytes", kMessageBytes[i]},
                      {"us", ts.back() * 1e6},
                      {"cpu_us", mean(cpuRounds, i) * 1e6},
                      {"rounds_us", each}});
  }
  auto [alpha, beta] = fitLatencyBandwidth(moved, ts);
  return {{"group_size", size},
          {"points", points},
          {"latency_us", alpha * 1e6},
          {"gb_per_s", beta / 1e9},
          {"bytes_model", op == "all_reduce" ? "2 (n-1)/n x bytes"
                          : op == "p2p"      ? "bytes"
                                             : "(n-1)/n x bytes"}};
}

/// Every collective on groups of each size that divides the world (2, 4,
/// ..., all ranks): the groups of consecutive ranks of a mesh
/// [world / size, size], all running at once as a mesh axis's groups do.
/// Point to point on pairs. A small call's time depends on where the
/// scheduler has put the ranks (a woken rank that shares its core with a
/// busy one waits up to a 4 ms slice), and that changes every few seconds:
/// each point is timed in `rounds` turns, interleaved with the other ops
/// and sizes of its group size, and priced at their mean.
json measureCollectives(const Config &cfg) {
  int world = cleave_rt_world_size();
  json r = json::object();
  for (int size = 2; size <= world; ++size) {
    if (world % size)
      continue;
    int64_t shape[2] = {world / size, size}, axis = 1;
    if (cleave_rt_define_mesh(2, shape, nullptr) ||
        cleave_rt_define_group(size, 1, &axis)) {
      std::fprintf(stderr, "[rank %d] groups of %d: %s\n", cleave_rt_rank(),
                   size, cleave_rt_error_message());
      std::exit(1);
    }
    std::vector<std::string> ops = {"all_reduce", "all_gather",
                                    "reduce_scatter"};
    if (size == 2)
      ops.push_back("p2p");
    const size_t sizes = std::size(kMessageBytes);
    // [op][round][size]
    std::vector<std::vector<std::vector<double>>> times(ops.size()),
        cpus(ops.size());
    std::vector<std::vector<double>> moved(ops.size(),
                                           std::vector<double>(sizes));
    for (int round = 0; round < cfg.rounds(); ++round)
      for (size_t o = 0; o < ops.size(); ++o) {
        times[o].emplace_back(sizes);
        cpus[o].emplace_back(sizes);
        for (size_t i = 0; i < sizes; ++i)
          times[o].back()[i] = timeCollective(
              ops[o], size, size, kMessageBytes[i], cfg.minSeconds(),
              cfg.between, moved[o][i], cpus[o].back()[i]);
      }
    for (size_t o = 0; o < ops.size(); ++o)
      r[ops[o]].push_back(
          collectiveJson(ops[o], size, times[o], cpus[o], moved[o]));
  }
  return r;
}

int runRank(void *arg) {
  const Config &cfg = *static_cast<const Config *>(arg);
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  if (cleave_rt_init(nullptr) != 0) {
    std::fprintf(stderr, "%s\n", cleave_rt_error_message());
    return 1;
  }
  int world = cleave_rt_world_size();
  json r;
  r["ranks"] = world;
  r["gemm"] = measureGemm(cfg);
  r["compute_capacity"] = measureCapacity(cfg, r["gemm"]);
  r["memory"] = measureMemory(cfg);
  if (world > 1) {
    r["collectives"] = measureCollectives(cfg);
    r["collectives_after_gemm"] = cfg.between;
  }
  int rank = cleave_rt_rank();
  cleave_rt_finalize();
  if (rank == 0) {
    std::ofstream out(cfg.outDir + "/.ranks-" + std::to_string(world) +
                      ".json");
    out << r.dump(2);
    if (!out)
      return 1;
  }
  return 0;
}

/// `t` made non-decreasing (a larger message is not faster) by pooling
/// adjacent violators (isotonic regression, least squares): the noise of
/// ranks sharing cores averaged out where it breaks the order.
std::vector<double> monotone(const std::vector<double> &t) {
  std::vector<std::pair<double, int>> blocks; // (mean, count)
  for (double x : t) {
    blocks.push_back({x, 1});
    while (blocks.size() > 1 &&
           blocks[blocks.size() - 2].first > blocks.back().first) {
      auto [m2, c2] = blocks.back();
      blocks.pop_back();
      auto &[m1, c1] = blocks.back();
      m1 = (m1 * c1 + m2 * c2) / (c1 + c2);
      c1 += c2;
    }
  }
  std::vector<double> out;
  for (auto [m, c] : blocks)
    out.insert(out.end(), size_t(c), m);
  return out;
}

/// The cluster file for `n` ranks from its measurement. GEMM: every
/// measured shape's rate (the cost model takes the nearest shape's), and as
/// the peak the median over the shapes at or above 256 in every dimension.
/// Collectives: every measured point, by op and group size, made monotone
/// in size (the cost model interpolates them); the links' latency and bandwidth
/// are the world all-reduce's fit (latency per ring step, the cost model's
/// unit), used only for what was not measured. Each point's CPU per rank,
/// made monotone the same way, and the host's cores, with which the
/// simulator bounds a step by the CPU its ranks need.
cleave::cost::ClusterSpec clusterFor(const json &m, int hostCores) {
  int n = m["ranks"];
  cleave::cost::ClusterSpec c;
  c.name = "local-cpu-measured";
  c.nodes = 1;
  c.gpusPerNode = n;
  cleave::cost::GpuSpec &g = c.gpu;
  g.name = "cpu-process";
  std::vector<double> large;
  for (const json &row : m["gemm"])
    if (row["m"] >= 256 && row["n"] >= 256 && row["k"] >= 256)
      large.push_back(double(row["gflops_per_rank"]) * 1e9);
  double rate = median(large);
  g.peakF32 = g.peakTF32 = g.peakBF16 = g.peakF16 = rate;
  g.peakF8 = 0;
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  g.hbmBytes = double(pages) * pageSize / n;
  g.hbmBandwidth = double(m["memory"]["triad_gb_per_s_per_rank"]) * 1e9;
  g.smCount = 1;
  g.gemmEfficiency = 1.0;
  g.memoryEfficiency = 1.0;
  // The program's buffers are what cleave-run counts (the runtime's
  // allocator): a CPU rank has no CUDA context and no NCCL buffers, and
  // Gloo's buffers are outside the count.
  g.runtimeReservedBytes = 0;
  g.communicatorBufferBytes = 0;
  // The rates above are every rank's at once; with fewer ranks computing
  // the simulator runs them faster, up to the capacity's rate alone.
  if (n > 1)
    c.hostComputeCapacity = double(m["compute_capacity"]["ranks_equivalent"]);
  for (const json &row : m["gemm"])
    g.measuredGemms.push_back({double(row["m"]), double(row["n"]),
                               double(row["k"]),
                               double(row["gflops_per_rank"]) * 1e9});
  c.intra.kind = cleave::cost::IntraNodeKind::PCIe;
  if (n > 1) {
    for (auto it = m["collectives"].begin(); it != m["collectives"].end(); ++it)
      for (const json &group : it.value()) {
        cleave::cost::MeasuredCollective t;
        t.op = it.key() == "p2p" ? "send_recv" : it.key();
        t.groupSize = int(group["group_size"]);
        std::vector<double> times, cpus;
        for (const json &p : group["points"]) {
          times.push_back(double(p["us"]) * 1e-6);
          cpus.push_back(double(p["cpu_us"]) * 1e-6);
        }
        times = monotone(times);
        t.cpuSeconds = monotone(cpus);
        for (size_t i = 0; i < times.size(); ++i)
          t.points.push_back({double(group["points"][i]["bytes"]), times[i]});
        c.measuredCollectives.push_back(t);
      }
    const json &ar = m["collectives"]["all_reduce"].back();
    c.intra.bandwidth = double(ar["gb_per_s"]) * 1e9;
    c.intra.latency =
        std::max(1e-7, double(ar["latency_us"]) * 1e-6 / (2.0 * (n - 1)));
  } else {
    c.intra.bandwidth = g.hbmBandwidth;
    c.intra.latency = 1e-6;
  }
  c.inter.nicsPerNode = 1;
  c.inter.nicBandwidth = c.intra.bandwidth;
  c.inter.latency = c.intra.latency;
  if (n > 1)
    c.hostCores = hostCores;
  return c;
}

bool parseArgs(int argc, char **argv, Config &cfg) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char *name) -> const char * {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", argv[0], name);
        std::exit(1);
      }
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: %s [--ranks 1,2,4,8] [--out DIR] [--quick] "
          "[--between N]\n\n"
          "Measures GEMM rate by shape, memory bandwidth and the runtime's "
          "collectives\nfor N local ranks running together; writes "
          "DIR/local-cpu-measured.json and\nDIR/local-cpu-N.json (cluster "
          "files for --cluster, and for cleave-run --plan auto\nwith "
          "CLEAVE_LOCAL_CPU_SPEC=DIR).\n\n"
          "--between N: each timed collective call follows an N x N x N "
          "GEMM on every\nrank, as in a step (its time taken off); "
          "default 256, 0: back to back.\n",
          argv[0]);
      std::exit(0);
    } else if (arg == "--quick") {
      cfg.quick = true;
    } else if (arg == "--between") {
      const char *text = value("--between");
      char *end = nullptr;
      long n = std::strtol(text, &end, 10);
      if (!*text || *end || n < 0 || n > 4096) {
        std::fprintf(stderr,
                     "%s: --between: '%s' is not a GEMM size in 0..4096\n",
                     argv[0], text);
        return false;
      }
      cfg.between = n;
    } else if (arg == "--out") {
      cfg.outDir = value("--out");
    } else if (arg == "--ranks") {
      cfg.ranks.clear();
      std::string list = value("--ranks");
      size_t pos = 0;
      while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        std::string item = list.substr(pos, comma - pos);
        char *end = nullptr;
        long n = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end || n < 1 || n > 64) {
          std::fprintf(stderr,
                       "%s: --ranks: '%s' is not a rank count in 1..64\n",
                       argv[0], item.c_str());
          return false;
        }
        cfg.ranks.push_back(int(n));
        if (comma == std::string::npos)
          break;
        pos = comma + 1;
      }
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s'; see --help\n", argv[0],
                   arg.c_str());
      return false;
    }
  }
  return true;
}

void printMeasurement(const json &m) {
  int n = m["ranks"];
  std::printf("== %d rank%s ==\n", n, n > 1 ? "s" : "");
  std::printf("  GEMM f32 (per rank, all ranks at once):\n");
  for (const json &row : m["gemm"])
    std::printf("    %5d x %5d x %5d  %7.1f GFLOP/s (slowest rank %.1f)\n",
                int(row["m"]), int(row["n"]), int(row["k"]),
                double(row["gflops_per_rank"]), double(row["gflops_min_rank"]));
  std::printf("  compute capacity: %.2f ranks computing alone\n",
              double(m["compute_capacity"]["ranks_equivalent"]));
  std::printf("  triad bandwidth per rank: %.2f GB/s\n",
              double(m["memory"]["triad_gb_per_s_per_rank"]));
  if (!m.contains("collectives"))
    return;
  for (auto it = m["collectives"].begin(); it != m["collectives"].end(); ++it)
    for (const json &c : it.value()) {
      std::printf("  %-14s x%d latency %7.1f us, bandwidth %6.3f GB/s  [",
                  it.key().c_str(), int(c["group_size"]),
                  double(c["latency_us"]), double(c["gb_per_s"]));
      for (const json &p : c["points"])
        std::printf(" %lldK:%.0fus/%.0f", (long long)p["bytes"] / 1024,
                    double(p["us"]), double(p["cpu_us"]));
      std::printf(" ]\n");
    }
}

} // namespace

int main(int argc, char **argv) {
  ::cleave::exitQuietlyOnClosedStdoutPosix();
  Config cfg;
  if (!parseArgs(argc, argv, cfg))
    return 1;
  ::mkdir(cfg.outDir.c_str(), 0755);
  int cores = int(::sysconf(_SC_NPROCESSORS_ONLN));
  json all;
  all["host_cores"] = cores;
  all["method"] = "bench/localcluster/MeasureLocalCpu.cpp";
  all["measurements"] = json::array();
  for (int n : cfg.ranks) {
    cleave_launch_options_t opts{};
    opts.nprocs = n;
    opts.prefix_output = 1;
    opts.timeout_ms = 60000;
    opts.body = runRank;
    opts.body_arg = &cfg;
    if (int rc = cleave_launch(&opts)) {
      std::fprintf(stderr, "measuring %d ranks failed (exit %d)\n", n, rc);
      return 1;
    }
    std::string part = cfg.outDir + "/.ranks-" + std::to_string(n) + ".json";
    std::ifstream in(part);
    json m = json::parse(in, nullptr, false);
    std::remove(part.c_str());
    if (m.is_discarded()) {
      std::fprintf(stderr, "%s: rank 0 wrote no measurement\n", part.c_str());
      return 1;
    }
    printMeasurement(m);
    std::fflush(stdout);
    all["measurements"].push_back(m);
    std::string path = cfg.outDir + "/local-cpu-" + std::to_string(n) + ".json";
    std::ofstream out(path);
    out << cleave::cost::clusterToJson(clusterFor(m, cores)) << "\n";
    if (!out) {
      std::fprintf(stderr, "%s: cannot write\n", path.c_str());
      return 1;
    }
  }
  std::string path = cfg.outDir + "/local-cpu-measured.json";
  std::ofstream out(path);
  out << all.dump(2) << "\n";
  if (!out) {
    std::fprintf(stderr, "%s: cannot write\n", path.c_str());
    return 1;
  }
  std::printf("wrote %s and local-cpu-N.json beside it\n", path.c_str());
  return 0;
}
