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

private:
  /// The layers of each stage: `layers-per-stage`, checked, or an even
  /// split whose first (layers % stages) stages get one more, as the cost
  /// model assumes. Emits an error on `func` and returns nullopt when the
  /// split cannot hold `layers`.
  std::optional<SmallVector<int64_t>> layerCounts(func::FuncOp func,
                                                  int64_t layers);
};

std::optional<SmallVector<int64_t>>
CleavePipelineStagesPass::layerCounts(func::FuncOp func, int64_t layers) {
  SmallVector<int64_t> counts(layersPerStage.begin(), layersPerStage.end());
  if (counts.empty()) {
    if (layers < stages) {
      func.emitError() << "cleave-pipeline-stages: " << stages.getValue()
                       << " stages need at least as many layers; the "
                          "parameters name "
                       << layers << " (numbered components like 'h.3.')";
      return std::nullopt;
    }
    for (int64_t s = 0; s < stages; ++s)
      counts.push_back(layers / stages + (s < layers % stages ? 1 : 0));
    return counts;
  }
  if (int64_t(counts.size()) != stages) {
    func.emitError() << "cleave-pipeline-stages: layers-per-stage has "
                     << counts.size() << " entries for " << stages.getValue()
                     << " stages";
    return std::nullopt;
  }
  int64_t sum = 0;
  for (auto [s, n] : llvm::enumerate(counts)) {
    bool end = s == 0 || s + 1 == counts.size();
    if (n < (end && stages > 1 ? 0 : 1)) {
      func.emitError() << "cleave-pipeline-stages: layers-per-stage gives "
                       << "stage " << s << " " << n
                       << " layers; every stage but the first and the last "
                          "needs at least one";
      return std::nullopt;
    }
    sum += n;
  }
  if (sum != layers || sum == 0) {
    func.emitError() << "cleave-pipeline-stages: layers-per-stage holds " << sum
                     << " layers, the parameters name " << layers
                     << " (numbered components like 'h.3.')";
    return std::nullopt;
  }
  return counts;
}

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
  std::map<int64_t, int64_t> layerStage;
  for (BlockArgument arg : func.getArguments())
    if (auto name = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), CleaveDialect::kParamAttrName))
      if (std::optional<int64_t> layer = layerOfParamName(name.getValue()))
        layerStage[*layer] = 0;
  std::optional<SmallVector<int64_t>> counts =
      layerCounts(func, layerStage.size());
  if (!counts)
    return signalPassFailure();
  // Layers in order of their numbers, `counts[s]` to stage s.
  auto layer = layerStage.begin();
  for (auto [stage, count] : llvm::enumerate(*counts))
    for (int64_t i = 0; i < count; ++i, ++layer)
      layer->second = int64_t(stage);
  // An op runs on the latest stage among its layer parameters and operands:
  // the embedding on the first stage, the head on the last.
  DenseMap<Value, int64_t> stageOf;
  for (BlockArgument arg : func.getArguments())
    if (auto name = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), CleaveDialect::kParamAttrName))
      if (std::optional<int64_t> layer = layerOfParamName(name.getValue()))
        stageOf[arg] = layerStage[*layer];
  // An empty last stage takes what follows the last use of a parameter of
  // the last layer: the final norm, the head and the loss.
  Operation *lastLayerUse = nullptr;
  if (stages > 1 && counts->back() == 0)
    for (Operation &op : body.without_terminator())
      for (Value v : op.getOperands())
        if (stageOf.count(v) && stageOf.lookup(v) == stages - 2)
          lastLayerUse = &op;
  int64_t floor = 0;
  Builder b(module.getContext());
  for (Operation &op : body.without_terminator()) {
    int64_t stage = floor;
    for (Value v : op.getOperands())
      stage = std::max(stage, stageOf.lookup(v));
    if (&op == lastLayerUse)
      floor = stages - 1;
    for (Value r : op.getResults())
      stageOf[r] = stage;
    op.setAttr(CleaveDialect::kStageAttrName, b.getI64IntegerAttr(stage));
  }
}

} // namespace
