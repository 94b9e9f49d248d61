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

#include "cleave/Execution/Manifest.h"
#include "cleave/Pipelines/Lowering.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include <memory>

namespace mlir {
class ExecutionEngine;
} // namespace mlir

namespace mlir::cleave {

/// How to compile a program with local shapes (the lowering pipeline of
/// `target`, then LLVM).
struct CompileOptions {
  /// LLVM optimization level of the generated code (0-3).
  unsigned optLevel = 3;
  Target target = Target::CPU;
  CPUPipelineOptions pipeline;
  CUDAPipelineOptions cuda;
  /// The CPU that compileToObject generates host code for (an LLVM CPU
  /// name such as "x86-64-v3"); empty: this machine's. Bundles, which run
  /// elsewhere, name a portable one. The JIT always targets this machine.
  std::string hostCpu;
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

/// Registers everything the compiler needs in `registry` (dialects,
/// bufferization models, LLVM translations).
void registerCompilerDialects(DialectRegistry &registry);

} // namespace mlir::cleave

#endif // CLEAVE_EXECUTION_COMPILER_H
