//===- Backend.h - What a device backend implements -------------*- C++ -*-===//
//
// Internal to libCleaveRuntime. Everything above the device calls (argument
// checks, group bookkeeping, sequence numbers, fingerprints, the flight
// recorder, timeouts and error messages, heartbeats) is shared code that talks
// to a Backend and its Communicators. The cpu backend implements them with
// Gloo and OpenBLAS; a cuda backend implements the same interfaces with NCCL,
// cuBLASLt and the CUDA driver API.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_BACKEND_H
#define CLEAVE_LIB_RUNTIME_BACKEND_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace cleave::rt {

class KvStore;

/// One communicator group as the shared layer knows it.
struct GroupInfo {
  int64_t id = 0;           ///< The ABI group id (-1 is the world).
  std::string axes;         ///< "world" or "mesh axes [dp,tp]".
  std::vector<int> members; ///< World ranks, in group-rank order.
  int groupRank = 0;        ///< This process's index in `members`.
  int64_t timeoutMs = 0;    ///< Timeout of every blocking call.
  int size() const { return int(members.size()); }
  /// "group 1 (mesh axes [tp], ranks 0,1,2,3)" for messages.
  std::string describe() const;
};

/// One transfer of a send/recv batch: `bytes` bytes to or from group rank
/// `peer`, matched on the other side by `tag`.
struct Transfer {
  int peer;
  void *data;
  size_t bytes;
};

/// A connected group. Calls block until done and throw CommError (with the
/// backend's own words) on timeout or peer failure. Buffers are device
/// memory of the backend; counts are in elements of `dtype`.
class Communicator {
public:
  virtual ~Communicator() = default;
  virtual void allReduce(const void *in, void *out, size_t count, int32_t dtype,
                         int32_t op, uint32_t tag) = 0;
  virtual void allGather(const void *in, void *out, size_t count, int32_t dtype,
                         uint32_t tag) = 0;
  virtual void reduceScatter(const void *in, void *out, size_t count,
                             int32_t dtype, int32_t op, uint32_t tag) = 0;
  virtual void allToAll(const void *in, void *out, size_t count, int32_t dtype,
                        uint32_t tag) = 0;
  virtual void broadcast(void *data, size_t count, int32_t dtype, int root,
                         uint32_t tag) = 0;
  /// Posts every receive and send, then waits for all of them.
  virtual void sendRecv(const std::vector<Transfer> &sends,
                        const std::vector<Transfer> &recvs, uint64_t tag) = 0;
  virtual void barrier(uint32_t tag) = 0;
  /// All-gather of small host-memory records (debug fingerprints).
  virtual void hostAllGather(const void *in, void *out, size_t bytes,
                             uint32_t tag) = 0;
  /// Exchanges small host-memory records with one peer.
  virtual void hostExchange(int peer, const void *in, void *out, size_t bytes,
                            uint64_t tag) = 0;
  /// Tears down the connections so that peers blocked on this rank fail at
  /// once instead of waiting for their timeout. The communicator is unusable
  /// afterwards.
  virtual void abort() = 0;
};

/// One block of a copy between a backend's buffers and host memory.
struct HostCopy {
  void *dst;
  const void *src;
  size_t bytes;
};

/// Arguments of cleave_rt_gemm, already checked.
struct GemmArgs {
  int32_t dtype;
  bool transA, transB;
  int64_t batch, m, n, k;
  double alpha;
  const void *a;
  int64_t lda, strideA;
  const void *b;
  int64_t ldb, strideB;
  double beta;
  void *c;
  int64_t ldc, strideC;
};

/// A device backend: communicators, math and memory.
class Backend {
public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;
  /// Connects `group`; every member calls this at the same time. Keys the
  /// backend puts in `store` go under `prefix` (a PrefixStore), which is
  /// unique to this group and this definition of it.
  virtual std::unique_ptr<Communicator> connect(const GroupInfo &group,
                                                KvStore &store,
                                                const std::string &prefix) = 0;
  virtual void gemm(const GemmArgs &args) = 0;
  virtual void *alloc(int64_t bytes) = 0;
  virtual void free(void *ptr) = 0;
  /// Copies `bytes` of device memory (overlap allowed).
  virtual void copy(void *dst, const void *src, size_t bytes) = 0;
  /// Sets `bytes` of device memory to zero.
  virtual void zero(void *dst, size_t bytes) = 0;

  /// Bulk copies between buffers of alloc() and host memory (checkpoints;
  /// Runtime.h). A backend whose buffers are host memory (cpu) keeps these
  /// defaults: the copies are memcpys and pinning does nothing.
  virtual bool buffersOnDevice() const { return false; }
  virtual void pinHost(void *ptr, size_t bytes) {}
  /// Never throws.
  virtual void unpinHost(void *ptr) {}
  /// `toHost`: from alloc()'s buffers to host memory, else the reverse.
  /// Every copy is done when it returns.
  virtual void copyHost(const HostCopy *copies, size_t count, bool toHost) {
    for (size_t i = 0; i < count; ++i)
      std::memcpy(copies[i].dst, copies[i].src, copies[i].bytes);
  }

  /// Asynchronous requests (Async.cpp). A backend whose communication is
  /// ordered on the device (cuda: each communicator has a stream, ordered
  /// after the compute work before the call) returns true: a request's call
  /// then runs on the caller's thread between beginDeferred() and
  /// endDeferred(), and the device work issued after it waits for it only
  /// from awaitDeferred() on. A backend that communicates on the host (cpu)
  /// returns false: its requests run on the progress thread.
  virtual bool ordersOnDevice() const { return false; }
  /// Defers the completion of the communication this thread issues next:
  /// later device work does not wait for it.
  virtual void beginDeferred() {}
  /// Ends the deferral; returns a token for the communication issued since
  /// beginDeferred() (0: nothing is pending, e.g. the call failed first).
  virtual int64_t endDeferred() { return 0; }
  /// Makes the device work issued from now on wait for `token`'s
  /// communication and spends the token. Outside a step it also waits on
  /// the host, as every call there does.
  virtual void awaitDeferred(int64_t token) { (void)token; }
};

/// The cpu backend (Gloo over TCP, OpenBLAS). `socketHost` is the address
/// Gloo binds ("" lets Gloo resolve the host name); `ifname` an interface.
std::unique_ptr<Backend> createCpuBackend(const std::string &socketHost,
                                          const std::string &ifname);

/// The cpu GEMM, usable without an initialized runtime.
void cpuGemm(const GemmArgs &args);

/// Gives OpenBLAS this process's share of the machine's cores when
/// `localRanks` processes run on it (unless OPENBLAS_NUM_THREADS or
/// OMP_NUM_THREADS say otherwise): several ranks each spinning a thread per
/// core would oversubscribe the machine.
void shareCpuCores(int localRanks);

/// Checks the arguments of a GEMM; throws RuntimeError naming the problem.
void checkGemm(const GemmArgs &args);

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_BACKEND_H
