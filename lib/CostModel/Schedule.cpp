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

/// State of one stage in the ZB-H1 list schedule.
struct ZbStage {
  double freeAt = 0;
  int nextF = 0, nextB = 0, nextW = 0, live = 0;
  std::vector<double> fDone, bDone;
};

constexpr double kNever = std::numeric_limits<double>::infinity();

/// Earliest start of the next pass of stage `i` and which pass it is.
std::pair<double, PassKind> zbNext(const std::vector<ZbStage> &st, int i, int p,
                                   int m, const NominalTimes &t) {
  const ZbStage &s = st[i];
  double readyB = kNever, readyF = kNever, readyW = kNever;
  if (s.nextB < s.nextF) {
    double grad = i == p - 1 ? s.fDone[s.nextB] : st[i + 1].bDone[s.nextB];
    if (grad < kNever)
      readyB = grad + (i == p - 1 ? 0 : t.p2p);
  }
  if (s.nextF < m && s.live < p - i) {
    double act = i == 0 ? 0 : st[i - 1].fDone[s.nextF];
    if (act < kNever)
      readyF = act + (i == 0 ? 0 : t.p2p);
  }
  if (s.nextW < s.nextB)
    readyW = s.bDone[s.nextW];
  double start = std::max(s.freeAt, std::min({readyB, readyF, readyW}));
  if (readyB <= start)
    return {start, PassKind::Backward};
  if (readyF <= start)
    return {start, PassKind::Forward};
  return {start, PassKind::WeightGrad};
}

std::vector<Order> zeroBubbleH1(int p, int m, const NominalTimes &t) {
  std::vector<ZbStage> st(p);
  for (ZbStage &s : st) {
    s.fDone.assign(m, kNever);
    s.bDone.assign(m, kNever);
  }
  std::vector<Order> orders(p);
  for (int64_t done = 0, total = int64_t(3) * p * m; done < total; ++done) {
    int best = -1;
    std::pair<double, PassKind> next{kNever, PassKind::Forward};
    for (int i = 0; i < p; ++i) {
      std::pair<double, PassKind> cand = zbNext(st, i, p, m, t);
      if (cand.first < next.first) {
        next = cand;
        best = i;
      }
    }
    if (best < 0)
      break; // cannot happen for a valid plan; avoid spinning
    ZbStage &s = st[best];
    switch (next.second) {
    case PassKind::Forward:
      s.freeAt = next.first + t.forward;
      s.fDone[s.nextF] = s.freeAt;
      orders[best].push_back({PassKind::Forward, s.nextF++, 0});
      ++s.live;
      break;
    case PassKind::Backward:
      s.freeAt = next.first + t.backward;
      s.bDone[s.nextB] = s.freeAt;
      orders[best].push_back({PassKind::Backward, s.nextB++, 0});
      break;
    case PassKind::WeightGrad:
      s.freeAt = next.first + t.weightGrad;
      orders[best].push_back({PassKind::WeightGrad, s.nextW++, 0});
      --s.live;
      break;
    }
  }
  return orders;
}

} // namespace

std::vector<std::vector<PassRef>> pipelineOrders(const ParallelPlan &plan,
                                                 const NominalTimes &t) {
  int p = plan.pp, m = int(plan.numMicroBatches);
  if (plan.schedule == Schedule::ZeroBubbleH1)
    return zeroBubbleH1(p, m, t);
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
