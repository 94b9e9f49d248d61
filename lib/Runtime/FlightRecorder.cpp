//===- FlightRecorder.cpp - The last collectives of this rank -------------===//

#include "FlightRecorder.h"
#include "DType.h"
#include "Env.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace cleave::rt {
namespace {

const char *stateName(FlightEntry::State state) {
  switch (state) {
  case FlightEntry::Started:
    return "started";
  case FlightEntry::Completed:
    return "completed";
  case FlightEntry::Failed:
    return "failed";
  }
  return "?";
}

} // namespace

FlightRecorder::FlightRecorder(size_t capacity)
    : ring_(capacity ? capacity : 1) {}

void FlightRecorder::reset(size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  ring_.assign(capacity ? capacity : 1, FlightEntry());
  total_ = 0;
}

size_t FlightRecorder::start(const FlightEntry &entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t slot = size_t(total_ % ring_.size());
  ring_[slot] = entry;
  ++total_;
  return slot;
}

void FlightRecorder::finish(size_t slot, bool ok) {
  std::lock_guard<std::mutex> lock(mutex_);
  ring_[slot].end = monotonicSeconds();
  ring_[slot].state = ok ? FlightEntry::Completed : FlightEntry::Failed;
}

std::vector<FlightEntry> FlightRecorder::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<FlightEntry> out;
  uint64_t n = std::min<uint64_t>(total_, ring_.size());
  for (uint64_t i = total_ - n; i < total_; ++i)
    out.push_back(ring_[i % ring_.size()]);
  return out;
}

void FlightRecorder::dumpText(std::ostream &os, int rank) const {
  std::vector<FlightEntry> list = entries();
  os << "cleave flight recorder, rank " << rank << ": last " << list.size()
     << " communication calls (oldest first)\n";
  char line[256];
  for (const FlightEntry &e : list) {
    double ms = e.state == FlightEntry::Started ? -1 : (e.end - e.start) * 1e3;
    std::snprintf(line, sizeof(line),
                  "  #%-6llu group %-3lld %-18s count %-10lld %-5s %-4s "
                  "peer %-3d start %.6f %s",
                  (unsigned long long)e.seq, (long long)e.group, e.op,
                  (long long)e.count, e.dtype >= 0 ? dtypeName(e.dtype) : "-",
                  e.reduce >= 0 ? reduceName(e.reduce) : "-", e.peer, e.start,
                  stateName(e.state));
    os << line;
    if (ms >= 0)
      os << " after " << ms << " ms";
    os << "\n";
  }
}

std::string FlightRecorder::dumpJson(int rank) const {
  nlohmann::json entriesJson = nlohmann::json::array();
  for (const FlightEntry &e : entries()) {
    entriesJson.push_back(
        {{"seq", e.seq},
         {"group", e.group},
         {"op", e.op},
         {"count", e.count},
         {"dtype", e.dtype >= 0 ? dtypeName(e.dtype) : ""},
         {"reduce", e.reduce >= 0 ? reduceName(e.reduce) : ""},
         {"peer", e.peer},
         {"start", e.start},
         {"end", e.end},
         {"state", stateName(e.state)}});
  }
  nlohmann::json doc = {{"rank", rank}, {"entries", entriesJson}};
  return doc.dump(1);
}

} // namespace cleave::rt
