//===- Lowering.h - The back half: CPU and CUDA lowering --------*- C++ -*-===//
//
// A program with local shapes (what the front half of FrontHalf.h produces)
// down to the LLVM dialect: collectives to runtime calls, compute to linalg,
// bufferization, GEMMs to runtime calls, then loops (CPU) or kernels (CUDA)
// and host code. Both targets are built from one list of passes
// (docs/architecture.md, docs/cuda.md).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PIPELINES_LOWERING_H
#define CLEAVE_PIPELINES_LOWERING_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"
#include <string>

namespace mlir::cleave {

/// What the generated code runs on.
enum class Target {
  CPU,  ///< Loops on the host, OpenBLAS GEMMs, Gloo collectives.
  CUDA, ///< sm_90 kernels launched from host code, cuBLASLt, NCCL
        ///< (docs/cuda.md); the runtime must use backend "cuda".
};

/// Options of the CPU pipeline.
struct CPUPipelineOptions {
  /// Vectorize elementwise and reduction loops (otherwise scalar loops that
  /// LLVM may still vectorize).
  bool vectorize = true;
  /// Rows of the flash attention tiles (cleave-lower-to-linalg's
  /// `attention-tile`); 0 materialises the full attention probabilities.
  int64_t attentionTile = 128;
};

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
  /// Rows of the flash attention tiles, as on the CPU (docs/attention.md):
  /// host tile loops launching cuBLASLt GEMMs and online-softmax kernels on
  /// tiles; 0 materialises the full [B*H, S, Skv] probabilities.
  int64_t attentionTile = 128;
};

/// cleave (local shapes) -> LLVM dialect for the CPU: verify the
/// collectives, lower to linalg, fuse, bufferize with identity layouts and
/// out-parameters, GEMMs to runtime calls, loops, LLVM with the bare-pointer
/// convention, entry points.
void buildCPULoweringPipeline(OpPassManager &pm,
                              const CPUPipelineOptions &options = {});

/// cleave (local shapes) -> host code in the LLVM dialect for the CUDA
/// target: the CPU pipeline's tensor level and bufferization, GEMMs to
/// runtime calls, every other linalg op to a kernel, kernels to NVVM and
/// cubins (ptxas), the CPU pipeline's host lowering plus launches to
/// cleave_rt_cuda_launch, entry points.
void buildCUDALoweringPipeline(OpPassManager &pm,
                               const CUDAPipelineOptions &options = {});

/// Registers the dialects and interface models the CPU pipeline needs.
void registerCPULoweringDialects(DialectRegistry &registry);

/// Registers what the CUDA pipeline needs on top of the CPU pipeline's
/// dialects: GPU, NVVM and its target, and the LLVM IR translations used to
/// produce PTX.
void registerCUDALoweringDialects(DialectRegistry &registry);

/// Runs the lowering pipeline of `target` on `module`. The error carries
/// the diagnostics of the failing pass.
llvm::Error lowerForTarget(ModuleOp module, Target target,
                           const CPUPipelineOptions &cpu = {},
                           const CUDAPipelineOptions &cuda = {});

} // namespace mlir::cleave

#endif // CLEAVE_PIPELINES_LOWERING_H
