//===- CudaDedupKernels.cpp - One kernel per distinct body ----------------===//
//
// Implements -cleave-cuda-dedup-kernels. See Passes.td for the contract:
// identical kernels (the same layer's kernels at every depth) are merged
// into the first of them, and launches are retargeted.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/ADT/StringMap.h"

#define DEBUG_TYPE "cleave-cuda-dedup-kernels"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVECUDADEDUPKERNELSPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// The text of `kernel` under a fixed name: equal texts are equal kernels
/// (body, signature, attributes), whatever their names.
std::string kernelKey(gpu::GPUFuncOp kernel) {
  StringAttr name = SymbolTable::getSymbolName(kernel);
  SymbolTable::setSymbolName(kernel, "kernel");
  std::string key;
  llvm::raw_string_ostream os(key);
  kernel->print(os, OpPrintingFlags().useLocalScope());
  SymbolTable::setSymbolName(kernel, name);
  return key;
}

struct CleaveCudaDedupKernelsPass final
    : cleave::impl::CleaveCudaDedupKernelsPassBase<CleaveCudaDedupKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // (gpu.module, kernel) -> the kernel that replaces it.
    DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> replacement;
    SmallVector<gpu::GPUFuncOp> duplicates;
    for (auto kernels : module.getOps<gpu::GPUModuleOp>()) {
      llvm::StringMap<StringAttr> firstByKey;
      for (auto kernel : kernels.getOps<gpu::GPUFuncOp>()) {
        auto [it, inserted] = firstByKey.try_emplace(
            kernelKey(kernel), SymbolTable::getSymbolName(kernel));
        if (inserted)
          continue;
        replacement[{SymbolTable::getSymbolName(kernels),
                     SymbolTable::getSymbolName(kernel)}] = it->second;
        duplicates.push_back(kernel);
      }
    }
    if (duplicates.empty())
      return;
    // Launches are retargeted in one walk (replacing each kernel's uses
    // separately would walk the module once per duplicate).
    WalkResult result = module.walk([&](Operation *op) {
      auto launch = dyn_cast<gpu::LaunchFuncOp>(op);
      if (launch) {
        auto it = replacement.find(
            {launch.getKernelModuleName(), launch.getKernelName()});
        if (it != replacement.end())
          launch.setKernelAttr(
              SymbolRefAttr::get(launch.getKernelModuleName(),
                                 {FlatSymbolRefAttr::get(it->second)}));
        return WalkResult::advance();
      }
      for (NamedAttribute attr : op->getAttrs()) {
        auto ref = dyn_cast<SymbolRefAttr>(attr.getValue());
        if (ref && !ref.getNestedReferences().empty() &&
            replacement.count(
                {ref.getRootReference(), ref.getLeafReference()})) {
          op->emitOpError("uses kernel ")
              << ref << " other than by gpu.launch_func; "
              << "cleave-cuda-dedup-kernels cannot merge it";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();
    for (gpu::GPUFuncOp kernel : duplicates)
      kernel.erase();
  }
};

} // namespace
