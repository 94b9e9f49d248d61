//===- Cluster.h - GPUs, nodes and the links between them -------*- C++ -*-===//
//
// What the hardware can do: per-GPU peak FLOP/s and memory, the link inside
// a node (NVLink through NVSwitch) and the fabric between nodes (NICs,
// rails, SHARP, oversubscription). Named presets for the DGX systems the
// published runs used; any spec can be read from a JSON file (see
// docs/cost-model.md for the schema), and errors name the field.
//
// Units everywhere in the cost model: seconds, bytes, FLOP/s, bytes/s.
// Bandwidths are per direction.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_CLUSTER_H
#define CLEAVE_COSTMODEL_CLUSTER_H

#include "cleave/CostModel/Result.h"
#include "cleave/ModelConfig/ModelConfig.h"

#include <optional>
#include <string>
#include <vector>

namespace cleave::cost {

/// A GEMM rate measured on the device (cleave-measure-local-cpu): C[m, n] =
/// A[m, k] B[k, n] at `flopsPerSecond`, every device of the node running
/// GEMMs at once.
struct MeasuredGemm {
  double m = 0, n = 0, k = 0;
  double flopsPerSecond = 0;
};

/// One GPU model. Peaks are dense (no structured sparsity) tensor-core rates
/// from the vendor datasheet; a peak of 0 means the dtype is unsupported.
struct GpuSpec {
  std::string name;
  double peakF32 = 0;  ///< FLOP/s, IEEE fp32 (non-tensor-core)
  double peakTF32 = 0; ///< FLOP/s, tf32 tensor cores
  double peakBF16 = 0; ///< FLOP/s
  double peakF16 = 0;  ///< FLOP/s
  double peakF8 = 0;   ///< FLOP/s, fp8 (e4m3/e5m2)
  double hbmBytes = 0;
  double hbmBandwidth = 0; ///< bytes/s
  int smCount = 0;
  /// Fraction of peak a large, well-shaped GEMM reaches with the vendor BLAS
  /// (a property of the chip: clocks under load, power capping).
  double gemmEfficiency = 0;
  /// The same for fp8 GEMMs, as a fraction of the fp8 peak (0: use
  /// gemmEfficiency). fp8 kernels do not reach the bf16 fraction of their
  /// doubled peak (docs/cost-model.md, "GPU efficiencies").
  double gemmEfficiencyF8 = 0;
  /// Fraction of `hbmBandwidth` a streaming kernel reaches.
  double memoryEfficiency = 0;
  /// Memory the device's runtime holds outside the program's buffers (a
  /// CUDA context, cuBLAS workspaces), and the buffers of each
  /// communicator. Unset: CostConstants' values for a CUDA GPU with NCCL.
  /// A local CPU rank has neither: its runtime counts only the program's
  /// buffers, which is what cleave-run reports.
  std::optional<double> runtimeReservedBytes;
  std::optional<double> communicatorBufferBytes;
  /// Measured GEMM rates by shape. When present, a GEMM's efficiency is the
  /// rate of the nearest measured shape (log distance over m, n, k) over
  /// the peak, instead of the tile-quantization model of OpCost.h.
  std::vector<MeasuredGemm> measuredGemms;

  /// Dense peak for `dtype`; 0 if unsupported.
  double peakFlops(DType dtype) const;
};

/// How the GPUs of a node are connected.
enum class IntraNodeKind { NVSwitch, NVLinkMesh, PCIe };

struct IntraNodeLink {
  IntraNodeKind kind = IntraNodeKind::NVSwitch;
  /// Bytes/s one GPU can send (and, at the same time, receive).
  double bandwidth = 0;
  /// Seconds per ring step of a large-message (NCCL "Simple") transfer.
  double latency = 0;
  /// NVLink SHARP: the switch reduces (third-generation NVSwitch, H100+).
  bool nvls = false;
};

/// The network between nodes.
struct Fabric {
  int nicsPerNode = 0;
  /// Bytes/s of one NIC, per direction.
  double nicBandwidth = 0;
  /// Seconds per ring step across the network (NCCL "Simple").
  double latency = 0;
  /// NIC i of every node on leaf switch ("rail") i, non-blocking up to
  /// `podNodes`. If false, all traffic between nodes crosses uplinks that
  /// are `oversubscription` times oversubscribed.
  bool railOptimized = true;
  /// In-network reduction (SHARP / NCCL CollNet) available to all-reduce.
  bool sharp = false;
  /// Nodes below one full-bisection pod; 0: the whole fabric is
  /// non-blocking.
  int podNodes = 0;
  /// Bandwidth divisor for traffic that leaves a pod (>= 1).
  double oversubscription = 1.0;
};

/// Times of one collective measured on this cluster (cleave-measure-local-
/// cpu): every group of `groupSize` consecutive ranks running it at once, as
/// a mesh axis's groups do in a step.
struct MeasuredCollective {
  /// "all_reduce", "all_gather", "reduce_scatter" or "send_recv".
  std::string op;
  int groupSize = 0;
  /// (bytes, seconds), bytes strictly ascending. Bytes are the full buffer
  /// (Collective.h's convention), the message for send_recv (one way).
  std::vector<std::pair<double, double>> points;
  /// CPU seconds one call costs each member rank's process (user and
  /// system time, the runtime's threads included), one per point; empty:
  /// not measured.
  std::vector<double> cpuSeconds;
};

struct ClusterSpec {
  std::string name;
  GpuSpec gpu;
  int nodes = 0;
  int gpusPerNode = 0;
  IntraNodeLink intra;
  Fabric inter;
  /// Measured collective times; a collective with a table for its kind and
  /// group size is priced from it (Collective.h), not from the links.
  std::vector<MeasuredCollective> measuredCollectives;
  /// Ranks that share one host's cores (a measured local CPU cluster): the
  /// node computes as fast as this many ranks computing alone
  /// (cleave-measure-local-cpu: the ranks' summed GEMM rate with every
  /// rank of the node computing, over one rank's rate with the others
  /// idle). The GPU's rates stay those of every rank computing at once;
  /// the simulator runs a rank's compute faster while fewer of the node's
  /// ranks compute, up to the rate alone (docs/cost-model.md). 0: each
  /// device computes on its own (GPUs).
  double hostComputeCapacity = 0;
  /// The shared host's hardware threads (cleave-measure-local-cpu): the
  /// ranks' computation and the CPU their collectives cost
  /// (MeasuredCollective::cpuSeconds) cannot take more than these cores'
  /// time, which bounds a step from below (docs/cost-model.md). 0: no bound.
  int hostCores = 0;

  int numGpus() const { return nodes * gpusPerNode; }
  /// Bytes/s of network bandwidth per GPU (the node's NICs shared evenly).
  double nicBandwidthPerGpu() const;
  /// The measured table of `op` for groups of `groupSize`, or nullptr.
  const MeasuredCollective *measured(const std::string &op,
                                     int groupSize) const;
  /// Empty if consistent; otherwise a message naming the field.
  std::string validate() const;
};

/// Presets: dgx-a100-40gb, dgx-a100-80gb, dgx-h100, dgx-h200 (8 GPUs per
/// node). `nodes` sets the cluster size.
Result<ClusterSpec> lookupClusterPreset(const std::string &name, int nodes);
std::vector<std::string> clusterPresetNames();
/// GPU presets: a100-sxm4-40gb, a100-sxm4-80gb, h100-sxm5-80gb, h200-sxm-141gb.
Result<GpuSpec> lookupGpuPreset(const std::string &name);

/// Parses a cluster from JSON text (schema in docs/cost-model.md). An
/// optional "base" names a preset whose fields the file overrides. Errors
/// name the field: "cluster.gpu.hbm_gb: expected a positive number, got -3".
Result<ClusterSpec> clusterFromJson(const std::string &text);
/// Reads and parses a cluster file; errors start with the path.
Result<ClusterSpec> loadClusterFile(const std::string &path);
/// The spec as JSON text that `clusterFromJson` reads back.
std::string clusterToJson(const ClusterSpec &cluster);

const char *toString(IntraNodeKind kind);

} // namespace cleave::cost

#endif // CLEAVE_COSTMODEL_CLUSTER_H
