//===- ApproximateMath.cpp - Inline polynomial math for f32 ---------------===//
//
// Implements -cleave-approximate-math. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "cleave-approximate-math"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEAPPROXIMATEMATHPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct CleaveApproximateMathPass final
    : cleave::impl::CleaveApproximateMathPassBase<CleaveApproximateMathPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    MathPolynomialApproximationOptions options;
    options.enableAvx2 = false; // portable across hosts (AOT objects)
    populateMathPolynomialApproximationPatterns(patterns, options);
    if (failed(
            applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
