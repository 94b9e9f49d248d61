//===- LowerToLinalg.cpp - cleave compute ops to linalg -------------------===//
//
// Implements -cleave-lower-to-linalg. See Passes.td for the contract. The
// patterns live in the *Lowering.cpp files, one per family of ops.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "cleave/Conversion/Passes.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Transforms/DialectConversion.h"

#define DEBUG_TYPE "cleave-lower-to-linalg"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVELOWERTOLINALGPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct CleaveLowerToLinalgPass final
    : cleave::impl::CleaveLowerToLinalgPassBase<CleaveLowerToLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    populateElementwiseLoweringPatterns(patterns);
    populateShapeLoweringPatterns(patterns);
    populateNormLoweringPatterns(patterns);
    populateNNLoweringPatterns(patterns);
    populateMoELoweringPatterns(patterns);
    populateAttentionLoweringPatterns(patterns, attentionTile);

    ConversionTarget target(*ctx);
    target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect,
                           math::MathDialect, scf::SCFDialect,
                           tensor::TensorDialect, func::FuncDialect>();
    target.addLegalOp<ModuleOp>();
    // Per-device communication and meshes are lowered by later passes.
    target.addLegalOp<MeshOp, AllReduceOp, AllGatherOp, ReduceScatterOp,
                      AllToAllOp, CollectivePermuteOp, SendOp, RecvOp>();
    // Recomputation stays separate from the forward ops through the CSE
    // that follows; cleave-prepare-bufferization removes the barriers.
    target.addLegalOp<OptimizationBarrierOp>();
    target.addIllegalDialect<CleaveDialect>();
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
