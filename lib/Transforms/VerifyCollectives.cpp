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

/// The stage functions of `cleave.pipeline = {axis = "pp", stages = [...]}`.
struct Pipeline {
  std::string axis;
  SmallVector<func::FuncOp> stages;
};

FailureOr<std::optional<Pipeline>>
parsePipeline(ModuleOp module, SymbolTableCollection &symbols) {
  Attribute attr = module->getAttr(kPipelineAttr);
  if (!attr)
    return std::optional<Pipeline>();
  auto dict = dyn_cast<DictionaryAttr>(attr);
  auto axis = dict ? dict.getAs<StringAttr>("axis") : StringAttr();
  auto stages = dict ? dict.getAs<ArrayAttr>("stages") : ArrayAttr();
  if (!axis || !stages || stages.empty()) {
    module.emitError() << kPipelineAttr
                       << " must be {axis = \"<mesh axis>\", stages = "
                          "[@stage0, ...]}, got "
                       << attr;
    return failure();
  }
  Pipeline pipeline{axis.getValue().str(), {}};
  for (auto [k, stage] : llvm::enumerate(stages)) {
    auto ref = dyn_cast<FlatSymbolRefAttr>(stage);
    auto func = ref ? symbols.lookupNearestSymbolFrom<func::FuncOp>(module, ref)
                    : func::FuncOp();
    if (!func || func.isExternal()) {
      module.emitError() << kPipelineAttr << ": stage #" << k << " (" << stage
                         << ") is not a function with a body in this module";
      return failure();
    }
    pipeline.stages.push_back(func);
  }
  return std::optional<Pipeline>(std::move(pipeline));
}

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

    FailureOr<std::optional<Pipeline>> pipeline =
        parsePipeline(module, symbols);
    if (failed(pipeline))
      return signalPassFailure();
    llvm::SmallPtrSet<Operation *, 8> stageFuncs;
    if (*pipeline) {
      for (func::FuncOp stage : (*pipeline)->stages)
        stageFuncs.insert(stage);
      ok &= succeeded(
          checkPipeline(**pipeline, module, replayer, table, options));
    }
    // Every other function the host can call runs on every device.
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || func.isPrivate() || stageFuncs.contains(func))
        continue;
      FailureOr<CommTrace> trace = replayer.replay(func);
      if (failed(trace)) {
        ok = false;
        continue;
      }
      MeshPrograms programs{{&*trace}, {func}, std::nullopt, func.getLoc()};
      ok &= succeeded(check(programs, table, options, func.getName()));
    }
    if (!ok)
      signalPassFailure();
  }

  LogicalResult checkPipeline(const Pipeline &pipeline, ModuleOp module,
                              TraceReplayer &replayer, CommTable &table,
                              const CheckOptions &options) {
    std::vector<CommTrace> traces;
    traces.reserve(pipeline.stages.size());
    for (func::FuncOp stage : pipeline.stages) {
      FailureOr<CommTrace> trace = replayer.replay(stage);
      if (failed(trace))
        return failure();
      traces.push_back(std::move(*trace));
    }
    MeshPrograms programs{{}, {}, pipeline.axis, module.getLoc()};
    for (auto [trace, stage] : llvm::zip(traces, pipeline.stages)) {
      programs.traces.push_back(&trace);
      programs.funcs.push_back(stage);
    }
    return check(programs, table, options, "the pipeline");
  }

  LogicalResult check(const MeshPrograms &programs, const CommTable &table,
                      const CheckOptions &options, StringRef what) {
    CheckStats stats;
    LogicalResult result = checkPrograms(programs, table, options, &stats);
    LLVM_DEBUG(llvm::dbgs()
               << DEBUG_TYPE ": " << what << ": " << stats.calls << " calls on "
               << stats.simulatedDevices << " simulated of "
               << stats.meshDevices << " devices\n");
    return result;
  }
};

} // namespace
