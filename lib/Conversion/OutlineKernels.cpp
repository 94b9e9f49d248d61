//===- OutlineKernels.cpp - One function per loop nest
//---------------------===//
//
// Implements -cleave-outline-kernels. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"

#define DEBUG_TYPE "cleave-outline-kernels"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEOUTLINEKERNELSPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// Whether `v` is a constant that the kernel recomputes rather than takes
/// (loop bounds must stay constants for LLVM's loop optimizations).
bool isConstant(Value v) {
  Operation *def = v.getDefiningOp();
  return def && def->hasTrait<OpTrait::ConstantLike>();
}

/// The values `op` uses that are defined outside it (constants aside), if
/// each can be passed through the bare-pointer calling convention.
std::optional<SmallVector<Value>> capturedValues(Operation *op) {
  llvm::SetVector<Value> all, captured;
  for (Region &region : op->getRegions())
    getUsedValuesDefinedAbove(region, all);
  for (Value v : op->getOperands())
    all.insert(v);
  for (Value v : all)
    if (!isConstant(v))
      captured.insert(v);
  for (Value v : captured) {
    Type type = v.getType();
    if (auto memref = dyn_cast<MemRefType>(type)) {
      if (!memref.getLayout().isIdentity() || !memref.hasStaticShape())
        return std::nullopt;
      continue;
    }
    if (!type.isIntOrIndexOrFloat())
      return std::nullopt;
  }
  return SmallVector<Value>(captured.begin(), captured.end());
}

struct CleaveOutlineKernelsPass final
    : cleave::impl::CleaveOutlineKernelsPassBase<CleaveOutlineKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    for (func::FuncOp func : funcs)
      if (!func.isExternal())
        outlineIn(module, func);
  }

  void outlineIn(ModuleOp module, func::FuncOp func) {
    SmallVector<Operation *> nests;
    for (Operation &op : func.getBody().front())
      if (op.getNumRegions() > 0 && op.getNumResults() == 0)
        nests.push_back(&op);
    unsigned index = 0;
    for (Operation *nest : nests) {
      std::optional<SmallVector<Value>> captured = capturedValues(nest);
      if (!captured)
        continue;
      OpBuilder b(module.getBodyRegion());
      b.setInsertionPoint(func);
      std::string name =
          (func.getName() + "_kernel" + std::to_string(index++)).str();
      auto kernel = b.create<func::FuncOp>(
          nest->getLoc(), name,
          b.getFunctionType(ValueRange(*captured).getTypes(), {}));
      kernel.setPrivate();
      // LLVM would otherwise inline every single-call kernel back.
      kernel->setAttr("passthrough",
                      b.getArrayAttr(b.getStringAttr("noinline")));
      kernel->setAttr(
          "llvm.linkage",
          LLVM::LinkageAttr::get(b.getContext(), LLVM::Linkage::Internal));
      Block *body = kernel.addEntryBlock();
      IRMapping mapping;
      for (auto [value, arg] : llvm::zip(*captured, body->getArguments()))
        mapping.map(value, arg);
      b.setInsertionPointToStart(body);
      llvm::SetVector<Value> used;
      for (Region &region : nest->getRegions())
        getUsedValuesDefinedAbove(region, used);
      used.insert(nest->operand_begin(), nest->operand_end());
      for (Value v : used)
        if (isConstant(v))
          mapping.map(v, b.clone(*v.getDefiningOp())->getResult(0));
      b.clone(*nest, mapping);
      b.create<func::ReturnOp>(nest->getLoc());
      b.setInsertionPoint(nest);
      b.create<func::CallOp>(nest->getLoc(), kernel, *captured);
      nest->erase();
    }
  }
};

} // namespace
