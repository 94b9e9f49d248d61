//===- Cluster.cpp - Cluster presets, local CPU processes, JSON files -----===//

#include "cleave/Planner/AutoShard.h"

#include <cstdlib>

namespace cleave::planner {

namespace {

/// `ranks` processes sharing this machine's 2 cores and 24 GiB
/// (docs/planner.md): OpenBLAS sgemm reaches about 230 GFLOP/s on both
/// cores together, and Gloo's loopback all-reduce about 1 GB/s of bus
/// bandwidth (2 GB/s with 2 ranks, 0.7 GB/s with 4).
cost::ClusterSpec localCpu(int ranks) {
  cost::ClusterSpec c;
  c.name = "local-cpu";
  c.nodes = 1;
  c.gpusPerNode = ranks;
  cost::GpuSpec &g = c.gpu;
  g.name = "cpu-process";
  g.peakF32 = g.peakTF32 = g.peakBF16 = g.peakF16 = 230e9 / ranks;
  g.peakF8 = 0;
  g.hbmBytes = 24.0 * (1ull << 30) / ranks;
  g.hbmBandwidth = 20e9 / ranks;
  g.smCount = 1;
  g.gemmEfficiency = 0.7;
  g.memoryEfficiency = 0.5;
  // cleave-run's memory is the program's buffers, as the runtime's
  // allocator counts them: no CUDA context, no NCCL buffers.
  g.runtimeReservedBytes = 0;
  g.communicatorBufferBytes = 0;
  c.intra.kind = cost::IntraNodeKind::PCIe;
  c.intra.bandwidth = 1e9;
  c.intra.latency = 50e-6;
  c.inter.nicsPerNode = 1;
  c.inter.nicBandwidth = 1e9;
  c.inter.latency = 50e-6;
  return c;
}

} // namespace

cost::Result<PlanCluster> resolveCluster(const std::string &name, int gpus) {
  using R = cost::Result<PlanCluster>;
  if (gpus < 0)
    return R::failure("gpus: expected a count >= 0, got " +
                      std::to_string(gpus));
  if (name == "local-cpu") {
    int ranks = gpus ? gpus : 4;
    if (ranks > 64)
      return R::failure("gpus: local-cpu runs at most 64 processes, got " +
                        std::to_string(ranks));
    // A measured spec (cleave-measure-local-cpu --out DIR) replaces the
    // built-in one.
    if (const char *dir = std::getenv("CLEAVE_LOCAL_CPU_SPEC"); dir && *dir) {
      std::string path =
          std::string(dir) + "/local-cpu-" + std::to_string(ranks) + ".json";
      cost::Result<cost::ClusterSpec> c = cost::loadClusterFile(path);
      if (!c)
        return R::failure("CLEAVE_LOCAL_CPU_SPEC: " + c.error() +
                          " (write it with cleave-measure-local-cpu --ranks " +
                          std::to_string(ranks) + " --out " + dir + ")");
      return PlanCluster{*c, true};
    }
    return PlanCluster{localCpu(ranks), true};
  }
  bool file = name.find('/') != std::string::npos ||
              (name.size() > 5 && name.substr(name.size() - 5) == ".json");
  if (file) {
    cost::Result<cost::ClusterSpec> c = cost::loadClusterFile(name);
    if (!c)
      return R::failure(c.error());
    if (gpus > c->numGpus())
      return R::failure("gpus: " + std::to_string(gpus) + " is more than the " +
                        std::to_string(c->numGpus()) + " GPUs of " + name);
    return PlanCluster{*c, false};
  }
  int perNode = 8;
  if (gpus % perNode != 0 && gpus > perNode)
    return R::failure("gpus: " + std::to_string(gpus) +
                      " is not a whole number of 8-GPU nodes of " + name);
  cost::Result<cost::ClusterSpec> c =
      cost::lookupClusterPreset(name, std::max(1, (gpus + 7) / perNode));
  if (!c)
    return R::failure("cluster: " + c.error() +
                      ", local-cpu, or a JSON file path");
  return PlanCluster{*c, false};
}

} // namespace cleave::planner
