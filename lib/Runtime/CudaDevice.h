//===- CudaDevice.h - Device, context, streams and events -------*- C++ -*-===//
//
// Internal to libCleaveRuntimeCuda (CUDA driver API only; no runtime API).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_CUDADEVICE_H
#define CLEAVE_LIB_RUNTIME_CUDADEVICE_H

#include "Error.h"

#include <cuda.h>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace cleave::rt {

/// "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)".
std::string cudaErrorText(CUresult result);
/// Throws RuntimeError("<what> failed: <error text>").
[[noreturn]] void cudaFail(CUresult result, const std::string &what);
/// Unless CUDA_SUCCESS, cudaFail with `what` concatenated from the parts,
/// formatted only then (a check runs on every launch and allocation).
template <typename... Args>
inline void cudaCheck(CUresult result, Args &&...what) {
  if (result != CUDA_SUCCESS) [[unlikely]]
    cudaFail(result, concat(std::forward<Args>(what)...));
}

/// The number of devices, or -1 with the reason in `why`.
int cudaDeviceCount(std::string &why);
/// The name and compute capability of device `ordinal`; false (with the
/// reason in `why`) when there is no such device or no driver.
bool cudaDeviceInfo(int ordinal, std::string &name, int &major, int &minor,
                    std::string &why);

/// The process's device: its primary context and compute stream, and a pool
/// of events for ordering streams.
class CudaDevice {
public:
  /// Initializes the driver and retains device `localRank` (device 0 when
  /// only one is visible). Throws RuntimeError("no CUDA device: ...").
  explicit CudaDevice(int localRank);
  ~CudaDevice();
  CudaDevice(const CudaDevice &) = delete;
  CudaDevice &operator=(const CudaDevice &) = delete;

  /// Makes the context current on the calling thread.
  void makeCurrent() const;
  CUdevice device() const { return device_; }
  int ordinal() const { return ordinal_; }
  CUstream compute() const { return compute_; }
  /// "GPU 3 (NVIDIA H100 80GB HBM3, sm_90)".
  const std::string &describe() const { return description_; }

  /// A non-blocking stream of its own (a communicator's).
  CUstream createStream();
  void destroyStream(CUstream stream);

  CUevent acquireEvent();
  void releaseEvent(CUevent event);
  /// Records an event on `stream` (returned; release it when done).
  CUevent record(CUstream stream);
  /// Makes `waiter` wait for the work enqueued so far on `signaller`.
  void order(CUstream signaller, CUstream waiter);

  /// Waits on the host until `stream` is idle, polling so that the wait
  /// ends early when `abandon()` returns true (a failure elsewhere).
  /// Returns the stream's status (CUDA_SUCCESS when idle).
  CUresult wait(CUstream stream, const std::function<bool()> &abandon);

private:
  CUdevice device_ = 0;
  int ordinal_ = 0;
  CUcontext context_ = nullptr;
  CUstream compute_ = nullptr;
  std::string description_;
  std::mutex eventsMutex_;
  std::vector<CUevent> freeEvents_, allEvents_;
};

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_CUDADEVICE_H
