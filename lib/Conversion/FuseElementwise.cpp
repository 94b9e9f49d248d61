//===- FuseElementwise.cpp - Elementwise fusion that keeps GEMMs named ----===//
//
// Implements -cleave-fuse-elementwise. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "cleave-fuse-elementwise"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEFUSEELEMENTWISEPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct CleaveFuseElementwisePass final
    : cleave::impl::CleaveFuseElementwisePassBase<CleaveFuseElementwisePass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // Fuse generic into generic, and only producers with a single user:
    // fusing a producer that has other users recomputes it in each of them
    // (the residual stream of a transformer would be recomputed from the
    // embedding in every layer). A producer that reads its own output (an
    // in-place update of a loop-carried tensor) stays: the fused op would
    // lose the value it reads.
    linalg::ControlFusionFn onlyGenerics = [](OpOperand *operand) {
      auto producer = operand->get().getDefiningOp<linalg::GenericOp>();
      Operation *consumer = operand->getOwner();
      return producer && isa<linalg::GenericOp>(consumer) &&
             llvm::all_of(producer->getResults(),
                          [](Value r) { return r.hasOneUse(); }) &&
             llvm::none_of(producer.getDpsInitsMutable(), [&](OpOperand &o) {
               return producer.payloadUsesValueFromOperand(&o);
             });
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, onlyGenerics);
    if (failed(
            applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
