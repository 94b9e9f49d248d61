//===- Schedule.h - Pipeline schedules as per-stage pass orders -*- C++ -*-===//
//
// A pipeline schedule is, for each stage, the order in which its rank runs
// the passes of (micro-batch, model chunk) pairs: forward (F), backward (B,
// input gradients and, unless split, weight gradients) and weight gradient
// (W, zero-bubble only). The simulator replays these orders with the
// dependencies between stages; the memory model counts the micro-batches
// they keep alive.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_SCHEDULE_H
#define CLEAVE_COSTMODEL_SCHEDULE_H

#include "cleave/CostModel/Plan.h"

#include <cstdint>
#include <vector>

namespace cleave::cost {

enum class PassKind : uint8_t { Forward, Backward, WeightGrad };

struct PassRef {
  PassKind kind;
  int32_t microBatch;
  /// Local model chunk (0 .. chunks-1); global virtual stage is
  /// chunk * pp + stage.
  int32_t chunk;
};

/// The order of passes of every pipeline stage (index: stage).
/// - GPipe: all F in micro-batch order, then all B.
/// - 1F1B: pp - stage - 1 warm-up forwards, then alternate F and B, then
///   the remaining B (Narayanan et al. 2021, Fig. 4 top).
/// - Interleaved: Megatron-LM's order over chunks in groups of pp
///   micro-batches, with (pp - stage - 1) * 2 + (chunks - 1) * pp warm-up
///   forwards (Narayanan et al. 2021, Fig. 4 bottom).
/// - ZB-H1 (Qi et al. 2023, Fig. 3): 1F1B's warm-up, then F, B and the W
///   of the micro-batch `stage` places earlier, the leftover W passes last;
///   at most pp micro-batches alive (F done, W not done) on every stage,
///   1F1B's peak. Bubble (pp-1)(F + B - W) instead of (pp-1)(F + B + W).
std::vector<std::vector<PassRef>> pipelineOrders(const ParallelPlan &plan);

/// The largest number of (micro-batch, chunk) pairs whose activations are
/// alive at once in `order` (F done, last backward pass not yet done),
/// each weighted by `weightOfChunk[chunk]`.
double peakLive(const std::vector<PassRef> &order, bool splitW,
                const std::vector<double> &weightOfChunk);

} // namespace cleave::cost

#endif // CLEAVE_COSTMODEL_SCHEDULE_H
