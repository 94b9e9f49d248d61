//===- Error.h - Sticky errors and the exceptions behind them ---*- C++ -*-===//
//
// Internal to libCleaveRuntime. Code inside the runtime throws RuntimeError
// (or CommError for communication failures); the C entry points catch it with
// guard(), record the first message and return an error code. The recorded
// message is what cleave_rt_error_message() returns.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_ERROR_H
#define CLEAVE_LIB_RUNTIME_ERROR_H

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace cleave::rt {

/// An error inside the runtime. The message says what is wrong and where; the
/// "rank N: " prefix is added when it is recorded.
class RuntimeError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A failure of a communication backend (Gloo, NCCL), classified so that the
/// shared layer can word the message and decide what to diagnose.
class CommError : public RuntimeError {
public:
  enum Kind { Timeout, PeerFailure, Other };
  CommError(Kind kind, const std::string &message)
      : RuntimeError(message), kind(kind) {}
  Kind kind;
};

/// Concatenates the arguments with operator<<.
template <typename... Args>
std::string concat(Args &&...args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

/// The rank used in messages: the initialized rank, else the rank the
/// environment names (RANK, OMPI_COMM_WORLD_RANK), else 0.
int messageRank();

/// Records "rank R: <message>" as the failure unless one is recorded already.
/// Returns the full message that was formatted.
std::string recordError(const std::string &message);

/// True once a failure is recorded (cheap: one atomic load).
bool hasFailed();

/// Forgets the recorded failure.
void clearError();

/// The recorded failure ("" if none); valid until the next clearError().
const char *errorMessage();
/// A copy of the recorded failure (safe from any thread).
std::string errorText();

/// Runs `fn`; on an exception records "<what>: <exception message>" and
/// returns `onError`, else returns what `fn` returns.
template <typename R, typename Fn>
R guard(const char *what, R onError, Fn &&fn) {
  try {
    return fn();
  } catch (const std::exception &e) {
    recordError(concat(what, ": ", e.what()));
  } catch (...) {
    recordError(concat(what, ": unknown exception"));
  }
  return onError;
}

/// Throws RuntimeError(concat(parts...)) when `condition` is false. The
/// message is formatted only then: checks on every GEMM and collective call
/// must not build strings that are thrown away.
template <typename... Args>
inline void require(bool condition, Args &&...parts) {
  if (!condition) [[unlikely]]
    throw RuntimeError(concat(std::forward<Args>(parts)...));
}

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_ERROR_H
