//===- CompileCache.h - Compiled training steps, by content -----*- C++ -*-===//
//
// A training step compiled once is not compiled again. The cache holds
// shared objects (compileToObject's object file, linked with the system C
// compiler driver) under a key that is a SHA-256 of everything the machine
// code depends on:
//
//   - the per-device program after planning, autodiff and partitioning
//     (printed without locations, which only diagnostics read);
//   - the target and every lowering and LLVM option;
//   - the host CPU and its features (code is generated for this CPU);
//   - the build IDs of the compiler and the runtime (every ELF object
//     loaded in the process), so a rebuilt Cleave never reuses old code.
//
// The idea is that of PyTorch's and XLA's compilation caches. Entries are
// written to a temporary name and renamed into place, so concurrent ranks
// and processes never read half a file; the least recently used entries are
// removed when the cache grows beyond its bound. A cached step is loaded
// with dlopen exactly like an AOT build (loadAotJob).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_EXECUTION_COMPILECACHE_H
#define CLEAVE_EXECUTION_COMPILECACHE_H

#include "cleave/Execution/Compiler.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <optional>
#include <string>

namespace mlir::cleave {

struct CompileCacheOptions {
  /// Off: every run compiles, as before the cache.
  bool enabled = true;
  /// Where entries live.
  std::string dir;
  /// The cache is trimmed to this many bytes after each insertion, oldest
  /// use first (0: no bound).
  int64_t maxBytes = int64_t(2) << 30;

  /// From the environment: CLEAVE_COMPILE_CACHE=0 switches the cache off,
  /// CLEAVE_COMPILE_CACHE_DIR names the folder (default
  /// $XDG_CACHE_HOME/cleave, else ~/.cache/cleave), and
  /// CLEAVE_COMPILE_CACHE_MAX_MB bounds its size (default 2048). Errors
  /// name the variable and its value.
  static llvm::Expected<CompileCacheOptions> fromEnvironment();
};

class CompileCache {
public:
  explicit CompileCache(CompileCacheOptions options);

  /// The key of per-device program `module` compiled with `options`: 64 hex
  /// digits.
  static std::string key(ModuleOp module, const CompileOptions &options);

  /// The path of the entry for `key` if the cache has it (its use time is
  /// renewed).
  std::optional<std::string> lookup(llvm::StringRef key) const;

  /// Lowers `module` in place, compiles and links it into the entry for
  /// `key`, trims the cache, and returns the entry's path.
  llvm::Expected<std::string> insert(llvm::StringRef key, ModuleOp module,
                                     const CompileOptions &options) const;

  /// Removes the least recently used entries until the cache holds at most
  /// `maxBytes` (temporary files of writers that died are removed after an
  /// hour). Returns the number of entries removed.
  int trim() const;

  const CompileCacheOptions &getOptions() const { return options; }

private:
  std::string entryPath(llvm::StringRef key) const;
  CompileCacheOptions options;
};

} // namespace mlir::cleave

#endif // CLEAVE_EXECUTION_COMPILECACHE_H
