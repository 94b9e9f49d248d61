//===- Env.cpp - Options and launcher environment variables ---------------===//

#include "Env.h"
#include "Error.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <unistd.h>

namespace cleave::rt {
namespace {

std::atomic<int> theRank{-1};

/// Reads one integer variable; -1 when unset.
int envRankValue(const char *name) {
  int64_t value = envInt(name, -1);
  if (value < -1 || value > INT32_MAX)
    throw RuntimeError(
        concat("environment variable ", name, "=", value, " is out of range"));
  return static_cast<int>(value);
}

} // namespace

std::optional<std::string> getEnv(const char *name) {
  const char *value = std::getenv(name);
  if (!value || !*value)
    return std::nullopt;
  return std::string(value);
}

std::optional<int64_t> parseInt(const std::string &text) {
  if (text.empty())
    return std::nullopt;
  errno = 0;
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size())
    return std::nullopt;
  return static_cast<int64_t>(value);
}

int64_t envInt(const char *name, int64_t fallback) {
  std::optional<std::string> text = getEnv(name);
  if (!text)
    return fallback;
  std::optional<int64_t> value = parseInt(*text);
  if (!value)
    throw RuntimeError(concat("environment variable ", name, "='", *text,
                              "' is not an integer"));
  return *value;
}

bool envFlag(const char *name) {
  std::optional<std::string> text = getEnv(name);
  return text && *text != "0" && *text != "false" && *text != "no";
}

EnvRanks readEnvRanks() {
  EnvRanks ranks;
  if (getEnv("RANK") || getEnv("WORLD_SIZE")) {
    ranks.rank = envRankValue("RANK");
    ranks.worldSize = envRankValue("WORLD_SIZE");
    ranks.localRank = envRankValue("LOCAL_RANK");
    ranks.source = "RANK/WORLD_SIZE";
  } else if (getEnv("OMPI_COMM_WORLD_RANK")) {
    ranks.rank = envRankValue("OMPI_COMM_WORLD_RANK");
    ranks.worldSize = envRankValue("OMPI_COMM_WORLD_SIZE");
    ranks.localRank = envRankValue("OMPI_COMM_WORLD_LOCAL_RANK");
    ranks.source = "OMPI_COMM_WORLD_*";
  }
  return ranks;
}

/// Fills rank, world size and local rank.
static void resolveRanks(const cleave_rt_options_t &opts,
                         ResolvedOptions &out) {
  EnvRanks env = readEnvRanks();
  out.rank = opts.rank >= 0 ? opts.rank : (env.rank >= 0 ? env.rank : 0);
  out.worldSize = opts.world_size >= 0
                      ? opts.world_size
                      : (env.worldSize >= 0 ? env.worldSize : 1);
  out.localRank = opts.local_rank >= 0
                      ? opts.local_rank
                      : (env.localRank >= 0 ? env.localRank : 0);
  std::string from = env.source.empty() ? "" : " (from " + env.source + ")";
  if (out.worldSize < 1)
    throw RuntimeError(
        concat("world size ", out.worldSize, from, " must be at least 1"));
  if (out.rank >= out.worldSize)
    throw RuntimeError(concat("rank ", out.rank, from,
                              " is not below the world size ", out.worldSize));
  if (env.rank >= 0 && opts.rank < 0 && env.worldSize < 0 &&
      opts.world_size < 0)
    throw RuntimeError(concat("the environment sets the rank", from,
                              " but not the world size"));
}

ResolvedOptions resolveOptions(const cleave_rt_options_t *given) {
  cleave_rt_options_t opts;
  cleave_rt_default_options(&opts);
  if (given)
    opts = *given;
  ResolvedOptions out;
  out.backend = opts.backend ? opts.backend : "cpu";
  resolveRanks(opts, out);
  if (opts.timeout_ms < 0)
    throw RuntimeError(concat("timeout_ms ", opts.timeout_ms, " is negative"));
  out.timeoutMs = opts.timeout_ms > 0 ? opts.timeout_ms
                                      : envInt("CLEAVE_TIMEOUT_MS", 300000);
  if (out.timeoutMs <= 0)
    throw RuntimeError(
        concat("CLEAVE_TIMEOUT_MS=", out.timeoutMs, " must be positive"));
  if (out.worldSize == 1)
    return out;
  if (opts.rendezvous && *opts.rendezvous) {
    out.rendezvous = opts.rendezvous;
  } else if (std::optional<std::string> url = getEnv("CLEAVE_RENDEZVOUS")) {
    out.rendezvous = *url;
  } else {
    std::optional<std::string> addr = getEnv("MASTER_ADDR");
    std::optional<std::string> port = getEnv("MASTER_PORT");
    if (!addr || !port)
      throw RuntimeError(
          concat("world size is ", out.worldSize,
                 " but no rendezvous is given: set CLEAVE_RENDEZVOUS "
                 "(file:/shared/dir or tcp://host:port) or MASTER_ADDR and "
                 "MASTER_PORT"));
    out.rendezvous = "tcp://" + *addr + ":" + *port;
  }
  return out;
}

int initializedRank() { return theRank.load(); }
void setInitializedRank(int rank) { theRank.store(rank); }

} // namespace cleave::rt

extern "C" void cleave_rt_default_options(cleave_rt_options_t *opts) {
  if (!opts)
    return;
  std::memset(opts, 0, sizeof(*opts));
  opts->backend = nullptr;
  opts->rank = -1;
  opts->world_size = -1;
  opts->local_rank = -1;
  opts->rendezvous = nullptr;
  opts->timeout_ms = 0;
}

namespace cleave::rt {

double monotonicSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

int64_t wallMillis() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

char processState(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() ? text[paren + 2]
                                                               : 0;
}

std::string hostName() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0)
    return "unknown";
  return name;
}

} // namespace cleave::rt
