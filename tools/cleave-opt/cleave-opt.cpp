//===- cleave-opt.cpp - The Cleave optimizer driver -----------------------===//
//
// mlir-opt for Cleave: the cleave dialect, the upstream dialects and passes
// Cleave's pipelines use, and every cleave pass and pipeline.
//
// MlirOptMain is called on streams rather than through its argc/argv form:
// that form runs its own InitLLVM, which makes a closed stdout exit 74
// (`cleave-opt x.mlir | head` must exit 0; see cleave/Support/ClosedPipe.h).
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "cleave/Dialect/CleaveDialect.h"
#include "cleave/Pipelines/Lowering.h"
#include "cleave/Pipelines/Registration.h"
#include "cleave/Support/ClosedPipeLLVM.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  ::cleave::exitQuietlyOnClosedStdout();

  mlir::DialectRegistry registry;
  mlir::cleave::registerCPULoweringDialects(registry);
  mlir::cleave::registerCUDALoweringDialects(registry);

  mlir::cleave::registerCleavePasses();
  mlir::cleave::registerCleaveConversionPasses();
  mlir::cleave::registerCleavePipelines();
  // The upstream passes Cleave's pipelines are made of, so that every step
  // of a pipeline can be run and inspected alone.
  mlir::registerTransformsPasses();
  mlir::registerConversionPasses();
  mlir::registerLinalgPasses();
  mlir::memref::registerMemRefPasses();
  mlir::bufferization::registerBufferizationPasses();
  mlir::bufferization::registerBufferizationPipelines();
  mlir::registerGPUPasses();

  auto [inputPath, outputPath] = mlir::registerAndParseCLIOptions(
      argc, argv, "Cleave optimizer driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects()) {
    llvm::outs() << "Available Dialects: ";
    llvm::interleaveComma(registry.getDialectNames(), llvm::outs());
    llvm::outs() << "\n";
    return 0;
  }
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputPath, &error);
  if (!input) {
    llvm::errs() << "cleave-opt: " << error << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputPath, &error);
  if (!output) {
    llvm::errs() << "cleave-opt: " << error << "\n";
    return 1;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
