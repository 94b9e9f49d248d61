//===- cleave-opt.cpp - The Cleave optimizer driver -----------------------===//
//
// mlir-opt for Cleave: the cleave dialect, the upstream dialects and passes
// Cleave's pipelines use, and every cleave pass and pipeline.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "cleave/Dialect/CleaveDialect.h"
#include "cleave/Pipelines/Lowering.h"
#include "cleave/Pipelines/Registration.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
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

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Cleave optimizer driver\n", registry));
}
