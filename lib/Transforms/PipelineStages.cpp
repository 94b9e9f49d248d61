//===- PipelineStages.cpp - Pipeline stages by layer ----------------------===//
//
// Implements -cleave-pipeline-stages. See Passes.td for the contract. The
// layer of an op is read from the names of the parameters it uses
// (LayerNames.h).
//
//===----------------------------------------------------------------------===//

#include "LayerNames.h"
#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>

#define DEBUG_TYPE "cleave-pipeline-stages"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEPIPELINESTAGESPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct CleavePipelineStagesPass final
    : cleave::impl::CleavePipelineStagesPassBase<CleavePipelineStagesPass> {
  using Base::Base;

  void runOnOperation() override;
};

void CleavePipelineStagesPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto func = module.lookupSymbol<func::FuncOp>(entry);
  if (!func || func.isExternal() || !func.getBody().hasOneBlock()) {
    module.emitError() << "cleave-pipeline-stages: no function @"
                       << entry.getValue() << " with one block";
    return signalPassFailure();
  }
  if (stages < 1) {
    module.emitError() << "cleave-pipeline-stages: stages must be >= 1";
    return signalPassFailure();
  }
  Block &body = func.getBody().front();
  for (Operation &op : body.without_terminator())
    if (op.hasAttr(CleaveDialect::kStageAttrName)) {
      op.emitError() << "cleave-pipeline-stages: @" << entry.getValue()
                     << " already has stage annotations";
      return signalPassFailure();
    }
  // Layers in order of their numbers, split evenly: the first
  // (layers % stages) stages get one more, as the cost model assumes.
  std::map<int64_t, int64_t> layerStage;
  for (BlockArgument arg : func.getArguments())
    if (auto name = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), CleaveDialect::kParamAttrName))
      if (std::optional<int64_t> layer = layerOfParamName(name.getValue()))
        layerStage[*layer] = 0;
  int64_t layers = layerStage.size();
  if (layers < stages) {
    func.emitError() << "cleave-pipeline-stages: " << stages.getValue()
                     << " stages need at least as many layers; the "
                        "parameters name "
                     << layers << " (numbered components like 'h.3.')";
    return signalPassFailure();
  }
  int64_t index = 0;
  for (auto &[layer, stage] : layerStage) {
    int64_t base = layers / stages, extra = layers % stages;
    // Stages < extra hold base + 1 layers.
    int64_t boundary = extra * (base + 1);
    stage = index < boundary ? index / (base + 1)
                             : extra + (index - boundary) / base;
    ++index;
  }
  // An op runs on the latest stage among its layer parameters and operands:
  // the embedding on the first stage, the head on the last.
  DenseMap<Value, int64_t> stageOf;
  for (BlockArgument arg : func.getArguments())
    if (auto name = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), CleaveDialect::kParamAttrName))
      if (std::optional<int64_t> layer = layerOfParamName(name.getValue()))
        stageOf[arg] = layerStage[*layer];
  Builder b(module.getContext());
  for (Operation &op : body.without_terminator()) {
    int64_t stage = 0;
    for (Value v : op.getOperands())
      stage = std::max(stage, stageOf.lookup(v));
    for (Value r : op.getResults())
      stageOf[r] = stage;
    op.setAttr(CleaveDialect::kStageAttrName, b.getI64IntegerAttr(stage));
  }
}

} // namespace
