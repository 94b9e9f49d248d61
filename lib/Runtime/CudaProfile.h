//===- CudaProfile.h - GPU time by kernel ---------------------------*- C++
//-*-===//
//
// CLEAVE_CUDA_PROFILE=1: the cuda backend brackets every kernel launch and
// cuBLASLt call with CUDA events and, when the backend closes, prints the
// GPU time of each kernel over the run, largest first (stderr, per rank).
// Events serialize nothing, but each adds a few microseconds of host time:
// profile to see where GPU time goes, not to time the step.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_CUDAPROFILE_H
#define CLEAVE_LIB_RUNTIME_CUDAPROFILE_H

#include <cuda.h>
#include <map>
#include <string>
#include <vector>

namespace cleave::rt {

class CudaProfile {
public:
  explicit CudaProfile(int rank);
  ~CudaProfile();
  bool enabled() const { return enabled_; }
  /// Before and after the work named `name` is queued on `stream`.
  void begin(const std::string &name, CUstream stream);
  void end(CUstream stream);
  /// Adds the times of the work queued so far (call after the stream
  /// finished it).
  void collect();
  void countStep() { ++steps_; }

private:
  CUevent event();
  struct Pending {
    std::string name;
    CUevent start, stop;
  };
  struct Total {
    int64_t calls = 0;
    double ms = 0;
  };
  bool enabled_;
  int rank_;
  int64_t steps_ = 0;
  std::vector<Pending> pending_;
  std::vector<CUevent> free_;
  std::map<std::string, Total> totals_;
};

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_CUDAPROFILE_H
