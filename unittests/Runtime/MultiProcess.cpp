//===- MultiProcess.cpp - Run a test body as N forked ranks ---------------===//

#include "MultiProcess.h"

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cleave::test {
namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

void removeDir(const std::string &dir) {
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
        ::unlink((dir + "/" + e->d_name).c_str());
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

} // namespace

std::vector<RankResult> runRanks(int n, const std::function<int(int)> &body,
                                 const RunOptions &options) {
  char dirTemplate[] = "/tmp/cleave-test-XXXXXX";
  std::string dir = ::mkdtemp(dirTemplate);
  std::string rendezvous = options.tcp
                               ? "tcp://127.0.0.1:" + std::to_string(freePort())
                               : "file:" + dir;
  std::vector<pid_t> pids(n);
  std::vector<int> fds(n);
  std::vector<RankResult> results(n);
  double start = now();
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (::pipe(p) != 0)
      std::abort();
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      ::dup2(p[1], 1);
      ::dup2(p[1], 2);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("CLEAVE_RENDEZVOUS", rendezvous.c_str(), 1);
      ::setenv("CLEAVE_TIMEOUT_MS", std::to_string(options.timeoutMs).c_str(),
               1);
      ::setenv("CLEAVE_HEARTBEAT_MS", "100", 0);
      for (const auto &[k, v] : options.env)
        ::setenv(k.c_str(), v.c_str(), 1);
      int code = 1;
      try {
        code = body(r);
      } catch (const std::exception &e) {
        std::fprintf(stderr, "exception: %s\n", e.what());
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    ::close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  int remaining = n;
  std::vector<bool> done(n, false);
  while (remaining > 0) {
    std::vector<pollfd> pfds;
    for (int r = 0; r < n; ++r)
      if (fds[r] >= 0)
        pfds.push_back({fds[r], POLLIN, 0});
    if (!pfds.empty())
      ::poll(pfds.data(), pfds.size(), 20);
    else
      ::usleep(20000);
    for (int r = 0; r < n; ++r) {
      if (fds[r] < 0)
        continue;
      pollfd q{fds[r], POLLIN, 0};
      if (::poll(&q, 1, 0) > 0) {
        char buf[4096];
        ssize_t k = ::read(fds[r], buf, sizeof(buf));
        if (k > 0)
          results[r].output.append(buf, size_t(k));
        else {
          ::close(fds[r]);
          fds[r] = -1;
        }
      }
    }
    for (int r = 0; r < n; ++r) {
      int status;
      if (done[r] || ::waitpid(pids[r], &status, WNOHANG) != pids[r])
        continue;
      done[r] = true;
      --remaining;
      results[r].seconds = now() - start;
      if (WIFEXITED(status))
        results[r].exitCode = WEXITSTATUS(status);
      else
        results[r].signal = WTERMSIG(status);
    }
    if (now() - start > options.deadlineSeconds) {
      for (int r = 0; r < n; ++r)
        if (!done[r]) {
          results[r].hung = true;
          ::kill(pids[r], SIGKILL);
        }
    }
  }
  for (int r = 0; r < n; ++r)
    if (fds[r] >= 0) {
      char buf[4096];
      ssize_t k;
      while ((k = ::read(fds[r], buf, sizeof(buf))) > 0)
        results[r].output.append(buf, size_t(k));
      ::close(fds[r]);
    }
  removeDir(dir);
  return results;
}

std::string describe(const std::vector<RankResult> &results) {
  std::string text;
  for (size_t r = 0; r < results.size(); ++r) {
    const RankResult &x = results[r];
    text += "--- rank " + std::to_string(r) + ": exit " +
            std::to_string(x.exitCode) + " signal " + std::to_string(x.signal) +
            (x.hung ? " HUNG" : "") + " after " + std::to_string(x.seconds) +
            " s\n" + x.output;
  }
  return text;
}

} // namespace cleave::test
