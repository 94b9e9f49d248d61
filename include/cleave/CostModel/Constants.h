//===- Constants.h - The global constants of the cost model -----*- C++ -*-===//
//
// Every number the model uses that is not a property of one GPU or cluster
// (those live in ClusterSpec) is here, with where it comes from. "Fitted"
// means chosen to minimize the calibration error over the published runs of
// bench/costmodel/published_runs.json, always one global value, never per
// run or per model; "a prior" means set from the cited source and left
// alone. docs/cost-model.md has the procedure and the resulting errors.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_CONSTANTS_H
#define CLEAVE_COSTMODEL_CONSTANTS_H

#include "cleave/CostModel/Result.h"

#include <string>

namespace cleave::cost {

struct CostConstants {
  //===--- Kernels
  //---------------------------------------------------------===//

  /// Seconds of GPU time lost per kernel (launch gap, ramp-up and tail of a
  /// grid): the 2-5 us NVIDIA quotes for back-to-back dependent kernels.
  /// A prior, not fitted (the calibration moves < 0.5% over 2-8 us).
  double kernelOverhead = 4e-6;
  /// GEMM efficiency falls for short reductions: factor K / (K + gemmKHalf)
  /// (prologue/epilogue of each output tile amortized over K). A prior, not
  /// fitted (the calibration moves < 0.8% over 32-128).
  double gemmKHalf = 64;
  /// Fused (flash) attention forward / backward throughput as a fraction of
  /// the GPU's GEMM efficiency. FlashAttention-2 (Dao 2023) reports 73% of
  /// peak forward and 63% backward on A100, where cuBLAS GEMMs reach
  /// ~85%: ratios 0.85 and 0.75.
  double flashForwardRatio = 0.85;
  double flashBackwardRatio = 0.75;

  //===--- Collectives
  //-----------------------------------------------------===//

  /// Achieved bus bandwidth of a large NCCL ring collective as a fraction
  /// of the per-GPU link bandwidth inside a node. NCCL's own tuning model
  /// caps A100 NVLink rings at 235 GB/s of 300 (0.78); nccl-tests on
  /// 8xH100 report ~360-370 GB/s of 450 for ring all-reduce (0.8).
  double intraNodeBusEfficiency = 0.78;
  /// Achieved fraction of NIC line rate for collectives across nodes.
  /// nccl-tests reports 85-96% on HDR/NDR (e.g. NVIDIA/nccl-tests#119: 96 of
  /// 100 GB/s at 3 nodes); chosen inside that range (0.85 and 0.90 give the
  /// same calibration error).
  double interNodeBusEfficiency = 0.90;
  /// NVLink SHARP all-reduce: algorithm bandwidth as a fraction of the
  /// per-GPU link bandwidth. From the NCCL maintainers' figure of ~480 GB/s
  /// bus bandwidth on 8xH100: 480 / (2 * 7/8 * 450) = 0.61.
  double nvlsEfficiency = 0.61;
  /// Whether a flat ring collective (reduce-scatter, all-gather, ring
  /// all-reduce) whose group has k members on each of several nodes drives
  /// k NICs per node (NCCL's multi-channel rings, as nccl-tests measures
  /// them) or only one NIC's share per member. The calibration runs sustain
  /// the latter: DeepSpeed ZeRO-3 (Narayanan et al. 2021, Table 2) moves
  /// 4 x 2 bytes per parameter per step at ~21 GB/s per GPU for 175B and
  /// 530B at 384-2240 GPUs, one HDR NIC's rate, where multi-rail rings
  /// would be 8x faster; Megatron-Core's 1.7B run on 48 H100s (tp = 1)
  /// matches the same rule. Hierarchical all-reduce (reduce-scatter in the
  /// node, all-reduce across, all-gather in the node) still uses every NIC.
  /// Fitted (a choice between two physical models); see docs/cost-model.md.
  bool ringRailAggregation = false;

  //===--- Overlap
  //---------------------------------------------------------===//

  /// Compute runs this much slower while a collective runs on the same GPU
  /// (NCCL kernels take SMs and HBM bandwidth): the 10-20% GEMM slowdown
  /// reported under overlapped communication; the calibration is flat over
  /// 0.05-0.2.
  double overlapSlowdown = 0.10;
  /// With tensor-parallel communication overlap (Transformer Engine
  /// userbuffers), the fraction of each TP collective that stays exposed.
  /// A prior, not fitted.
  double tpOverlapExposed = 0.2;

  //===--- Runtime
  //---------------------------------------------------------===//

  /// Bytes moved per parameter by the fused Adam step (read fp32 master,
  /// grad, m, v; write master, m, v and the 16-bit copy) plus gradient
  /// clipping and zeroing: 4*4 + 3*4 + 2 + 4 + 4 = 38 bytes.
  double adamBytesPerParam = 38;
  /// Parameters per data-parallel gradient bucket at small data
  /// parallelism: Megatron-Core's DDP default is max(40M, 1M x dp x cp),
  /// which the program builder applies.
  double dpBucketParams = 40e6;
  /// Memory reserved per GPU that no tensor accounts for: the CUDA context
  /// with the framework's kernels loaded (~0.76 GB: 723 MiB measured by a
  /// PyTorch process holding one scalar tensor, discuss.pytorch.org
  /// "What is the reason for pytorch's GPU memory floor?"; "~700+ MB" per
  /// the PyTorch maintainers), cuBLAS/cuBLASLt workspaces (32 MiB per
  /// stream on Hopper in PyTorch and Transformer Engine, a few streams) and
  /// the caching allocator's steady-state slack (one partly used 20 MiB
  /// large-pool and 2 MiB small-pool segment per stream,
  /// c10/cuda/CUDACachingAllocator.cpp kLargeBuffer / kSmallBuffer):
  /// 0.76 + 0.13 + 0.11 = 1.0 GB. Device capacity is what CUDA reports
  /// (GpuSpec::hbmBytes), so the driver's own reservation is not here.
  double runtimeReservedBytes = 1.0e9;
  /// NCCL channels of a collective communicator; each channel holds one
  /// ring connection with a buffer per protocol (NCCL src/init.cc:
  /// DEFAULT_BUFFSIZE 4 MiB Simple, DEFAULT_LL128_BUFFSIZE 4,915,200 B,
  /// DEFAULT_LL_BUFFSIZE 524,288 B). NCCL's logs on 8-GPU NVSwitch nodes
  /// report 16-32 collective channels; 16 is a prior.
  double ncclChannels = 16;
  /// Whether each pipeline send/receive is followed by a device
  /// synchronization, as Megatron does after its batched isend/irecv
  /// (p2p_communication.py, `torch.cuda.synchronize()` "to protect against
  /// race condition when using batch_isend_irecv()"; Megatron-Core's
  /// batch_p2p_sync, on by default): the stage's next compute waits for its
  /// own send to finish, and both sides relaunch their next kernel from the
  /// host (one more kernelOverhead after the transfer).
  bool p2pSynchronize = true;

  //===--- Mixtures of experts
  //---------------------------------------------===//

  /// Dropless routing under expert parallelism: the busiest expert-parallel
  /// rank's expert load over the mean (it computes and receives this many
  /// times its share, and the others wait for it at the combine
  /// all-to-all). A stated prior, not fitted: 1.25 is the capacity factor
  /// GShard (Lepikhin et al. 2020) and Switch Transformer (Fedus et al.
  /// 2021, Sec. 2.2 and Table 1) train with so that a balance-loss-trained
  /// router drops few tokens, i.e. the busiest expert's load stays near
  /// 1.25x the mean. A per-expert figure, so an upper bound when a rank
  /// holds several experts (their loads average out).
  double moeDroplessImbalance = 1.25;
};

/// The constants the calibration benchmark reports against.
inline const CostConstants &defaultConstants() {
  static const CostConstants c;
  return c;
}

/// Reads constants from a JSON object whose keys are the snake_case field
/// names ("kernel_overhead", "inter_node_bus_efficiency", ...); absent keys
/// keep their defaults. Errors name the key: "constants.overlap_slowdown:
/// expected a number >= 0, got -1".
Result<CostConstants> constantsFromJson(const std::string &text);
/// Every constant as JSON (the format constantsFromJson reads).
std::string constantsToJson(const CostConstants &c);

} // namespace cleave::cost

#endif // CLEAVE_COSTMODEL_CONSTANTS_H
