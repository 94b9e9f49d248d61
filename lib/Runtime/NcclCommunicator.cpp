//===- NcclCommunicator.cpp - Groups on NCCL ------------------------------===//

#include "NcclCommunicator.h"
#include "DType.h"
#include "Env.h"
#include "Error.h"
#include "Store.h"

#include <chrono>
#include <cstring>
#include <iostream>

namespace cleave::rt {
namespace {

ncclDataType_t ncclType(int32_t dtype) {
  switch (dtype) {
  case CLEAVE_F32:
    return ncclFloat32;
  case CLEAVE_F64:
    return ncclFloat64;
  case CLEAVE_BF16:
    return ncclBfloat16;
  case CLEAVE_F16:
    return ncclFloat16;
  case CLEAVE_I32:
    return ncclInt32;
  case CLEAVE_I64:
    return ncclInt64;
  default:
    throw RuntimeError(concat("no NCCL type for dtype code ", dtype));
  }
}

ncclRedOp_t ncclOp(int32_t op) {
  switch (op) {
  case CLEAVE_SUM:
    return ncclSum;
  case CLEAVE_MAX:
    return ncclMax;
  case CLEAVE_MIN:
    return ncclMin;
  case CLEAVE_AVG:
    return ncclAvg;
  default:
    throw RuntimeError(concat("no NCCL reduction for code ", op));
  }
}

/// Nonblocking communicators: setup and calls return ncclInProgress instead
/// of blocking the host, so that timeouts stay ours.
ncclConfig_t nonblockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

CommError ncclError(ncclResult_t result, const std::string &what,
                    ncclComm_t comm) {
  const char *last = ncclGetLastError(comm);
  CommError::Kind kind = result == ncclRemoteError || result == ncclSystemError
                             ? CommError::PeerFailure
                             : CommError::Other;
  return CommError(kind, concat("NCCL ", what, ": ", ncclGetErrorString(result),
                                last && *last ? concat(" (", last, ")") : ""));
}

/// Device scratch for the host-memory calls (debug fingerprints).
struct DeviceScratch {
  explicit DeviceScratch(size_t bytes) {
    cudaCheck(cuMemAlloc(&ptr, std::max<size_t>(bytes, 1)),
              "allocating communication scratch");
  }
  ~DeviceScratch() { cuMemFree(ptr); }
  void *get() const { return reinterpret_cast<void *>(ptr); }
  CUdeviceptr ptr = 0;
};

} // namespace

//===----------------------------------------------------------------------===//
// Watchdog
//===----------------------------------------------------------------------===//

NcclWatchdog::NcclWatchdog(CudaDevice &device, int64_t timeoutMs,
                           int64_t pollMs)
    : device_(device), timeoutMs_(timeoutMs), pollMs_(pollMs) {
  thread_ = std::thread([this] { run(); });
}

NcclWatchdog::~NcclWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  for (const Pending &p : pending_)
    device_.releaseEvent(p.done);
}

void NcclWatchdog::add(NcclCommunicator *comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  comms_.insert(comm);
}

void NcclWatchdog::remove(NcclCommunicator *comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  comms_.erase(comm);
  for (size_t i = 0; i < pending_.size();)
    if (pending_[i].comm == comm) {
      device_.releaseEvent(pending_[i].done);
      pending_.erase(pending_.begin() + long(i));
    } else {
      ++i;
    }
}

void NcclWatchdog::track(NcclCommunicator *comm, CUevent done, const char *op,
                         uint32_t tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.push_back({comm, done, op, tag, monotonicSeconds()});
}

void NcclWatchdog::run() {
  try {
    device_.makeCurrent();
  } catch (const std::exception &e) {
    recordError(concat("NCCL watchdog: ", e.what()));
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(pollMs_));
    if (stop_)
      break;
    lock.unlock();
    poll();
    lock.lock();
  }
}

void NcclWatchdog::poll() {
  std::vector<Pending> snapshot;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    snapshot = pending_;
  }
  std::vector<CUevent> finished;
  double now = monotonicSeconds();
  for (const Pending &p : snapshot) {
    CUresult status = cuEventQuery(p.done);
    if (status == CUDA_SUCCESS) {
      finished.push_back(p.done);
      continue;
    }
    if (status != CUDA_ERROR_NOT_READY)
      return fail(p, "failed on the GPU: " + cudaErrorText(status));
    std::string message;
    ncclResult_t error = p.comm->asyncError(message);
    if (error != ncclSuccess && error != ncclInProgress)
      return fail(p, concat("failed: NCCL reports ", ncclGetErrorString(error),
                            message.empty() ? "" : " (" + message + ")"));
    if ((now - p.start) * 1000.0 > double(timeoutMs_))
      return fail(p, concat("did not finish within ", timeoutMs_,
                            " ms on the GPU (a peer may have died, hung or "
                            "issued a different collective)"));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (CUevent e : finished)
    for (size_t i = 0; i < pending_.size(); ++i)
      if (pending_[i].done == e) {
        device_.releaseEvent(e);
        pending_.erase(pending_.begin() + long(i));
        break;
      }
}

void NcclWatchdog::fail(const Pending &p, const std::string &why) {
  if (fired_.exchange(true))
    return;
  std::string message =
      recordError(concat(p.op, " on ", p.comm->info().describe(),
                         " (transport tag ", p.tag, "), ", why,
                         "; every NCCL communicator of this "
                         "rank was aborted"));
  std::cerr << "cleave: " << message << std::endl;
  std::set<NcclCommunicator *> comms;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comms = comms_;
  }
  for (NcclCommunicator *comm : comms)
    comm->abort();
}

//===----------------------------------------------------------------------===//
// Setup
//===----------------------------------------------------------------------===//

NcclCommunicator::NcclCommunicator(NcclHost &host, NcclWatchdog &watchdog,
                                   GroupInfo info)
    : host_(host), watchdog_(watchdog), info_(std::move(info)) {
  stream_ = host_.device().createStream();
  watchdog_.add(this);
}

NcclCommunicator::~NcclCommunicator() {
  watchdog_.remove(this);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (comm_) {
      // A clean shutdown flushes the communicator; a failed one is aborted.
      ncclResult_t r = ncclCommFinalize(comm_);
      if (r == ncclInProgress)
        r = settle(r, "finalize");
      if (r == ncclSuccess)
        ncclCommDestroy(comm_);
      else
        ncclCommAbort(comm_);
      comm_ = nullptr;
    }
  }
  host_.device().destroyStream(stream_);
}

ncclResult_t NcclCommunicator::settle(ncclResult_t result, const char *what) {
  double deadline = monotonicSeconds() + double(info_.timeoutMs) / 1000.0;
  while (result == ncclInProgress) {
    if (monotonicSeconds() > deadline || hasFailed())
      return ncclInProgress;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    ncclCommGetAsyncError(comm_, &result);
  }
  return result;
}

std::unique_ptr<NcclCommunicator>
NcclCommunicator::connectWorld(NcclHost &host, NcclWatchdog &watchdog,
                               const GroupInfo &info, KvStore &store,
                               const std::string &prefix) {
  std::unique_ptr<NcclCommunicator> c(
      new NcclCommunicator(host, watchdog, info));
  // The key ends with the index of the rank that writes it, so that a
  // rendezvous timeout names that rank.
  std::string key = prefix + "/nccl-unique-id/0";
  ncclUniqueId id;
  if (info.groupRank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
      throw ncclError(r, "ncclGetUniqueId", nullptr);
    store.set(key, std::vector<char>(id.internal, id.internal + sizeof(id)));
  } else {
    store.wait({key});
    std::vector<char> bytes = store.get(key);
    require(bytes.size() == sizeof(id), "the NCCL unique id in the store has ",
            bytes.size(), " bytes instead of ", sizeof(id));
    std::memcpy(id.internal, bytes.data(), sizeof(id));
  }
  ncclConfig_t config = nonblockingConfig();
  std::lock_guard<std::mutex> lock(c->mutex_);
  ncclResult_t r = ncclCommInitRankConfig(&c->comm_, info.size(), id,
                                          info.groupRank, &config);
  r = c->settle(r, "setup");
  if (r == ncclInProgress)
    throw CommError(CommError::Timeout,
                    concat("NCCL setup of the world did not complete within ",
                           info.timeoutMs, " ms (did every rank start?)"));
  if (r != ncclSuccess)
    throw ncclError(r, "ncclCommInitRankConfig", c->comm_);
  if (getEnv("NCCL_DEBUG"))
    std::cerr << "cleave: rank " << info.members[info.groupRank]
              << ": NCCL world communicator of " << info.size() << " ranks on "
              << host.device().describe() << "\n";
  return c;
}

std::unique_ptr<NcclCommunicator>
NcclCommunicator::split(NcclCommunicator &parent, const GroupInfo &info) {
  std::unique_ptr<NcclCommunicator> c(
      new NcclCommunicator(parent.host_, parent.watchdog_, info));
  ncclConfig_t config = nonblockingConfig();
  std::lock_guard<std::mutex> parentLock(parent.mutex_);
  require(parent.comm_, "the world communicator was aborted");
  ncclResult_t r = ncclCommSplit(parent.comm_, info.members.front(),
                                 info.groupRank, &c->comm_, &config);
  // Both the parent and the child report the split's progress.
  r = parent.settle(r, "split");
  if (r == ncclSuccess && c->comm_)
    r = c->settle(ncclInProgress, "split");
  if (r == ncclInProgress)
    throw CommError(CommError::Timeout,
                    concat("ncclCommSplit did not complete within ",
                           info.timeoutMs, " ms"));
  if (r != ncclSuccess)
    throw ncclError(r, "ncclCommSplit", parent.comm_);
  require(c->comm_, "ncclCommSplit returned no communicator for this rank");
  return c;
}

ncclResult_t NcclCommunicator::asyncError(std::string &message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!comm_)
    return ncclSuccess;
  ncclResult_t state = ncclSuccess;
  ncclCommGetAsyncError(comm_, &state);
  if (state != ncclSuccess && state != ncclInProgress)
    if (const char *last = ncclGetLastError(comm_))
      message = last;
  return state;
}

void NcclCommunicator::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

template <typename Fn>
void NcclCommunicator::run(const char *op, uint32_t tag, Fn &&enqueue) {
  CudaDevice &device = host_.device();
  CUevent done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!comm_)
      throw CommError(CommError::Other, "the NCCL communicator was aborted");
    device.order(device.compute(), stream_);
    ncclResult_t r = settle(enqueue(), op);
    if (r == ncclInProgress)
      throw CommError(CommError::Timeout,
                      concat("NCCL could not enqueue ", op, " within ",
                             info_.timeoutMs, " ms"));
    if (r != ncclSuccess)
      throw ncclError(r, op, comm_);
    done = device.record(stream_);
    CUresult w = host_.defer(stream_)
                     ? CUDA_SUCCESS
                     : cuStreamWaitEvent(device.compute(), done, 0);
    if (w != CUDA_SUCCESS) {
      device.releaseEvent(done);
      cudaCheck(w, "ordering the compute stream after a collective");
    }
  }
  watchdog_.track(this, done, op, tag);
  host_.afterCall();
}

void NcclCommunicator::allReduce(const void *in, void *out, size_t count,
                                 int32_t dtype, int32_t op, uint32_t tag) {
  ncclDataType_t type = ncclType(dtype);
  ncclRedOp_t red = ncclOp(op);
  run("all_reduce", tag,
      [&] { return ncclAllReduce(in, out, count, type, red, comm_, stream_); });
}

void NcclCommunicator::allGather(const void *in, void *out, size_t count,
                                 int32_t dtype, uint32_t tag) {
  ncclDataType_t type = ncclType(dtype);
  run("all_gather", tag,
      [&] { return ncclAllGather(in, out, count, type, comm_, stream_); });
}

void NcclCommunicator::reduceScatter(const void *in, void *out, size_t count,
                                     int32_t dtype, int32_t op, uint32_t tag) {
  ncclDataType_t type = ncclType(dtype);
  ncclRedOp_t red = ncclOp(op);
  run("reduce_scatter", tag, [&] {
    return ncclReduceScatter(in, out, count, type, red, comm_, stream_);
  });
}

void NcclCommunicator::allToAll(const void *in, void *out, size_t count,
                                int32_t dtype, uint32_t tag) {
  ncclDataType_t type = ncclType(dtype);
  size_t bytes = count * size_t(dtypeSize(dtype));
  run("all_to_all", tag, [&] {
    ncclGroupStart();
    for (int peer = 0; peer < info_.size(); ++peer) {
      ncclSend(static_cast<const char *>(in) + peer * bytes, count, type, peer,
               comm_, stream_);
      ncclRecv(static_cast<char *>(out) + peer * bytes, count, type, peer,
               comm_, stream_);
    }
    return ncclGroupEnd();
  });
}

void NcclCommunicator::broadcast(void *data, size_t count, int32_t dtype,
                                 int root, uint32_t tag) {
  ncclDataType_t type = ncclType(dtype);
  run("broadcast", tag, [&] {
    return ncclBroadcast(data, data, count, type, root, comm_, stream_);
  });
}

void NcclCommunicator::sendRecv(const std::vector<Transfer> &sends,
                                const std::vector<Transfer> &recvs,
                                uint64_t tag) {
  // Point-to-point inside one group call: NCCL pairs them by order per peer.
  run("send/recv", uint32_t(tag & 0xFFFFFFFFu), [&] {
    ncclGroupStart();
    for (const Transfer &t : recvs)
      ncclRecv(t.data, t.bytes, ncclInt8, t.peer, comm_, stream_);
    for (const Transfer &t : sends)
      ncclSend(t.data, t.bytes, ncclInt8, t.peer, comm_, stream_);
    return ncclGroupEnd();
  });
}

void NcclCommunicator::hostCall(
    const char *op, const void *in, size_t inBytes, void *out, size_t outBytes,
    const std::function<ncclResult_t(void *, void *)> &call) {
  CudaDevice &device = host_.device();
  DeviceScratch send(inBytes), recv(outBytes);
  cudaCheck(cuMemcpyHtoDAsync(send.ptr, in, inBytes, device.compute()), op,
            ": copying to the device");
  run(op, 0, [&] { return call(send.get(), recv.get()); });
  cudaCheck(cuMemcpyDtoHAsync(out, recv.ptr, outBytes, device.compute()), op,
            ": copying to the host");
  CUresult r = device.wait(device.compute(), [] { return hasFailed(); });
  if (r != CUDA_SUCCESS)
    throw CommError(CommError::Other,
                    concat(op, " did not complete: ",
                           hasFailed() ? errorText() : cudaErrorText(r)));
}

void NcclCommunicator::barrier(uint32_t tag) {
  int32_t token = 0, sum = 0;
  hostCall("barrier", &token, sizeof(token), &sum, sizeof(sum),
           [&](void *in, void *out) {
             return ncclAllReduce(in, out, 1, ncclInt32, ncclSum, comm_,
                                  stream_);
           });
}

void NcclCommunicator::hostAllGather(const void *in, void *out, size_t bytes,
                                     uint32_t tag) {
  hostCall("fingerprint all_gather", in, bytes, out, bytes * info_.size(),
           [&](void *send, void *recv) {
             return ncclAllGather(send, recv, bytes, ncclInt8, comm_, stream_);
           });
}

void NcclCommunicator::hostExchange(int peer, const void *in, void *out,
                                    size_t bytes, uint64_t tag) {
  hostCall("fingerprint exchange", in, bytes, out, bytes,
           [&](void *send, void *recv) {
             ncclGroupStart();
             ncclRecv(recv, bytes, ncclInt8, peer, comm_, stream_);
             ncclSend(send, bytes, ncclInt8, peer, comm_, stream_);
             return ncclGroupEnd();
           });
}

} // namespace cleave::rt
