//===- CollectiveTrace.h - Symbolic replay of communication -----*- C++ -*-===//
//
// The analysis behind cleave-verify-collectives, in two steps:
//
// 1. Replay (CollectiveTrace.cpp): a function becomes the sequence of
//    communication calls a device makes when it runs it, following calls,
//    unrolling scf.for loops with compile-time bounds and deciding scf.if /
//    scf.index_switch on compile-time values.
// 2. Check (CollectiveCheck.cpp): every device of the mesh runs the trace of
//    its program (its pipeline stage's, or the one SPMD program) under the
//    runtime's blocking semantics; mismatched calls, unmatched sends and
//    cycles of waits become errors naming the ranks and both IR locations.
//
// docs/verify-collectives.md describes the model and its limits.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_COLLECTIVETRACE_H
#define CLEAVE_TRANSFORMS_COLLECTIVETRACE_H

#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <optional>
#include <vector>

namespace mlir::cleave {

/// What a communication call waits for: every member of its group
/// (collectives), or one peer (send, recv).
enum class CommKind : uint8_t { Collective, Send, Recv };

/// One communication call, in the order a device makes it.
struct CommEvent {
  /// The cleave op (its location and description).
  Operation *op = nullptr;
  /// The communicator (index into CommTable).
  uint32_t comm = 0;
  /// What the partners' calls must equal (index into CommTable): the kind,
  /// types and attributes of a collective; the payload type of send/recv.
  uint32_t signature = 0;
  /// Send and recv: the partner's linear index in the group.
  int64_t peer = -1;
  CommKind kind = CommKind::Collective;

  bool operator==(const CommEvent &other) const {
    return comm == other.comm && signature == other.signature &&
           peer == other.peer && kind == other.kind;
  }
};

/// The communication calls of one program, in order.
using CommTrace = std::vector<CommEvent>;

/// A communicator: a mesh and an ordered list of its axes, i.e. one runtime
/// group (the order fixes the devices' indices in the group).
struct CommInfo {
  MeshOp mesh;
  llvm::SmallVector<unsigned> axes;
};

/// Is `op` one of the communication ops of CleaveCollectiveOps.td? A
/// `cleave.*_start` is (the communication happens in start order, see
/// docs/verify-collectives.md); a `cleave.wait` is not.
bool isCommunicationOp(Operation *op);
/// Is `op` a `cleave.*_start`?
bool isStartOp(Operation *op);
/// The tensor `op` produces: its result, or the start's request's value
/// type (null for a send).
Type communicatedType(Operation *op);

/// Interns the communicators and signatures of the events of one module.
class CommTable {
public:
  explicit CommTable(SymbolTableCollection &symbols) : symbols(symbols) {}

  /// The event of communication op `op` (cached per op). The op has passed
  /// its verifier, so its mesh and axes exist.
  CommEvent eventFor(Operation *op);
  const CommInfo &comm(uint32_t id) const { return comms[id]; }
  /// "[pp, dp]": the axes of communicator `id`.
  std::string describeComm(uint32_t id) const;
  /// The signature's text, e.g. "all_reduce(tensor<4xf32>, sum)" or, for
  /// send and recv, the payload type.
  llvm::StringRef describeSignature(uint32_t id) const {
    return signatures[id];
  }

private:
  uint32_t internComm(MeshOp mesh, ArrayAttr axes);
  uint32_t internSignature(std::string text);

  SymbolTableCollection &symbols;
  std::vector<CommInfo> comms;
  llvm::DenseMap<std::pair<Operation *, Attribute>, uint32_t> commIds;
  std::vector<std::string> signatures;
  llvm::StringMap<uint32_t> signatureIds;
  llvm::DenseMap<Operation *, CommEvent> cache;
};

/// The device a program is replayed for: its coordinates on the mesh axes
/// that are known (those its `cleave.axis_index` values may depend on).
struct DeviceView {
  MeshOp mesh;
  llvm::SmallVector<int64_t> coords; ///< One per mesh axis.
  llvm::SmallVector<bool> known;     ///< Which coordinates are meaningful.
};

/// Replays functions into traces. Errors (loops whose bounds are not
/// compile-time values around communication, recursion, ...) are emitted as
/// diagnostics at the offending op.
class TraceReplayer {
public:
  TraceReplayer(CommTable &table, SymbolTableCollection &symbols,
                size_t maxEvents = size_t(1) << 22)
      : table(table), symbols(symbols), maxEvents(maxEvents) {}

  /// The communication calls of `func` run from its entry with unknown
  /// arguments.
  FailureOr<CommTrace> replay(func::FuncOp func);

  /// Replays from now on as `device` (std::nullopt: any device, so
  /// `cleave.axis_index` values are unknown).
  void setDevice(std::optional<DeviceView> device);

  /// Whether `op` (or a function it calls) contains communication.
  bool mayCommunicate(Operation *op);

private:
  /// Integer and index values known at compile time in one call frame.
  using Frame = llvm::DenseMap<Value, int64_t>;
  /// A replayed call: its trace and its integer results.
  struct CallResult {
    CommTrace trace;
    llvm::SmallVector<std::optional<int64_t>> results;
  };
  using CallKey = std::pair<Operation *, std::vector<std::optional<int64_t>>>;

  FailureOr<const CallResult *>
  replayCall(func::FuncOp callee, llvm::ArrayRef<std::optional<int64_t>> args,
             Operation *caller);
  LogicalResult replayBlock(Block &block, Frame &frame, CommTrace &out);
  LogicalResult replayOp(Operation *op, Frame &frame, CommTrace &out);
  LogicalResult replayFor(Operation *op, Frame &frame, CommTrace &out);
  LogicalResult replayIf(Operation *op, Frame &frame, CommTrace &out);
  LogicalResult replaySwitch(Operation *op, Frame &frame, CommTrace &out);
  LogicalResult replayAlternatives(Operation *op,
                                   llvm::MutableArrayRef<Region> regions,
                                   Frame &frame, CommTrace &out);
  LogicalResult append(Operation *at, CommTrace &out, const CommTrace &more);
  std::optional<int64_t> evaluate(Value value, Frame &frame,
                                  unsigned depth = 0);
  /// Binds the values a region yields to `results`.
  void bindYield(Region &region, ValueRange results, Frame &frame);
  InFlightDiagnostic emitUnreplayable(Operation *op, const llvm::Twine &why);

  std::optional<int64_t> evaluateAxisIndex(AxisIndexOp op);

  CommTable &table;
  SymbolTableCollection &symbols;
  size_t maxEvents;
  std::optional<DeviceView> device;
  llvm::DenseMap<Operation *, bool> communicates;
  llvm::SmallVector<Operation *> callStack;
  std::map<CallKey, CallResult> calls;
};

/// The mesh a function communicates on: the mesh of the first
/// communication or `cleave.axis_index` op in it or in a function it calls;
/// null if there is none.
MeshOp findProgramMesh(func::FuncOp func, SymbolTableCollection &symbols);

/// The axes of `mesh` whose coordinates may decide the control flow of
/// `func` (or of a function it calls): the axes of every
/// `cleave.axis_index` whose value reaches a loop, a branch, a yield or a
/// call. Devices that differ only on other axes replay alike.
llvm::SmallVector<unsigned> findControlAxes(func::FuncOp func, MeshOp mesh,
                                            SymbolTableCollection &symbols);

/// The programs the devices of a mesh run for one entry. A device's program
/// is selected by its coordinates on `programAxes` (the pipeline's stage
/// axis, and the axes `cleave.axis_index` decides control flow on): one
/// trace for every device (SPMD without per-device control flow), else one
/// per combination of those coordinates.
struct MeshPrograms {
  MeshOp mesh;
  /// Mesh axis indices, the first one major.
  llvm::SmallVector<unsigned> programAxes;
  /// The traces, indexed row-major by a device's coordinates on
  /// `programAxes`.
  llvm::SmallVector<const CommTrace *> traces;
  /// The function each trace comes from (for diagnostics).
  llvm::SmallVector<func::FuncOp> funcs;
};

/// Options of the check.
struct CheckOptions {
  /// Simulate every device of the mesh instead of one device per class of
  /// interchangeable devices (for testing the reduction and benchmarking).
  bool exhaustive = false;
};

/// The most devices the check simulates, and programs it replays. Axes of
/// collectives collapse to one device whatever their size; the axes that
/// must be simulated whole (point-to-point communication, a pipeline's
/// stage axis, all of them when exhaustive) multiply to at most this, or
/// the check says so and stops, naming them. Memory and time grow linearly
/// in it (about 200 bytes per simulated device).
constexpr int64_t kMaxSimulatedDevices = int64_t(1) << 20;

/// `a * b`, or -1 if it exceeds kMaxSimulatedDevices (never overflows).
inline int64_t simulatedProduct(int64_t a, int64_t b) {
  if (a < 0 || b < 0 || (b != 0 && a > kMaxSimulatedDevices / b))
    return -1;
  return a * b;
}

/// What the check did.
struct CheckStats {
  int64_t meshDevices = 0;          ///< Devices of the mesh.
  int64_t simulatedDevices = 0;     ///< Devices the simulation ran.
  int64_t calls = 0;                ///< Communication calls simulated.
  int64_t programs = 0;             ///< Traces replayed (verifyEntry).
  double replayMs = 0, checkMs = 0; ///< Wall times (verifyEntry).
};

/// Runs every device on its program under blocking semantics and proves
/// that all calls match and complete; otherwise emits one error (with notes
/// at the other operations involved) and fails.
LogicalResult checkPrograms(const MeshPrograms &programs,
                            const CommTable &table,
                            const CheckOptions &options = {},
                            CheckStats *stats = nullptr);

/// Verifies one entry of a module: `funcs` holds one function per
/// coordinate of `stageAxis` (a pipeline) or, without a stage axis, the one
/// function every device runs. Finds the mesh, the axes that select a
/// device's program, replays one trace per program and checks them; errors
/// about the entry as a whole go to `loc`.
LogicalResult verifyEntry(llvm::ArrayRef<func::FuncOp> funcs,
                          std::optional<llvm::StringRef> stageAxis,
                          Location loc, TraceReplayer &replayer,
                          const CommTable &table,
                          SymbolTableCollection &symbols,
                          const CheckOptions &options = {},
                          CheckStats *stats = nullptr);

} // namespace mlir::cleave

#endif // CLEAVE_TRANSFORMS_COLLECTIVETRACE_H
