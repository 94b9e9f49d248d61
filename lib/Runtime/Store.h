//===- Store.h - Rendezvous key-value stores --------------------*- C++ -*-===//
//
// Internal to libCleaveRuntime. A KvStore is a gloo::rendezvous::Store (so
// Gloo contexts connect through it, usually behind a PrefixStore per group)
// plus what heartbeats need: overwriting puts and non-blocking gets. Two
// kinds: "file:/dir" (Gloo's FileStore on a shared directory) and
// "tcp://host:port" (our TcpStoreServer, served by rank 0).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_STORE_H
#define CLEAVE_LIB_RUNTIME_STORE_H

#include "Error.h"

#include <gloo/rendezvous/store.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace cleave::rt {

/// A wait that timed out; `missing` lists the keys that never appeared.
class StoreTimeout : public RuntimeError {
public:
  StoreTimeout(const std::string &message, std::vector<std::string> missing)
      : RuntimeError(message), missing(std::move(missing)) {}
  std::vector<std::string> missing;
};

/// A rendezvous store. set() creates a key (Gloo's semantics), get() blocks
/// until the key exists (at most timeoutMs), wait() throws StoreTimeout.
class KvStore : public gloo::rendezvous::Store {
public:
  explicit KvStore(int64_t timeoutMs) : timeoutMs(timeoutMs) {}
  using gloo::rendezvous::Store::wait;
  void wait(const std::vector<std::string> &keys) override {
    wait(keys, std::chrono::milliseconds(timeoutMs));
  }
  /// Creates or replaces `key` (heartbeats).
  virtual void put(const std::string &key, const std::string &value) = 0;
  /// The value of `key` if it exists, without waiting.
  virtual std::optional<std::string> tryGet(const std::string &key) = 0;
  /// "file:/dir" or "tcp://host:port".
  virtual std::string url() const = 0;
  int64_t timeoutMs;
};

/// A store on the shared directory `dir` (created if missing).
std::unique_ptr<KvStore> openFileStore(const std::string &dir,
                                       int64_t timeoutMs);

/// A client of a TcpStoreServer; retries the connection until timeoutMs.
std::unique_ptr<KvStore> connectTcpStore(const std::string &host, int port,
                                         int64_t timeoutMs);

/// The server of "tcp://host:port" stores: one thread, poll(), all keys in
/// memory, waits answered when their keys appear or their deadline passes.
class TcpStoreServer {
public:
  /// Listens on `port` of every interface; throws RuntimeError if it cannot.
  explicit TcpStoreServer(int port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer &) = delete;
  TcpStoreServer &operator=(const TcpStoreServer &) = delete;
  int port() const { return port_; }

private:
  void run();
  int listenFd_ = -1;
  int wakePipe_[2] = {-1, -1};
  int port_ = 0;
  std::thread thread_;
};

/// Parses "tcp://host:port" (port required) or "file:/dir".
struct RendezvousUrl {
  enum Kind { File, Tcp } kind = File;
  std::string path; ///< The directory for File.
  std::string host; ///< For Tcp.
  int port = 0;     ///< For Tcp.
};
/// Throws RuntimeError on anything else.
RendezvousUrl parseRendezvousUrl(const std::string &url);

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_STORE_H
