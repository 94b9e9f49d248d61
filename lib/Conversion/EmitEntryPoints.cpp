//===- EmitEntryPoints.cpp - One C signature per compiled function --------===//
//
// Implements -cleave-emit-entry-points. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"

#define DEBUG_TYPE "cleave-emit-entry-points"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEEMITENTRYPOINTSPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// Functions of the program proper, as opposed to declarations of runtime
/// and library functions and MLIR's C-interface wrappers.
bool isProgramFunction(LLVM::LLVMFuncOp func) {
  StringRef name = func.getName();
  return !func.isExternal() && !func.isPrivate() &&
         !name.starts_with("cleave_") && !name.starts_with("_mlir") &&
         func.getLinkage() != LLVM::Linkage::Internal &&
         func.getLinkage() != LLVM::Linkage::Private;
}

struct CleaveEmitEntryPointsPass final
    : cleave::impl::CleaveEmitEntryPointsPassBase<CleaveEmitEntryPointsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<LLVM::LLVMFuncOp> funcs;
    for (auto func : module.getOps<LLVM::LLVMFuncOp>())
      if (isProgramFunction(func))
        funcs.push_back(func);
    for (LLVM::LLVMFuncOp func : funcs)
      if (failed(emitEntry(module, func)))
        return signalPassFailure();
    for (auto func : module.getOps<LLVM::LLVMFuncOp>())
      stripCleaveAttrs(func);
    // The mesh was read into the manifest; LLVM IR has no place for it.
    for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
      if (op.getDialect() && op.getDialect()->getNamespace() == "cleave")
        op.erase();
  }

  /// The cleave.* argument and result attributes described the buffers for
  /// the manifest; LLVM IR has no place for them (translation would warn
  /// once per argument).
  static void stripCleaveAttrs(LLVM::LLVMFuncOp func) {
    auto strip = [](DictionaryAttr dict) -> DictionaryAttr {
      if (!dict)
        return dict;
      SmallVector<NamedAttribute> kept;
      for (NamedAttribute attr : dict)
        if (!attr.getName().getValue().starts_with("cleave."))
          kept.push_back(attr);
      return DictionaryAttr::get(dict.getContext(), kept);
    };
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      func.setArgAttrs(i, strip(func.getArgAttrDict(i)));
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
      func.setResultAttrs(i, strip(func.getResultAttrDict(i)));
  }

  LogicalResult emitEntry(ModuleOp module, LLVM::LLVMFuncOp func) {
    MLIRContext *ctx = module.getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    LLVM::LLVMFunctionType type = func.getFunctionType();
    for (auto [i, arg] : llvm::enumerate(type.getParams()))
      if (arg != ptr)
        return func.emitError()
               << "cannot emit an entry point: argument #" << i << " is " << arg
               << ", not a buffer pointer (lower with the bare-pointer "
               << "calling convention and static shapes)";
    if (!isa<LLVM::LLVMVoidType>(type.getReturnType()))
      return func.emitError() << "cannot emit an entry point: the function "
                                 "returns a value (results must be "
                                 "out-parameters)";
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    Location loc = func.getLoc();
    auto entry = b.create<LLVM::LLVMFuncOp>(
        loc, ("cleave_entry_" + func.getName()).str(),
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptr}));
    Block *body = entry.addEntryBlock(b);
    b.setInsertionPointToStart(body);
    Value buffers = body->getArgument(0);
    SmallVector<Value> args;
    for (int64_t i = 0, e = type.getNumParams(); i < e; ++i) {
      Value slot = b.create<LLVM::GEPOp>(loc, ptr, ptr, buffers,
                                         ArrayRef<LLVM::GEPArg>{int32_t(i)});
      args.push_back(b.create<LLVM::LoadOp>(loc, ptr, slot));
    }
    b.create<LLVM::CallOp>(loc, func, args);
    b.create<LLVM::ReturnOp>(loc, ValueRange{});
    return success();
  }
};

} // namespace
