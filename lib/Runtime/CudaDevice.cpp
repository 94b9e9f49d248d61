//===- CudaDevice.cpp - Device, context, streams and events ---------------===//

#include "CudaDevice.h"
#include "Error.h"

#include <chrono>
#include <thread>

namespace cleave::rt {

std::string cudaErrorText(CUresult result) {
  const char *name = nullptr, *text = nullptr;
  cuGetErrorName(result, &name);
  cuGetErrorString(result, &text);
  return concat(name ? name : "CUDA error", " (",
                text ? text : "no description", ")");
}

void cudaFail(CUresult result, const std::string &what) {
  throw RuntimeError(concat(what, " failed: ", cudaErrorText(result)));
}

int cudaDeviceCount(std::string &why) {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) {
    why = "cuInit: " + cudaErrorText(r);
    return -1;
  }
  int count = 0;
  r = cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    why = "cuDeviceGetCount: " + cudaErrorText(r);
    return -1;
  }
  if (count == 0)
    why = "the driver reports no CUDA device";
  return count;
}

bool cudaDeviceInfo(int ordinal, std::string &name, int &major, int &minor,
                    std::string &why) {
  int count = cudaDeviceCount(why);
  if (count <= 0)
    return false;
  if (ordinal < 0 || ordinal >= count) {
    why = concat("device ", ordinal, " does not exist (", count, " visible)");
    return false;
  }
  CUdevice device;
  CUresult r = cuDeviceGet(&device, ordinal);
  if (r != CUDA_SUCCESS) {
    why = "cuDeviceGet: " + cudaErrorText(r);
    return false;
  }
  char text[256] = {};
  cuDeviceGetName(text, sizeof(text), device);
  name = text;
  cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                       device);
  cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                       device);
  return true;
}

CudaDevice::CudaDevice(int localRank) {
  std::string why;
  int count = cudaDeviceCount(why);
  if (count <= 0)
    throw RuntimeError("no CUDA device: " + why);
  ordinal_ = count == 1 ? 0 : localRank;
  if (ordinal_ < 0 || ordinal_ >= count)
    throw RuntimeError(concat("no CUDA device: LOCAL_RANK ", localRank,
                              " selects device ", localRank, " but only ",
                              count, " are visible (run one process per GPU)"));
  cudaCheck(cuDeviceGet(&device_, ordinal_), "cuDeviceGet");
  char name[256] = {};
  cuDeviceGetName(name, sizeof(name), device_);
  int major = 0, minor = 0;
  cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                       device_);
  cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                       device_);
  description_ =
      concat("GPU ", ordinal_, " (", name, ", sm_", major, minor, ")");
  cudaCheck(cuDevicePrimaryCtxRetain(&context_, device_),
            "retaining the primary context of " + description_);
  makeCurrent();
  cudaCheck(cuStreamCreate(&compute_, CU_STREAM_NON_BLOCKING),
            "creating the compute stream");
}

CudaDevice::~CudaDevice() {
  makeCurrent();
  if (compute_) {
    cuStreamSynchronize(compute_);
    cuStreamDestroy(compute_);
  }
  for (CUevent e : allEvents_)
    cuEventDestroy(e);
  if (context_)
    cuDevicePrimaryCtxRelease(device_);
}

void CudaDevice::makeCurrent() const {
  cudaCheck(cuCtxSetCurrent(context_), "making the CUDA context current");
}

CUstream CudaDevice::createStream() {
  CUstream stream;
  cudaCheck(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
            "creating a communication stream");
  return stream;
}

void CudaDevice::destroyStream(CUstream stream) {
  if (stream)
    cuStreamDestroy(stream);
}

CUevent CudaDevice::acquireEvent() {
  std::lock_guard<std::mutex> lock(eventsMutex_);
  if (!freeEvents_.empty()) {
    CUevent e = freeEvents_.back();
    freeEvents_.pop_back();
    return e;
  }
  CUevent e;
  cudaCheck(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "creating an event");
  allEvents_.push_back(e);
  return e;
}

void CudaDevice::releaseEvent(CUevent event) {
  std::lock_guard<std::mutex> lock(eventsMutex_);
  freeEvents_.push_back(event);
}

CUevent CudaDevice::record(CUstream stream) {
  CUevent e = acquireEvent();
  CUresult r = cuEventRecord(e, stream);
  if (r != CUDA_SUCCESS) {
    releaseEvent(e);
    cudaCheck(r, "recording an event");
  }
  return e;
}

void CudaDevice::order(CUstream signaller, CUstream waiter) {
  CUevent e = record(signaller);
  // A wait uses the event's state when it is enqueued: the event can be
  // reused right away.
  CUresult r = cuStreamWaitEvent(waiter, e, 0);
  releaseEvent(e);
  cudaCheck(r, "ordering two streams");
}

CUresult CudaDevice::wait(CUstream stream,
                          const std::function<bool()> &abandon) {
  // Spin briefly (short steps), then sleep between polls.
  for (int polls = 0;; ++polls) {
    CUresult r = cuStreamQuery(stream);
    if (r != CUDA_ERROR_NOT_READY)
      return r;
    if (abandon && abandon())
      return CUDA_ERROR_NOT_READY;
    if (polls < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

} // namespace cleave::rt
