//===- Groups.cpp - Meshes, groups and their bookkeeping ------------------===//
//
// cleave_rt_define_mesh / cleave_rt_define_group and the shared pieces every
// backend relies on: group descriptions for messages, size-1 groups, aborting
// all groups after an error, the flight-recorder dump.
//
//===----------------------------------------------------------------------===//

#include "Async.h"
#include "DType.h"
#include "State.h"

#include <gloo/rendezvous/prefix_store.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace cleave::rt {

std::string GroupInfo::describe() const {
  std::string ranks;
  size_t n = members.size();
  for (size_t i = 0; i < n; ++i) {
    if (n > 16 && i == 8) {
      ranks += concat(",...,", members.back(), " (", n, " ranks)");
      break;
    }
    ranks += (i ? "," : "") + std::to_string(members[i]);
  }
  return concat("group ", id, " (", axes, ", ranks ", ranks, ")");
}

namespace {

/// A group of one: every collective is a copy.
class LocalCommunicator final : public Communicator {
public:
  explicit LocalCommunicator(Backend &backend) : backend_(backend) {}
  void allReduce(const void *in, void *out, size_t count, int32_t dtype,
                 int32_t, uint32_t) override {
    copy(in, out, count * dtypeSize(dtype));
  }
  void allGather(const void *in, void *out, size_t count, int32_t dtype,
                 uint32_t) override {
    copy(in, out, count * dtypeSize(dtype));
  }
  void reduceScatter(const void *in, void *out, size_t count, int32_t dtype,
                     int32_t, uint32_t) override {
    copy(in, out, count * dtypeSize(dtype));
  }
  void allToAll(const void *in, void *out, size_t count, int32_t dtype,
                uint32_t) override {
    copy(in, out, count * dtypeSize(dtype));
  }
  void broadcast(void *, size_t, int32_t, int, uint32_t) override {}
  void sendRecv(const std::vector<Transfer> &sends,
                const std::vector<Transfer> &recvs, uint64_t) override {
    require(sends.empty() && recvs.empty(),
            "a group of one rank has no peers to send to or receive from");
  }
  void barrier(uint32_t) override {}
  void hostAllGather(const void *in, void *out, size_t bytes,
                     uint32_t) override {
    std::memmove(out, in, bytes);
  }
  void hostExchange(int, const void *, void *, size_t, uint64_t) override {
    throw RuntimeError("a group of one rank has no peer");
  }
  void abort() override {}

private:
  void copy(const void *in, void *out, size_t bytes) {
    if (in != out && bytes)
      backend_.copy(out, in, bytes);
  }
  Backend &backend_;
};

} // namespace

std::unique_ptr<Communicator> createLocalCommunicator(Backend &backend) {
  return std::make_unique<LocalCommunicator>(backend);
}

Group *findGroup(RuntimeState &state, int64_t id) {
  std::lock_guard<std::mutex> lock(state.groupsMutex);
  auto it = state.groups.find(id);
  return it == state.groups.end() ? nullptr : it->second.get();
}

void abortAllGroups(RuntimeState &state, const std::string &why) {
  std::lock_guard<std::mutex> lock(state.groupsMutex);
  for (auto &[id, group] : state.groups) {
    if (group->broken.empty())
      group->broken = why;
    if (group->comm)
      group->comm->abort();
  }
}

std::string dumpFlightRecorder(RuntimeState &state) {
  std::ostringstream text;
  state.recorder.dumpText(text, state.options.rank);
  std::cerr << text.str() << std::flush;
  if (state.flightRecorderDir.empty())
    return "";
  std::string path = concat(state.flightRecorderDir, "/cleave-flight-rank",
                            state.options.rank, ".json");
  std::ofstream out(path);
  out << state.recorder.dumpJson(state.options.rank) << "\n";
  if (!out)
    std::cerr << "cleave: cannot write the flight recorder to " << path << "\n";
  return path;
}

/// Connects a group through the store under `prefix`; translates a
/// rendezvous timeout into the ranks that did not arrive.
std::unique_ptr<Communicator> connectGroup(RuntimeState &state,
                                           const GroupInfo &info,
                                           const std::string &prefix) {
  if (info.size() == 1)
    return createLocalCommunicator(*state.backend);
  try {
    return state.backend->connect(info, *state.store, prefix);
  } catch (const StoreTimeout &e) {
    std::string ranks;
    for (const std::string &key : e.missing) {
      std::optional<int64_t> index = parseInt(key.substr(key.rfind('/') + 1));
      if (index && *index >= 0 && *index < info.size())
        ranks += (ranks.empty() ? "" : ", ") +
                 std::to_string(info.members[size_t(*index)]);
    }
    throw RuntimeError(
        concat("timed out after ", info.timeoutMs, " ms waiting for rank(s) ",
               ranks.empty() ? "?" : ranks,
               " to join through the rendezvous store ", state.store->url()));
  }
}

} // namespace cleave::rt

using namespace cleave::rt;

namespace {

RuntimeState &requireState() {
  RuntimeState *state = runtimeState();
  require(state, "the runtime is not initialized (call cleave_rt_init first)");
  return *state;
}

int defineGroup(int64_t groupId, int64_t naxes, const int64_t *axes) {
  RuntimeState &state = requireState();
  require(groupId >= 0, "group id ", groupId,
          " is negative (-1 is the world group)");
  require(naxes >= 0 && (naxes == 0 || axes), "naxes ", naxes, " with axes ",
          axes ? "given" : "NULL");
  require(!hasFailed(), "skipped after an earlier error: ", errorMessage());
  std::vector<int64_t> axisList(axes, axes + naxes);
  Mesh::Group mg = state.mesh.groupAlong(axisList, state.options.rank);
  auto group = std::make_unique<Group>();
  group->info.id = groupId;
  group->info.axes = mg.axesText;
  group->info.members = mg.members;
  group->info.groupRank = mg.groupRank;
  group->info.timeoutMs = state.options.timeoutMs;
  int generation = state.generations[groupId]++;
  std::string prefix =
      concat(state.keyPrefix, "group", groupId, ".", generation, ".", mg.color);
  try {
    group->comm = connectGroup(state, group->info, prefix);
  } catch (const std::exception &e) {
    throw RuntimeError(concat(group->info.describe(), ": ", e.what()));
  }
  std::lock_guard<std::mutex> lock(state.groupsMutex);
  state.groups[groupId] = std::move(group);
  return 0;
}

} // namespace

extern "C" {

int cleave_rt_define_mesh(int64_t ndims, const int64_t *shape,
                          const char *const *axis_names) {
  return guard("define_mesh", 1, [&] {
    RuntimeState &state = requireState();
    require(ndims >= 1 && shape, "a mesh needs ndims >= 1 and a shape (got ",
            ndims, ")");
    std::vector<std::string> names;
    for (int64_t i = 0; axis_names && i < ndims; ++i) {
      require(axis_names[i], "the name of axis ", i, " is NULL");
      names.push_back(axis_names[i]);
    }
    state.mesh = Mesh(std::vector<int64_t>(shape, shape + ndims), names,
                      state.options.worldSize);
    return 0;
  });
}

int cleave_rt_define_group(int64_t group_id, int64_t naxes,
                           const int64_t *axes) {
  std::string what = concat("define_group ", group_id);
  drainProgressThread(); // Requests in flight may use the group.
  return guard(what.c_str(), 1,
               [&] { return defineGroup(group_id, naxes, axes); });
}

int64_t cleave_rt_group_rank(int64_t group_id) {
  RuntimeState *state = runtimeState();
  Group *group = state ? findGroup(*state, group_id) : nullptr;
  return group ? group->info.groupRank : -1;
}

int64_t cleave_rt_group_size(int64_t group_id) {
  RuntimeState *state = runtimeState();
  Group *group = state ? findGroup(*state, group_id) : nullptr;
  return group ? group->info.size() : -1;
}

} // extern "C"
