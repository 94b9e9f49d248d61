//===- Async.cpp - Asynchronous communication
//------------------------------===//
//
// cleave_rt_*_start queue a request on the progress thread and return its
// handle; cleave_rt_wait blocks until it has run. The thread runs the same
// entry points as the blocking calls (Collectives.cpp), so argument checks,
// sequence numbers, the flight recorder, heartbeats, fingerprints and the
// wording of errors are the blocking calls'. An error raised on the thread
// is the runtime's sticky error ("rank R: all_reduce on group ... failed")
// and cleave_rt_wait returns non-zero.
//
// A backend that orders communication on the device (cuda) needs no
// thread: the start runs the call on the caller's thread with its completion
// deferred (Backend::beginDeferred), which enqueues it on the communicator's
// stream, and the wait makes the compute stream wait for it. The device
// work between the start and the wait overlaps the call.
//
// CLEAVE_ASYNC=0 runs every start at once on the caller's thread (the
// request is complete when the start returns): a switch to measure what
// the thread costs on machines with few cores.
//
//===----------------------------------------------------------------------===//

#include "Async.h"
#include "Error.h"
#include "State.h"

#include "cleave/Runtime/Runtime.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace cleave::rt {
namespace {

thread_local bool onProgressThread = false;

/// What a handle names until it is waited.
struct Request {
  const char *op;
  const void *in;
  const void *out;
  bool done = false;
  int64_t deferred = 0; ///< Backend::endDeferred's token (0: none).
};

class ProgressThread {
public:
  int64_t submit(const char *op, const void *in, const void *out,
                 std::function<void()> work);
  int wait(int64_t id, const void *in, const void *out);
  bool forward(const std::function<void()> &call);
  void drain();
  void stop();

private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::pair<int64_t, std::function<void()>>> queue_;
  std::unordered_map<int64_t, Request> requests_;
  int64_t nextId_ = 1;
  int64_t pending_ = 0; ///< Queued or running.
  bool stopping_ = false;
  std::thread thread_;
};

ProgressThread &progress() {
  // Never destroyed: at exit without cleave_rt_finalize, a request may still
  // block in the backend, and joining the thread would hang the exit.
  static ProgressThread *thread = new ProgressThread;
  return *thread;
}

bool asyncEnabled() {
  static const bool enabled = [] {
    const char *v = std::getenv("CLEAVE_ASYNC");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return enabled;
}

void ProgressThread::loop() {
  onProgressThread = true;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty())
      return;
    auto [id, work] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    work();
    lock.lock();
    if (auto it = requests_.find(id); it != requests_.end())
      it->second.done = true;
    --pending_;
    idle_.notify_all();
  }
}

int64_t ProgressThread::submit(const char *op, const void *in, const void *out,
                               std::function<void()> work) {
  std::unique_lock<std::mutex> lock(mutex_);
  int64_t id = nextId_++;
  requests_[id] = Request{op, in, out};
  Backend *backend = currentBackend();
  bool onDevice = backend && backend->ordersOnDevice();
  if (!asyncEnabled() || onDevice) {
    // At once: blocking, or enqueued on the device with its wait deferred.
    bool defer = onDevice && asyncEnabled();
    lock.unlock();
    if (defer)
      backend->beginDeferred();
    work();
    int64_t token = defer ? backend->endDeferred() : 0;
    lock.lock();
    requests_[id].done = true;
    requests_[id].deferred = token;
    return id;
  }
  if (!thread_.joinable()) {
    stopping_ = false;
    thread_ = std::thread([this] { loop(); });
  }
  queue_.emplace_back(id, std::move(work));
  ++pending_;
  wake_.notify_one();
  return id;
}

int ProgressThread::wait(int64_t id, const void *in, const void *out) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    lock.unlock();
    recordError(concat("wait: request ", id,
                       " was never started or is already waited"));
    return 1;
  }
  Request &r = it->second;
  std::string mismatch;
  if ((in && in != r.in) || (out && out != r.out))
    mismatch =
        concat("wait: request ", id, " (", r.op, ") was started with buffers ",
               r.in, " -> ", r.out, " but is waited with ", in, " -> ", out);
  // Even then the request runs to its end before the wait returns: the
  // caller may free its buffers next.
  idle_.wait(lock, [&] { return r.done; });
  int64_t deferred = r.deferred;
  requests_.erase(id);
  lock.unlock();
  if (deferred && !guard("wait", false, [&] {
        if (Backend *backend = currentBackend())
          backend->awaitDeferred(deferred);
        return true;
      }))
    return 1;
  if (!mismatch.empty()) {
    recordError(mismatch);
    return 1;
  }
  return hasFailed() ? 1 : 0;
}

bool ProgressThread::forward(const std::function<void()> &call) {
  if (onProgressThread)
    return false;
  int64_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pending_ == 0)
      return false;
    id = nextId_++;
    requests_[id] = Request{"blocking call", nullptr, nullptr};
    queue_.emplace_back(id, call);
    ++pending_;
    wake_.notify_one();
  }
  wait(id, nullptr, nullptr);
  return true;
}

void ProgressThread::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return pending_ == 0; });
}

void ProgressThread::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable())
    thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  requests_.clear();
}

} // namespace

bool forwardToProgressThread(const std::function<void()> &call) {
  return progress().forward(call);
}

void drainProgressThread() { progress().drain(); }

void stopProgressThread() { progress().stop(); }

} // namespace cleave::rt

using namespace cleave::rt;

extern "C" {

int64_t cleave_rt_all_reduce_start(int64_t group, int32_t dtype, int32_t op,
                                   const void *in, void *out, int64_t count) {
  return progress().submit("all_reduce", in, out, [=] {
    cleave_rt_all_reduce(group, dtype, op, in, out, count);
  });
}

int64_t cleave_rt_all_gather_start(int64_t group, int32_t dtype, const void *in,
                                   void *out, int64_t count) {
  return progress().submit("all_gather", in, out, [=] {
    cleave_rt_all_gather(group, dtype, in, out, count);
  });
}

int64_t cleave_rt_reduce_scatter_start(int64_t group, int32_t dtype, int32_t op,
                                       const void *in, void *out,
                                       int64_t count) {
  return progress().submit("reduce_scatter", in, out, [=] {
    cleave_rt_reduce_scatter(group, dtype, op, in, out, count);
  });
}

int64_t cleave_rt_all_to_all_start(int64_t group, int32_t dtype, const void *in,
                                   void *out, int64_t count) {
  return progress().submit("all_to_all", in, out, [=] {
    cleave_rt_all_to_all(group, dtype, in, out, count);
  });
}

int64_t cleave_rt_collective_permute_start(int64_t group, int32_t dtype,
                                           const void *in, void *out,
                                           int64_t count, int64_t npairs,
                                           const int64_t *pairs) {
  // The pairs are the caller's (a stack array in generated code): the
  // request keeps its own copy. A bad npairs is reported by the call.
  std::vector<int64_t> copy;
  if (pairs && npairs > 0)
    copy.assign(pairs, pairs + 2 * npairs);
  return progress().submit("collective_permute", in, out, [=] {
    cleave_rt_collective_permute(group, dtype, in, out, count, npairs,
                                 pairs ? copy.data() : nullptr);
  });
}

int64_t cleave_rt_send_start(int64_t group, int64_t peer, int32_t dtype,
                             const void *in, int64_t count) {
  return progress().submit("send", in, nullptr, [=] {
    cleave_rt_send(group, peer, dtype, in, count);
  });
}

int64_t cleave_rt_recv_start(int64_t group, int64_t peer, int32_t dtype,
                             void *out, int64_t count) {
  return progress().submit("recv", nullptr, out, [=] {
    cleave_rt_recv(group, peer, dtype, out, count);
  });
}

int cleave_rt_wait(int64_t request, const void *in, const void *out,
                   const void *operand) {
  (void)operand; // Only keeps the operand in use until here (Runtime.h).
  return progress().wait(request, in, out);
}

} // extern "C"
