//===- ClosedPipe.h - A closed stdout ends a tool normally ------*- C++ -*-===//
//
// `cleave-models ... | head` must exit 0, as Unix tools do when their reader
// goes away. LLVM's InitLLVM makes the first SIGPIPE exit with EX_IOERR (74),
// which fails every pipeline under `set -o pipefail`. Header-only so that
// every tool and bench can use it whatever libraries it links.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SUPPORT_CLOSEDPIPE_H
#define CLEAVE_SUPPORT_CLOSEDPIPE_H

#include "llvm/Support/Signals.h"
#include <poll.h>
#include <unistd.h>

namespace cleave {

namespace detail {
/// SIGPIPE handler body (async-signal-safe): if standard output is a pipe
/// whose reader has gone, the output is simply not wanted any more: exit 0.
/// Any other broken pipe (a socket to a peer rank) keeps LLVM's meaning, an
/// I/O error.
inline void onBrokenPipe() {
  struct pollfd out = {STDOUT_FILENO, POLLOUT, 0};
  if (::poll(&out, 1, 0) == 1 && (out.revents & POLLERR))
    ::_exit(0);
  llvm::sys::DefaultOneShotPipeSignalHandler();
}
} // namespace detail

/// Makes a write to a standard output whose reader has closed it end the
/// process with status 0. Call after InitLLVM (which installs LLVM's handler).
inline void exitQuietlyOnClosedStdout() {
  llvm::sys::SetOneShotPipeSignalFunction(detail::onBrokenPipe);
}

} // namespace cleave

#endif // CLEAVE_SUPPORT_CLOSEDPIPE_H
