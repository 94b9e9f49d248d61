//===- Passes.h - Cleave lowering passes and pipelines ----------*- C++ -*-===//

#ifndef CLEAVE_CONVERSION_PASSES_H
#define CLEAVE_CONVERSION_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
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

/// Options of the CUDA pipeline (docs/cuda.md).
struct CUDAPipelineOptions {
  /// The GPU architecture ptxas compiles for.
  std::string chip = "sm_90";
  /// Path of ptxas; empty: found under CUDA_HOME, CUDA_PATH, /usr/local/cuda
  /// or on PATH.
  std::string ptxas;
  /// If set, ptxas' per-kernel resource usage is written to this JSON file
  /// ("-": a table on stderr).
  std::string ptxasReport;
  /// Threads per block of elementwise kernels (and the most a reduction
  /// block uses).
  int64_t blockSize = 256;
  /// Width of vector loads and stores in kernels (0 disables them).
  int64_t vectorBits = 128;
};

/// cleave (local shapes) -> host code in the LLVM dialect for the CUDA
/// target: the CPU pipeline's tensor level and bufferization, GEMMs to
/// runtime calls, every other linalg op to a kernel, kernels to NVVM and
/// cubins (ptxas), launches to cleave_rt_cuda_launch, entry points.
void buildCUDALoweringPipeline(OpPassManager &pm,
                               const CUDAPipelineOptions &options = {});

/// Registers `cleave-lower-to-cuda` (called by registerCleavePipelines).
void registerCUDAPipeline();

/// Registers what the CUDA pipeline needs on top of the CPU pipeline's
/// dialects: GPU, NVVM and its target, and the LLVM IR translations used to
/// produce PTX.
void registerCUDALoweringDialects(DialectRegistry &registry);

} // namespace mlir::cleave

#endif // CLEAVE_CONVERSION_PASSES_H
