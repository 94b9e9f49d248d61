//===- Passes.h - Cleave lowering passes and pipelines ----------*- C++ -*-===//

#ifndef CLEAVE_CONVERSION_PASSES_H
#define CLEAVE_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::cleave {

#define GEN_PASS_DECL
#include "cleave/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Conversion/Passes.h.inc"

/// Options of the CPU pipeline.
struct CPUPipelineOptions {
  /// Vectorize elementwise and reduction loops (otherwise scalar loops that
  /// LLVM may still vectorize).
  bool vectorize = true;
};

/// cleave (local shapes) -> LLVM dialect for the CPU: lower to linalg, fuse,
/// bufferize with identity layouts and out-parameters, GEMMs to runtime
/// calls, loops, LLVM with the bare-pointer convention, entry points.
void buildCPULoweringPipeline(OpPassManager &pm,
                              const CPUPipelineOptions &options = {});

/// Registers `cleave-lower-to-cpu` as a named pipeline for cleave-opt.
void registerCleavePipelines();

/// Registers the dialects and interface models the CPU pipeline needs.
void registerCPULoweringDialects(DialectRegistry &registry);

} // namespace mlir::cleave

#endif // CLEAVE_CONVERSION_PASSES_H
