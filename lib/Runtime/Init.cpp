//===- Init.cpp - cleave_rt_init / cleave_rt_finalize ---------------------===//
//
// Bootstraps a process: resolves the options, opens the rendezvous store
// (rank 0 serves tcp:// stores), picks the address Gloo binds, starts the
// heartbeat and connects the world group (id -1).
//
//===----------------------------------------------------------------------===//

#include "Async.h"
#include "CudaBackend.h"
#include "State.h"
#include <csignal>
#include <malloc.h>

#include <cstdlib>
#include <iostream>
#include <unistd.h>

namespace cleave::rt {
namespace {

std::unique_ptr<RuntimeState> theState;
int initCount = 0;

/// The run's key namespace: the launcher's run id if any, and how many
/// times this process has initialized (so a re-init gets fresh keys).
std::string keyPrefixFor(int count) {
  std::string run = "run";
  if (auto id = getEnv("CLEAVE_RUN_ID"))
    run = *id;
  else if (auto id = getEnv("TORCHELASTIC_RUN_ID"))
    run = *id;
  else if (auto job = getEnv("SLURM_JOB_ID"))
    run = *job + "." + getEnv("SLURM_STEP_ID").value_or("0");
  return concat(run, "/init", count, "/");
}

/// Publishes this host's name and returns the address Gloo should bind:
/// CLEAVE_SOCKET_HOST if set, loopback when every rank runs on this host,
/// else "" (Gloo resolves the host name).
std::string chooseSocketHost(RuntimeState &state) {
  if (auto host = getEnv("CLEAVE_SOCKET_HOST"))
    return *host;
  KvStore &store = *state.store;
  std::string me = hostName();
  store.set(concat(state.keyPrefix, "host/", state.options.rank),
            std::vector<char>(me.begin(), me.end()));
  std::vector<std::string> keys;
  for (int r = 0; r < state.options.worldSize; ++r)
    keys.push_back(concat(state.keyPrefix, "host/", r));
  try {
    store.wait(keys, std::chrono::milliseconds(state.options.timeoutMs));
  } catch (const StoreTimeout &e) {
    std::string ranks;
    for (const std::string &key : e.missing)
      ranks += (ranks.empty() ? "" : ", ") + key.substr(key.rfind('/') + 1);
    throw RuntimeError(concat(
        "timed out after ", state.options.timeoutMs, " ms waiting for rank(s) ",
        ranks, " to join through the rendezvous store ", store.url()));
  }
  for (const std::string &key : keys) {
    std::vector<char> host = store.get(key);
    if (std::string(host.begin(), host.end()) != me)
      return "";
  }
  return "127.0.0.1";
}

RankStatus snapshot(RuntimeState &state) {
  RankStatus status;
  status.pid = int(::getpid());
  status.host = hostName();
  std::lock_guard<std::mutex> lock(state.groupsMutex);
  if (state.finalizing) {
    status.state = "finalized";
  } else if (!state.failureNote.empty() || hasFailed()) {
    status.state = "failed";
    status.error = hasFailed() ? errorText() : state.failureNote;
  }
  for (auto &[id, group] : state.groups) {
    GroupProgress &p = status.groups[id];
    p.seq = group->seq.load();
    p.op = group->lastOp.load();
    if (auto running = group->runningCall()) {
      p.active = true;
      p.call = running->first;
      p.sinceMs = running->second;
    }
  }
  return status;
}

/// The backend the options ask for: cpu (Gloo binds `socketHost`) or cuda
/// (loaded from libCleaveRuntimeCuda).
std::unique_ptr<Backend> createBackend(const ResolvedOptions &o,
                                       const std::string &socketHost) {
  if (o.backend == "cuda") {
    CudaBackendOptions cuda;
    cuda.rank = o.rank;
    cuda.localRank = o.localRank;
    cuda.timeoutMs = o.timeoutMs;
    return loadCudaBackend(cuda);
  }
  return createCpuBackend(socketHost,
                          getEnv("CLEAVE_SOCKET_IFNAME").value_or(""));
}

void openStores(RuntimeState &state, std::unique_ptr<KvStore> &heartbeat) {
  const ResolvedOptions &o = state.options;
  RendezvousUrl url = parseRendezvousUrl(o.rendezvous);
  if (url.kind == RendezvousUrl::File) {
    state.store = openFileStore(url.path, o.timeoutMs);
    heartbeat = openFileStore(url.path, o.timeoutMs);
    return;
  }
  if (o.rank == 0)
    state.server = std::make_unique<TcpStoreServer>(url.port);
  state.store = connectTcpStore(url.host, url.port, o.timeoutMs);
  heartbeat = connectTcpStore(url.host, url.port, o.timeoutMs);
}

void connectWorld(RuntimeState &state) {
  const ResolvedOptions &o = state.options;
  std::unique_ptr<KvStore> heartbeatStore;
  openStores(state, heartbeatStore);
  int64_t interval = envInt("CLEAVE_HEARTBEAT_MS", 500);
  require(interval > 0, "CLEAVE_HEARTBEAT_MS must be positive");
  state.hangTimeoutMs = envInt("CLEAVE_HEARTBEAT_TIMEOUT_MS", 30000);
  require(state.hangTimeoutMs > 0,
          "CLEAVE_HEARTBEAT_TIMEOUT_MS must be positive");
  RuntimeState *raw = &state;
  state.heartbeat = std::make_unique<Heartbeat>(
      std::move(heartbeatStore), state.keyPrefix, o.rank, interval,
      [raw] { return snapshot(*raw); },
      [raw](Heartbeat &heartbeat) { watchForStalls(*raw, heartbeat); });
  std::string socketHost = chooseSocketHost(state);
  state.backend = createBackend(o, socketHost);
}

/// A peer that dies mid-transfer makes the next write to its socket raise
/// SIGPIPE, whose default action kills this rank silently; ignored, the
/// write fails with EPIPE and the collective reports which peer died. Only
/// the default disposition is replaced: a host's own handler is kept.
void ignoreBrokenPipes() {
  struct sigaction current{};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 &&
      current.sa_handler == SIG_DFL)
    ::signal(SIGPIPE, SIG_IGN);
}

/// Large buffers of generated code are malloc'ed and freed every step; with
/// glibc's defaults each one is a fresh mmap whose pages fault in again.
/// Serving them from the heap keeps the pages of the previous step.
void keepLargeAllocations() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

void initialize(const cleave_rt_options_t *opts) {
  require(!theState, "the runtime is already initialized");
  ignoreBrokenPipes();
  keepLargeAllocations();
  auto state = std::make_unique<RuntimeState>();
  state->options = resolveOptions(opts);
  const ResolvedOptions &o = state->options;
  setInitializedRank(o.rank);
  require(o.backend == "cpu" || o.backend == "cuda", "unknown backend '",
          o.backend, "' (cpu or cuda)");
  state->debugCollectives = envFlag("CLEAVE_DEBUG_COLLECTIVES");
  state->flightRecorderDir = getEnv("CLEAVE_FLIGHT_RECORDER_DIR").value_or("");
  int64_t capacity = envInt("CLEAVE_FLIGHT_RECORDER_SIZE", 64);
  require(capacity > 0, "CLEAVE_FLIGHT_RECORDER_SIZE must be positive");
  state->recorder.reset(size_t(capacity));
  state->keyPrefix = keyPrefixFor(initCount++);
  shareCpuCores(
      int(envInt("LOCAL_WORLD_SIZE", envInt("OMPI_COMM_WORLD_LOCAL_SIZE", 1))));
  if (o.worldSize > 1)
    connectWorld(*state);
  else
    state->backend = createBackend(o, "127.0.0.1");
  auto world = std::make_unique<Group>();
  world->info.id = -1;
  world->info.axes = "world";
  for (int r = 0; r < o.worldSize; ++r)
    world->info.members.push_back(r);
  world->info.groupRank = o.rank;
  world->info.timeoutMs = o.timeoutMs;
  world->comm = connectGroup(*state, world->info, state->keyPrefix + "world");
  state->groups[-1] = std::move(world);
  theState = std::move(state);
}

} // namespace

RuntimeState *runtimeState() { return theState.get(); }

Backend *currentBackend() {
  return theState ? theState->backend.get() : nullptr;
}

} // namespace cleave::rt

using namespace cleave::rt;

extern "C" {

int cleave_rt_init(const cleave_rt_options_t *opts) {
  int rc = guard("init", 1, [&] {
    initialize(opts);
    return 0;
  });
  if (rc != 0 && !theState)
    setInitializedRank(-1);
  return rc;
}

void cleave_rt_finalize(void) {
  if (!theState)
    return;
  RuntimeState &state = *theState;
  // Keep rank 0's store alive until every rank is done with it.
  if (state.options.worldSize > 1 && !hasFailed())
    cleave_rt_barrier(-1);
  stopProgressThread();
  state.finalizing = true;
  if (state.heartbeat) {
    state.heartbeat->publishNow();
    state.heartbeat->stop();
  }
  {
    std::lock_guard<std::mutex> lock(state.groupsMutex);
    state.groups.clear();
  }
  theState.reset();
  setInitializedRank(-1);
}

int32_t cleave_rt_rank(void) { return theState ? theState->options.rank : 0; }
int32_t cleave_rt_world_size(void) {
  return theState ? theState->options.worldSize : 1;
}
int32_t cleave_rt_local_rank(void) {
  return theState ? theState->options.localRank : 0;
}

} // extern "C"
