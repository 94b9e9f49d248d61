//===- cleave-opt.cpp - The Cleave optimizer driver -----------------------===//
//
// mlir-opt for Cleave: the cleave dialect, the upstream dialects and passes
// Cleave's pipelines use, and every cleave pass.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/CleaveDialect.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::cleave::CleaveDialect, mlir::func::FuncDialect>();

  mlir::cleave::registerCleavePasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Cleave optimizer driver\n", registry));
}
