//===- Env.h - Options and launcher environment variables -------*- C++ -*-===//
//
// Internal to libCleaveRuntime: how cleave_rt_init resolves its options from
// the arguments and the environment that launchers set (torchrun, Slurm
// wrappers, Open MPI, cleave_launch_local).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_ENV_H
#define CLEAVE_LIB_RUNTIME_ENV_H

#include "cleave/Runtime/Runtime.h"

#include <cstdint>
#include <optional>
#include <string>

namespace cleave::rt {

/// The value of environment variable `name`, if set and non-empty.
std::optional<std::string> getEnv(const char *name);

/// Environment variable `name` as an integer, `fallback` when unset; throws
/// RuntimeError naming the variable when it is not an integer.
int64_t envInt(const char *name, int64_t fallback);

/// True when `name` is set to something other than "", "0", "false", "no".
bool envFlag(const char *name);

/// Parses a whole decimal integer; nullopt on anything else.
std::optional<int64_t> parseInt(const std::string &text);

/// Rank, world size and local rank as the environment gives them (-1 for
/// what it does not give) and which convention they came from.
struct EnvRanks {
  int rank = -1;
  int worldSize = -1;
  int localRank = -1;
  std::string source; ///< "RANK/WORLD_SIZE", "OMPI_COMM_WORLD_*" or "".
};

/// Reads RANK / WORLD_SIZE / LOCAL_RANK, else OMPI_COMM_WORLD_RANK / _SIZE /
/// _LOCAL_RANK. Throws RuntimeError on malformed values.
EnvRanks readEnvRanks();

/// cleave_rt_options_t with every default filled in and checked.
struct ResolvedOptions {
  std::string backend;
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  std::string rendezvous; ///< "file:/dir" or "tcp://host:port"; "" if size 1.
  int64_t timeoutMs = 300000;
};

/// Resolves `opts` (NULL means all defaults) against the environment. Throws
/// RuntimeError saying which value is wrong.
ResolvedOptions resolveOptions(const cleave_rt_options_t *opts);

/// Seconds on the monotonic clock (cleave_rt_now).
double monotonicSeconds();
/// Milliseconds since the Unix epoch (heartbeats compare these across
/// processes, so they use the wall clock).
int64_t wallMillis();
/// This machine's host name.
std::string hostName();
/// The state letter of process `pid` in /proc/<pid>/stat (R, S, T, Z...),
/// or 0 if it cannot be read (no such process).
char processState(int pid);

/// The rank cleave_rt_init set up, or -1 when not initialized.
int initializedRank();
void setInitializedRank(int rank);

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_ENV_H
