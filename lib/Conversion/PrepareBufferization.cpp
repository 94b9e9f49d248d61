//===- PrepareBufferization.cpp - Function boundaries for bufferization ---===//
//
// Implements -cleave-prepare-bufferization. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SmallPtrSet.h"

#define DEBUG_TYPE "cleave-prepare-bufferization"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEPREPAREBUFFERIZATIONPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct CleavePrepareBufferizationPass final
    : cleave::impl::CleavePrepareBufferizationPassBase<
          CleavePrepareBufferizationPass> {
  using Base::Base;

  void runOnOperation() override {
    // Barriers kept recomputed ops apart from the forward ops through the
    // tensor-level CSE; none runs from here on.
    getOperation().walk([](OptimizationBarrierOp barrier) {
      barrier.getResult().replaceAllUsesWith(barrier.getInput());
      barrier.erase();
    });
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || func.isPrivate())
        continue;
      OpBuilder b(func.getContext());
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        if (isa<TensorType>(func.getArgumentTypes()[i]))
          func.setArgAttr(
              i, bufferization::BufferizationDialect::kWritableAttrName,
              b.getBoolAttr(false));
      func.walk([&](func::ReturnOp ret) { copyDuplicates(ret); });
      func.walk([&](linalg::FillOp fill) { unshareFill(fill); });
    }
  }

  /// CSE merges identical fills (the zeros every GEMM accumulates into);
  /// one-shot bufferization then fills one buffer and copies it for every
  /// user that writes into it. A fill per user is a memset instead of a
  /// copy, and lets the GEMM lowering drop it entirely (beta = 0).
  void unshareFill(linalg::FillOp fill) {
    if (!fill.hasPureTensorSemantics() || fill->getResult(0).hasOneUse())
      return;
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : fill->getResult(0).getUses())
      uses.push_back(&use);
    for (OpOperand *use : llvm::drop_begin(uses)) {
      OpBuilder b(use->getOwner());
      IRMapping mapping;
      if (auto init = fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>())
        mapping.map(init.getResult(), b.clone(*init)->getResult(0));
      use->set(b.clone(*fill, mapping)->getResult(0));
    }
  }

  void copyDuplicates(func::ReturnOp ret) {
    OpBuilder b(ret);
    llvm::SmallPtrSet<Value, 16> seen;
    for (OpOperand &operand : ret->getOpOperands()) {
      Value v = operand.get();
      auto type = dyn_cast<RankedTensorType>(v.getType());
      // Function arguments are copied too: out-parameter promotion in LLVM
      // 19 crashes on a returned argument when hoisting static allocations.
      bool fresh = seen.insert(v).second && !isa<BlockArgument>(v);
      if (!type || fresh)
        continue;
      Value init = b.create<tensor::EmptyOp>(ret.getLoc(), type.getShape(),
                                             type.getElementType());
      operand.set(b.create<linalg::CopyOp>(ret.getLoc(), v, init).getResult(0));
    }
  }
};

} // namespace
