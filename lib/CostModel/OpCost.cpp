//===- OpCost.cpp - Roofline kernel costs with efficiency curves ----------===//

#include "cleave/CostModel/OpCost.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cleave::cost {

double AttentionShape::executedFlops(bool backward) const {
  // QK^T and PV: 2 * sq * skv * d each. Backward recomputes QK^T and runs
  // four more GEMMs of the same size (dV, dP, dQ, dK): 5 / 2 of forward.
  double f = 4 * batch * heads * seqQ * seqKV * headDim;
  if (causal)
    f *= causalShare;
  return backward ? 2.5 * f : f;
}

namespace {

/// Output tile utilization over whole waves of SMs, for the best of the
/// CTA tile shapes cuBLAS commonly picks, with split-K when the output has
/// fewer tiles than the GPU has SMs. A dimension below 128 also gets a
/// narrow tile (16-row granularity), whose throughput is limited by
/// operand reuse: tm tn / (tm + tn) multiply-adds per loaded element, full
/// speed from 32 on (where shared-memory bandwidth stops limiting the
/// tensor cores). Returns (utilization, k per split).
std::pair<double, double> bestTiling(const GemmShape &s, int sms) {
  double tiles[6][2] = {{128, 256}, {256, 128}, {128, 128}};
  int count = 3;
  auto narrow = [](double d) { return std::min(64.0, 16 * std::ceil(d / 16)); };
  if (s.m < 128)
    tiles[count][0] = narrow(s.m), tiles[count++][1] = 256;
  if (s.n < 128)
    tiles[count][0] = 256, tiles[count++][1] = narrow(s.n);
  double best = 0, bestK = s.k;
  for (int i = 0; i < count; ++i) {
    const double *t = tiles[i];
    double reuse = std::min(1.0, t[0] * t[1] / (t[0] + t[1]) / 32);
    double tilesM = std::ceil(s.m / t[0]), tilesN = std::ceil(s.n / t[1]);
    double outTiles = tilesM * tilesN * s.batch;
    for (int split = 1; split <= 16; split *= 2) {
      double kPerSplit = s.k / split;
      if (split > 1 && (kPerSplit < 256 || outTiles * split > 2.0 * sms))
        break;
      double ctas = outTiles * split;
      double waves = std::ceil(ctas / sms);
      double util = (s.m * s.n * s.batch) / (waves * sms * t[0] * t[1] / split);
      util = std::min(util, 1.0) * reuse;
      // Prefer the larger K per split on ties: fewer partial reductions.
      if (util > best * 1.0001) {
        best = util;
        bestK = kPerSplit;
      }
    }
  }
  return {best, bestK};
}

/// The measured rate of the shape nearest to `s` (sum of the log distances
/// of m, n and k), or 0 if the GPU has no measured GEMMs.
double measuredRate(const GemmShape &s, const GpuSpec &gpu) {
  double best = 0, bestDistance = std::numeric_limits<double>::infinity();
  for (const MeasuredGemm &g : gpu.measuredGemms) {
    double d = std::abs(std::log(s.m / g.m)) + std::abs(std::log(s.n / g.n)) +
               std::abs(std::log(s.k / g.k));
    if (d < bestDistance) {
      bestDistance = d;
      best = g.flopsPerSecond;
    }
  }
  return best;
}

} // namespace

double gemmEfficiency(const GemmShape &s, const GpuSpec &gpu,
                      const CostConstants &c, DType dtype) {
  double large = dtype == DType::F8E4M3 && gpu.gemmEfficiencyF8 > 0
                     ? gpu.gemmEfficiencyF8
                     : gpu.gemmEfficiency;
  if (s.m <= 0 || s.n <= 0 || s.k <= 0 || s.batch <= 0)
    return large;
  double peak = gpu.peakFlops(dtype) > 0 ? gpu.peakFlops(dtype) : gpu.peakF32;
  if (double rate = measuredRate(s, gpu); rate > 0 && peak > 0)
    return rate / peak;
  auto [util, kPerSplit] = bestTiling(s, std::max(gpu.smCount, 1));
  double ramp = kPerSplit / (kPerSplit + c.gemmKHalf);
  return large * util * ramp;
}

double memoryTime(double bytes, const GpuSpec &gpu) {
  return bytes / (gpu.hbmBandwidth * gpu.memoryEfficiency);
}

double gemmTime(const GemmShape &s, DType dtype, const GpuSpec &gpu,
                const CostConstants &c) {
  double flops = s.flops();
  if (flops <= 0)
    return 0;
  double peak = gpu.peakFlops(dtype);
  if (peak <= 0)
    peak = gpu.peakF32;
  double math = flops / (peak * gemmEfficiency(s, gpu, c, dtype));
  // fp8 GEMMs read 1-byte operands and write 16-bit results.
  double in = dtype == DType::F8E4M3 ? 1 : double(bytesOf(dtype));
  double out = dtype == DType::F8E4M3 ? 2 : double(bytesOf(dtype));
  double bytes =
      (s.m * s.k + s.k * s.n) * s.batch * in + s.m * s.n * s.batch * out;
  return std::max(math, memoryTime(bytes, gpu));
}

double flashAttentionTime(const AttentionShape &s, bool backward, DType dtype,
                          const GpuSpec &gpu, const CostConstants &c) {
  double flops = s.executedFlops(backward);
  if (flops <= 0)
    return 0;
  // Attention runs in 16-bit even when the linear layers use fp8.
  DType attnType = dtype == DType::F8E4M3 ? DType::BF16 : dtype;
  double peak = gpu.peakFlops(attnType);
  // The published efficiencies are for head dimension 128; smaller heads
  // do less work per loaded tile.
  double headFactor =
      (s.headDim / (s.headDim + c.gemmKHalf)) / (128.0 / (128.0 + c.gemmKHalf));
  double ratio = backward ? c.flashBackwardRatio : c.flashForwardRatio;
  double eff = gpu.gemmEfficiency * ratio * std::min(headFactor, 1.1);
  double math = flops / (peak * eff);
  // Reads Q, K, V (and dO, O in backward), writes O (dQ, dK, dV).
  double elems = s.batch * s.heads * s.headDim * (s.seqQ + 2 * s.seqKV);
  double bytes = elems * bytesOf(attnType) * (backward ? 3 : 1.5);
  return std::max(math, memoryTime(bytes, gpu));
}

double kernelTime(const Kernel &k, const GpuSpec &gpu, const CostConstants &c) {
  double t = 0;
  switch (k.kind) {
  case KernelKind::Gemm:
    t = gemmTime(k.gemm, k.dtype, gpu, c);
    break;
  case KernelKind::FlashAttention:
    t = flashAttentionTime(k.attention, false, k.dtype, gpu, c);
    break;
  case KernelKind::FlashAttentionBackward:
    t = flashAttentionTime(k.attention, true, k.dtype, gpu, c);
    break;
  case KernelKind::Memory:
    t = memoryTime(k.bytes, gpu);
    break;
  }
  return t + c.kernelOverhead;
}

double rooflineTime(double flops, double bytes, DType dtype,
                    const GpuSpec &gpu) {
  double peak = gpu.peakFlops(dtype);
  if (peak <= 0)
    peak = gpu.peakF32;
  double math = flops > 0 ? flops / (peak * gpu.gemmEfficiency) : 0;
  return std::max(math, bytes > 0 ? memoryTime(bytes, gpu) : 0.0);
}

} // namespace cleave::cost
