//===- Async.h - The communication progress thread ------------*- C++ -*-===//
//
// Internal to libCleaveRuntime. Asynchronous requests (cleave_rt_*_start)
// run on one progress thread, in the order they were started; a blocking
// call made while requests are pending is queued behind them and waited, so
// every rank executes its communication in program order whatever mix of
// blocking and asynchronous calls it makes (docs/runtime.md).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_ASYNC_H
#define CLEAVE_LIB_RUNTIME_ASYNC_H

#include <functional>

namespace cleave::rt {

/// If requests are pending and the caller is not the progress thread, runs
/// `call` on the progress thread behind them, waits for it and returns true;
/// otherwise returns false and the caller runs `call` itself.
bool forwardToProgressThread(const std::function<void()> &call);

/// Waits until every started request has run (requests stay waitable).
void drainProgressThread();

/// Drains and ends the progress thread (cleave_rt_finalize); the next start
/// starts a new one.
void stopProgressThread();

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_ASYNC_H
