//===- FlightRecorder.h - The last collectives of this rank -----*- C++ -*-===//
//
// Internal to libCleaveRuntime. A ring of the last N communication calls
// (op, group, sequence number, count, dtype, reduction, peer, start and end
// times, state), dumped to stderr and to CLEAVE_FLIGHT_RECORDER_DIR on a
// timeout or an error so that the ranks' last steps can be compared.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_FLIGHTRECORDER_H
#define CLEAVE_LIB_RUNTIME_FLIGHTRECORDER_H

#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

namespace cleave::rt {

/// One recorded call.
struct FlightEntry {
  enum State { Started, Completed, Failed };
  uint64_t seq = 0;
  int64_t group = 0;
  const char *op = "";
  int64_t count = 0;
  int32_t dtype = -1;
  int32_t reduce = -1;
  int peer = -1;
  double start = 0, end = 0;
  State state = Started;
};

class FlightRecorder {
public:
  explicit FlightRecorder(size_t capacity = 64);
  /// Forgets every entry and keeps the last `capacity` from now on.
  void reset(size_t capacity);
  /// Records a started call; returns its slot for finish().
  size_t start(const FlightEntry &entry);
  void finish(size_t slot, bool ok);
  /// The entries, oldest first.
  std::vector<FlightEntry> entries() const;
  /// Human-readable table.
  void dumpText(std::ostream &os, int rank) const;
  /// JSON (one object with an "entries" array).
  std::string dumpJson(int rank) const;
  size_t capacity() const { return ring_.size(); }

private:
  mutable std::mutex mutex_;
  std::vector<FlightEntry> ring_;
  uint64_t total_ = 0;
};

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_FLIGHTRECORDER_H
