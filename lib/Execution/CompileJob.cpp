//===- CompileJob.cpp - Compile the step every rank runs ------------------===//
//
// The compiler side of Run.h: JIT or compile-cache builds of a job.
//
//===----------------------------------------------------------------------===//

#include "cleave/Execution/Run.h"
#include "cleave/Runtime/Runtime.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace mlir::cleave;
using llvm::Error;
using llvm::Expected;
using llvm::Twine;

static Error runError(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Ends the line that says how the step was compiled: the ranks and mesh.
static void endCompileLine(llvm::raw_ostream &log, const TrainJob &job,
                           int world) {
  if (job.manifest.mesh)
    log << " for " << world << " ranks on mesh ("
        << job.manifest.mesh->toString() << ")";
  log << "\n";
  log.flush();
}

/// The compiled step of `module` from `cache`, compiled into it first if it
/// is not there.
static Error compileCachedJob(ModuleOp module, const CompileOptions &options,
                              int world, TrainJob &job, llvm::raw_ostream &log,
                              const CompileCache &cache) {
  double start = cleave_rt_now();
  std::string key = CompileCache::key(module, options);
  std::optional<std::string> path = cache.lookup(key);
  bool hit = path.has_value();
  if (!hit) {
    Expected<std::string> inserted = cache.insert(key, module, options);
    if (!inserted)
      return inserted.takeError();
    path = *inserted;
  }
  Expected<TrainJob> loaded = loadAotJob(*path);
  if (!loaded)
    return runError("compile cache entry " + *path + ": " +
                    toString(loaded.takeError()) +
                    " (remove it, or set CLEAVE_COMPILE_CACHE=0)");
  job.manifest = std::move(loaded->manifest);
  job.entries = std::move(loaded->entries);
  double total = cleave_rt_now() - start;
  if (hit)
    log << "loaded the compiled step from the compile cache in "
        << llvm::format("%.2f", total) << " s";
  else
    log << "compiled in " << llvm::format("%.2f", total)
        << " s (into the compile cache)";
  log << " (" << key.substr(0, 12) << ")";
  endCompileLine(log, job, world);
  return Error::success();
}

Error mlir::cleave::compileJob(ModuleOp module, const CompileOptions &options,
                               int world, TrainJob &job, llvm::raw_ostream &log,
                               const CompileCache *cache) {
  if (cache && cache->getOptions().enabled)
    return compileCachedJob(module, options, world, job, log, *cache);
  double start = cleave_rt_now();
  auto compiled = JitProgram::compile(module, options);
  if (!compiled)
    return compiled.takeError();
  JitProgram &jit = **compiled;
  job.manifest = jit.getManifest();
  for (const std::string &name : stepEntryNames(job.manifest)) {
    auto e = jit.lookup(name);
    if (!e)
      return e.takeError();
    job.entries[name] = *e;
  }
  // The JIT emits machine code on the first lookup.
  double total = cleave_rt_now() - start;
  const JitProgram::Stats &stats = jit.getStats();
  job.owner = std::shared_ptr<JitProgram>(std::move(*compiled));
  log << "compiled in " << llvm::format("%.2f", total) << " s (lowering "
      << llvm::format("%.2f", stats.loweringSeconds) << " s, LLVM IR "
      << llvm::format("%.2f", stats.codegenSeconds) << " s, machine code "
      << llvm::format("%.2f",
                      total - stats.loweringSeconds - stats.codegenSeconds)
      << " s)";
  endCompileLine(log, job, world);
  return Error::success();
}
