//===- Bundle.cpp - A compiled training run that moves to another machine -===//

#include "cleave/Execution/Bundle.h"
#include "cleave/CostModel/Estimate.h"
#include "cleave/Execution/Manifest.h"
#include "cleave/Pipelines/Compile.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unistd.h>

using namespace mlir;
using namespace mlir::cleave;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;
using nlohmann::json;
namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

#ifndef CLEAVE_CUDA_VERSION
#define CLEAVE_CUDA_VERSION ""
#endif
#ifndef CLEAVE_LLVM_VERSION
#define CLEAVE_LLVM_VERSION ""
#endif

static Error bundleError(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "--emit-bundle: " + message);
}

/// Files larger than this are referenced by path, not copied.
static constexpr uint64_t kCopyLimit = uint64_t(64) << 20;

/// Libraries every Linux machine has (glibc, the C++ runtime of its
/// compiler): never copied.
static bool isSystemLibrary(StringRef name) {
  static const char *const names[] = {
      "linux-vdso.so", "ld-linux-x86-64.so", "libc.so",      "libm.so",
      "libdl.so",      "libpthread.so",      "librt.so",     "libutil.so",
      "libstdc++.so",  "libgcc_s.so",        "libresolv.so", "libz.so"};
  for (const char *n : names)
    if (name.starts_with(n))
      return true;
  return false;
}

/// The CUDA driver and CUDA libraries: found on the GPU machine at run time.
static bool isCudaLibrary(StringRef name) {
  for (const char *n : {"libcuda.so", "libcublas", "libnccl.so", "libcudart"})
    if (name.starts_with(n))
      return true;
  return false;
}

/// The libraries `file` loads (ldd): soname -> path ("" if not found).
static Expected<std::map<std::string, std::string>>
sharedLibraries(StringRef file) {
  llvm::ErrorOr<std::string> ldd = llvm::sys::findProgramByName("ldd");
  if (!ldd)
    return bundleError("no ldd on PATH (Debian's libc-bin has it): it lists "
                       "the libraries to copy");
  SmallString<128> out;
  int fd;
  if (std::error_code ec =
          fs::createTemporaryFile("cleave-ldd", "txt", fd, out))
    return bundleError("cannot create a temporary file: " + ec.message());
  ::close(fd);
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(out),
                                          std::nullopt};
  StringRef args[] = {*ldd, file};
  std::string errorText;
  int rc = llvm::sys::ExecuteAndWait(*ldd, args, std::nullopt, redirects, 0, 0,
                                     &errorText);
  auto text = llvm::MemoryBuffer::getFile(out);
  fs::remove(out);
  if (rc != 0 || !text)
    return bundleError("ldd " + file + " failed" +
                       (errorText.empty() ? "" : ": " + errorText));
  std::map<std::string, std::string> libs;
  llvm::SmallVector<StringRef> lines;
  (*text)->getBuffer().split(lines, '\n');
  for (StringRef line : lines) {
    line = line.trim();
    auto [name, rest] = line.split(" => ");
    if (rest.empty())
      continue;
    rest = rest.trim();
    libs[name.str()] =
        rest.starts_with("not found") ? "" : rest.split(" (").first.str();
  }
  return libs;
}

static Error copyInto(StringRef from, StringRef dir, StringRef name = "") {
  SmallString<256> to(dir);
  path::append(to, name.empty() ? path::filename(from) : name);
  if (std::error_code ec = fs::copy_file(from, to))
    return bundleError("cannot copy " + from + " to " + to + ": " +
                       ec.message());
  fs::file_status st;
  if (!fs::status(from, st))
    fs::setPermissions(to, st.permissions());
  return Error::success();
}

/// The compiled step of `module` for `options`, from the cache (compiled
/// into it first), copied to `dest`.
static Error buildStep(ModuleOp module, const CompileOptions &options,
                       const CompileCache &cache, StringRef dest,
                       llvm::raw_ostream &log, StringRef what) {
  OwningOpRef<ModuleOp> clone(module.clone());
  std::string key = CompileCache::key(*clone, options);
  std::optional<std::string> entry = cache.lookup(key);
  bool hit = entry.has_value();
  if (!hit) {
    Expected<std::string> inserted = cache.insert(key, *clone, options);
    if (!inserted)
      return inserted.takeError();
    entry = *inserted;
  }
  log << "  " << what << ": " << path::filename(dest)
      << (hit ? " (from the compile cache)" : "") << "\n";
  if (std::error_code ec = fs::copy_file(*entry, dest))
    return bundleError("cannot copy " + *entry + ": " + ec.message());
  return Error::success();
}

/// What the cost model predicts for the step on each known GPU kind.
static json predictions(const BundleOptions &options) {
  json out = json::object();
  if (!options.model || options.model->arch == ::cleave::Architecture::MLP)
    return out;
  // Without --plan, several ranks run data parallel (as cleave-run does);
  // the planner's choice (--plan auto) is not known here.
  PlanSpec plan = options.plan.value_or(PlanSpec());
  if (!options.plan)
    plan.named.dp = options.world;
  if (plan.automatic)
    return out;
  ::cleave::cost::ParallelPlan p =
      costPlanOf(plan, *options.model, &options.step);
  int gpus = p.dp * p.tp * p.cp * p.pp;
  for (const char *name : {"dgx-a100-80gb", "dgx-h100", "dgx-h200"}) {
    auto cluster =
        ::cleave::cost::lookupClusterPreset(name, std::max(1, (gpus + 7) / 8));
    if (!cluster)
      continue;
    auto e = ::cleave::cost::estimate(*options.model, *cluster, p);
    if (!e)
      continue;
    out[name] = {{"gpu", cluster->gpu.name},
                 {"step_seconds", e->stepTime},
                 {"tokens_per_second", e->tokensPerSecond},
                 {"mfu", e->mfu},
                 {"model_flops_per_step", e->modelFlops},
                 {"peak_flops_per_gpu", e->peakFlopsPerGpu},
                 {"gpus", e->numGpus}};
  }
  return out;
}

/// Copies data file `file` into DIR/data (or references it when large);
/// returns what bundle.json records.
static Expected<std::string> carryData(StringRef file, StringRef dataDir,
                                       StringRef prefix,
                                       llvm::raw_ostream &log) {
  uint64_t size = 0;
  if (std::error_code ec = fs::file_size(file, size))
    return bundleError("cannot read " + file + ": " + ec.message());
  if (size > kCopyLimit) {
    SmallString<256> absolute(file);
    fs::make_absolute(absolute);
    log << "  data: " << file << " (" << size / (1 << 20)
        << " MiB) is referenced by its path, not copied\n";
    return std::string(absolute);
  }
  std::string name = (prefix + path::filename(file)).str();
  if (Error err = copyInto(file, dataDir, name))
    return std::move(err);
  return "data/" + name;
}

/// DIR/run: finds the CUDA libraries (cuda bundles), then runs the runner.
static std::string runScript(const std::vector<std::string> &cudaLibs) {
  std::string libs = llvm::join(cudaLibs, " ");
  return R"SH(#!/bin/bash
# A Cleave bundle: trains the compiled step on this machine (docs/cuda.md,
# "Running on a GPU cluster"). Options are cleave-run's run options;
# --selftest checks the GPU build against the CPU build; --help lists them.
# "run --exec PROGRAM ARGS..." runs PROGRAM with the bundle's libraries and
# the CUDA libraries found as for a run.
set -o pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
needed=")SH" +
         libs + R"SH("
backend=$(sed -n 's/.*"backend": *"\([a-z]*\)".*/\1/p' "$here/bundle.json")
program=("$here/bin/cleave-bundle-run" --bundle "$here")
if [ "${1:-}" = --exec ]; then
  shift
  program=("${1:?run --exec needs a program}")
  shift
fi
for a in "$@"; do
  case "$a" in --backend=cpu) backend=cpu ;; --backend=cuda) backend=cuda ;; esac
done
prev=""
for a in "$@"; do
  [ "$prev" = "--backend" ] && backend="$a"
  prev="$a"
done
paths="$here/lib"
if [ "$backend" = cuda ] && [ -n "$needed" ]; then
  # The CUDA libraries, in this order: CLEAVE_CUDA_LIBS, LD_LIBRARY_PATH,
  # the CUDA toolkit (CLEAVE_CUDA_HOME, default /usr/local/cuda), then the
  # nvidia-* wheels of the Python environment (CLEAVE_PYTHON, default python3).
  cuda_home="${CLEAVE_CUDA_HOME:-/usr/local/cuda}"
  wheels=$("${CLEAVE_PYTHON:-python3}" -c 'import nvidia, glob, os
for p in nvidia.__path__:
    for d in sorted(glob.glob(os.path.join(p, "*", "lib"))): print(d)' 2>/dev/null)
  dirs=()
  IFS=: read -ra e <<< "${CLEAVE_CUDA_LIBS:-}"; dirs+=("${e[@]}")
  IFS=: read -ra e <<< "${LD_LIBRARY_PATH:-}"; dirs+=("${e[@]}")
  dirs+=("$cuda_home/lib64" "$cuda_home/lib")
  while read -r d; do [ -n "$d" ] && dirs+=("$d"); done <<< "$wheels"
  found=""
  for lib in $needed; do
    hit=""
    for d in "${dirs[@]}"; do
      [ -n "$d" ] && [ -e "$d/$lib" ] && { hit="$d"; break; }
    done
    if [ -z "$hit" ]; then
      echo "cleave bundle: error: $lib not found; looked in CLEAVE_CUDA_LIBS (${CLEAVE_CUDA_LIBS:-unset}), LD_LIBRARY_PATH (${LD_LIBRARY_PATH:-unset}), $cuda_home/lib64, $cuda_home/lib and the nvidia wheels of ${CLEAVE_PYTHON:-python3} (${wheels:-none}); set CLEAVE_CUDA_LIBS to its folder, or run with --backend cpu" | tr '\n' ' ' >&2
      echo >&2
      exit 1
    fi
    case ":$paths:" in *":$hit:"*) ;; *) paths="$paths:$hit" ;; esac
    found="$found $hit/$lib"
  done
  export CLEAVE_BUNDLE_CUDA_LIBS="${found# }"
fi
export LD_LIBRARY_PATH="$paths${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "${program[@]}" "$@"
)SH";
}

/// The directory must be new, empty, or an earlier bundle (replaced).
static Error prepareDirectory(StringRef dir) {
  if (!fs::exists(dir))
    return fs::create_directories(dir) ? bundleError("cannot create " + dir)
                                       : Error::success();
  if (!fs::is_directory(dir))
    return bundleError(dir + " exists and is not a directory");
  SmallString<256> manifest(dir);
  path::append(manifest, "bundle.json");
  std::error_code ec;
  bool empty = fs::directory_iterator(dir, ec) == fs::directory_iterator();
  if (!empty && !fs::exists(manifest))
    return bundleError(dir +
                       " is not empty and not a bundle; refusing to write "
                       "into it (choose a new directory)");
  if (!empty) {
    if (std::error_code rm = fs::remove_directories(dir))
      return bundleError("cannot replace the bundle in " + dir + ": " +
                         rm.message());
    if (fs::create_directories(dir))
      return bundleError("cannot create " + dir);
  }
  return Error::success();
}

static std::string nowText() {
  std::time_t t = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return text;
}

Error mlir::cleave::writeBundle(ModuleOp module, const BundleOptions &options,
                                llvm::raw_ostream &log) {
  const std::string &dir = options.dir;
  bool cuda = options.compile.target == Target::CUDA;
  if (!fs::exists(options.runner))
    return bundleError("the runner " + options.runner +
                       " is missing (build the target cleave-bundle-run)");
  FailureOr<ProgramManifest> manifest = extractManifest(module);
  if (failed(manifest))
    return bundleError("the program's signature cannot be driven by a runner");
  if (Error err = prepareDirectory(dir))
    return err;
  for (const char *sub : {"bin", "lib", "data"}) {
    SmallString<256> p(dir);
    path::append(p, sub);
    if (std::error_code ec = fs::create_directories(p))
      return bundleError("cannot create " + p + ": " + ec.message());
  }
  auto in = [&](StringRef sub) {
    SmallString<256> p(dir);
    path::append(p, sub);
    return std::string(p);
  };
  log << "writing bundle " << dir << "\n";

  // The compiled steps, through the compile cache (a private one when the
  // cache is off, removed afterwards).
  std::optional<CompileCache> privateCache;
  const CompileCache *cache = options.cache;
  if (!cache || !cache->getOptions().enabled) {
    CompileCacheOptions o;
    o.dir = in(".build");
    o.maxBytes = 0;
    privateCache.emplace(o);
    cache = &*privateCache;
  }
  CompileOptions compile = options.compile;
  if (compile.hostCpu.empty())
    compile.hostCpu = kBundleHostCpu;
  json builds = json::object();
  std::string backend = cuda ? "cuda" : "cpu";
  if (Error err =
          buildStep(module, compile, *cache, in("step-" + backend + ".so"), log,
                    cuda ? "the step for CUDA (" + compile.cuda.chip + ")"
                         : "the step for the CPU (" + compile.hostCpu + ")"))
    return err;
  builds[backend] = "step-" + backend + ".so";
  if (cuda) {
    CompileOptions cpu = compile;
    cpu.target = Target::CPU;
    if (Error err = buildStep(module, cpu, *cache, in("step-cpu.so"), log,
                              "the same step for the CPU (the selftest's "
                              "reference, and --backend cpu)"))
      return err;
    builds["cpu"] = "step-cpu.so";
  }
  if (privateCache)
    fs::remove_directories(in(".build"));

  // The runner and the libraries it loads.
  if (Error err = copyInto(options.runner, in("bin")))
    return err;
  Expected<std::map<std::string, std::string>> libs =
      sharedLibraries(options.runner);
  if (!libs)
    return libs.takeError();
  std::vector<std::string> cudaLibs;
  auto runtime = libs->find("libCleaveRuntime.so");
  if (runtime == libs->end() || runtime->second.empty())
    return bundleError("the runner does not load libCleaveRuntime.so");
  if (cuda) {
    SmallString<256> plugin(path::parent_path(runtime->second));
    path::append(plugin, "libCleaveRuntimeCuda.so");
    if (!fs::exists(plugin))
      return bundleError("this build has no cuda backend (" + plugin +
                         " is missing): configure with CUDA to bundle for it");
    Expected<std::map<std::string, std::string>> pluginLibs =
        sharedLibraries(plugin);
    if (!pluginLibs)
      return pluginLibs.takeError();
    for (auto &[name, where] : *pluginLibs)
      if (isCudaLibrary(name) && name != "libcuda.so.1")
        cudaLibs.push_back(name);
    libs->insert(pluginLibs->begin(), pluginLibs->end());
    (*libs)["libCleaveRuntimeCuda.so"] = std::string(plugin);
  }
  int64_t copied = 0;
  for (auto &[name, where] : *libs) {
    if (isSystemLibrary(name) || isCudaLibrary(name))
      continue;
    if (where.empty())
      return bundleError("the runner needs " + name +
                         ", which ldd does not find");
    if (Error err = copyInto(where, in("lib"), name))
      return err;
    ++copied;
  }
  // Symbols only debuggers read: the runner and the runtime shrink by a
  // fifth (Debian's own libraries are stripped already).
  if (llvm::ErrorOr<std::string> strip = llvm::sys::findProgramByName("strip"))
    for (std::string file :
         {in("bin/cleave-bundle-run"), in("lib/libCleaveRuntime.so"),
          in("lib/libCleaveRuntimeCuda.so")})
      if (fs::exists(file)) {
        StringRef args[] = {*strip, "--strip-unneeded", file};
        llvm::sys::ExecuteAndWait(*strip, args);
      }
  log << "  the runner and " << copied
      << " libraries (the CUDA driver and CUDA libraries are found where "
         "the bundle runs)\n";

  // Data and parameters.
  json data;
  if (!options.inputsPath.empty()) {
    Expected<std::string> f =
        carryData(options.inputsPath, in("data"), "", log);
    if (!f)
      return f.takeError();
    data = {{"kind", "inputs"}, {"file", *f}};
  } else if (!options.tokensPath.empty()) {
    Expected<std::string> f =
        carryData(options.tokensPath, in("data"), "", log);
    if (!f)
      return f.takeError();
    data = {
        {"kind", "tokens"}, {"file", *f}, {"token_bytes", options.tokenBytes}};
  } else {
    std::error_code ec;
    llvm::raw_fd_ostream text(in("data/corpus.txt"), ec);
    if (ec)
      return bundleError("cannot write data/corpus.txt: " + ec.message());
    text << options.text;
    data = {{"kind", "text"}, {"file", "data/corpus.txt"}};
  }
  data["vocab"] = options.vocab;
  if (!options.valDataPath.empty()) {
    Expected<std::string> f =
        carryData(options.valDataPath, in("data"), "val-", log);
    if (!f)
      return f.takeError();
    data["val_file"] = *f;
  }
  json params = nullptr;
  if (!options.paramsPath.empty()) {
    std::string name = "params" + path::extension(options.paramsPath).str();
    if (Error err = copyInto(options.paramsPath, dir, name))
      return err;
    params = name;
  }

  json root = {{"format", "cleave-bundle"},
               {"version", 1},
               {"backend", backend},
               {"builds", builds},
               {"host_cpu", compile.hostCpu},
               {"world", options.world},
               {"plan", options.planText},
               {"mesh", manifest->mesh ? manifest->mesh->toString() : ""},
               {"data", data},
               {"params", params},
               {"defaults",
                {{"steps", options.steps},
                 {"lr", options.learningRate},
                 {"seed", options.seed}}},
               {"cuda_libraries", cudaLibs},
               {"predictions", predictions(options)},
               {"versions",
                {{"llvm", CLEAVE_LLVM_VERSION}, {"cuda", CLEAVE_CUDA_VERSION}}},
               {"created", nowText()}};
  if (cuda)
    root["chip"] = compile.cuda.chip;
  // Rows of the flash attention tiles of the steps (0: materialised).
  root["attention_tile"] =
      cuda ? compile.cuda.attentionTile : compile.pipeline.attentionTile;
  if (options.model) {
    const ::cleave::ModelConfig &m = *options.model;
    root["model"] = {{"name", m.name},
                     {"arch", ::cleave::toString(m.arch)},
                     {"layers", m.layers},
                     {"hidden", m.hidden},
                     {"heads", m.heads},
                     {"seq", m.seqLen},
                     {"batch", m.batch},
                     {"dtype", ::cleave::toString(m.dtype)},
                     {"parameters", m.numParameters()}};
    root["tokens_per_step"] = m.batch * m.seqLen;
  }
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(in("bundle.json"), ec);
    if (ec)
      return bundleError("cannot write bundle.json: " + ec.message());
    out << root.dump(2) << "\n";
  }
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(in("run"), ec);
    if (ec)
      return bundleError("cannot write run: " + ec.message());
    out << runScript(cudaLibs);
  }
  fs::setPermissions(in("run"), fs::all_read | fs::all_exe | fs::owner_write);

  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    uint64_t size = 0;
    if (!fs::is_directory(it->path()) && !fs::file_size(it->path(), size))
      total += size;
  }
  log << "wrote bundle " << dir << ": "
      << llvm::format("%.1f", total / 1048576.0) << " MiB; run it with " << dir
      << "/run [--steps N] [-n N]" << (cuda ? " [--selftest]" : "") << "\n";
  return Error::success();
}
