//===- TcpStore.cpp - The "tcp://host:port" rendezvous store --------------===//
//
// Debian's Gloo has no TCP store, so this is ours. Rank 0 runs the server;
// every rank (rank 0 included) talks to it through a client.
//
// Wire format: each message is a little-endian u32 length and a body. A
// request body is an opcode byte and fields; a field is a u32 length and
// bytes. Requests and replies:
//   'S' key value          -> 'O'                 set (create or replace)
//   'G' key                -> 'V' value | 'N'     non-blocking get
//   'W' u64 ms, keys...    -> 'O' | 'T' keys...   wait until all keys exist
// The server answers a wait when its keys appear or its deadline passes; a
// connection's later requests queue behind it.
//
//===----------------------------------------------------------------------===//

#include "Store.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace cleave::rt {
namespace {

using Clock = std::chrono::steady_clock;

void appendU32(std::string &out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(char((v >> (8 * i)) & 0xff));
}
void appendU64(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(char((v >> (8 * i)) & 0xff));
}
void appendField(std::string &out, const std::string &field) {
  appendU32(out, uint32_t(field.size()));
  out += field;
}

/// Reads fields of a body; `ok` turns false on a malformed body.
struct Reader {
  const std::string &data;
  size_t pos = 0;
  bool ok = true;
  uint64_t number(int bytes) {
    if (pos + bytes > data.size()) {
      ok = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
      v |= uint64_t(uint8_t(data[pos + i])) << (8 * i);
    pos += bytes;
    return v;
  }
  std::string field() {
    uint64_t n = number(4);
    if (!ok || pos + n > data.size()) {
      ok = false;
      return {};
    }
    std::string s = data.substr(pos, n);
    pos += n;
    return s;
  }
  bool done() const { return pos == data.size(); }
};

std::string frame(const std::string &body) {
  std::string out;
  appendU32(out, uint32_t(body.size()));
  return out + body;
}

//===----------------------------------------------------------------------===//
// Server
//===----------------------------------------------------------------------===//

struct Connection {
  int fd;
  std::string in, out;
  bool waiting = false;
  std::vector<std::string> waitKeys;
  Clock::time_point deadline;
};

class ServerLoop {
public:
  ServerLoop(int listenFd, int wakeFd) : listenFd_(listenFd), wakeFd_(wakeFd) {}
  ~ServerLoop() {
    for (auto &entry : conns_)
      ::close(entry.first);
  }
  void run();

private:
  void accept();
  bool readFrom(Connection &c);
  void process(Connection &c);
  void handle(Connection &c, const std::string &body);
  bool finishWait(Connection &c, bool timedOut);
  void flush(Connection &c);
  int pollTimeoutMs() const;

  int listenFd_, wakeFd_;
  std::map<int, Connection> conns_;
  std::map<std::string, std::string> data_;
};

void ServerLoop::run() {
  for (;;) {
    std::vector<pollfd> fds{{wakeFd_, POLLIN, 0}, {listenFd_, POLLIN, 0}};
    for (auto &[fd, c] : conns_)
      fds.push_back({fd, short(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    int rv = ::poll(fds.data(), fds.size(), pollTimeoutMs());
    if (rv < 0 && errno != EINTR)
      return;
    if (fds[0].revents)
      return; // Shutdown.
    if (fds[1].revents & POLLIN)
      accept();
    for (size_t i = 2; i < fds.size(); ++i) {
      auto it = conns_.find(fds[i].fd);
      if (it == conns_.end())
        continue;
      Connection &c = it->second;
      bool alive = true;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
        alive = readFrom(c);
      if (alive && (fds[i].revents & POLLOUT))
        flush(c);
      if (!alive) {
        ::close(c.fd);
        conns_.erase(it);
      }
    }
    for (auto &[fd, c] : conns_) {
      if (c.waiting && Clock::now() >= c.deadline)
        finishWait(c, true);
      process(c);
    }
  }
}

int ServerLoop::pollTimeoutMs() const {
  int timeout = 1000;
  for (const auto &[fd, c] : conns_) {
    if (!c.waiting)
      continue;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  c.deadline - Clock::now())
                  .count();
    timeout = std::min<int>(timeout, std::max<int64_t>(ms + 1, 0));
  }
  return timeout;
}

void ServerLoop::accept() {
  int fd = ::accept(listenFd_, nullptr, nullptr);
  if (fd < 0)
    return;
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  Connection c;
  c.fd = fd;
  conns_[fd] = std::move(c);
}

bool ServerLoop::readFrom(Connection &c) {
  char buffer[65536];
  for (;;) {
    ssize_t n = ::recv(c.fd, buffer, sizeof(buffer), 0);
    if (n > 0) {
      c.in.append(buffer, size_t(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return true;
    if (n < 0 && errno == EINTR)
      continue;
    return false; // EOF or error: drop the client.
  }
}

void ServerLoop::process(Connection &c) {
  while (!c.waiting && c.in.size() >= 4) {
    Reader header{c.in};
    uint64_t length = header.number(4);
    if (c.in.size() < 4 + length)
      break;
    std::string body = c.in.substr(4, length);
    c.in.erase(0, 4 + length);
    handle(c, body);
  }
  flush(c);
}

void ServerLoop::handle(Connection &c, const std::string &body) {
  Reader r{body};
  char op = char(r.number(1));
  if (op == 'S') {
    std::string key = r.field(), value = r.field();
    if (!r.ok)
      return;
    data_[key] = value;
    c.out += frame("O");
    for (auto &[fd, other] : conns_)
      if (other.waiting)
        finishWait(other, false);
  } else if (op == 'G') {
    std::string key = r.field();
    auto it = data_.find(key);
    std::string reply = it == data_.end() ? "N" : "V";
    if (it != data_.end())
      appendField(reply, it->second);
    c.out += frame(reply);
  } else if (op == 'W') {
    uint64_t ms = r.number(8);
    c.waitKeys.clear();
    while (r.ok && !r.done())
      c.waitKeys.push_back(r.field());
    c.waiting = true;
    c.deadline = Clock::now() + std::chrono::milliseconds(ms);
    finishWait(c, false);
  }
}

/// Answers a pending wait if its keys exist (or with the missing keys when
/// it timed out). Returns true if answered.
bool ServerLoop::finishWait(Connection &c, bool timedOut) {
  std::vector<std::string> missing;
  for (const std::string &key : c.waitKeys)
    if (!data_.count(key))
      missing.push_back(key);
  if (!missing.empty() && !timedOut)
    return false;
  std::string reply = missing.empty() ? "O" : "T";
  for (const std::string &key : missing)
    appendField(reply, key);
  c.out += frame(reply);
  c.waiting = false;
  c.waitKeys.clear();
  flush(c);
  return true;
}

void ServerLoop::flush(Connection &c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n <= 0)
      return; // EAGAIN: POLLOUT will call again; errors show up as EOF.
    c.out.erase(0, size_t(n));
  }
}

//===----------------------------------------------------------------------===//
// Client
//===----------------------------------------------------------------------===//

int connectOnce(const std::string &host, int port, std::string &error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *list = nullptr;
  int rv =
      ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (rv != 0) {
    error = concat("cannot resolve '", host, "': ", gai_strerror(rv));
    return -1;
  }
  int fd = -1;
  for (addrinfo *ai = list; ai && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                  ai->ai_protocol);
    if (fd < 0)
      continue;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      error = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(list);
  if (fd >= 0) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

class TcpKvStore final : public KvStore {
public:
  TcpKvStore(const std::string &host, int port, int64_t timeoutMs)
      : KvStore(timeoutMs), host_(host), port_(port) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
    std::string error;
    while ((fd_ = connectOnce(host, port, error)) < 0) {
      if (Clock::now() >= deadline)
        throw RuntimeError(concat("cannot reach the rendezvous store ", url(),
                                  " within ", timeoutMs,
                                  " ms (rank 0 serves it): ", error));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~TcpKvStore() override {
    if (fd_ >= 0)
      ::close(fd_);
  }

  void set(const std::string &key, const std::vector<char> &data) override {
    put(key, std::string(data.begin(), data.end()));
  }

  std::vector<char> get(const std::string &key) override {
    wait({key}, std::chrono::milliseconds(timeoutMs));
    std::optional<std::string> value = tryGet(key);
    if (!value)
      throw RuntimeError(
          concat("rendezvous store ", url(), ": key '", key, "' vanished"));
    return std::vector<char>(value->begin(), value->end());
  }

  using KvStore::wait;
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override {
    std::string body = "W";
    appendU64(body, uint64_t(std::max<int64_t>(0, timeout.count())));
    for (const std::string &key : keys)
      appendField(body, key);
    std::string reply = request(body, timeout.count() + 10000);
    if (reply == "O")
      return;
    Reader r{reply};
    r.number(1);
    std::vector<std::string> missing;
    while (r.ok && !r.done())
      missing.push_back(r.field());
    throw StoreTimeout(concat("rendezvous store ", url(), ": timed out after ",
                              timeout.count(), " ms waiting for ",
                              missing.size(), " key(s)"),
                       missing);
  }

  void put(const std::string &key, const std::string &value) override {
    std::string body = "S";
    appendField(body, key);
    appendField(body, value);
    request(body, timeoutMs);
  }

  std::optional<std::string> tryGet(const std::string &key) override {
    std::string body = "G";
    appendField(body, key);
    std::string reply = request(body, timeoutMs);
    if (reply == "N")
      return std::nullopt;
    Reader r{reply};
    r.number(1);
    return r.field();
  }

  std::string url() const override {
    return concat("tcp://", host_, ":", port_);
  }

private:
  /// Sends one request and returns the reply body; throws on failure.
  std::string request(const std::string &body, int64_t replyTimeoutMs);
  void readExactly(char *data, size_t n, Clock::time_point deadline);

  std::mutex mutex_;
  std::string host_;
  int port_;
  int fd_ = -1;
};

std::string TcpKvStore::request(const std::string &body,
                                int64_t replyTimeoutMs) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0)
    throw RuntimeError(concat("the rendezvous store ", url(),
                              " is unreachable after an earlier error"));
  std::string message = frame(body);
  for (size_t sent = 0; sent < message.size();) {
    ssize_t n =
        ::send(fd_, message.data() + sent, message.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      std::string why = std::strerror(errno);
      ::close(fd_);
      fd_ = -1;
      throw RuntimeError(concat("lost the rendezvous store ", url(), " (", why,
                                "; rank 0 serves it and has probably "
                                "exited)"));
    }
    sent += size_t(n);
  }
  auto deadline = Clock::now() + std::chrono::milliseconds(replyTimeoutMs);
  char header[4];
  readExactly(header, 4, deadline);
  std::string lengthText(header, 4);
  Reader r{lengthText};
  std::string reply(r.number(4), '\0');
  readExactly(reply.data(), reply.size(), deadline);
  return reply;
}

void TcpKvStore::readExactly(char *data, size_t n, Clock::time_point deadline) {
  for (size_t got = 0; got < n;) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - Clock::now())
                  .count();
    pollfd pfd{fd_, POLLIN, 0};
    int rv =
        ms > 0 ? ::poll(&pfd, 1, int(std::min<int64_t>(ms, INT32_MAX))) : 0;
    if (rv < 0 && errno == EINTR)
      continue;
    ssize_t m = rv > 0 ? ::recv(fd_, data + got, n - got, 0) : -1;
    if (m > 0) {
      got += size_t(m);
      continue;
    }
    if (m < 0 && rv > 0 && errno == EINTR)
      continue;
    ::close(fd_);
    fd_ = -1;
    if (rv == 0)
      throw RuntimeError(
          concat("the rendezvous store ", url(), " did not answer in time"));
    throw RuntimeError(concat("lost the rendezvous store ", url(),
                              " (rank 0 serves it and has probably exited)"));
  }
}

} // namespace

TcpStoreServer::TcpStoreServer(int port) {
  listenFd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  require(listenFd_ >= 0, "socket: ", std::strerror(errno));
  int one = 1;
  ::setsockopt(listenFd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(uint16_t(port));
  if (::bind(listenFd_, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) ||
      ::listen(listenFd_, 1024)) {
    std::string why = std::strerror(errno);
    ::close(listenFd_);
    throw RuntimeError(
        concat("cannot serve the rendezvous store on port ", port, ": ", why));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(listenFd_, reinterpret_cast<sockaddr *>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (::pipe2(wakePipe_, O_CLOEXEC) != 0) {
    ::close(listenFd_);
    throw RuntimeError(concat("pipe: ", std::strerror(errno)));
  }
  thread_ = std::thread([this] { run(); });
}

TcpStoreServer::~TcpStoreServer() {
  char byte = 0;
  if (::write(wakePipe_[1], &byte, 1) < 0) {
    // The loop also ends when the pipe closes below.
  }
  if (thread_.joinable())
    thread_.join();
  ::close(wakePipe_[0]);
  ::close(wakePipe_[1]);
  ::close(listenFd_);
}

void TcpStoreServer::run() {
  ServerLoop loop(listenFd_, wakePipe_[0]);
  loop.run();
}

std::unique_ptr<KvStore> connectTcpStore(const std::string &host, int port,
                                         int64_t timeoutMs) {
  return std::make_unique<TcpKvStore>(host, port, timeoutMs);
}

} // namespace cleave::rt
