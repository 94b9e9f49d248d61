//===- OpCost.h - What one kernel costs on one GPU --------------*- C++ -*-===//
//
// A roofline with efficiency curves: a kernel takes the larger of its math
// time (FLOPs over the achieved fraction of peak) and its memory time (bytes
// over the achieved HBM bandwidth), plus a fixed per-kernel overhead.
//
// - GEMMs: the chip's large-GEMM efficiency (GpuSpec::gemmEfficiency) times
//   the tile and wave quantization of the output on the SMs (NVIDIA, "Matrix
//   Multiplication Background User's Guide": 128x128 / 128x256 / 256x128 CTA
//   tiles, split-K when there are fewer tiles than SMs) times a short-K
//   ramp K / (K + CostConstants::gemmKHalf). A device with measured GEMM
//   rates (GpuSpec::measuredGemms, a local CPU rank) takes the rate of the
//   nearest measured shape instead.
// - Fused (flash) attention: executed FLOPs (causal masks skip half) at a
//   fixed fraction of the GEMM efficiency (CostConstants::flash*Ratio).
// - Everything else is memory-bound: bytes / (hbm * memoryEfficiency).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_OPCOST_H
#define CLEAVE_COSTMODEL_OPCOST_H

#include "cleave/CostModel/Cluster.h"
#include "cleave/CostModel/Constants.h"

namespace cleave::cost {

/// C[m, n] = A[m, k] B[k, n], `batch` independent times.
struct GemmShape {
  double m = 0, n = 0, k = 0, batch = 1;
  double flops() const { return 2 * m * n * k * batch; }
};

/// Scaled dot-product attention of `batch` sequences.
struct AttentionShape {
  double batch = 0, heads = 0, seqQ = 0, seqKV = 0, headDim = 0;
  bool causal = true;
  /// With `causal`, the share of the seqQ x seqKV scores the kernel
  /// computes: half for a whole sequence and for every rank of the
  /// load-balanced context-parallel layout; (2cp-1) / 2cp for the last rank
  /// of a contiguous one, whose queries see nearly every key.
  double causalShare = 0.5;
  /// FLOPs the kernel executes (QK^T and PV; causal skips the masked share).
  double executedFlops(bool backward) const;
};

enum class KernelKind {
  Gemm,
  FlashAttention,
  FlashAttentionBackward,
  /// Streams `bytes` through HBM (elementwise, norms, softmax, copies).
  Memory,
};

/// One kernel of a per-rank program, with local (per-device) shapes.
struct Kernel {
  KernelKind kind = KernelKind::Memory;
  GemmShape gemm;
  AttentionShape attention;
  double bytes = 0;
  DType dtype = DType::BF16;

  static Kernel makeGemm(GemmShape s, DType dtype) {
    Kernel k;
    k.kind = KernelKind::Gemm;
    k.gemm = s;
    k.dtype = dtype;
    return k;
  }
  static Kernel makeMemory(double bytes) {
    Kernel k;
    k.kind = KernelKind::Memory;
    k.bytes = bytes;
    return k;
  }
  static Kernel makeAttention(AttentionShape s, bool backward, DType dtype) {
    Kernel k;
    k.kind = backward ? KernelKind::FlashAttentionBackward
                      : KernelKind::FlashAttention;
    k.attention = s;
    k.dtype = dtype;
    return k;
  }
};

/// Fraction of `gpu`'s peak for `dtype` a GEMM of this shape reaches.
double gemmEfficiency(const GemmShape &shape, const GpuSpec &gpu,
                      const CostConstants &c, DType dtype = DType::BF16);
/// Seconds for one GEMM (math or memory bound, whichever is slower), not
/// counting the per-kernel overhead.
double gemmTime(const GemmShape &shape, DType dtype, const GpuSpec &gpu,
                const CostConstants &c);
/// Seconds to stream `bytes` through HBM, without the per-kernel overhead.
double memoryTime(double bytes, const GpuSpec &gpu);
/// Seconds for a fused attention kernel, without the per-kernel overhead.
double flashAttentionTime(const AttentionShape &shape, bool backward,
                          DType dtype, const GpuSpec &gpu,
                          const CostConstants &c);
/// Seconds for `kernel`, including CostConstants::kernelOverhead.
double kernelTime(const Kernel &kernel, const GpuSpec &gpu,
                  const CostConstants &c);

/// Roofline time of an op known only by FLOPs and bytes (the MLIR bridge):
/// max(flops / (peak * gemmEfficiency), bytes / achieved HBM bandwidth).
double rooflineTime(double flops, double bytes, DType dtype,
                    const GpuSpec &gpu);

} // namespace cleave::cost

#endif // CLEAVE_COSTMODEL_OPCOST_H
