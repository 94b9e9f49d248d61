//===- CudaProfile.cpp - GPU time by kernel -------------------------------===//

#include "CudaProfile.h"
#include "Env.h"

#include <algorithm>
#include <cstdio>

namespace cleave::rt {

CudaProfile::CudaProfile(int rank)
    : enabled_(envFlag("CLEAVE_CUDA_PROFILE")), rank_(rank) {}

CUevent CudaProfile::event() {
  if (!free_.empty()) {
    CUevent e = free_.back();
    free_.pop_back();
    return e;
  }
  CUevent e = nullptr;
  cuEventCreate(&e, CU_EVENT_DEFAULT);
  return e;
}

void CudaProfile::begin(const std::string &name, CUstream stream) {
  Pending p{name, event(), event()};
  cuEventRecord(p.start, stream);
  pending_.push_back(std::move(p));
}

void CudaProfile::end(CUstream stream) {
  if (!pending_.empty())
    cuEventRecord(pending_.back().stop, stream);
}

void CudaProfile::collect() {
  for (Pending &p : pending_) {
    float ms = 0;
    if (cuEventSynchronize(p.stop) == CUDA_SUCCESS &&
        cuEventElapsedTime(&ms, p.start, p.stop) == CUDA_SUCCESS) {
      Total &t = totals_[p.name];
      ++t.calls;
      t.ms += ms;
    }
    free_.push_back(p.start);
    free_.push_back(p.stop);
  }
  pending_.clear();
}

CudaProfile::~CudaProfile() {
  if (enabled_) {
    collect();
    std::vector<std::pair<std::string, Total>> rows(totals_.begin(),
                                                    totals_.end());
    std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
      return a.second.ms > b.second.ms;
    });
    double total = 0;
    int64_t calls = 0;
    for (const auto &[name, t] : rows) {
      total += t.ms;
      calls += t.calls;
    }
    std::fprintf(stderr,
                 "cleave: rank %d: GPU time by kernel (CLEAVE_CUDA_PROFILE) "
                 "over %lld steps: %.3f ms in %lld launches, %.3f ms and %.0f "
                 "launches per step\n%10s %6s %8s  %s\n",
                 rank_, (long long)steps_, total, (long long)calls,
                 steps_ ? total / double(steps_) : total,
                 steps_ ? double(calls) / double(steps_) : double(calls),
                 "ms/step", "%", "calls", "kernel");
    size_t shown = 0;
    for (const auto &[name, t] : rows) {
      if (++shown > 30)
        break;
      std::fprintf(stderr, "%10.4f %5.1f%% %8lld  %s\n",
                   steps_ ? t.ms / double(steps_) : t.ms,
                   total > 0 ? 100.0 * t.ms / total : 0.0, (long long)t.calls,
                   name.c_str());
    }
  }
  for (Pending &p : pending_)
    free_.insert(free_.end(), {p.start, p.stop});
  for (CUevent e : free_)
    cuEventDestroy(e);
}

} // namespace cleave::rt
