//===- CollectiveCheck.cpp - Run every device's trace, find mismatches ----===//
//
// Step 2 of cleave-verify-collectives (see CollectiveTrace.h and
// docs/verify-collectives.md). Every device runs the trace of its program;
// a call blocks as it does in the runtime:
//
// * a collective (all_reduce, all_gather, reduce_scatter, all_to_all,
//   collective_permute) until every member of the device's group along the
//   op's axes has reached its call with the same number on that group;
// * a send until the peer reaches the matching recv, and a recv until the
//   peer reaches the matching send (Gloo's unbound-buffer send completes
//   only once the receiver has posted its receive: a rendezvous).
//
// The first call that cannot match (different signature, self-send) is an
// error; if devices remain blocked when nothing can move, the wait-for graph
// gives either a device that waits for one that has finished, or a cycle.
//
// Symmetry: a device's program depends only on its stage coordinate, and
// groups are regular, so devices that differ only on axes no send/recv
// names behave identically and stay in lockstep. Those axes are collapsed
// to coordinate 0: a pipelined program on a pp x dp x tp mesh whose
// send/recv go along pp runs pp simulated devices.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/CollectiveTrace.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/raw_ostream.h"

#include <deque>

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// The simulated devices: the mesh with every axis that is not kept
/// collapsed to coordinate 0.
class SimMesh {
public:
  SimMesh(MeshOp mesh, ArrayRef<bool> kept) : kept(kept) {
    shape.assign(mesh.getShape().begin(), mesh.getShape().end());
    for (Attribute name : mesh.getAxisNames())
      axisNames.push_back(cast<StringAttr>(name).getValue());
    unsigned rank = shape.size();
    simStride.assign(rank, 0);
    fullStride.assign(rank, 0);
    // Only the kept axes' product is bounded (Checker::setUp); the full
    // mesh may be far larger and is counted saturating.
    int64_t sim = 1, full = 1;
    for (unsigned a = rank; a-- > 0;) {
      fullStride[a] = full;
      full =
          shape[a] && full > INT64_MAX / shape[a] ? INT64_MAX : full * shape[a];
      if (kept[a]) {
        simStride[a] = sim;
        sim *= shape[a];
      }
    }
    numDevices = sim;
    meshDevices = full;
  }

  int64_t coord(uint32_t d, unsigned axis) const {
    return kept[axis] ? (d / simStride[axis]) % shape[axis] : 0;
  }
  /// The device's rank in the full mesh (row-major, last axis fastest).
  int64_t rank(uint32_t d) const {
    int64_t r = 0;
    for (unsigned a = 0; a < shape.size(); ++a)
      r += coord(d, a) * fullStride[a];
    return r;
  }
  /// "rank 5 (pp=1, tp=1)".
  std::string describe(uint32_t d) const {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "rank " << rank(d) << " (";
    for (unsigned a = 0; a < shape.size(); ++a)
      os << (a ? ", " : "") << axisNames[a] << "=" << coord(d, a);
    os << ")";
    return text;
  }

  SmallVector<StringRef> axisNames;
  SmallVector<bool> kept;
  SmallVector<int64_t> shape, simStride, fullStride;
  int64_t numDevices = 1, meshDevices = 1;
};

/// The groups of one communicator on the simulated mesh.
struct GroupLayout {
  GroupLayout(const SimMesh &mesh, ArrayRef<unsigned> axes)
      : axes(axes.begin(), axes.end()) {
    instStride.assign(mesh.shape.size(), 0);
    int64_t stride = 1;
    for (unsigned a = mesh.shape.size(); a-- > 0;) {
      if (!mesh.kept[a])
        continue;
      if (llvm::is_contained(axes, a)) {
        simSize *= mesh.shape[a];
        continue;
      }
      instStride[a] = stride;
      stride *= mesh.shape[a];
    }
    numInstances = uint32_t(stride);
  }

  uint32_t instance(const SimMesh &mesh, uint32_t d) const {
    int64_t i = 0;
    for (unsigned a = 0; a < mesh.shape.size(); ++a)
      i += mesh.coord(d, a) * instStride[a];
    return uint32_t(i);
  }
  /// The device with linear index `j` in the group of `d` (every axis of
  /// the group is kept: the communicator of a send or recv).
  uint32_t member(const SimMesh &mesh, uint32_t d, int64_t j) const {
    int64_t result = d;
    for (unsigned k = axes.size(); k-- > 0;) {
      unsigned a = axes[k];
      int64_t c = j % mesh.shape[a];
      j /= mesh.shape[a];
      result += (c - mesh.coord(d, a)) * mesh.simStride[a];
    }
    return uint32_t(result);
  }
  /// The linear index of `d` in its group.
  int64_t indexOf(const SimMesh &mesh, uint32_t d) const {
    int64_t index = 0;
    for (unsigned a : axes)
      index = index * mesh.shape[a] + mesh.coord(d, a);
    return index;
  }
  /// The simulated members of the group of `d`, in group order.
  SmallVector<uint32_t> members(const SimMesh &mesh, uint32_t d) const {
    SmallVector<uint32_t> result = {d};
    for (unsigned a : axes) {
      if (!mesh.kept[a])
        continue;
      SmallVector<uint32_t> next;
      for (uint32_t m : result)
        for (int64_t c = 0; c < mesh.shape[a]; ++c)
          next.push_back(
              uint32_t(m + (c - mesh.coord(m, a)) * mesh.simStride[a]));
      result = std::move(next);
    }
    return result;
  }

  SmallVector<unsigned> axes;
  SmallVector<int64_t> instStride;
  int64_t simSize = 1;
  uint32_t numInstances = 1;
};

class Checker {
public:
  Checker(const MeshPrograms &programs, const CommTable &table)
      : programs(programs), table(table) {}

  LogicalResult check(const CheckOptions &options, CheckStats *stats);

private:
  enum class State : uint8_t { Ready, Blocked, Done };
  struct Device {
    uint32_t program = 0;
    uint32_t pos = 0;
    State state = State::Ready;
  };
  /// The collective a group instance is at (at most one: members block).
  struct Pending {
    uint32_t ref = 0; ///< The first member that arrived.
    uint32_t completed = 0;
    std::vector<uint32_t> arrived;
  };

  LogicalResult checkMesh();
  LogicalResult setUp(const CheckOptions &options);
  LogicalResult run(uint32_t d);
  LogicalResult arrive(uint32_t d, const CommEvent &event, bool &blocked);
  LogicalResult rendezvous(uint32_t d, const CommEvent &event, bool &blocked);
  LogicalResult reportStuck();
  LogicalResult reportCycle(ArrayRef<uint32_t> cycle);
  LogicalResult reportMissing(uint32_t d, uint32_t finished);
  std::pair<uint32_t, bool> waitTarget(uint32_t d);

  const CommTrace &trace(uint32_t d) const {
    return *programs.traces[devices[d].program];
  }
  const CommEvent &current(uint32_t d) const {
    return trace(d)[devices[d].pos];
  }
  const GroupLayout &layout(uint32_t comm) const { return *layouts[comm]; }
  Pending &pendingOf(uint32_t d, uint32_t comm) {
    return pending[comm][layout(comm).instance(*mesh, d)];
  }
  std::string who(uint32_t d) const { return mesh->describe(d); }
  std::string callText(uint32_t d, const CommEvent &event);

  const MeshPrograms &programs;
  const CommTable &table;
  std::optional<SimMesh> mesh;
  std::vector<std::optional<GroupLayout>> layouts;
  std::vector<std::vector<Pending>> pending;
  std::vector<Device> devices;
  std::deque<uint32_t> work;
  int64_t calls = 0;
};

/// Every call must be on the programs' mesh.
LogicalResult Checker::checkMesh() {
  const CommEvent *onMesh = nullptr, *offMesh = nullptr;
  for (const CommTrace *t : programs.traces)
    for (const CommEvent &e : *t) {
      const CommEvent *&slot =
          table.comm(e.comm).mesh == programs.mesh ? onMesh : offMesh;
      if (!slot)
        slot = &e;
    }
  if (!offMesh)
    return success();
  MeshOp mesh = programs.mesh, other = table.comm(offMesh->comm).mesh;
  InFlightDiagnostic diag =
      offMesh->op->emitError()
      << "cleave-verify-collectives needs one mesh per program, but this op "
         "uses @"
      << other.getSymName() << " and the program @" << mesh.getSymName();
  if (onMesh)
    diag.attachNote(onMesh->op->getLoc())
        << "this op uses @" << mesh.getSymName();
  return diag;
}

LogicalResult Checker::setUp(const CheckOptions &options) {
  if (failed(checkMesh()))
    return failure();
  MeshOp meshOp = programs.mesh;
  SmallVector<bool> kept(meshOp.getRank(), options.exhaustive);
  for (unsigned a : programs.programAxes)
    kept[a] = true;
  for (const CommTrace *t : programs.traces)
    for (const CommEvent &e : *t)
      if (e.kind != CommKind::Collective)
        for (unsigned a : table.comm(e.comm).axes)
          kept[a] = true;
  int64_t simulated = 1;
  std::string keptAxes;
  for (unsigned a = 0; a < meshOp.getRank(); ++a)
    if (kept[a]) {
      simulated = simulatedProduct(simulated, meshOp.getShape()[a]);
      keptAxes += (keptAxes.empty() ? "" : ", ") +
                  cast<StringAttr>(meshOp.getAxisNames()[a]).getValue().str() +
                  " = " + std::to_string(meshOp.getShape()[a]);
    }
  if (simulated < 0)
    return meshOp.emitError()
           << "cleave-verify-collectives: the axes simulated device by device ("
           << keptAxes << (options.exhaustive ? ": exhaustive mode" : "")
           << ") have more than " << kMaxSimulatedDevices
           << " devices, the most the check simulates"
           << (options.exhaustive
                   ? "; without exhaustive=1 collectives' axes collapse to "
                     "one device"
                   : "; point-to-point communication and pipeline stages "
                     "are simulated on every device of their axes");
  mesh.emplace(meshOp, kept);
  for (const CommTrace *t : programs.traces)
    for (const CommEvent &e : *t) {
      if (e.comm >= layouts.size()) {
        layouts.resize(e.comm + 1);
        pending.resize(e.comm + 1);
      }
      if (!layouts[e.comm]) {
        layouts[e.comm].emplace(*mesh, table.comm(e.comm).axes);
        pending[e.comm].resize(layouts[e.comm]->numInstances);
      }
    }
  devices.resize(mesh->numDevices);
  for (uint32_t d = 0; d < devices.size(); ++d) {
    int64_t program = 0;
    for (unsigned a : programs.programAxes)
      program = program * mesh->shape[a] + mesh->coord(d, a);
    devices[d].program = uint32_t(program);
    work.push_back(d);
  }
  return success();
}

LogicalResult Checker::check(const CheckOptions &options, CheckStats *stats) {
  bool empty = llvm::all_of(programs.traces,
                            [](const CommTrace *t) { return t->empty(); });
  if (empty)
    return success();
  if (failed(setUp(options)))
    return failure();
  while (!work.empty()) {
    uint32_t d = work.front();
    work.pop_front();
    if (failed(run(d)))
      return failure();
  }
  if (stats) {
    stats->meshDevices = mesh->meshDevices;
    stats->simulatedDevices = mesh->numDevices;
    stats->calls = calls;
  }
  for (const Device &device : devices)
    if (device.state != State::Done)
      return reportStuck();
  return success();
}

/// Runs device `d` until it blocks or finishes.
LogicalResult Checker::run(uint32_t d) {
  Device &device = devices[d];
  const CommTrace &events = trace(d);
  device.state = State::Ready;
  while (device.pos < events.size()) {
    const CommEvent &event = events[device.pos];
    bool blocked = false;
    LogicalResult result = event.kind == CommKind::Collective
                               ? arrive(d, event, blocked)
                               : rendezvous(d, event, blocked);
    if (failed(result))
      return failure();
    if (blocked) {
      device.state = State::Blocked;
      return success();
    }
  }
  device.state = State::Done;
  return success();
}

/// `d` reaches a collective: wait for the group, or complete the call.
LogicalResult Checker::arrive(uint32_t d, const CommEvent &event,
                              bool &blocked) {
  Pending &p = pendingOf(d, event.comm);
  if (p.arrived.empty()) {
    p.ref = d;
  } else if (current(p.ref).signature != event.signature) {
    const CommEvent &ref = current(p.ref);
    InFlightDiagnostic diag =
        event.op->emitError()
        << "collective mismatch on the group along "
        << table.describeComm(event.comm) << ": " << who(d) << " issues "
        << table.describeSignature(event.signature) << " as call #"
        << p.completed + 1 << " on its group, but " << who(p.ref) << " issues "
        << table.describeSignature(ref.signature);
    diag.attachNote(ref.op->getLoc())
        << who(p.ref) << " issues " << table.describeSignature(ref.signature)
        << " here";
    return diag;
  }
  p.arrived.push_back(d);
  if (int64_t(p.arrived.size()) < layout(event.comm).simSize) {
    blocked = true;
    return success();
  }
  ++p.completed;
  for (uint32_t m : p.arrived) {
    ++devices[m].pos;
    ++calls;
    if (m != d) {
      devices[m].state = State::Ready;
      work.push_back(m);
    }
  }
  p.arrived.clear();
  return success();
}

/// `d` reaches a send or recv: match it with the peer's call, or wait.
LogicalResult Checker::rendezvous(uint32_t d, const CommEvent &event,
                                  bool &blocked) {
  const GroupLayout &group = layout(event.comm);
  uint32_t peer = group.member(*mesh, d, event.peer);
  bool sending = event.kind == CommKind::Send;
  if (peer == d)
    return event.op->emitError()
           << who(d) << (sending ? " sends to" : " receives from")
           << " itself: peer " << event.peer
           << " is its own index in its group along "
           << table.describeComm(event.comm);
  const Device &other = devices[peer];
  if (other.state != State::Blocked) {
    blocked = true;
    return success();
  }
  const CommEvent &theirs = current(peer);
  CommKind partner = sending ? CommKind::Recv : CommKind::Send;
  if (theirs.kind != partner || theirs.comm != event.comm ||
      group.member(*mesh, peer, theirs.peer) != d) {
    blocked = true;
    return success();
  }
  if (theirs.signature != event.signature) {
    const CommEvent &send = sending ? event : theirs;
    const CommEvent &recv = sending ? theirs : event;
    uint32_t sender = sending ? d : peer, receiver = sending ? peer : d;
    InFlightDiagnostic diag =
        send.op->emitError()
        << "send/recv mismatch: " << who(sender) << " sends "
        << table.describeSignature(send.signature) << " to " << who(receiver)
        << " along " << table.describeComm(send.comm) << ", which receives "
        << table.describeSignature(recv.signature) << " from it";
    diag.attachNote(recv.op->getLoc())
        << who(receiver) << " receives "
        << table.describeSignature(recv.signature) << " here";
    return diag;
  }
  ++devices[peer].pos;
  devices[peer].state = State::Ready;
  ++devices[d].pos;
  calls += 2;
  work.push_back(peer);
  return success();
}

std::string Checker::callText(uint32_t d, const CommEvent &event) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (event.kind == CommKind::Collective) {
    os << table.describeSignature(event.signature) << " (call #"
       << pendingOf(d, event.comm).completed + 1 << " on its group along "
       << table.describeComm(event.comm) << ")";
    return text;
  }
  uint32_t peer = layout(event.comm).member(*mesh, d, event.peer);
  bool sending = event.kind == CommKind::Send;
  os << (sending ? "send of " : "recv of ")
     << table.describeSignature(event.signature)
     << (sending ? " to " : " from ") << who(peer) << " along "
     << table.describeComm(event.comm);
  return text;
}

/// Whom blocked device `d` waits for, and whether that device has finished.
std::pair<uint32_t, bool> Checker::waitTarget(uint32_t d) {
  const CommEvent &event = current(d);
  const GroupLayout &group = layout(event.comm);
  if (event.kind != CommKind::Collective) {
    uint32_t peer = group.member(*mesh, d, event.peer);
    return {peer, devices[peer].state == State::Done};
  }
  const Pending &p = pendingOf(d, event.comm);
  llvm::DenseSet<uint32_t> arrived(p.arrived.begin(), p.arrived.end());
  std::optional<uint32_t> waiting;
  for (uint32_t m : group.members(*mesh, d)) {
    if (arrived.contains(m))
      continue;
    if (devices[m].state == State::Done)
      return {m, true};
    if (!waiting)
      waiting = m;
  }
  return {*waiting, false};
}

LogicalResult Checker::reportStuck() {
  uint32_t cur = 0;
  while (devices[cur].state == State::Done)
    ++cur;
  SmallVector<uint32_t> path;
  llvm::DenseMap<uint32_t, unsigned> index;
  while (true) {
    auto [it, inserted] = index.try_emplace(cur, path.size());
    if (!inserted)
      return reportCycle(ArrayRef<uint32_t>(path).drop_front(it->second));
    path.push_back(cur);
    auto [next, finished] = waitTarget(cur);
    if (finished)
      return reportMissing(cur, next);
    cur = next;
  }
}

LogicalResult Checker::reportCycle(ArrayRef<uint32_t> found) {
  // Start the cycle at its lowest rank (deterministic messages).
  auto lowest = llvm::min_element(found, [&](uint32_t a, uint32_t b) {
    return mesh->rank(a) < mesh->rank(b);
  });
  SmallVector<uint32_t> cycle(lowest, found.end());
  cycle.append(found.begin(), lowest);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "deadlock: these calls wait for each other in a cycle: ";
  for (uint32_t d : cycle)
    os << who(d) << " waits in " << callText(d, current(d)) << " -> ";
  os << "back to " << who(cycle.front())
     << " (a collective blocks until every member of its group arrives, a "
        "send until its peer reaches the matching recv, a recv until its "
        "peer reaches the matching send)";
  InFlightDiagnostic diag = current(cycle.front()).op->emitError() << text;
  for (uint32_t d : ArrayRef<uint32_t>(cycle).drop_front())
    diag.attachNote(current(d).op->getLoc())
        << who(d) << " waits here in " << callText(d, current(d));
  return diag;
}

LogicalResult Checker::reportMissing(uint32_t d, uint32_t finished) {
  const CommEvent &event = current(d);
  func::FuncOp func = programs.funcs[devices[finished].program];
  std::string text;
  llvm::raw_string_ostream os(text);
  os << who(d) << " waits forever in " << callText(d, event) << ": "
     << who(finished) << " returns from @" << func.getName();
  if (event.kind == CommKind::Send)
    os << " without receiving it";
  else if (event.kind == CommKind::Recv)
    os << " without sending it";
  else
    os << " after " << pendingOf(d, event.comm).completed
       << " call(s) on that group";
  InFlightDiagnostic diag = event.op->emitError() << text;
  diag.attachNote(func.getLoc())
      << who(finished) << " runs @" << func.getName() << ", which ends here";
  return diag;
}

} // namespace

LogicalResult mlir::cleave::checkPrograms(const MeshPrograms &programs,
                                          const CommTable &table,
                                          const CheckOptions &options,
                                          CheckStats *stats) {
  return Checker(programs, table).check(options, stats);
}
