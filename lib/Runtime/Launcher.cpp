//===- Launcher.cpp - cleave_launch_local: N ranks on this machine --------===//
//
// Forks and execs N ranks with the environment torchrun would give them,
// forwards their output (optionally prefixed "[rank 2] "), and waits. When a
// rank fails or dies, it says which and how, gives the others timeout_ms to
// end on their own (the runtime's own timeouts make them fail), then sends
// SIGTERM and, a second later, SIGKILL. Children get PR_SET_PDEATHSIG so a
// killed launcher leaves no orphans.
//
//===----------------------------------------------------------------------===//

#include "Env.h"
#include "Error.h"

#include "cleave/Runtime/Runtime.h"

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char **environ;

using namespace cleave::rt;

namespace {

/// The signal (SIGINT or SIGTERM) that interrupted the launcher; 0 if none.
volatile sig_atomic_t interrupted = 0;
void onSignal(int signal) { interrupted = signal; }

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  require(fd >= 0, "socket: ", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bool ok =
      ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) == 0;
  ::close(fd);
  require(ok, "cannot find a free port: ", std::strerror(errno));
  return ntohs(addr.sin_port);
}

void removeFlatDirectory(const std::string &dir) {
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *entry = ::readdir(d)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..")
        ::unlink((dir + "/" + name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

/// One rank's process and its output pipes.
struct Child {
  pid_t pid = -1;
  int out = -1, err = -1;       ///< Read ends (prefixing only).
  std::string outLine, errLine; ///< Partial lines.
  bool running = false;
  bool killedStopped = false; ///< SIGKILLed because it was stopped.
  int status = 0;
};

std::string describeStatus(int status) {
  if (WIFSIGNALED(status))
    return concat("was killed by signal ", WTERMSIG(status), " (",
                  strsignal(WTERMSIG(status)), ")");
  return concat("exited with status ", WEXITSTATUS(status));
}

void writeAllFd(int fd, const std::string &text) {
  const char *p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    p += n;
    left -= size_t(n);
  }
}

/// Reads what is available on `fd` and prints whole lines with the prefix.
/// Returns false at EOF.
bool forward(int fd, int to, int rank, std::string &partial, bool flushAll) {
  char buffer[65536];
  ssize_t n = ::read(fd, buffer, sizeof(buffer));
  bool open = n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR));
  if (n > 0)
    partial.append(buffer, size_t(n));
  std::string text;
  size_t pos;
  while ((pos = partial.find('\n')) != std::string::npos) {
    text += concat("[rank ", rank, "] ", partial.substr(0, pos + 1));
    partial.erase(0, pos + 1);
  }
  if ((!open || flushAll) && !partial.empty()) {
    text += concat("[rank ", rank, "] ", partial, "\n");
    partial.clear();
  }
  writeAllFd(to, text);
  return open;
}

/// The environment of rank `rank`: ours with the launcher variables set.
std::vector<std::string> rankEnvironment(
    int rank, int nprocs,
    const std::vector<std::pair<std::string, std::string>> &common) {
  std::vector<std::pair<std::string, std::string>> vars = common;
  vars.emplace_back("RANK", std::to_string(rank));
  vars.emplace_back("LOCAL_RANK", std::to_string(rank));
  vars.emplace_back("WORLD_SIZE", std::to_string(nprocs));
  vars.emplace_back("LOCAL_WORLD_SIZE", std::to_string(nprocs));
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    std::string entry = *e;
    std::string key = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto &[k, v] : vars)
      replaced = replaced || k == key;
    if (!replaced)
      env.push_back(entry);
  }
  for (const auto &[k, v] : vars)
    env.push_back(k + "=" + v);
  return env;
}

/// What every child does first: die with the launcher, send its output to
/// the pipes, default signal handling.
void prepareChild(int out, int err, pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent)
    ::_exit(127);
  if (out >= 0)
    ::dup2(out, 1);
  if (err >= 0)
    ::dup2(err, 2);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
}

/// A forked rank: this process's code with the rank's environment.
[[noreturn]] void runBody(int (*body)(void *), void *arg,
                          const std::vector<std::string> &env, int out, int err,
                          pid_t parent) {
  prepareChild(out, err, parent);
  for (const std::string &entry : env) {
    size_t eq = entry.find('=');
    ::setenv(entry.substr(0, eq).c_str(), entry.substr(eq + 1).c_str(), 1);
  }
  int status = body(arg);
  std::fflush(nullptr);
  ::_exit(status);
}

[[noreturn]] void execChild(char *const argv[], std::vector<char *> &envp,
                            int out, int err, pid_t parent) {
  prepareChild(out, err, parent);
  ::execvpe(argv[0], argv, envp.data());
  std::string message = concat("cleave_launch_local: cannot run ", argv[0],
                               ": ", std::strerror(errno), "\n");
  writeAllFd(2, message);
  ::_exit(127);
}

} // namespace

namespace {

class Launch {
public:
  explicit Launch(const cleave_launch_options_t &o) : o_(o) {}
  int run();

private:
  void start();
  void pump(int timeoutMs);
  void reap();
  void enforceTimeout();
  std::vector<Child> children_;
  const cleave_launch_options_t &o_;
  std::string rendezvousDir_;
  double firstFailure_ = -1;
  int firstStatus_ = 0;
  bool termSent_ = false, killSent_ = false;
};

void Launch::start() {
  std::string mode = o_.rendezvous ? o_.rendezvous : "file";
  require(mode == "file" || mode == "tcp", "rendezvous '", mode,
          "' must be \"file\" or \"tcp\"");
  int port = freePort();
  std::vector<std::pair<std::string, std::string>> common = {
      {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", std::to_string(port)},
      {"CLEAVE_RUN_ID", concat("launch-", ::getpid(), "-", wallMillis())}};
  if (mode == "file") {
    std::string base = getEnv("TMPDIR").value_or("/tmp");
    std::string templ = base + "/cleave-rdzv-XXXXXX";
    require(::mkdtemp(templ.data()),
            "cannot create a rendezvous "
            "directory in ",
            base, ": ", std::strerror(errno));
    rendezvousDir_ = templ;
    common.emplace_back("CLEAVE_RENDEZVOUS", "file:" + templ);
  } else {
    common.emplace_back("CLEAVE_RENDEZVOUS", concat("tcp://127.0.0.1:", port));
  }
  children_.resize(size_t(o_.nprocs));
  pid_t parent = ::getpid();
  for (int r = 0; r < o_.nprocs; ++r) {
    std::vector<std::string> env = rankEnvironment(r, o_.nprocs, common);
    std::vector<char *> envp;
    for (std::string &e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    int outPipe[2] = {-1, -1}, errPipe[2] = {-1, -1};
    if (o_.prefix_output)
      require(::pipe2(outPipe, O_CLOEXEC) == 0 &&
                  ::pipe2(errPipe, O_CLOEXEC) == 0,
              "pipe: ", std::strerror(errno));
    std::fflush(nullptr);
    pid_t pid = ::fork();
    require(pid >= 0, "fork: ", std::strerror(errno));
    if (pid == 0 && o_.body)
      runBody(o_.body, o_.body_arg, env, outPipe[1], errPipe[1], parent);
    if (pid == 0)
      execChild(o_.argv, envp, outPipe[1], errPipe[1], parent);
    Child &c = children_[size_t(r)];
    c.pid = pid;
    c.running = true;
    if (o_.prefix_output) {
      ::close(outPipe[1]);
      ::close(errPipe[1]);
      c.out = outPipe[0];
      c.err = errPipe[0];
    }
  }
}

void Launch::pump(int timeoutMs) {
  std::vector<pollfd> fds;
  std::vector<std::pair<int, int>> who; // (rank, 1 or 2)
  for (size_t r = 0; r < children_.size(); ++r) {
    if (children_[r].out >= 0) {
      fds.push_back({children_[r].out, POLLIN, 0});
      who.emplace_back(int(r), 1);
    }
    if (children_[r].err >= 0) {
      fds.push_back({children_[r].err, POLLIN, 0});
      who.emplace_back(int(r), 2);
    }
  }
  if (fds.empty()) {
    ::usleep(useconds_t(timeoutMs) * 1000);
    return;
  }
  if (::poll(fds.data(), fds.size(), timeoutMs) <= 0)
    return;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!fds[i].revents)
      continue;
    auto [rank, stream] = who[i];
    Child &c = children_[size_t(rank)];
    int &fd = stream == 1 ? c.out : c.err;
    if (!forward(fd, stream, rank, stream == 1 ? c.outLine : c.errLine,
                 false)) {
      ::close(fd);
      fd = -1;
    }
  }
}

void Launch::reap() {
  for (size_t r = 0; r < children_.size(); ++r) {
    Child &c = children_[r];
    if (!c.running || ::waitpid(c.pid, &c.status, WNOHANG) != c.pid)
      continue;
    c.running = false;
    if (o_.exit_status)
      o_.exit_status[r] =
          WIFSIGNALED(c.status) ? -WTERMSIG(c.status) : WEXITSTATUS(c.status);
    bool failed = !WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0;
    if (!failed || termSent_)
      continue;
    writeAllFd(2, concat("cleave_launch_local: rank ", r, " (pid ", c.pid, ") ",
                         describeStatus(c.status), "\n"));
    if (firstFailure_ < 0) {
      firstFailure_ = monotonicSeconds();
      firstStatus_ = WIFSIGNALED(c.status) ? 128 + WTERMSIG(c.status)
                                           : WEXITSTATUS(c.status);
    }
  }
}

/// True if `pid` is stopped (SIGSTOP, SIGTSTP): it cannot end on its own.
static bool processStopped(pid_t pid) {
  char state = processState(int(pid));
  return state == 'T' || state == 't';
}

void Launch::enforceTimeout() {
  bool stop = interrupted != 0;
  if (firstFailure_ >= 0 && !termSent_) {
    // A stopped rank never ends on its own (the others name it as hung):
    // kill it now rather than after the grace period.
    for (size_t r = 0; r < children_.size(); ++r) {
      Child &c = children_[r];
      if (!c.running || c.killedStopped || !processStopped(c.pid))
        continue;
      writeAllFd(2, concat("cleave_launch_local: rank ", r, " (pid ", c.pid,
                           ") is stopped; killing it\n"));
      ::kill(c.pid, SIGKILL);
      c.killedStopped = true;
    }
  }
  if (firstFailure_ >= 0) {
    double waited = (monotonicSeconds() - firstFailure_) * 1e3;
    stop = stop || waited >= double(o_.timeout_ms);
    if (termSent_ && !killSent_ && waited >= double(o_.timeout_ms) + 1000) {
      for (Child &c : children_)
        if (c.running)
          ::kill(c.pid, SIGKILL);
      killSent_ = true;
    }
  }
  if (!stop || termSent_)
    return;
  std::string ranks;
  for (size_t r = 0; r < children_.size(); ++r)
    if (children_[r].running) {
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      ::kill(children_[r].pid, SIGTERM);
    }
  if (!ranks.empty())
    writeAllFd(2, concat("cleave_launch_local: terminating rank(s) ", ranks,
                         interrupted ? concat(" (interrupted by ",
                                              interrupted == SIGTERM ? "SIGTERM"
                                                                     : "SIGINT",
                                              ")")
                                     : concat(", still running ", o_.timeout_ms,
                                              " ms after the first failure"),
                         "\n"));
  termSent_ = true;
  if (firstFailure_ < 0) { // Interrupted: SIGKILL a second later.
    firstFailure_ = monotonicSeconds() - double(o_.timeout_ms) / 1e3;
    // The shell's convention: 128 + the signal (130 for SIGINT, 143 for
    // SIGTERM).
    firstStatus_ = 128 + (interrupted ? int(interrupted) : SIGINT);
  }
}

int Launch::run() {
  start();
  for (;;) {
    pump(20);
    reap();
    enforceTimeout();
    bool anyRunning = false, anyOpen = false;
    for (const Child &c : children_) {
      anyRunning = anyRunning || c.running;
      anyOpen = anyOpen || c.out >= 0 || c.err >= 0;
    }
    if (!anyRunning) {
      // Drain what the ranks wrote before exiting (bounded).
      for (int i = 0; i < 50 && anyOpen; ++i) {
        pump(10);
        anyOpen = false;
        for (const Child &c : children_)
          anyOpen = anyOpen || c.out >= 0 || c.err >= 0;
      }
      break;
    }
  }
  for (size_t r = 0; r < children_.size(); ++r) {
    Child &c = children_[r];
    for (int *fd : {&c.out, &c.err})
      if (*fd >= 0) {
        forward(*fd, fd == &c.out ? 1 : 2, int(r),
                fd == &c.out ? c.outLine : c.errLine, true);
        ::close(*fd);
      }
  }
  if (!rendezvousDir_.empty())
    removeFlatDirectory(rendezvousDir_);
  return firstFailure_ >= 0 ? (firstStatus_ ? firstStatus_ : 1) : 0;
}

} // namespace

extern "C" {

int cleave_launch(const cleave_launch_options_t *opts) {
  return guard("launch_local", 1, [&] {
    require(opts && opts->nprocs >= 1 &&
                (opts->body || (opts->argv && opts->argv[0])),
            "launch needs nprocs >= 1 and a program (argv[0]) or a body");
    cleave_launch_options_t o = *opts;
    if (o.timeout_ms <= 0)
      o.timeout_ms = envInt("CLEAVE_TIMEOUT_MS", 300000) + 10000;
    struct sigaction action{}, oldInt{}, oldTerm{};
    action.sa_handler = onSignal;
    sigemptyset(&action.sa_mask);
    interrupted = 0;
    ::sigaction(SIGINT, &action, &oldInt);
    ::sigaction(SIGTERM, &action, &oldTerm);
    int rc;
    try {
      rc = Launch(o).run();
    } catch (...) {
      ::sigaction(SIGINT, &oldInt, nullptr);
      ::sigaction(SIGTERM, &oldTerm, nullptr);
      throw;
    }
    ::sigaction(SIGINT, &oldInt, nullptr);
    ::sigaction(SIGTERM, &oldTerm, nullptr);
    return rc;
  });
}

int cleave_launch_local(int32_t nprocs, char *const argv[],
                        int32_t prefix_output, int64_t timeout_ms) {
  cleave_launch_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.nprocs = nprocs;
  o.argv = argv;
  o.prefix_output = prefix_output;
  o.timeout_ms = timeout_ms;
  return cleave_launch(&o);
}

} // extern "C"
