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
    // Function boundaries, private ones too, have identity layouts.
    getOperation().walk([](Operation *op) {
      if (isa<func::CallOp, func::ReturnOp>(op))
        copyStridedViews(op);
    });
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (!func.isPrivate()) {
        OpBuilder b(func.getContext());
        for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
          if (isa<TensorType>(func.getArgumentTypes()[i]))
            func.setArgAttr(
                i, bufferization::BufferizationDialect::kWritableAttrName,
                b.getBoolAttr(false));
        func.walk([&](func::ReturnOp ret) { copyDuplicates(ret); });
      }
      // Private functions too: a pipeline's passes (@train_step_b0) hold
      // the layers' compute, so their shared fills and empties are the
      // ones that matter.
      func.walk([&](linalg::FillOp fill) { unshareFill(fill); });
      if (!unshareEmpties)
        continue;
      SmallVector<tensor::EmptyOp> empties;
      func.walk([&](tensor::EmptyOp empty) { empties.push_back(empty); });
      for (tensor::EmptyOp empty : empties)
        unshareEmpty(empty);
    }
  }

  /// CSE merges identical fills (the zeros every GEMM accumulates into);
  /// one-shot bufferization then fills one buffer and copies it for every
  /// user that writes into it. A fill per user, right before it, is a memset
  /// instead of a copy, lets the GEMM lowering drop it entirely (beta = 0),
  /// and allocates no buffer before the user needs it (the merged fill sits
  /// where its first occurrence was, in the forward pass say).
  void unshareFill(linalg::FillOp fill) {
    if (!fill.hasPureTensorSemantics() || fill->getResult(0).hasOneUse())
      return;
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : fill->getResult(0).getUses())
      uses.push_back(&use);
    for (OpOperand *use : uses) {
      OpBuilder b(use->getOwner());
      IRMapping mapping;
      if (auto init = fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>())
        mapping.map(init.getResult(), b.clone(*init)->getResult(0));
      use->set(b.clone(*fill, mapping)->getResult(0));
    }
    auto init = fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>();
    fill.erase();
    if (init && init->use_empty())
      init.erase();
  }

  /// CSE merges the tensor.empty ops of one shape all over a function, and
  /// one-shot bufferization gives the merged one a single buffer, which
  /// each user writes in place once the previous user's result is dead: one
  /// buffer alive from the first user to the last (from a layer's forward
  /// pass to its backward pass), however short each value lives. An empty
  /// per user, right before it, is a buffer per value, freed after its last
  /// use (cleave-early-dealloc). Users inside one op's regions (a loop's
  /// tiles) keep sharing one empty, put right before that op.
  static void unshareEmpty(tensor::EmptyOp empty) {
    Block *block = empty->getBlock();
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : empty->getUses())
      uses.push_back(&use);
    if (uses.size() < 2)
      return;
    DenseMap<Operation *, Value> perAncestor;
    for (OpOperand *use : uses) {
      Operation *ancestor = block->findAncestorOpInBlock(*use->getOwner());
      if (!ancestor)
        continue;
      Value &copy = perAncestor[ancestor];
      if (!copy || ancestor == use->getOwner()) {
        OpBuilder b(ancestor);
        copy = b.clone(*empty)->getResult(0);
      }
      use->set(copy);
    }
    if (empty->use_empty())
      empty.erase();
  }

  /// Whether `v` bufferizes to a view whose layout is not the identity: a
  /// slice (through reshapes) other than a leading block of whole rows. A
  /// function boundary has identity layouts, and memref.cast cannot drop a
  /// static offset, so such a value needs a copy there (the bucketed
  /// collectives' members are slices of one buffer, passed to stage calls).
  static bool isStridedView(Value v) {
    while (Operation *def = v.getDefiningOp()) {
      if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp, tensor::CastOp>(
              def)) {
        v = def->getOperand(0);
        continue;
      }
      auto slice = dyn_cast<tensor::ExtractSliceOp>(def);
      if (!slice)
        return false;
      RankedTensorType source = slice.getSourceType();
      if (!slice.hasUnitStride() || !slice.hasZeroOffset())
        return true;
      ArrayRef<int64_t> sizes = slice.getStaticSizes();
      for (int64_t d = 1, e = source.getRank(); d < e; ++d)
        if (sizes[d] != source.getDimSize(d))
          return true;
      return false;
    }
    return false;
  }

  static void copyInto(OpBuilder &b, OpOperand &operand) {
    auto type = cast<RankedTensorType>(operand.get().getType());
    Location loc = operand.getOwner()->getLoc();
    Value init =
        b.create<tensor::EmptyOp>(loc, type.getShape(), type.getElementType());
    operand.set(
        b.create<linalg::CopyOp>(loc, operand.get(), init).getResult(0));
  }

  void copyDuplicates(func::ReturnOp ret) {
    OpBuilder b(ret);
    llvm::SmallPtrSet<Value, 16> seen;
    for (OpOperand &operand : ret->getOpOperands()) {
      Value v = operand.get();
      if (!isa<RankedTensorType>(v.getType()))
        continue;
      // Function arguments are copied too: out-parameter promotion in LLVM
      // 19 crashes on a returned argument when hoisting static allocations.
      bool fresh = seen.insert(v).second && !isa<BlockArgument>(v);
      if (fresh)
        continue;
      copyInto(b, operand);
    }
  }

  /// Copies the strided views that `op` (a call or a return) passes.
  static void copyStridedViews(Operation *op) {
    OpBuilder b(op);
    for (OpOperand &operand : op->getOpOperands())
      if (isa<RankedTensorType>(operand.get().getType()) &&
          isStridedView(operand.get()))
        copyInto(b, operand);
  }
};

} // namespace
