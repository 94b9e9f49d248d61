//===- PropagateSharding.cpp - Complete partial sharding annotations ------===//
//
// Implements -cleave-propagate-sharding. See Passes.td for the contract and
// the conflict policy; the per-op work is in lib/Sharding.
//
//===----------------------------------------------------------------------===//

#include "cleave/Sharding/FactorAssignment.h"
#include "cleave/Sharding/Propagation.h"
#include "cleave/Transforms/Passes.h"

#define DEBUG_TYPE "cleave-propagate-sharding"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEPROPAGATESHARDINGPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct CleavePropagateShardingPass final
    : cleave::impl::CleavePropagateShardingPassBase<
          CleavePropagateShardingPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<MeshOp> mesh = getModuleMesh(module);
    if (failed(mesh))
      return signalPassFailure();
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (!func.getBody().hasOneBlock()) {
        func.emitError() << "sharding propagation needs a function with one "
                            "block";
        return signalPassFailure();
      }
      if (failed(propagateAndRecord(func, *mesh)))
        return signalPassFailure();
    }
  }
};

} // namespace
