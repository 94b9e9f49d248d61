//===- Pipeline.cpp - Pipeline stages and schedules -----------------------===//
//
// Implements -cleave-pipeline. See Passes.td for the contract and
// docs/pipeline.md for the design; the work is in PipelineAnalysis.cpp,
// PipelineSchedule.cpp and PipelineBuild.cpp.
//
//===----------------------------------------------------------------------===//

#include "Pipeline.h"
#include "cleave/CostModel/Plan.h"
#include "cleave/Sharding/FactorAssignment.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#define DEBUG_TYPE "cleave-pipeline"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEPIPELINEPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::pipeline;

FailureOr<Plan> pipeline::readPlan(ModuleOp module, MeshOp mesh,
                                   StringRef ppAxis, StringRef mbAxis) {
  Plan plan;
  plan.ppAxis = ppAxis.str();
  plan.mbAxis = mbAxis.str();
  if (!mesh.getAxisIndex(ppAxis))
    return mesh.emitError()
           << "cleave-pipeline: the mesh has no pipeline axis '" << ppAxis
           << "'";
  plan.pp = mesh.getAxisSize(ppAxis);
  plan.hasMbAxis = mesh.getAxisIndex(mbAxis).has_value();
  plan.numMicroBatches = plan.hasMbAxis ? mesh.getAxisSize(mbAxis) : 1;
  auto dict =
      module->getAttrOfType<DictionaryAttr>(CleaveDialect::kPlanAttrName);
  auto integer = [&](StringRef key, int64_t fallback) {
    auto value = dict ? dict.getAs<IntegerAttr>(key) : IntegerAttr();
    return value ? value.getInt() : fallback;
  };
  int64_t m = integer("num_micro_batches", plan.numMicroBatches);
  if (m != plan.numMicroBatches)
    return module.emitError()
           << "cleave-pipeline: cleave.plan has num_micro_batches = " << m
           << " but the mesh's micro-batch axis '" << mbAxis << "' has "
           << plan.numMicroBatches << (plan.hasMbAxis ? "" : " (none)");
  plan.virtualStages = integer("virtual_stages", 1);
  auto schedule = dict ? dict.getAs<StringAttr>("schedule") : StringAttr();
  std::string name = schedule ? schedule.str() : "1f1b";
  std::optional<cost::Schedule> parsed = cost::parseSchedule(name);
  if (!parsed)
    return module.emitError()
           << "cleave-pipeline: unknown schedule '" << name << "'";
  plan.schedule = *parsed;
  if (plan.virtualStages > 1 &&
      plan.schedule != cost::Schedule::Interleaved1F1B)
    return module.emitError()
           << "cleave-pipeline: virtual_stages = " << plan.virtualStages
           << " needs the interleaved schedule, not " << name;
  if (plan.schedule == cost::Schedule::Interleaved1F1B &&
      plan.numMicroBatches % plan.pp != 0)
    return module.emitError()
           << "cleave-pipeline: the interleaved schedule needs the number of "
              "micro-batches ("
           << plan.numMicroBatches << ") to be a multiple of pp (" << plan.pp
           << ")";
  return plan;
}

namespace {

struct CleavePipelinePass final
    : mlir::cleave::impl::CleavePipelinePassBase<CleavePipelinePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::string> names(entries.begin(), entries.end());
    if (names.empty())
      names.push_back("train_step");
    if (module->hasAttr(CleaveDialect::kPipelineAttrName)) {
      module.emitError() << "cleave-pipeline: the module is already pipelined";
      return signalPassFailure();
    }
    FailureOr<MeshOp> mesh = getModuleMesh(module);
    if (failed(mesh))
      return signalPassFailure();
    FailureOr<Plan> plan = readPlan(module, *mesh, axis, microBatchAxis);
    if (failed(plan))
      return signalPassFailure();
    SmallVector<std::pair<StringRef, SmallVector<Attribute>>> built;
    for (const std::string &name : names) {
      auto func = module.lookupSymbol<func::FuncOp>(name);
      if (!func || func.isExternal()) {
        module.emitError() << "cleave-pipeline: no function @" << name
                           << " with a body";
        return signalPassFailure();
      }
      FailureOr<Analysis> analysis = analyze(func, *mesh, *plan);
      if (failed(analysis))
        return signalPassFailure();
      PassGroups groups = collectPassGroups(*analysis);
      auto events = orderEvents(*analysis, groups);
      if (failed(events))
        return signalPassFailure();
      FailureOr<SmallVector<Attribute>> stages =
          buildPipeline(*analysis, groups, *events);
      if (failed(stages))
        return signalPassFailure();
      built.emplace_back(name, std::move(*stages));
    }
    if (failed(finishPipeline(module, *mesh, *plan, built)))
      return signalPassFailure();
  }
};

} // namespace
