//===- VerifyCollectives.cpp - Prove that no rank can deadlock ------------===//
//
// Implements -cleave-verify-collectives. See Passes.td for the contract and
// docs/verify-collectives.md for the model. This file finds the programs of
// a module (the pipeline's stage functions, every other public function as
// an SPMD program), replays them (CollectiveTrace.cpp) and checks them
// (CollectiveCheck.cpp).
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/CollectiveTrace.h"
#include "cleave/Transforms/Passes.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Debug.h"

#include <chrono>

#define DEBUG_TYPE "cleave-verify-collectives"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEVERIFYCOLLECTIVESPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// The module attribute naming the stage functions (docs/plans.md).
constexpr llvm::StringLiteral kPipelineAttr = CleaveDialect::kPipelineAttrName;

/// The stage functions of one pipelined step of `cleave.pipeline = {axis =
/// "pp", stages = [...], entries = {...}}`.
struct Pipeline {
  std::string axis;
  SmallVector<func::FuncOp> stages;
};

/// Every pipelined step: the training step's `stages`, then each of
/// `entries`.
FailureOr<SmallVector<Pipeline>>
parsePipelines(ModuleOp module, SymbolTableCollection &symbols) {
  SmallVector<Pipeline> pipelines;
  Attribute attr = module->getAttr(kPipelineAttr);
  if (!attr)
    return pipelines;
  auto dict = dyn_cast<DictionaryAttr>(attr);
  auto axis = dict ? dict.getAs<StringAttr>("axis") : StringAttr();
  auto stages = dict ? dict.getAs<ArrayAttr>("stages") : ArrayAttr();
  auto entries = dict ? dict.getAs<DictionaryAttr>("entries") : nullptr;
  if (!axis || !stages || stages.empty()) {
    module.emitError() << kPipelineAttr
                       << " must be {axis = \"<mesh axis>\", stages = "
                          "[@stage0, ...]}, got "
                       << attr;
    return failure();
  }
  SmallVector<std::pair<StringRef, ArrayAttr>> lists = {{"stages", stages}};
  if (entries)
    for (NamedAttribute entry : entries)
      lists.emplace_back(entry.getName(),
                         dyn_cast<ArrayAttr>(entry.getValue()));
  for (auto [what, list] : lists) {
    Pipeline pipeline{axis.getValue().str(), {}};
    if (!list) {
      module.emitError() << kPipelineAttr << ": entries." << what
                         << " is not a list of stage functions";
      return failure();
    }
    for (auto [k, stage] : llvm::enumerate(list)) {
      auto ref = dyn_cast<FlatSymbolRefAttr>(stage);
      auto func =
          ref ? symbols.lookupNearestSymbolFrom<func::FuncOp>(module, ref)
              : func::FuncOp();
      if (!func || func.isExternal()) {
        module.emitError() << kPipelineAttr << ": stage #" << k << " (" << stage
                           << ") is not a function with a body in this module";
        return failure();
      }
      pipeline.stages.push_back(func);
    }
    pipelines.push_back(std::move(pipeline));
  }
  return pipelines;
}

/// Above this many programs per entry (combinations of the coordinates that
/// decide control flow), the check gives up with an error.
constexpr int64_t kMaxPrograms = 1 << 14;

/// The axes that select a device's program: the stage axis first, then the
/// axes cleave.axis_index decides control flow on (their number goes to
/// `numControl`).
FailureOr<SmallVector<unsigned>> findProgramAxes(ArrayRef<func::FuncOp> funcs,
                                                 std::optional<StringRef> stage,
                                                 Location loc, MeshOp mesh,
                                                 SymbolTableCollection &symbols,
                                                 size_t &numControl) {
  SmallVector<unsigned> axes;
  if (stage) {
    std::optional<unsigned> axis = mesh.getAxisIndex(*stage);
    if (!axis)
      return emitError(loc)
             << kPipelineAttr << ": '" << *stage << "' is not an axis of mesh @"
             << mesh.getSymName();
    if (mesh.getShape()[*axis] != int64_t(funcs.size()))
      return emitError(loc)
             << kPipelineAttr << " lists " << funcs.size()
             << " stage functions, but axis '" << *stage << "' of mesh @"
             << mesh.getSymName() << " has size " << mesh.getShape()[*axis];
    axes.push_back(*axis);
  }
  SmallVector<unsigned> control;
  for (func::FuncOp func : funcs)
    for (unsigned a : findControlAxes(func, mesh, symbols))
      if (!llvm::is_contained(axes, a) && !llvm::is_contained(control, a))
        control.push_back(a);
  llvm::sort(control);
  int64_t programs = int64_t(funcs.size());
  for (unsigned a : control)
    programs *= mesh.getShape()[a];
  if (programs > kMaxPrograms)
    return emitError(loc) << "cleave-verify-collectives: cleave.axis_index "
                             "decides control flow on "
                          << control.size()
                          << " mesh axes, which gives more than "
                          << kMaxPrograms << " distinct programs to replay";
  numControl = control.size();
  axes.append(control);
  return axes;
}

/// The device view of program `k` (row-major over `axes`).
DeviceView programView(MeshOp mesh, ArrayRef<unsigned> axes, int64_t k) {
  DeviceView view{mesh, SmallVector<int64_t>(mesh.getRank(), 0),
                  SmallVector<bool>(mesh.getRank(), false)};
  for (size_t i = axes.size(); i-- > 0;) {
    view.coords[axes[i]] = k % mesh.getShape()[axes[i]];
    view.known[axes[i]] = true;
    k /= mesh.getShape()[axes[i]];
  }
  return view;
}

double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

} // namespace

LogicalResult mlir::cleave::verifyEntry(ArrayRef<func::FuncOp> funcs,
                                        std::optional<StringRef> stageAxis,
                                        Location loc, TraceReplayer &replayer,
                                        const CommTable &table,
                                        SymbolTableCollection &symbols,
                                        const CheckOptions &options,
                                        CheckStats *stats) {
  auto start = std::chrono::steady_clock::now();
  MeshOp mesh;
  for (func::FuncOp func : funcs)
    if (!mesh)
      mesh = findProgramMesh(func, symbols);
  if (!mesh)
    return success(); // Nothing communicates.
  size_t numControl = 0;
  FailureOr<SmallVector<unsigned>> axes =
      findProgramAxes(funcs, stageAxis, loc, mesh, symbols, numControl);
  if (failed(axes))
    return failure();
  int64_t count = 1;
  for (unsigned a : *axes)
    count = simulatedProduct(count, mesh.getShape()[a]);
  if (count < 0)
    return mesh.emitError()
           << "cleave-verify-collectives: more than " << kMaxSimulatedDevices
           << " distinct programs to replay (one per coordinate of the axes "
              "the program reads its position on, or of the pipeline axis)";
  std::vector<CommTrace> traces;
  MeshPrograms programs{mesh, *axes, {}, {}};
  for (int64_t k = 0; k < count; ++k) {
    DeviceView view = programView(mesh, *axes, k);
    func::FuncOp func =
        stageAxis ? funcs[view.coords[axes->front()]] : funcs.front();
    replayer.setDevice(numControl ? std::optional<DeviceView>(view)
                                  : std::nullopt);
    FailureOr<CommTrace> trace = replayer.replay(func);
    if (failed(trace))
      return failure();
    traces.push_back(std::move(*trace));
    programs.funcs.push_back(func);
  }
  for (const CommTrace &trace : traces)
    programs.traces.push_back(&trace);
  double replayMs = millisecondsSince(start);
  start = std::chrono::steady_clock::now();
  CheckStats local;
  CheckStats &s = stats ? *stats : local;
  LogicalResult result = checkPrograms(programs, table, options, &s);
  s.programs = count;
  s.replayMs = replayMs;
  s.checkMs = millisecondsSince(start);
  LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": @" << funcs.front().getName() << ": "
                          << s.programs << " programs, " << s.calls
                          << " calls on " << s.simulatedDevices
                          << " simulated of " << s.meshDevices << " devices\n");
  return result;
}

namespace {

struct CleaveVerifyCollectivesPass final
    : mlir::cleave::impl::CleaveVerifyCollectivesPassBase<
          CleaveVerifyCollectivesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    markAllAnalysesPreserved();
    SymbolTableCollection symbols;
    CommTable table(symbols);
    TraceReplayer replayer(table, symbols);
    CheckOptions options;
    options.exhaustive = exhaustive;
    bool ok = true;

    FailureOr<SmallVector<Pipeline>> pipelines =
        parsePipelines(module, symbols);
    if (failed(pipelines))
      return signalPassFailure();
    llvm::SmallPtrSet<Operation *, 8> stageFuncs;
    for (const Pipeline &pipeline : *pipelines) {
      for (func::FuncOp stage : pipeline.stages)
        stageFuncs.insert(stage);
      ok &= succeeded(verifyEntry(pipeline.stages, StringRef(pipeline.axis),
                                  module.getLoc(), replayer, table, symbols,
                                  options));
    }
    // Every other function the host can call runs on every device.
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || func.isPrivate() || stageFuncs.contains(func))
        continue;
      ok &= succeeded(verifyEntry({func}, std::nullopt, func.getLoc(), replayer,
                                  table, symbols, options));
    }
    if (!ok)
      signalPassFailure();
  }
};

} // namespace
