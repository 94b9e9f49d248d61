//===- Compiler.cpp - JIT and AOT compilation for the CPU -----------------===//

#include "cleave/Execution/Compiler.h"
#include "cleave/Pipelines/Compile.h"
#include "cleave/Runtime/CudaRuntime.h"
#include "cleave/Runtime/Runtime.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include <chrono>
#include <mutex>

using namespace mlir;
using namespace mlir::cleave;

/// Strided memref copies (lib/Runtime/MemrefCopy.cpp).
extern "C" void memrefCopy(int64_t elementSize, void *src, void *dst);

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Caps LLVM's full-unrolling threshold (unless the user set
/// -unroll-threshold). With the host's cost model (AVX-512) LLVM fully unrolls
/// the short constant-trip loops of small per-device tensors: the partitioned
/// tiny-gpt step (batch 8, tp 2) grew 20x, from 0.4 MB to 8 MB of bitcode, and
/// took minutes to compile instead of seconds. 100 keeps the inner loops
/// vectorized without unrolling whole loop nests.
static void limitFullUnrolling() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto &options = llvm::cl::getRegisteredOptions();
    auto it = options.find("unroll-threshold");
    if (it == options.end() || it->second->getNumOccurrences() != 0)
      return;
    // LLVM reads the option only when it occurred on a command line.
    (void)it->second->addOccurrence(1, "unroll-threshold", "100");
  });
}

void mlir::cleave::registerCompilerDialects(DialectRegistry &registry) {
  registerCPULoweringDialects(registry);
  registerCUDALoweringDialects(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

/// Adds `const char *cleave_manifest_json(void)` returning `json`.
static void embedManifest(ModuleOp module, StringRef json) {
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToEnd(module.getBody());
  Location loc = module.getLoc();
  MLIRContext *ctx = module.getContext();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  auto func = b.create<LLVM::LLVMFuncOp>(loc, "cleave_manifest_json",
                                         LLVM::LLVMFunctionType::get(ptr, {}));
  Block *body = func.addEntryBlock(b);
  b.setInsertionPointToStart(body);
  std::string text = json.str();
  text.push_back('\0');
  Value str = LLVM::createGlobalString(loc, b, "cleave_manifest", text,
                                       LLVM::Linkage::Internal);
  b.create<LLVM::ReturnOp>(loc, str);
}

/// Extracts the manifest, lowers, and embeds the manifest.
static llvm::Expected<ProgramManifest> prepare(ModuleOp module,
                                               const CompileOptions &options) {
  DiagnosticCollector diags(module.getContext());
  FailureOr<ProgramManifest> manifest = extractManifest(module);
  if (failed(manifest))
    return makeError("cannot describe the program's buffers:\n" + diags.text);
  if (llvm::Error err = lowerForTarget(module, options.target, options.pipeline,
                                       options.cuda))
    return std::move(err);
  if (failed(extractGroups(module, *manifest)))
    return makeError("cannot describe the program's communicators:\n" +
                     diags.text);
  std::string json;
  llvm::raw_string_ostream os(json);
  os << manifest->toJSON();
  embedManifest(module, json);
  return *manifest;
}

JitProgram::~JitProgram() = default;

llvm::Expected<std::unique_ptr<JitProgram>>
JitProgram::compile(ModuleOp module, const CompileOptions &options) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  std::unique_ptr<JitProgram> program(new JitProgram());
  auto t0 = std::chrono::steady_clock::now();
  llvm::Expected<ProgramManifest> manifest = prepare(module, options);
  if (!manifest)
    return manifest.takeError();
  program->manifest = std::move(*manifest);

  // Optimize for the host CPU (without a target machine LLVM's cost models
  // are generic and compilation is both slower and worse).
  auto hostBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!hostBuilder)
    return hostBuilder.takeError();
  auto hostMachine = hostBuilder->createTargetMachine();
  if (!hostMachine)
    return hostMachine.takeError();
  limitFullUnrolling();
  auto transformer =
      makeOptimizingTransformer(options.optLevel, 0, hostMachine->get());
  ExecutionEngineOptions engineOptions;
  engineOptions.enableGDBNotificationListener = false;
  engineOptions.transformer = transformer;
  engineOptions.jitCodeGenOptLevel =
      static_cast<llvm::CodeGenOptLevel>(std::min(options.optLevel, 3u));
  auto t1 = std::chrono::steady_clock::now();
  auto engine = ExecutionEngine::create(module, engineOptions);
  if (!engine)
    return engine.takeError();
  auto t2 = std::chrono::steady_clock::now();
  program->stats.loweringSeconds =
      std::chrono::duration<double>(t1 - t0).count();
  program->stats.codegenSeconds =
      std::chrono::duration<double>(t2 - t1).count();
  program->engine = std::move(*engine);
  program->engine->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    auto add = [&](const char *name, auto *fn) {
      map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(fn),
                             llvm::JITSymbolFlags::Exported};
    };
    // Everything generated code may call (Runtime.h, "called by generated
    // code").
    add("cleave_rt_gemm", &cleave_rt_gemm);
    add("cleave_rt_all_reduce", &cleave_rt_all_reduce);
    add("cleave_rt_all_gather", &cleave_rt_all_gather);
    add("cleave_rt_reduce_scatter", &cleave_rt_reduce_scatter);
    add("cleave_rt_all_to_all", &cleave_rt_all_to_all);
    add("cleave_rt_collective_permute", &cleave_rt_collective_permute);
    add("cleave_rt_send", &cleave_rt_send);
    add("cleave_rt_recv", &cleave_rt_recv);
    add("cleave_rt_barrier", &cleave_rt_barrier);
    add("cleave_rt_group_rank", &cleave_rt_group_rank);
    add("memrefCopy", &memrefCopy);
    // Host code of the CUDA target (CudaRuntime.h).
    add("cleave_rt_cuda_launch", &cleave_rt_cuda_launch);
    add("cleave_rt_cuda_alloc", &cleave_rt_cuda_alloc);
    add("cleave_rt_cuda_free", &cleave_rt_cuda_free);
    add("cleave_rt_cuda_step_begin", &cleave_rt_cuda_step_begin);
    add("cleave_rt_cuda_synchronize", &cleave_rt_cuda_synchronize);
    add("cleave_rt_cuda_gemm_epilogue", &cleave_rt_cuda_gemm_epilogue);
    return map;
  });
  return std::move(program);
}

llvm::Expected<EntryFn> JitProgram::lookup(StringRef name) const {
  auto symbol = engine->lookup(("cleave_entry_" + name).str());
  if (!symbol)
    return symbol.takeError();
  return reinterpret_cast<EntryFn>(*symbol);
}

llvm::Error mlir::cleave::compileToObject(ModuleOp module, StringRef path,
                                          const CompileOptions &options) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Expected<ProgramManifest> manifest = prepare(module, options);
  if (!manifest)
    return manifest.takeError();

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext);
  if (!llvmModule)
    return makeError("translation to LLVM IR failed");
  std::string triple = llvm::sys::getProcessTriple();
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return makeError("no LLVM target for " + triple + ": " + error);
  llvm::TargetOptions targetOptions;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple,
      options.hostCpu.empty() ? llvm::sys::getHostCPUName()
                              : llvm::StringRef(options.hostCpu),
      "", targetOptions, llvm::Reloc::PIC_));
  if (!machine)
    return makeError("no LLVM target machine for CPU '" + options.hostCpu +
                     "' on " + triple);
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());
  limitFullUnrolling();
  auto optimize = makeOptimizingTransformer(options.optLevel, 0, machine.get());
  if (llvm::Error err = optimize(llvmModule.get()))
    return err;

  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return makeError("cannot open " + path + ": " + ec.message());
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, out.os(), nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return makeError("the target cannot emit object files");
  codegen.run(*llvmModule);
  out.keep();
  return llvm::Error::success();
}
