//===- Cluster.cpp - GPU and node presets ---------------------------------===//
//
// Every number here is a vendor datasheet value unless the comment says
// otherwise; docs/cost-model.md lists them with their sources.
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Cluster.h"

#include <cmath>
#include <map>
#include <sstream>

namespace cleave::cost {

double GpuSpec::peakFlops(DType dtype) const {
  switch (dtype) {
  case DType::F32:
    return peakF32;
  case DType::BF16:
    return peakBF16;
  case DType::F16:
    return peakF16;
  case DType::F8E4M3:
    return peakF8;
  }
  return 0;
}

const char *toString(IntraNodeKind kind) {
  switch (kind) {
  case IntraNodeKind::NVSwitch:
    return "nvswitch";
  case IntraNodeKind::NVLinkMesh:
    return "nvlink-mesh";
  case IntraNodeKind::PCIe:
    return "pcie";
  }
  return "?";
}

double ClusterSpec::nicBandwidthPerGpu() const {
  if (gpusPerNode <= 0)
    return 0;
  return inter.nicsPerNode * inter.nicBandwidth / gpusPerNode;
}

const MeasuredCollective *ClusterSpec::measured(const std::string &op,
                                                int groupSize) const {
  for (const MeasuredCollective &m : measuredCollectives)
    if (m.op == op && m.groupSize == groupSize && !m.points.empty())
      return &m;
  return nullptr;
}

std::string ClusterSpec::validate() const {
  auto positive = [](const char *field, double v) -> std::string {
    if (v > 0 && std::isfinite(v))
      return "";
    return std::string("cluster.") + field +
           ": expected a positive number, got " + std::to_string(v);
  };
  for (auto [field, v] :
       {std::pair{"nodes", double(nodes)},
        std::pair{"gpus_per_node", double(gpusPerNode)},
        std::pair{"gpu.hbm_gb", gpu.hbmBytes},
        std::pair{"gpu.hbm_tb_per_s", gpu.hbmBandwidth},
        std::pair{"gpu.sm_count", double(gpu.smCount)},
        std::pair{"gpu.gemm_efficiency", gpu.gemmEfficiency},
        std::pair{"gpu.memory_efficiency", gpu.memoryEfficiency},
        std::pair{"gpu.peak_tflops.bf16", gpu.peakBF16},
        std::pair{"intra_node.gb_per_s", intra.bandwidth},
        std::pair{"intra_node.latency_us", intra.latency}})
    if (std::string err = positive(field, v); !err.empty())
      return err;
  if (gpu.gemmEfficiency > 1 || gpu.memoryEfficiency > 1 ||
      !(gpu.gemmEfficiencyF8 >= 0 && gpu.gemmEfficiencyF8 <= 1))
    return "cluster.gpu: gemm_efficiency, gemm_efficiency_fp8 and "
           "memory_efficiency are fractions and must be at most 1";
  if (nodes > 1) {
    for (auto [field, v] :
         {std::pair{"inter_node.nics_per_node", double(inter.nicsPerNode)},
          std::pair{"inter_node.nic_gbit_per_s", inter.nicBandwidth},
          std::pair{"inter_node.latency_us", inter.latency}})
      if (std::string err = positive(field, v); !err.empty())
        return err;
  }
  if (inter.oversubscription < 1)
    return "cluster.inter_node.oversubscription: expected a number >= 1, "
           "got " +
           std::to_string(inter.oversubscription);
  if (inter.podNodes < 0)
    return "cluster.inter_node.pod_nodes: expected a count >= 0, got " +
           std::to_string(inter.podNodes);
  if (hostCores < 0)
    return "cluster.measured.cpu_cores: expected a positive integer, got " +
           std::to_string(hostCores);
  if (!(hostComputeCapacity == 0 ||
        (hostComputeCapacity >= 1 && hostComputeCapacity <= gpusPerNode)))
    return "cluster.measured.compute_capacity: expected a number from 1 to "
           "gpus_per_node (" +
           std::to_string(gpusPerNode) + "), got " + [&] {
             std::ostringstream os;
             os << hostComputeCapacity;
             return os.str();
           }();
  return "";
}

namespace {

constexpr double kTera = 1e12, kGiga = 1e9, kMicro = 1e-6;
/// Device memory is what CUDA reports as the device's total
/// (cudaDeviceProp::totalGlobalMem, torch.cuda.get_device_properties) in
/// MiB: A100-SXM4-40GB 40,536; A100-SXM4-80GB 81,117 (85,056,798,720 B);
/// H100 80GB HBM3 81,082-81,090; H200 143,156. nvidia-smi prints 40,960 /
/// 81,920 / 81,559 / 143,771 MiB, including what the driver keeps.
constexpr double kMebi = 1024.0 * 1024.0;

/// NVIDIA A100 Tensor Core GPU datasheet (2021): 19.5 / 156 / 312 / 312
/// TFLOP/s dense, no fp8, 108 SMs; 40 GB at 1,555 GB/s or 80 GB at
/// 2,039 GB/s. Achievable fractions: see docs/cost-model.md ("GPU
/// efficiencies").
GpuSpec a100(bool big) {
  GpuSpec g;
  g.name = big ? "a100-sxm4-80gb" : "a100-sxm4-40gb";
  g.peakF32 = 19.5 * kTera;
  g.peakTF32 = 156 * kTera;
  g.peakBF16 = g.peakF16 = 312 * kTera;
  g.peakF8 = 0;
  g.hbmBytes = (big ? 81117 : 40536) * kMebi;
  g.hbmBandwidth = (big ? 2039 : 1555) * kGiga;
  g.smCount = 108;
  g.gemmEfficiency = 0.72;
  g.memoryEfficiency = 0.80;
  return g;
}

/// NVIDIA H100 Tensor Core GPU datasheet (SXM5): 67 / 494.7 / 989.4 / 989.4
/// / 1,978.9 TFLOP/s dense, 80 GB HBM3 at 3.35 TB/s, 132 SMs. H200 (H200
/// datasheet): same GPU, 141 GB HBM3e at 4.8 TB/s. GEMM efficiencies:
/// cuBLASLt on H100 at Llama-2-70B training shapes (M = 16,384 tokens),
/// meta-pytorch/float8_experimental PRs #38 and #100: bf16 539-605
/// TFLOP/s, fp8 (torch._scaled_mm) 1,095-1,414 TFLOP/s; divided by this
/// model's tiling and K-ramp factors for those shapes (0.91-0.96), the
/// medians of the eight measurements are 0.60 and 0.71 (docs/cost-model.md).
GpuSpec h100(bool h200) {
  GpuSpec g;
  g.name = h200 ? "h200-sxm-141gb" : "h100-sxm5-80gb";
  g.peakF32 = 66.9 * kTera;
  g.peakTF32 = 494.7 * kTera;
  g.peakBF16 = g.peakF16 = 989.4 * kTera;
  g.peakF8 = 1978.9 * kTera;
  g.hbmBytes = (h200 ? 143156 : 81090) * kMebi;
  g.hbmBandwidth = (h200 ? 4800 : 3350) * kGiga;
  g.smCount = 132;
  g.gemmEfficiency = 0.60;
  g.gemmEfficiencyF8 = 0.71;
  g.memoryEfficiency = 0.85;
  return g;
}

/// DGX A100 (DGX A100 User Guide / SuperPOD reference architecture): 8
/// GPUs on six NVSwitches, NVLink 3 at 600 GB/s per GPU both directions
/// (300 GB/s each way); 8 ConnectX-6 HDR 200 Gb/s compute NICs on a
/// rail-optimized fat tree. DGX H100: NVLink 4 at 900 GB/s (450 each way)
/// through NVSwitch 3 with NVLink SHARP; 8 ConnectX-7 NDR 400 Gb/s.
/// Latencies: NCCL's per-step latency of its Simple protocol
/// (src/graph/tuning.cc, hwLat: NVLink ring 3.4 us, network ring 9.6 us).
ClusterSpec dgx(const std::string &name, GpuSpec gpu, bool hopper, int nodes) {
  ClusterSpec c;
  c.name = name;
  c.gpu = std::move(gpu);
  c.nodes = nodes;
  c.gpusPerNode = 8;
  c.intra.kind = IntraNodeKind::NVSwitch;
  c.intra.bandwidth = (hopper ? 450 : 300) * kGiga;
  c.intra.latency = 3.4 * kMicro;
  c.intra.nvls = hopper;
  c.inter.nicsPerNode = 8;
  c.inter.nicBandwidth = (hopper ? 400 : 200) / 8.0 * kGiga;
  c.inter.latency = 9.6 * kMicro;
  c.inter.railOptimized = true;
  c.inter.sharp = false;
  return c;
}

const std::map<std::string, GpuSpec> &gpuPresets() {
  static const std::map<std::string, GpuSpec> p = [] {
    std::map<std::string, GpuSpec> m;
    for (GpuSpec g : {a100(false), a100(true), h100(false), h100(true)})
      m[g.name] = g;
    return m;
  }();
  return p;
}

} // namespace

Result<GpuSpec> lookupGpuPreset(const std::string &name) {
  auto it = gpuPresets().find(name);
  if (it == gpuPresets().end()) {
    std::string known;
    for (const auto &[n, _] : gpuPresets())
      known += (known.empty() ? "" : ", ") + n;
    return Result<GpuSpec>::failure("unknown GPU preset '" + name +
                                    "' (known: " + known + ")");
  }
  return it->second;
}

std::vector<std::string> clusterPresetNames() {
  return {"dgx-a100-40gb", "dgx-a100-80gb", "dgx-h100", "dgx-h200"};
}

Result<ClusterSpec> lookupClusterPreset(const std::string &name, int nodes) {
  if (nodes <= 0)
    return Result<ClusterSpec>::failure(
        "cluster.nodes: expected a positive number, got " +
        std::to_string(nodes));
  if (name == "dgx-a100-40gb")
    return dgx(name, a100(false), false, nodes);
  if (name == "dgx-a100-80gb")
    return dgx(name, a100(true), false, nodes);
  if (name == "dgx-h100")
    return dgx(name, h100(false), true, nodes);
  if (name == "dgx-h200")
    return dgx(name, h100(true), true, nodes);
  std::string known;
  for (const std::string &n : clusterPresetNames())
    known += (known.empty() ? "" : ", ") + n;
  return Result<ClusterSpec>::failure("unknown cluster preset '" + name +
                                      "' (known: " + known + ")");
}

} // namespace cleave::cost
