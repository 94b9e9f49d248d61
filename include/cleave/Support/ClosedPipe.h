//===- ClosedPipe.h - A closed stdout ends a tool normally ------*- C++ -*-===//
//
// `cleave-models ... | head` must exit 0, as Unix tools do when their reader
// goes away: under `set -o pipefail` any other status fails the pipeline.
// LLVM's InitLLVM makes the first SIGPIPE exit with EX_IOERR (74); a plain
// C++ program is killed by the signal. Header-only, without LLVM, so that
// every tool and bench can use it whatever it links.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SUPPORT_CLOSEDPIPE_H
#define CLEAVE_SUPPORT_CLOSEDPIPE_H

#include <csignal>
#include <poll.h>
#include <unistd.h>

namespace cleave {

/// True when standard output is a pipe whose reader has gone (async-signal
/// safe). A broken pipe elsewhere (a socket to a peer rank) is not that.
inline bool stdoutReaderGone() {
  struct pollfd out = {STDOUT_FILENO, POLLOUT, 0};
  return ::poll(&out, 1, 0) == 1 && (out.revents & POLLERR);
}

namespace detail {
inline void onSigPipe(int) {
  if (stdoutReaderGone())
    ::_exit(0);
  // Any other broken pipe keeps its default meaning.
  ::signal(SIGPIPE, SIG_DFL);
  ::raise(SIGPIPE);
}
} // namespace detail

/// For programs without LLVM's signal handling: a write to a standard
/// output whose reader has closed it ends the process with status 0.
inline void exitQuietlyOnClosedStdoutPosix() {
  struct sigaction action = {};
  action.sa_handler = detail::onSigPipe;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGPIPE, &action, nullptr);
}

} // namespace cleave

#endif // CLEAVE_SUPPORT_CLOSEDPIPE_H
