//===- Error.cpp - Sticky errors
//-------------------------------------------===//

#include "Error.h"
#include "Env.h"

#include "cleave/Runtime/Runtime.h"

#include <atomic>
#include <mutex>

namespace cleave::rt {
namespace {

std::mutex errorMutex;
std::string firstError;
std::atomic<bool> failed{false};

} // namespace

int messageRank() {
  int rank = initializedRank();
  if (rank >= 0)
    return rank;
  EnvRanks ranks = readEnvRanks();
  return ranks.rank >= 0 ? ranks.rank : 0;
}

std::string recordError(const std::string &message) {
  std::string full = concat("rank ", messageRank(), ": ", message);
  std::lock_guard<std::mutex> lock(errorMutex);
  if (!failed.load()) {
    firstError = full;
    failed.store(true);
  }
  return full;
}

bool hasFailed() { return failed.load(std::memory_order_relaxed); }

void clearError() {
  std::lock_guard<std::mutex> lock(errorMutex);
  firstError.clear();
  failed.store(false);
}

std::string errorText() {
  std::lock_guard<std::mutex> lock(errorMutex);
  return firstError;
}

const char *errorMessage() {
  std::lock_guard<std::mutex> lock(errorMutex);
  return firstError.c_str();
}

} // namespace cleave::rt

using namespace cleave::rt;

extern "C" {

int cleave_rt_failed(void) { return hasFailed() ? 1 : 0; }
const char *cleave_rt_error_message(void) { return errorMessage(); }
void cleave_rt_clear_error(void) { clearError(); }

} // extern "C"
