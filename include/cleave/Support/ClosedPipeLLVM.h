//===- ClosedPipeLLVM.h - A closed stdout ends an LLVM tool -----*- C++ -*-===//
//
// The LLVM tools' form of ClosedPipe.h: LLVM owns the SIGPIPE handler (and
// reinstalls it whenever it registers signal handlers), so the decision is
// made in its one-shot pipe function instead.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SUPPORT_CLOSEDPIPELLVM_H
#define CLEAVE_SUPPORT_CLOSEDPIPELLVM_H

#include "cleave/Support/ClosedPipe.h"
#include "llvm/Support/Signals.h"

namespace cleave {

namespace detail {
inline void onBrokenPipe() {
  if (stdoutReaderGone())
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

#endif // CLEAVE_SUPPORT_CLOSEDPIPELLVM_H
