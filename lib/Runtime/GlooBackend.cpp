//===- GlooBackend.cpp - The cpu backend: Gloo over TCP, OpenBLAS ---------===//

#include "DType.h"
#include "Env.h"
#include "Gloo.h"
#include "Store.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <mutex>
#include <sched.h>
#include <set>
#include <type_traits>
#include <vector>

namespace cleave::rt {

[[noreturn]] void rethrowGloo(const std::exception &e) {
  std::string message = e.what();
  auto has = [&](const char *s) {
    return message.find(s) != std::string::npos;
  };
  CommError::Kind kind = CommError::Other;
  if (has("Timed out") || has("timed out") || has("Timeout") || has("timeout"))
    kind = CommError::Timeout;
  else if (has("closed") || has("reset") || has("Connection") ||
           has("Broken pipe") || has("peer"))
    kind = CommError::PeerFailure;
  throw CommError(kind, message);
}

namespace {

/// The unbound buffers a thread waits on right now, so that another thread
/// (the watchdog) can wake it: Gloo delivers nothing to a waiter when a
/// context's connections are closed under it.
std::mutex pendingMutex;
std::set<gloo::transport::UnboundBuffer *> pendingBuffers;
std::atomic<bool> waitsAborted{false};

/// Registers `buffer` for the duration of one wait.
class PendingWait {
public:
  explicit PendingWait(gloo::transport::UnboundBuffer &buffer)
      : buffer_(buffer) {
    std::lock_guard<std::mutex> lock(pendingMutex);
    pendingBuffers.insert(&buffer_);
  }
  ~PendingWait() {
    std::lock_guard<std::mutex> lock(pendingMutex);
    pendingBuffers.erase(&buffer_);
  }

private:
  gloo::transport::UnboundBuffer &buffer_;
};

template <typename Wait>
void waitOn(gloo::transport::UnboundBuffer &buffer, int n, const char *what,
            Wait &&wait) {
  PendingWait pending(buffer);
  for (int i = 0; i < n; ++i)
    glooCall([&] {
      if (waitsAborted || !wait())
        throw CommError(CommError::Other, what);
    });
}

} // namespace

void abortPendingWaits() {
  std::lock_guard<std::mutex> lock(pendingMutex);
  waitsAborted = true;
  for (gloo::transport::UnboundBuffer *buffer : pendingBuffers) {
    buffer->abortWaitRecv();
    buffer->abortWaitSend();
  }
}

void resetPendingWaits() { waitsAborted = false; }

void waitRecvs(gloo::transport::UnboundBuffer &buffer, int n,
               std::chrono::milliseconds timeout) {
  waitOn(buffer, n, "receive aborted",
         [&] { return buffer.waitRecv(nullptr, timeout); });
}

void waitSends(gloo::transport::UnboundBuffer &buffer, int n,
               std::chrono::milliseconds timeout) {
  waitOn(buffer, n, "send aborted",
         [&] { return buffer.waitSend(nullptr, timeout); });
}

ReduceScatterAlgo parseReduceScatterAlgo(const std::string &name) {
  if (name == "auto")
    return ReduceScatterAlgo::Auto;
  if (name == "ring")
    return ReduceScatterAlgo::Ring;
  if (name == "direct")
    return ReduceScatterAlgo::Direct;
  if (name == "halving")
    return ReduceScatterAlgo::Halving;
  if (name == "allreduce")
    return ReduceScatterAlgo::AllReduce;
  throw RuntimeError(
      concat("CLEAVE_REDUCE_SCATTER='", name,
             "' is not one of auto, ring, direct, halving, allreduce"));
}

namespace {

/// Default of CLEAVE_DIRECT_BYTES. Alone (bench/runtime, 4 ranks) the
/// direct all-reduce is 2x faster than the ring at 256 KiB and 2x slower at
/// 1 MiB; inside a training step, where the ring's 2(n-1) dependent steps
/// each wait for a peer that shares a core with busy ranks, the direct form
/// of tiny-gpt's 512 KiB tensor-parallel all-reduces takes tp=4 from 160-177
/// to 100 ms per step (docs/runtime.md).
constexpr int64_t kDefaultDirectBytes = 512 << 10;
/// Default of CLEAVE_RS_HALVING_BYTES: reduce-scatters of at most this many
/// bytes in all use recursive halving under `auto`, larger ones the ring.
/// Measured (bench/runtime, docs/runtime.md): halving is as fast as the
/// ring or faster up to 1 MiB on 2 and 4 ranks; from 4 MiB the ring's
/// pipelined segments win on 2 ranks.
constexpr int64_t kDefaultHalvingBytes = 1 << 20;
/// How Gloo's event-loop thread is scheduled (CLEAVE_GLOO_LOOP_SCHED).
/// Gloo's TCP pair skips a socket's event when its lock is held by the
/// thread posting a send or a receive, and returns to epoll, whose
/// level-triggered event fires again at once: the loop spins until the lock
/// holder runs. Woken by a peer's message, the loop thread preempts the
/// thread it shares a core with, often that very lock holder, and with more
/// busy threads than cores (ranks sharing a host) it then spins a whole
/// scheduler slice (4 ms here). Under SCHED_BATCH a woken thread does not
/// preempt the running one and keeps its full share of the CPU (nice 19
/// does the same for the spin but starves the loop behind other load).
/// Measured (cleave-measure-local-cpu, 4 ranks on 2 cores): a 1 KB
/// all-gather on 4 ranks 3.2 ms -> 0.35 ms per call, its CPU per rank 1.2
/// -> 0.15 ms; point to point 2.0 ms -> 0.13 ms (docs/runtime.md).
enum class LoopSched { Batch, Normal };

LoopSched parseLoopSched(const std::string &name) {
  if (name == "batch")
    return LoopSched::Batch;
  if (name == "normal")
    return LoopSched::Normal;
  throw RuntimeError(concat("CLEAVE_GLOO_LOOP_SCHED='", name,
                            "' is not one of batch, normal"));
}

/// The ids of this process's threads (Linux: /proc/self/task).
std::set<long> threadIds() {
  std::set<long> ids;
  if (DIR *dir = ::opendir("/proc/self/task")) {
    while (const dirent *entry = ::readdir(dir))
      if (std::optional<int64_t> id = parseInt(entry->d_name))
        ids.insert(long(*id));
    ::closedir(dir);
  }
  return ids;
}

/// Calls fn(T*) with an unsigned type of dtype's size (Gloo only needs the
/// element size; the reduction function knows the real type).
template <typename Fn>
void withElementType(int32_t dtype, Fn &&fn) {
  switch (dtypeSize(dtype)) {
  case 2:
    return fn(static_cast<uint16_t *>(nullptr));
  case 4:
    return fn(static_cast<uint32_t *>(nullptr));
  case 8:
    return fn(static_cast<uint64_t *>(nullptr));
  default:
    throw RuntimeError(concat("unknown dtype code ", dtype));
  }
}

bool overlaps(const void *a, size_t aBytes, const void *b, size_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && x < y + bBytes && y < x + aBytes;
}

class GlooCommunicator final : public Communicator {
public:
  GlooCommunicator(std::shared_ptr<gloo::Context> ctx,
                   std::chrono::milliseconds timeout, ReduceScatterAlgo algo,
                   size_t segmentBytes, size_t directBytes, size_t halvingBytes)
      : ctx_(std::move(ctx)), timeout_(timeout), algo_(algo),
        segmentBytes_(segmentBytes), directBytes_(directBytes),
        halvingBytes_(halvingBytes) {}

  void allReduce(const void *in, void *out, size_t count, int32_t dtype,
                 int32_t op, uint32_t tag) override {
    if (count == 0)
      return;
    size_t bytes = count * size_t(dtypeSize(dtype));
    if (bytes <= directBytes_) {
      directAllReduce(ctx_, in, out, count, dtype,
                      op == CLEAVE_AVG ? CLEAVE_SUM : op, tag, timeout_,
                      scratch(2, bytes * size_t(ctx_->size)));
      if (op == CLEAVE_AVG)
        scaleInPlace(dtype, out, count, 1.0 / ctx_->size);
      return;
    }
    withElementType(dtype, [&](auto *typed) {
      using T = std::remove_pointer_t<decltype(typed)>;
      gloo::AllreduceOptions o(ctx_);
      if (in != out)
        o.setInput(static_cast<T *>(const_cast<void *>(in)), count);
      o.setOutput(static_cast<T *>(out), count);
      o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      o.setReduceFunction(reduceFunction(dtype, op));
      o.setTag(tag);
      o.setTimeout(timeout_);
      glooCall([&] { gloo::allreduce(o); });
    });
    if (op == CLEAVE_AVG)
      scaleInPlace(dtype, out, count, 1.0 / ctx_->size);
  }

  void allGather(const void *in, void *out, size_t count, int32_t dtype,
                 uint32_t tag) override {
    if (count == 0)
      return;
    size_t bytes = count * size_t(dtypeSize(dtype));
    char *mine = static_cast<char *>(out) + bytes * size_t(ctx_->rank);
    if (in != mine && overlaps(in, bytes, out, bytes * ctx_->size))
      in = copyOf(in, bytes);
    if (bytes * size_t(ctx_->size) <= directBytes_) {
      directAllGather(ctx_, in, out, bytes, tag, timeout_);
      return;
    }
    withElementType(dtype, [&](auto *typed) {
      using T = std::remove_pointer_t<decltype(typed)>;
      gloo::AllgatherOptions o(ctx_);
      if (in != mine)
        o.setInput(static_cast<T *>(const_cast<void *>(in)), count);
      o.setOutput(static_cast<T *>(out), count * size_t(ctx_->size));
      o.setTag(tag);
      o.setTimeout(timeout_);
      glooCall([&] { gloo::allgather(o); });
    });
  }

  void reduceScatter(const void *in, void *out, size_t count, int32_t dtype,
                     int32_t op, uint32_t tag) override {
    if (count == 0)
      return;
    size_t bytes = count * size_t(dtypeSize(dtype));
    size_t total = bytes * size_t(ctx_->size);
    if (overlaps(in, total, out, bytes))
      in = copyOf(in, total);
    ReduceScatterAlgo algo = algo_;
    if (algo == ReduceScatterAlgo::Auto)
      algo = total <= halvingBytes_ ? ReduceScatterAlgo::Halving
                                    : ReduceScatterAlgo::Ring;
    switch (algo) {
    case ReduceScatterAlgo::Auto:
    case ReduceScatterAlgo::Ring:
      ringReduceScatter(ctx_, in, out, count, dtype, op, tag, timeout_,
                        segmentBytes_, scratch(0, 4 * bytes));
      break;
    case ReduceScatterAlgo::Direct:
      directReduceScatter(ctx_, in, out, count, dtype, op, tag, timeout_,
                          scratch(0, total));
      break;
    case ReduceScatterAlgo::Halving:
      halvingReduceScatter(ctx_, in, out, count, dtype, op, tag, timeout_,
                           scratch(0, 2 * total));
      break;
    case ReduceScatterAlgo::AllReduce: {
      char *all = scratch(0, total);
      std::memcpy(all, in, total);
      allReduce(all, all, count * ctx_->size, dtype,
                op == CLEAVE_AVG ? CLEAVE_SUM : op, tag);
      std::memcpy(out, all + bytes * ctx_->rank, bytes);
      break;
    }
    }
    if (op == CLEAVE_AVG)
      scaleInPlace(dtype, out, count, 1.0 / ctx_->size);
  }

  void allToAll(const void *in, void *out, size_t count, int32_t dtype,
                uint32_t tag) override {
    if (count == 0)
      return;
    size_t total = count * size_t(dtypeSize(dtype)) * size_t(ctx_->size);
    if (overlaps(in, total, out, total))
      in = copyOf(in, total);
    withElementType(dtype, [&](auto *typed) {
      using T = std::remove_pointer_t<decltype(typed)>;
      gloo::AlltoallOptions o(ctx_);
      o.setInput(static_cast<T *>(const_cast<void *>(in)),
                 count * size_t(ctx_->size));
      o.setOutput(static_cast<T *>(out), count * size_t(ctx_->size));
      o.setTag(tag);
      o.setTimeout(timeout_);
      glooCall([&] { gloo::alltoall(o); });
    });
  }

  void broadcast(void *data, size_t count, int32_t dtype, int root,
                 uint32_t tag) override {
    // The root sends to every other rank at once (one round, and waits
    // that the watchdog can abort; Gloo's own broadcast cannot be).
    // sendRecv tag space 4 << 40 (Collectives.cpp uses 1..3 << 40).
    size_t bytes = count * size_t(dtypeSize(dtype));
    std::vector<Transfer> sends, recvs;
    if (ctx_->rank == root) {
      for (int p = 0; p < ctx_->size; ++p)
        if (p != root)
          sends.push_back({p, data, bytes});
    } else {
      recvs.push_back({root, data, bytes});
    }
    sendRecv(sends, recvs, (4ull << 40) | tag);
  }

  void sendRecv(const std::vector<Transfer> &sends,
                const std::vector<Transfer> &recvs, uint64_t tag) override {
    uint64_t slot = kSendRecvSlot | tag;
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> rb, sb;
    glooCall([&] {
      for (const Transfer &t : recvs) {
        if (!t.bytes)
          continue;
        rb.push_back(ctx_->createUnboundBuffer(t.data, t.bytes));
        rb.back()->recv(t.peer, slot);
      }
      for (const Transfer &t : sends) {
        if (!t.bytes)
          continue;
        sb.push_back(ctx_->createUnboundBuffer(t.data, t.bytes));
        sb.back()->send(t.peer, slot);
      }
    });
    for (auto &b : rb)
      waitRecvs(*b, 1, timeout_);
    for (auto &b : sb)
      waitSends(*b, 1, timeout_);
  }

  void barrier(uint32_t tag) override {
    // One byte all-gathered in one round: as fast as Gloo's barrier, and
    // its waits can be aborted.
    char mine = 1;
    directAllGather(ctx_, &mine, scratch(2, size_t(ctx_->size)), 1, tag,
                    timeout_);
  }

  void hostAllGather(const void *in, void *out, size_t bytes,
                     uint32_t tag) override {
    gloo::AllgatherOptions o(ctx_);
    o.setInput(static_cast<uint8_t *>(const_cast<void *>(in)), bytes);
    o.setOutput(static_cast<uint8_t *>(out), bytes * size_t(ctx_->size));
    o.setTag(tag);
    o.setTimeout(timeout_);
    glooCall([&] { gloo::allgather(o); });
  }

  void hostExchange(int peer, const void *in, void *out, size_t bytes,
                    uint64_t tag) override {
    sendRecv({{peer, const_cast<void *>(in), bytes}}, {{peer, out, bytes}},
             tag);
  }

  void abort() override {
    // Wake this rank's own waits first (the watchdog aborts from another
    // thread while the communicating thread waits; closing the connections
    // delivers nothing to a local waiter), then close, so that peers fail.
    abortPendingWaits();
    try {
      ctx_->closeConnections();
    } catch (const std::exception &) {
      // The connections are already broken; nothing more to close.
    }
  }

private:
  /// Grow-only scratch memory (slot 0: algorithm buffers, slot 1: copies of
  /// inputs that overlap outputs, slot 2: the direct all-reduce's blocks,
  /// which the `allreduce` reduce-scatter calls on slot 0), reused across calls
  /// so that big collectives do not page-fault fresh memory every time.
  char *scratch(int slot, size_t bytes) {
    if (scratchBytes_[slot] < bytes) {
      scratch_[slot].reset(new char[bytes]);
      scratchBytes_[slot] = bytes;
    }
    return scratch_[slot].get();
  }
  /// A copy of `bytes` of `in` in scratch slot 1.
  const void *copyOf(const void *in, size_t bytes) {
    char *copy = scratch(1, bytes);
    std::memcpy(copy, in, bytes);
    return copy;
  }

  std::shared_ptr<gloo::Context> ctx_;
  std::chrono::milliseconds timeout_;
  ReduceScatterAlgo algo_;
  size_t segmentBytes_;
  /// All-reduces, all-gathers (and reduce-scatters under `auto`) of at most
  /// this many bytes in all use the one-round direct algorithms.
  size_t directBytes_;
  /// Reduce-scatters of at most this many bytes in all use recursive
  /// halving under `auto`.
  size_t halvingBytes_;
  std::unique_ptr<char[]> scratch_[3];
  size_t scratchBytes_[3] = {0, 0, 0};
};

class CpuBackend final : public Backend {
public:
  CpuBackend(std::string host, std::string ifname)
      : host_(std::move(host)), ifname_(std::move(ifname)) {}

  const char *name() const override { return "gloo"; }

  std::unique_ptr<Communicator> connect(const GroupInfo &group, KvStore &store,
                                        const std::string &prefix) override {
    // The settings are checked before connecting: every rank then fails
    // on its own with the setting named, instead of a peer seeing the
    // connection of a rank that already failed close.
    ReduceScatterAlgo algo = parseReduceScatterAlgo(
        getEnv("CLEAVE_REDUCE_SCATTER").value_or("auto"));
    int64_t segment = envInt("CLEAVE_RS_SEGMENT_BYTES", 1 << 20);
    require(segment > 0, "CLEAVE_RS_SEGMENT_BYTES must be positive");
    int64_t direct = envInt("CLEAVE_DIRECT_BYTES", kDefaultDirectBytes);
    require(direct >= 0, "CLEAVE_DIRECT_BYTES must not be negative");
    int64_t halving = envInt("CLEAVE_RS_HALVING_BYTES", kDefaultHalvingBytes);
    require(halving >= 0, "CLEAVE_RS_HALVING_BYTES must not be negative");
    std::shared_ptr<gloo::transport::Device> &dev = device();
    gloo::rendezvous::PrefixStore prefixed(prefix, store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(group.groupRank,
                                                           group.size());
    std::chrono::milliseconds timeout(group.timeoutMs);
    ctx->setTimeout(timeout);
    try {
      ctx->connectFullMesh(prefixed, dev);
    } catch (const RuntimeError &) {
      throw;
    } catch (const std::exception &e) {
      throw RuntimeError(
          concat("connecting the group through Gloo failed: ", e.what()));
    }
    return std::make_unique<GlooCommunicator>(
        ctx, timeout, algo, size_t(segment), size_t(direct), size_t(halving));
  }

  void gemm(const GemmArgs &args) override { cpuGemm(args); }

  void *alloc(int64_t bytes) override {
    size_t rounded = (size_t(std::max<int64_t>(bytes, 1)) + 63) & ~size_t(63);
    void *ptr = std::aligned_alloc(64, rounded);
    require(ptr, "cannot allocate ", bytes, " bytes");
    return ptr;
  }
  void free(void *ptr) override { std::free(ptr); }
  void copy(void *dst, const void *src, size_t bytes) override {
    std::memmove(dst, src, bytes);
  }
  void zero(void *dst, size_t bytes) override { std::memset(dst, 0, bytes); }

private:
  /// The TCP device, created at the first connection (a world of one never
  /// starts Gloo's event-loop thread).
  std::shared_ptr<gloo::transport::Device> &device() {
    if (device_)
      return device_;
    LoopSched sched =
        parseLoopSched(getEnv("CLEAVE_GLOO_LOOP_SCHED").value_or("batch"));
    gloo::transport::tcp::attr attr;
    if (!ifname_.empty())
      attr.iface = ifname_;
    else if (!host_.empty())
      attr.hostname = host_;
    std::set<long> before = threadIds();
    try {
      device_ = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception &e) {
      throw RuntimeError(concat("cannot create the Gloo TCP device (",
                                ifname_.empty() ? "host '" + host_ + "'"
                                                : "interface " + ifname_,
                                "): ", e.what()));
    }
    // The device started its event-loop thread: the one thread that is new
    // (if another thread of the process started meanwhile, none is
    // touched). Moving a thread from SCHED_OTHER to SCHED_BATCH needs no
    // privilege.
    if (sched == LoopSched::Batch) {
      std::vector<long> started;
      for (long id : threadIds())
        if (!before.count(id))
          started.push_back(id);
      sched_param param{};
      if (started.size() == 1 &&
          ::sched_getscheduler(pid_t(started.front())) == SCHED_OTHER)
        ::sched_setscheduler(pid_t(started.front()), SCHED_BATCH, &param);
    }
    return device_;
  }

  std::string host_, ifname_;
  std::shared_ptr<gloo::transport::Device> device_;
};

} // namespace

std::unique_ptr<Backend> createCpuBackend(const std::string &socketHost,
                                          const std::string &ifname) {
  resetPendingWaits();
  return std::make_unique<CpuBackend>(socketHost, ifname);
}

} // namespace cleave::rt
