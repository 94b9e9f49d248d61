//===- CompileCache.cpp - Compiled training steps, by content -------------===//

#include "cleave/Execution/CompileCache.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SHA256.h"
#include "llvm/TargetParser/Host.h"
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <elf.h>
#include <link.h>
#include <unistd.h>
#include <utime.h>
#include <vector>

using namespace mlir;
using namespace mlir::cleave;

static llvm::Error cacheError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "compile cache: " + message);
}

llvm::Expected<CompileCacheOptions> CompileCacheOptions::fromEnvironment() {
  CompileCacheOptions o;
  if (const char *v = std::getenv("CLEAVE_COMPILE_CACHE")) {
    llvm::StringRef s(v);
    if (s == "0" || s == "off")
      o.enabled = false;
    else if (s != "1" && s != "on" && !s.empty())
      return cacheError("CLEAVE_COMPILE_CACHE=" + s +
                        ": expected 0, off, 1 or on");
  }
  if (const char *v = std::getenv("CLEAVE_COMPILE_CACHE_DIR"); v && *v) {
    o.dir = v;
  } else {
    const char *xdg = std::getenv("XDG_CACHE_HOME");
    const char *home = std::getenv("HOME");
    if (xdg && *xdg)
      o.dir = std::string(xdg) + "/cleave";
    else if (home && *home)
      o.dir = std::string(home) + "/.cache/cleave";
    else
      o.enabled = false; // nowhere to keep it
  }
  if (const char *v = std::getenv("CLEAVE_COMPILE_CACHE_MAX_MB")) {
    long long mb = -1;
    if (llvm::StringRef(v).getAsInteger(10, mb) || mb < 0)
      return cacheError(std::string("CLEAVE_COMPILE_CACHE_MAX_MB=") + v +
                        ": expected a size in MiB >= 0 (0: no bound)");
    o.maxBytes = int64_t(mb) << 20;
  }
  return o;
}

CompileCache::CompileCache(CompileCacheOptions options)
    : options(std::move(options)) {}

/// The GNU build IDs of every ELF object loaded in this process: they
/// change whenever the compiler, the runtime or a library they load is
/// rebuilt.
static void hashBuildIds(llvm::SHA256 &hash) {
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        auto &h = *static_cast<llvm::SHA256 *>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr) &ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE)
            continue;
          auto *p =
              reinterpret_cast<const char *>(info->dlpi_addr + ph.p_vaddr);
          const char *end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            auto *note = reinterpret_cast<const ElfW(Nhdr) *>(p);
            const char *name = p + sizeof(ElfW(Nhdr));
            const char *desc = name + ((note->n_namesz + 3) & ~3u);
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
                llvm::StringRef(name, 3) == "GNU")
              h.update(llvm::StringRef(desc, note->n_descsz));
            p = desc + ((note->n_descsz + 3) & ~3u);
          }
        }
        return 0;
      },
      &hash);
}

std::string CompileCache::key(ModuleOp module, const CompileOptions &options) {
  llvm::SHA256 hash;
  auto field = [&](llvm::StringRef name, const llvm::Twine &value) {
    hash.update(name);
    hash.update("=");
    hash.update(value.str());
    hash.update("\n");
  };
  std::string text;
  llvm::raw_string_ostream os(text);
  // Locations only feed diagnostics; the code does not depend on them.
  module->print(os, OpPrintingFlags().enableDebugInfo(false));
  field("program", text);
  field("target", options.target == Target::CUDA ? "cuda" : "cpu");
  field("opt", llvm::Twine(options.optLevel));
  field("cpu.vectorize", llvm::Twine(options.pipeline.vectorize));
  field("cpu.attention-tile", llvm::Twine(options.pipeline.attentionTile));
  field("cuda.chip", options.cuda.chip);
  field("cuda.ptxas", options.cuda.ptxas);
  field("cuda.block", llvm::Twine(options.cuda.blockSize));
  field("cuda.vector", llvm::Twine(options.cuda.vectorBits));
  field("cuda.attention-tile", llvm::Twine(options.cuda.attentionTile));
  field("host-cpu", options.hostCpu);
  field("host", llvm::sys::getHostCPUName());
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  std::vector<std::string> on;
  for (const auto &f : features)
    if (f.second)
      on.push_back(f.first().str());
  std::sort(on.begin(), on.end());
  field("features", llvm::join(on, ","));
  hashBuildIds(hash);
  std::array<uint8_t, 32> digest = hash.final();
  return llvm::toHex(digest, /*LowerCase=*/true);
}

std::string CompileCache::entryPath(llvm::StringRef key) const {
  return options.dir + "/step-" + key.str() + ".so";
}

std::optional<std::string> CompileCache::lookup(llvm::StringRef key) const {
  if (!options.enabled)
    return std::nullopt;
  std::string path = entryPath(key);
  if (!llvm::sys::fs::exists(path))
    return std::nullopt;
  // The use time orders eviction (least recently used first).
  ::utime(path.c_str(), nullptr);
  return path;
}

llvm::Expected<std::string>
CompileCache::insert(llvm::StringRef key, ModuleOp module,
                     const CompileOptions &options) const {
  if (std::error_code ec = llvm::sys::fs::create_directories(this->options.dir))
    return cacheError("cannot create " + this->options.dir + ": " +
                      ec.message() +
                      " (set CLEAVE_COMPILE_CACHE_DIR, or "
                      "CLEAVE_COMPILE_CACHE=0)");
  // Unique temporary names: several processes may insert the same key.
  std::string tmp = entryPath(key) + ".tmp." + std::to_string(::getpid());
  std::string object = tmp + ".o";
  auto cleanup = [&] {
    llvm::sys::fs::remove(object);
    llvm::sys::fs::remove(tmp);
  };
  if (llvm::Error err = compileToObject(module, object, options)) {
    cleanup();
    return std::move(err);
  }
  // The entry points call the runtime (cleave_rt_*), which the process that
  // loads the entry has loaded already: the library leaves them undefined.
  llvm::ErrorOr<std::string> cc = llvm::sys::findProgramByName("cc");
  if (!cc) {
    cleanup();
    return cacheError("no C compiler driver (cc) on PATH to link " + object +
                      " (install gcc, or set CLEAVE_COMPILE_CACHE=0)");
  }
  std::string errorText;
  llvm::StringRef args[] = {*cc, "-shared", "-o", tmp, object};
  int rc =
      llvm::sys::ExecuteAndWait(*cc, args, std::nullopt, {}, 0, 0, &errorText);
  llvm::sys::fs::remove(object);
  if (rc != 0) {
    cleanup();
    return cacheError("linking the compiled step failed (" + *cc +
                      " -shared, exit " + std::to_string(rc) + ")" +
                      (errorText.empty() ? "" : ": " + errorText));
  }
  std::string path = entryPath(key);
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path)) {
    cleanup();
    return cacheError("cannot move the compiled step to " + path + ": " +
                      ec.message());
  }
  trim();
  return path;
}

int CompileCache::trim() const {
  struct Entry {
    std::string path;
    uint64_t size;
    llvm::sys::TimePoint<> used;
  };
  std::vector<Entry> entries;
  std::error_code ec;
  auto now = std::chrono::system_clock::now();
  int removed = 0;
  for (llvm::sys::fs::directory_iterator it(options.dir, ec), end;
       it != end && !ec; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (!name.starts_with("step-"))
      continue;
    llvm::sys::fs::file_status st;
    if (llvm::sys::fs::status(it->path(), st))
      continue;
    if (name.contains(".tmp.")) {
      // A writer that died mid-write; live writers finish in minutes.
      if (now - st.getLastModificationTime() > std::chrono::hours(1))
        removed += !llvm::sys::fs::remove(it->path());
      continue;
    }
    entries.push_back({it->path(), st.getSize(), st.getLastModificationTime()});
  }
  if (options.maxBytes <= 0)
    return removed;
  std::sort(entries.begin(), entries.end(),
            [](const Entry &a, const Entry &b) { return a.used > b.used; });
  uint64_t total = 0;
  for (const Entry &e : entries) {
    total += e.size;
    // The newest entry stays even if it alone is over the bound.
    if (total > uint64_t(options.maxBytes) && &e != &entries.front())
      removed += !llvm::sys::fs::remove(e.path);
  }
  return removed;
}
