//===- NcclCommunicator.h - Groups on NCCL ----------------------*- C++ -*-===//
//
// Internal to libCleaveRuntimeCuda. One NCCL communicator per group, each
// with its own stream: a call waits (on the device) for the compute work
// enqueued before it, and the compute work after it waits for the call (from
// the request's wait on, for an asynchronous request: the compute work
// between the start and the wait overlaps the call).
// Communicators are nonblocking (setup never hangs the host); a watchdog
// thread polls every pending call and the communicators' asynchronous
// errors, and on an error or a call that runs past the timeout it records a
// message naming the rank, the operation and the group and aborts every
// communicator, so no rank waits forever.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_NCCLCOMMUNICATOR_H
#define CLEAVE_LIB_RUNTIME_NCCLCOMMUNICATOR_H

#include "Backend.h"
#include "CudaDevice.h"

#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace cleave::rt {

class NcclCommunicator;

/// What communicators need from the backend.
class NcclHost {
public:
  virtual ~NcclHost() = default;
  virtual CudaDevice &device() = 0;
  /// Outside a compiled step, waits until the device finished the call.
  virtual void afterCall() = 0;
  /// While this thread defers completions (Backend::beginDeferred), keeps an
  /// event after the work enqueued so far on `stream` for awaitDeferred and
  /// returns true; otherwise returns false and the caller makes the compute
  /// stream wait for its call at once.
  virtual bool defer(CUstream stream) = 0;
};

/// Polls pending calls and asynchronous errors (see the file comment).
class NcclWatchdog {
public:
  NcclWatchdog(CudaDevice &device, int64_t timeoutMs, int64_t pollMs);
  ~NcclWatchdog();
  void add(NcclCommunicator *comm);
  void remove(NcclCommunicator *comm);
  /// Watches a call whose completion `done` records (the event is released
  /// by the watchdog).
  void track(NcclCommunicator *comm, CUevent done, const char *op,
             uint32_t tag);
  /// True once the watchdog reported a failure.
  bool fired() const { return fired_.load(); }

private:
  struct Pending {
    NcclCommunicator *comm;
    CUevent done;
    const char *op;
    uint32_t tag;
    double start;
  };
  void run();
  void poll();
  void fail(const Pending &p, const std::string &why);

  CudaDevice &device_;
  int64_t timeoutMs_, pollMs_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Pending> pending_;
  std::set<NcclCommunicator *> comms_;
  std::atomic<bool> fired_{false};
  bool stop_ = false;
  std::thread thread_;
};

/// A group on NCCL (see Backend.h for the semantics of each call).
class NcclCommunicator final : public Communicator {
public:
  /// Connects the world: group rank 0 publishes ncclGetUniqueId through
  /// the store, every rank joins with ncclCommInitRankConfig.
  static std::unique_ptr<NcclCommunicator>
  connectWorld(NcclHost &host, NcclWatchdog &watchdog, const GroupInfo &info,
               KvStore &store, const std::string &prefix);
  /// Splits `parent` (every member of the parent calls this) into the
  /// group `info` (ncclCommSplit, color = its first member).
  static std::unique_ptr<NcclCommunicator> split(NcclCommunicator &parent,
                                                 const GroupInfo &info);
  ~NcclCommunicator() override;

  void allReduce(const void *in, void *out, size_t count, int32_t dtype,
                 int32_t op, uint32_t tag) override;
  void allGather(const void *in, void *out, size_t count, int32_t dtype,
                 uint32_t tag) override;
  void reduceScatter(const void *in, void *out, size_t count, int32_t dtype,
                     int32_t op, uint32_t tag) override;
  void allToAll(const void *in, void *out, size_t count, int32_t dtype,
                uint32_t tag) override;
  void broadcast(void *data, size_t count, int32_t dtype, int root,
                 uint32_t tag) override;
  void sendRecv(const std::vector<Transfer> &sends,
                const std::vector<Transfer> &recvs, uint64_t tag) override;
  void barrier(uint32_t tag) override;
  void hostAllGather(const void *in, void *out, size_t bytes,
                     uint32_t tag) override;
  void hostExchange(int peer, const void *in, void *out, size_t bytes,
                    uint64_t tag) override;
  void abort() override;

  const GroupInfo &info() const { return info_; }
  /// The communicator's asynchronous error (ncclSuccess when healthy or
  /// aborted), with NCCL's last message.
  ncclResult_t asyncError(std::string &message);

private:
  NcclCommunicator(NcclHost &host, NcclWatchdog &watchdog, GroupInfo info);
  /// Waits for a nonblocking NCCL call to be enqueued (or set up).
  ncclResult_t settle(ncclResult_t result, const char *what);
  /// Runs `enqueue` (NCCL calls on `stream`) ordered after the compute
  /// stream, and makes the compute stream wait for it (at once, or at the
  /// request's wait when the host defers it).
  template <typename Fn>
  void run(const char *op, uint32_t tag, Fn &&enqueue);
  /// Copies host bytes through device scratch and waits.
  void hostCall(const char *op, const void *in, size_t inBytes, void *out,
                size_t outBytes,
                const std::function<ncclResult_t(void *, void *)> &call);

  NcclHost &host_;
  NcclWatchdog &watchdog_;
  GroupInfo info_;
  std::mutex mutex_;
  ncclComm_t comm_ = nullptr;
  CUstream stream_ = nullptr;
};

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_NCCLCOMMUNICATOR_H
