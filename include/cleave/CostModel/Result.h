//===- Result.h - A value or a message saying what is wrong -----*- C++ -*-===//
//
// The cost model reports bad input (a malformed cluster file, a plan that
// does not fit the model) as a message naming the field, never by throwing
// or aborting: the planner calls it thousands of times on candidate plans and
// a tool prints the message to the user.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_RESULT_H
#define CLEAVE_COSTMODEL_RESULT_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace cleave::cost {

/// Either a value of type `T` or an error message.
template <typename T>
class Result {
public:
  Result(T value) : value(std::move(value)) {}
  /// An error result; `message` must not be empty.
  static Result failure(std::string message) {
    Result r;
    r.message = std::move(message);
    return r;
  }

  explicit operator bool() const { return value.has_value(); }
  const T &operator*() const & { return *value; }
  T &operator*() & { return *value; }
  T &&operator*() && { return std::move(*value); }
  const T *operator->() const { return &*value; }
  T *operator->() { return &*value; }
  /// The error message; empty on success.
  const std::string &error() const { return message; }

private:
  Result() = default;
  std::optional<T> value;
  std::string message;
};

} // namespace cleave::cost

#endif // CLEAVE_COSTMODEL_RESULT_H
