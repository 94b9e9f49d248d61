//===- FileStore.cpp - The "file:/dir" rendezvous store -------------------===//
//
// Gloo's FileStore (one file per key, written to a temporary name and
// renamed), with our own wait() that honours millisecond timeouts and says
// which keys are missing, a clear message when a directory is reused, and
// put()/tryGet() for heartbeats.
//
//===----------------------------------------------------------------------===//

#include "Store.h"

#include <gloo/common/error.h>
#include <gloo/rendezvous/file_store.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace cleave::rt {
namespace {

/// Creates `dir` and its parents; throws RuntimeError if it cannot.
void makeDirectories(const std::string &dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/')
      continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST)
      throw RuntimeError(concat("cannot create the rendezvous directory ",
                                prefix, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw RuntimeError(concat("rendezvous path ", dir, " is not a directory"));
}

std::optional<std::string> readWholeFile(const std::string &path) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return std::nullopt;
  std::string data;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0)
    data.append(buffer, n);
  std::fclose(f);
  return data;
}

class FileKvStore final : public KvStore, private gloo::rendezvous::FileStore {
public:
  FileKvStore(const std::string &dir, int64_t timeoutMs)
      : KvStore(timeoutMs), gloo::rendezvous::FileStore(dir), dir_(dir) {}

  void set(const std::string &key, const std::vector<char> &data) override {
    if (check({key}))
      throw RuntimeError(
          concat("rendezvous key '", key, "' already exists in ", dir_,
                 ": the directory holds keys of an earlier run; use a fresh "
                 "directory per run (cleave_launch_local does) or set "
                 "CLEAVE_RUN_ID to a new value"));
    try {
      gloo::rendezvous::FileStore::set(key, data);
    } catch (const gloo::Exception &e) {
      throw RuntimeError(concat("rendezvous store ", url(), ": cannot set '",
                                key, "': ", e.what()));
    }
  }

  std::vector<char> get(const std::string &key) override {
    wait({key}, std::chrono::milliseconds(timeoutMs));
    std::optional<std::string> data = readWholeFile(objectPath(key));
    if (!data)
      throw RuntimeError(
          concat("rendezvous store ", url(), ": key '", key, "' vanished"));
    return std::vector<char>(data->begin(), data->end());
  }

  using KvStore::wait;
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override {
    auto start = std::chrono::steady_clock::now();
    for (int iteration = 0;; ++iteration) {
      if (check(keys))
        return;
      if (std::chrono::steady_clock::now() - start > timeout)
        break;
      std::this_thread::sleep_for(
          std::chrono::milliseconds(iteration < 200 ? 1 : 10));
    }
    std::vector<std::string> missing;
    for (const std::string &key : keys)
      if (!check({key}))
        missing.push_back(key);
    throw StoreTimeout(concat("rendezvous store ", url(), ": timed out after ",
                              timeout.count(), " ms waiting for ",
                              missing.size(), " key(s)"),
                       missing);
  }

  void put(const std::string &key, const std::string &value) override {
    std::string path = objectPath(key);
    std::string tmp = path + ".tmp" + std::to_string(::getpid());
    FILE *f = std::fopen(tmp.c_str(), "wb");
    if (!f)
      throw RuntimeError(
          concat("cannot write ", tmp, ": ", std::strerror(errno)));
    bool ok = std::fwrite(value.data(), 1, value.size(), f) == value.size();
    ok = (std::fclose(f) == 0) && ok;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0)
      throw RuntimeError(
          concat("cannot write ", path, ": ", std::strerror(errno)));
  }

  std::optional<std::string> tryGet(const std::string &key) override {
    return readWholeFile(objectPath(key));
  }

  std::string url() const override { return "file:" + dir_; }

private:
  std::string dir_;
};

} // namespace

std::unique_ptr<KvStore> openFileStore(const std::string &dir,
                                       int64_t timeoutMs) {
  makeDirectories(dir);
  return std::make_unique<FileKvStore>(dir, timeoutMs);
}

RendezvousUrl parseRendezvousUrl(const std::string &url) {
  RendezvousUrl out;
  if (url.rfind("file:", 0) == 0) {
    out.kind = RendezvousUrl::File;
    out.path = url.substr(5);
    if (out.path.rfind("//", 0) == 0) // file:///dir
      out.path = out.path.substr(2);
    require(!out.path.empty() && out.path[0] == '/', "rendezvous '", url,
            "' must name an absolute directory (file:/shared/dir)");
    return out;
  }
  require(url.rfind("tcp://", 0) == 0, "rendezvous '", url,
          "' is neither file:/dir nor tcp://host:port");
  std::string rest = url.substr(6);
  size_t colon = rest.rfind(':');
  require(colon != std::string::npos && colon > 0, "rendezvous '", url,
          "' has no host:port");
  out.kind = RendezvousUrl::Tcp;
  out.host = rest.substr(0, colon);
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2);
  char *end = nullptr;
  long port = std::strtol(rest.c_str() + colon + 1, &end, 10);
  require(end && *end == '\0' && colon + 1 < rest.size() && port > 0 &&
              port < 65536,
          "rendezvous '", url, "' has a bad port");
  out.port = int(port);
  return out;
}

} // namespace cleave::rt
