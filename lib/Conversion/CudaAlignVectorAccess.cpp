//===- CudaAlignVectorAccess.cpp - Aligned vector loads in kernels --------===//
//
// Implements -cleave-cuda-align-vector-access. See Passes.td for the
// contract: every vector access in a Cleave kernel was emitted by
// -cleave-cuda-map-to-gpu only where its address is a multiple of the
// vector's size.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#define DEBUG_TYPE "cleave-cuda-align-vector-access"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVECUDAALIGNVECTORACCESSPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// The size in bytes of a vector of ints or floats, or 0.
int64_t vectorBytes(Type type) {
  auto vector = dyn_cast<VectorType>(type);
  if (!vector || vector.isScalable() || !vector.getElementType().isIntOrFloat())
    return 0;
  return vector.getNumElements() *
         vector.getElementType().getIntOrFloatBitWidth() / 8;
}

struct CleaveCudaAlignVectorAccessPass final
    : cleave::impl::CleaveCudaAlignVectorAccessPassBase<
          CleaveCudaAlignVectorAccessPass> {
  using Base::Base;

  void runOnOperation() override {
    Builder b(&getContext());
    getOperation().walk([&](gpu::GPUModuleOp kernels) {
      kernels.walk([&](Operation *op) {
        int64_t bytes = 0;
        if (auto load = dyn_cast<LLVM::LoadOp>(op))
          bytes = vectorBytes(load.getType());
        else if (auto store = dyn_cast<LLVM::StoreOp>(op))
          bytes = vectorBytes(store.getValue().getType());
        // Only power-of-two sizes up to 16 bytes are single PTX accesses.
        if (bytes < 4 || bytes > 16 || !llvm::isPowerOf2_64(bytes))
          return;
        op->setAttr("alignment", b.getI64IntegerAttr(bytes));
      });
    });
  }
};

} // namespace
