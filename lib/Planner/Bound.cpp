//===- Bound.cpp - Lower bounds on a plan's step time ---------------------===//
//
// Every bound here only adds standalone task durations along chains the
// simulator must respect, and the simulator only ever slows tasks down
// (shared links, compute under overlapped communication), so a bound never
// exceeds the simulated step time (tested over many plans).
//
//===----------------------------------------------------------------------===//

#include "Space.h"

#include <algorithm>

namespace cleave::planner::detail {

using cost::ParallelPlan;

namespace {

/// Standalone times of one rank's data-parallel work around the optimizer.
struct StageTail {
  double before = 0, optimizer = 0, after = 0;
  double total() const { return before + optimizer + after; }
};

StageTail stageTail(const ModelConfig &m, const cost::ClusterSpec &cl,
                    const ParallelPlan &p, const cost::Workload &w, int stage,
                    const cost::CostConstants &c) {
  StageTail t;
  double params = cost::stageParameters(m, p, w, stage);
  double group = double(p.dp) * p.cp;
  // The routed experts' share (expert parallelism: their own group).
  double layers = 0;
  for (int ch = 0; ch < p.chunks(); ++ch)
    layers += double(cost::layersInChunk(m, p, ch * p.pp + stage));
  double expert = params > 0 ? layers * w.layerExpertParams / params : 0;
  t.optimizer =
      c.kernelOverhead * 8 +
      cost::memoryTime(cost::zeroShard(params, expert, p.zeroStage >= 1, p) *
                           c.adamBytesPerParam,
                       cl.gpu);
  if (group == 1)
    return t;
  bool zero3 = p.zeroStage >= 3;
  bool zero12 = p.zeroStage == 1 || p.zeroStage == 2;
  if (!zero3 && !p.overlapGradReduce) {
    auto kind = p.zeroStage == 0 ? cost::CollectiveKind::AllReduce
                                 : cost::CollectiveKind::ReduceScatter;
    double bytes = params * double(bytesOf(p.gradDType()));
    t.before = cost::dataParallelTime(kind, bytes, expert, p, cl, c);
  }
  if (zero12 && !p.overlapParamGather) {
    double bytes = params * (p.dtype == DType::F32 ? 4 : 2);
    t.after = cost::dataParallelTime(cost::CollectiveKind::AllGather, bytes,
                                     expert, p, cl, c);
  }
  return t;
}

/// ZeRO-3 gathers every layer's parameters before each forward, again
/// before its recompute and its backward, and reduce-scatters its gradients
/// after each backward, one collective per layer and micro-batch on the
/// gather and reduce streams: each stream's total is a bound.
double zero3Streams(const cost::ClusterSpec &cl, const ParallelPlan &p,
                    const cost::Workload &w, int stage, double layers,
                    const cost::CostConstants &c) {
  if (p.zeroStage < 3 || p.dp * p.cp == 1)
    return 0;
  double paramBytes = p.dtype == DType::F32 ? 4 : 2;
  double expert = w.layerParams > 0 ? w.layerExpertParams / w.layerParams : 0;
  double gather =
      cost::dataParallelTime(cost::CollectiveKind::AllGather,
                             w.layerParams * paramBytes, expert, p, cl, c);
  double reduce = cost::dataParallelTime(
      cost::CollectiveKind::ReduceScatter,
      w.layerParams * double(bytesOf(p.gradDType())), expert, p, cl, c);
  bool recompute = w.layerRecomputeOf[size_t(p.recomputeOf(stage))].total() > 0;
  double passes = double(p.numMicroBatches) * layers;
  return passes * std::max((recompute ? 3 : 2) * gather, reduce);
}

} // namespace

double lowerBound(const ModelConfig &m, const cost::ClusterSpec &cl,
                  const ParallelPlan &p, const cost::Workload &w,
                  const cost::CostConstants &c) {
  int pp = p.pp, chunks = pp * p.chunks();
  double mb = double(p.numMicroBatches);
  // One micro-batch's passes of each virtual stage.
  std::vector<double> fwd(chunks), bwd(chunks), work(pp, 0.0),
      layersOf(pp, 0.0);
  for (int vs = 0; vs < chunks; ++vs) {
    double layers = double(cost::layersInChunk(m, p, vs));
    int stage = vs % pp;
    bool first = vs == 0, last = vs == chunks - 1;
    double rc = w.layerRecomputeOf[size_t(p.recomputeOf(stage))].total();
    fwd[vs] = layers * w.layerForward.total() +
              (first ? w.embeddingForward.total() : 0) +
              (last ? w.headForward.total() : 0);
    bwd[vs] = layers * (w.layerBackward.total() + rc) +
              (first ? w.embeddingBackward.total() : 0) +
              (last ? w.headBackward.total() : 0);
    double wgrad = layers * w.layerWeightGrad.total() +
                   (last ? w.headWeightGrad.total() : 0);
    work[stage] += mb * (fwd[vs] + bwd[vs] + wgrad);
    layersOf[stage] += layers;
  }
  bool lastIsBackward = p.schedule != cost::Schedule::ZeroBubbleH1;
  double tail0 = stageTail(m, cl, p, w, 0, c).total();
  double bound = 0, prefixF = 0, prefixB = 0;
  for (int s = 0; s < pp; ++s) {
    // Stage s starts after the first micro-batch's forwards of the stages
    // before it and runs all its passes, then its data-parallel work.
    double start = prefixF + work[s];
    bound = std::max(bound, start + stageTail(m, cl, p, w, s, c).total());
    bound = std::max(bound, zero3Streams(cl, p, w, s, layersOf[s], c));
    // Its last pass is a backward of chunk 0; the stages before it must
    // then each run that micro-batch's backward, and stage 0 its tail.
    if (lastIsBackward)
      bound = std::max(bound, start + prefixB + tail0);
    prefixF += fwd[s];
    prefixB += bwd[s];
  }
  return bound;
}

double averageBound(const ModelConfig &m, const ParallelPlan &p,
                    const cost::Workload &w) {
  double rc = p.recomputePerStage.empty()
                  ? w.layerRecomputeOf[size_t(p.recompute)].total()
                  : 0;
  double layer = w.layerForward.total() + w.layerBackward.total() +
                 w.layerWeightGrad.total() + rc;
  double total = double(m.layers) * layer + w.embeddingForward.total() +
                 w.embeddingBackward.total() + w.headForward.total() +
                 w.headBackward.total() + w.headWeightGrad.total();
  return double(p.numMicroBatches) * total / p.pp;
}

} // namespace cleave::planner::detail
