//===- CudaCompilePtx.cpp - PTX to cubins with ptxas ----------------------===//
//
// Implements -cleave-cuda-compile-ptx. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"
#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>

#define DEBUG_TYPE "cleave-cuda-compile-ptx"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVECUDACOMPILEPTXPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// What ptxas -v says about one kernel.
struct KernelUsage {
  std::string name;
  int64_t registers = 0, spillStores = 0, spillLoads = 0, stack = 0, smem = 0;
};

/// The ptxas to run: `configured`, else under CUDA_HOME / CUDA_PATH /
/// /usr/local/cuda, else on PATH.
std::optional<std::string> findPtxas(StringRef configured) {
  if (!configured.empty())
    return configured.str();
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *root = std::getenv(var)) {
      std::string path = (Twine(root) + "/bin/ptxas").str();
      if (llvm::sys::fs::can_execute(path))
        return path;
    }
  if (llvm::sys::fs::can_execute("/usr/local/cuda/bin/ptxas"))
    return std::string("/usr/local/cuda/bin/ptxas");
  if (auto onPath = llvm::sys::findProgramByName("ptxas"))
    return *onPath;
  return std::nullopt;
}

/// The first integer before `suffix` in `line`, e.g. "17" in
/// "Used 17 registers".
std::optional<int64_t> numberBefore(StringRef line, StringRef suffix) {
  size_t at = line.find(suffix);
  if (at == StringRef::npos)
    return std::nullopt;
  StringRef head = line.take_front(at).rtrim();
  StringRef digits = head.substr(head.find_last_not_of("0123456789") + 1);
  int64_t value;
  if (digits.getAsInteger(10, value))
    return std::nullopt;
  return value;
}

/// Parses the -v lines of ptxas.
SmallVector<KernelUsage> parseUsage(StringRef log) {
  SmallVector<KernelUsage> kernels;
  SmallVector<StringRef> lines;
  log.split(lines, '\n');
  // Entry functions are announced first; device functions (libdevice's
  // helpers) also get properties, which are skipped.
  llvm::StringSet<> entries;
  bool inEntry = false;
  for (StringRef line : lines) {
    if (line.contains("Compiling entry function '")) {
      StringRef rest = line.substr(line.find('\'') + 1);
      entries.insert(rest.take_until([](char c) { return c == '\''; }));
      continue;
    }
    if (line.contains("Function properties for ")) {
      StringRef name = line.substr(line.find("for ") + 4).trim();
      inEntry = entries.contains(name);
      if (inEntry) {
        kernels.emplace_back();
        kernels.back().name = name.str();
      }
      continue;
    }
    if (!inEntry)
      continue;
    KernelUsage &k = kernels.back();
    if (auto v = numberBefore(line, "bytes stack frame"))
      k.stack = *v;
    if (auto v = numberBefore(line, "bytes spill stores"))
      k.spillStores = *v;
    if (auto v = numberBefore(line, "bytes spill loads"))
      k.spillLoads = *v;
    if (auto v = numberBefore(line, "registers"))
      k.registers = *v;
    if (auto v = numberBefore(line, "bytes smem"))
      k.smem = *v;
  }
  return kernels;
}

/// A temporary file removed when this goes out of scope.
struct TempFile {
  explicit TempFile(StringRef suffix) {
    if (llvm::sys::fs::createTemporaryFile("cleave-ptx", suffix, path))
      path.clear();
  }
  ~TempFile() {
    if (!path.empty())
      llvm::sys::fs::remove(path);
  }
  SmallString<128> path;
};

struct CleaveCudaCompilePtxPass final
    : cleave::impl::CleaveCudaCompilePtxPassBase<CleaveCudaCompilePtxPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::BinaryOp> binaries(module.getOps<gpu::BinaryOp>());
    if (binaries.empty())
      return;
    std::optional<std::string> tool = findPtxas(ptxas);
    if (!tool) {
      module.emitError("cannot find ptxas: set CUDA_HOME or pass "
                       "ptxas=<path> (CUDA is installed in /usr/local/cuda "
                       "on a standard machine)");
      return signalPassFailure();
    }
    SmallVector<KernelUsage> usage;
    double seconds = 0;
    for (gpu::BinaryOp binary : binaries)
      if (failed(compile(binary, *tool, usage, seconds)))
        return signalPassFailure();
    if (!report.empty() && failed(writeReport(usage, seconds)))
      return signalPassFailure();
  }

  LogicalResult compile(gpu::BinaryOp binary, StringRef tool,
                        SmallVectorImpl<KernelUsage> &usage, double &seconds) {
    SmallVector<Attribute> objects;
    for (Attribute attr : binary.getObjects()) {
      auto object = cast<gpu::ObjectAttr>(attr);
      if (object.getFormat() != gpu::CompilationTarget::Assembly) {
        objects.push_back(object);
        continue;
      }
      FailureOr<std::string> cubin =
          runPtxas(binary, tool, object.getObject().getValue(), usage, seconds);
      if (failed(cubin))
        return failure();
      objects.push_back(
          gpu::ObjectAttr::get(binary.getContext(), object.getTarget(),
                               gpu::CompilationTarget::Binary,
                               StringAttr::get(binary.getContext(), *cubin),
                               object.getProperties()));
    }
    binary.setObjectsAttr(ArrayAttr::get(binary.getContext(), objects));
    return success();
  }

  FailureOr<std::string> runPtxas(gpu::BinaryOp binary, StringRef tool,
                                  StringRef ptx,
                                  SmallVectorImpl<KernelUsage> &usage,
                                  double &seconds) {
    // The PTX of gpu-module-to-binary ends with a NUL that ptxas rejects.
    ptx = ptx.rtrim(StringRef("\0", 1));
    TempFile in(".ptx"), out(".cubin"), log(".log");
    if (in.path.empty() || out.path.empty() || log.path.empty())
      return binary.emitError("cannot create temporary files for ptxas");
    {
      std::error_code ec;
      llvm::raw_fd_ostream os(in.path, ec);
      if (ec)
        return binary.emitError()
               << "cannot write " << in.path << ": " << ec.message();
      os << ptx;
    }
    std::string opt = "-O" + std::to_string(optLevel);
    SmallVector<StringRef> args = {tool, "-arch", chip, opt};
    if (!report.empty())
      args.push_back("-v");
    args.append({in.path.str(), "-o", out.path.str()});
    std::optional<StringRef> redirects[] = {std::nullopt, log.path.str(),
                                            log.path.str()};
    std::string error;
    auto start = std::chrono::steady_clock::now();
    int rc = llvm::sys::ExecuteAndWait(tool, args, std::nullopt, redirects, 0,
                                       0, &error);
    seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    auto logText = llvm::MemoryBuffer::getFile(log.path);
    StringRef logStr = logText ? (*logText)->getBuffer() : StringRef();
    if (rc != 0)
      return binary.emitError()
             << "ptxas (" << tool << " -arch " << chip << ") failed"
             << (error.empty() ? "" : ": " + error) << "\n"
             << logStr;
    auto cubin = llvm::MemoryBuffer::getFile(out.path, /*IsText=*/false);
    if (!cubin)
      return binary.emitError() << "ptxas wrote no cubin to " << out.path;
    llvm::append_range(usage, parseUsage(logStr));
    return (*cubin)->getBuffer().str();
  }

  LogicalResult writeReport(ArrayRef<KernelUsage> usage, double seconds) {
    if (report == "-") {
      llvm::errs() << llvm::format("%-48s %5s %8s %8s %6s %6s\n",
                                   (const char *)"kernel", (const char *)"regs",
                                   (const char *)"spill-st",
                                   (const char *)"spill-ld",
                                   (const char *)"stack", (const char *)"smem");
      for (const KernelUsage &k : usage)
        llvm::errs() << llvm::format(
            "%-48s %5lld %8lld %8lld %6lld %6lld\n", k.name.c_str(),
            (long long)k.registers, (long long)k.spillStores,
            (long long)k.spillLoads, (long long)k.stack, (long long)k.smem);
      llvm::errs() << "ptxas: " << usage.size() << " kernels in "
                   << llvm::format("%.2f", seconds) << " s\n";
      return success();
    }
    nlohmann::json kernels = nlohmann::json::array();
    for (const KernelUsage &k : usage)
      kernels.push_back({{"name", k.name},
                         {"registers", k.registers},
                         {"spill_stores", k.spillStores},
                         {"spill_loads", k.spillLoads},
                         {"stack", k.stack},
                         {"smem", k.smem}});
    nlohmann::json root = {{"chip", std::string(chip)},
                           {"ptxas_seconds", seconds},
                           {"kernels", std::move(kernels)}};
    std::error_code ec;
    llvm::raw_fd_ostream os(report, ec);
    if (ec)
      return getOperation().emitError() << "cannot write the ptxas report "
                                        << report << ": " << ec.message();
    os << root.dump(2) << "\n";
    return success();
  }
};

} // namespace
