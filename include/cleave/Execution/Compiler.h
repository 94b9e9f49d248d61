//===- Compiler.h - Compile cleave programs for the CPU ---------*- C++ -*-===//
//
// Two ways to run a program with local shapes: in-process through MLIR's
// ExecutionEngine (JIT), or ahead of time to an object file that a host links
// with libCleaveRuntime. Either way each function `f` is called through
// `void cleave_entry_f(void **buffers)` with the buffers of its manifest.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_EXECUTION_COMPILER_H
#define CLEAVE_EXECUTION_COMPILER_H

#include "cleave/Conversion/Passes.h"
#include "cleave/Execution/Manifest.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include <memory>

namespace mlir {
class ExecutionEngine;
} // namespace mlir

namespace mlir::cleave {

/// What the generated code runs on.
enum class Target {
  CPU,  ///< Loops on the host, OpenBLAS GEMMs, Gloo collectives.
  CUDA, ///< sm_90 kernels launched from host code, cuBLASLt, NCCL
        ///< (docs/cuda.md); the runtime must use backend "cuda".
};

struct CompileOptions {
  /// LLVM optimization level of the generated code (0-3).
  unsigned optLevel = 3;
  Target target = Target::CPU;
  CPUPipelineOptions pipeline;
  CUDAPipelineOptions cuda;
};

/// The signature every compiled function is called through.
using EntryFn = void (*)(void **buffers);

/// A program compiled in-process. Owns the generated code.
class JitProgram {
public:
  /// Lowers `module` in place and JIT-compiles it. Errors carry the
  /// diagnostics of the failing pass.
  static llvm::Expected<std::unique_ptr<JitProgram>>
  compile(ModuleOp module, const CompileOptions &options = {});
  ~JitProgram();

  const ProgramManifest &getManifest() const { return manifest; }
  /// Where compilation time went.
  struct Stats {
    double loweringSeconds = 0; ///< MLIR passes down to the LLVM dialect.
    double codegenSeconds = 0;  ///< LLVM optimization and machine code.
  };
  const Stats &getStats() const { return stats; }
  /// The entry point of function `name`, or an error if there is none.
  llvm::Expected<EntryFn> lookup(llvm::StringRef name) const;

private:
  JitProgram() = default;
  std::unique_ptr<ExecutionEngine> engine;
  ProgramManifest manifest;
  Stats stats;
};

/// Lowers `module` in place and writes a position-independent object file
/// defining `cleave_entry_<f>` for every function and
/// `const char *cleave_manifest_json(void)`.
llvm::Error compileToObject(ModuleOp module, llvm::StringRef path,
                            const CompileOptions &options = {});

/// Runs the CPU lowering pipeline on `module`, collecting diagnostics into
/// the returned error.
llvm::Error lowerForCPU(ModuleOp module, const CompileOptions &options);
/// Runs the CUDA lowering pipeline (kernels compiled to cubins by ptxas).
llvm::Error lowerForCUDA(ModuleOp module, const CompileOptions &options);

/// Registers everything the compiler needs in `registry` (dialects,
/// bufferization models, LLVM translations).
void registerCompilerDialects(DialectRegistry &registry);

} // namespace mlir::cleave

#endif // CLEAVE_EXECUTION_COMPILER_H
