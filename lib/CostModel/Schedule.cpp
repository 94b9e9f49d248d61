//===- Schedule.cpp - Per-stage pass orders of the pipeline schedules -----===//

#include "cleave/CostModel/Schedule.h"

#include <algorithm>
#include <limits>

namespace cleave::cost {
namespace {

using Order = std::vector<PassRef>;

Order gpipe(int m) {
  Order o;
  for (int i = 0; i < m; ++i)
    o.push_back({PassKind::Forward, i, 0});
  for (int i = 0; i < m; ++i)
    o.push_back({PassKind::Backward, i, 0});
  return o;
}

Order oneFOneB(int p, int m, int stage) {
  Order o;
  int warmup = std::min(p - stage - 1, m);
  for (int i = 0; i < warmup; ++i)
    o.push_back({PassKind::Forward, i, 0});
  for (int i = 0; i < m - warmup; ++i) {
    o.push_back({PassKind::Forward, warmup + i, 0});
    o.push_back({PassKind::Backward, i, 0});
  }
  for (int i = m - warmup; i < m; ++i)
    o.push_back({PassKind::Backward, i, 0});
  return o;
}

/// Megatron-LM forward_backward_pipelining_with_interleaving.
Order interleaved(int p, int v, int m, int stage) {
  int total = m * v;
  auto pass = [&](PassKind kind, int k) {
    int inGroup = k % (p * v);
    int chunk = inGroup / p;
    if (kind == PassKind::Backward)
      chunk = v - 1 - chunk;
    int mb = (k / (p * v)) * p + k % p;
    return PassRef{kind, mb, chunk};
  };
  int warmup = std::min(total, (p - stage - 1) * 2 + (v - 1) * p);
  Order o;
  for (int k = 0; k < warmup; ++k)
    o.push_back(pass(PassKind::Forward, k));
  for (int k = 0; k < total - warmup; ++k) {
    o.push_back(pass(PassKind::Forward, warmup + k));
    o.push_back(pass(PassKind::Backward, k));
  }
  for (int k = std::max(0, total - warmup); k < total; ++k)
    o.push_back(pass(PassKind::Backward, k));
  return o;
}

/// ZB-H1 (Qi et al. 2023, Fig. 3): 1F1B's warm-up, then F, B and the W of
/// the micro-batch `stage` places earlier, so the W passes of the later
/// stages slide into their cool-down bubble; the leftover W passes close
/// the step. Every stage keeps at most pp micro-batches alive (F done, W
/// not done), the peak 1F1B reaches on its first stage.
Order zeroBubbleH1(int p, int m, int stage) {
  Order o;
  int warmup = std::min(p - stage - 1, m);
  for (int i = 0; i < warmup; ++i)
    o.push_back({PassKind::Forward, i, 0});
  int nextW = 0;
  for (int j = 0; j < m; ++j) {
    if (warmup + j < m)
      o.push_back({PassKind::Forward, warmup + j, 0});
    o.push_back({PassKind::Backward, j, 0});
    if (j - stage >= 0)
      o.push_back({PassKind::WeightGrad, nextW++, 0});
  }
  while (nextW < m)
    o.push_back({PassKind::WeightGrad, nextW++, 0});
  return o;
}

} // namespace

std::vector<std::vector<PassRef>> pipelineOrders(const ParallelPlan &plan) {
  int p = plan.pp, m = int(plan.numMicroBatches);
  std::vector<Order> orders(p);
  for (int stage = 0; stage < p; ++stage) {
    switch (plan.schedule) {
    case Schedule::GPipe:
      orders[stage] = gpipe(m);
      break;
    case Schedule::OneFOneB:
      orders[stage] = oneFOneB(p, m, stage);
      break;
    case Schedule::Interleaved1F1B:
      orders[stage] = interleaved(p, plan.virtualStages, m, stage);
      break;
    case Schedule::ZeroBubbleH1:
      orders[stage] = zeroBubbleH1(p, m, stage);
      break;
    }
  }
  return orders;
}

double peakLive(const std::vector<PassRef> &order, bool splitW,
                const std::vector<double> &weightOfChunk) {
  double live = 0, peak = 0;
  for (const PassRef &r : order) {
    double w = weightOfChunk[r.chunk];
    if (r.kind == PassKind::Forward) {
      live += w;
      peak = std::max(peak, live);
    } else if ((r.kind == PassKind::Backward) != splitW) {
      live -= w;
    }
  }
  return peak;
}

} // namespace cleave::cost
