//===- CudaLowerLaunches.cpp - Launches and buffers to the CUDA runtime ---===//
//
// Implements -cleave-cuda-lower-launches. See Passes.td for the contract and
// include/cleave/Runtime/CudaRuntime.h for the functions called.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#define DEBUG_TYPE "cleave-cuda-lower-launches"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVECUDALOWERLAUNCHESPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

constexpr StringLiteral kLaunch = "cleave_rt_cuda_launch";
constexpr StringLiteral kAlloc = "cleave_rt_cuda_alloc";
constexpr StringLiteral kFree = "cleave_rt_cuda_free";
constexpr StringLiteral kSynchronize = "cleave_rt_cuda_synchronize";
constexpr StringLiteral kStepBegin = "cleave_rt_cuda_step_begin";

/// The globals of one cubin: its bytes and the runtime's module handle.
struct Image {
  LLVM::GlobalOp bytes, module;
};

class Lowering {
public:
  explicit Lowering(ModuleOp module)
      : module(module), ctx(module.getContext()),
        ptr(LLVM::LLVMPointerType::get(ctx)) {}

  LogicalResult run() {
    if (failed(lowerBinaries()) || failed(lowerLaunches()) ||
        failed(lowerAllocations()))
      return failure();
    synchronizeEntries();
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
    return success();
  }

private:
  /// A builder at the start of the module (declarations and globals).
  OpBuilder top() { return OpBuilder::atBlockBegin(module.getBody()); }

  LLVM::LLVMFuncOp declare(StringRef name, Type result, ArrayRef<Type> args) {
    if (auto f = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
      return f;
    return top().create<LLVM::LLVMFuncOp>(
        module.getLoc(), name, LLVM::LLVMFunctionType::get(result, args));
  }

  LLVM::GlobalOp bytesGlobal(StringRef name, StringRef bytes) {
    auto type =
        LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), bytes.size());
    return top().create<LLVM::GlobalOp>(module.getLoc(), type,
                                        /*isConstant=*/true,
                                        LLVM::Linkage::Internal, name,
                                        StringAttr::get(ctx, bytes),
                                        /*alignment=*/64);
  }

  /// A pointer-sized global initialized to null (a handle slot).
  LLVM::GlobalOp slotGlobal(StringRef name) {
    auto slot = top().create<LLVM::GlobalOp>(
        module.getLoc(), ptr,
        /*isConstant=*/false, LLVM::Linkage::Internal, name, Attribute());
    OpBuilder b(ctx);
    Block *init = b.createBlock(&slot.getInitializerRegion());
    b.setInsertionPointToStart(init);
    b.create<LLVM::ReturnOp>(
        module.getLoc(),
        b.create<LLVM::ZeroOp>(module.getLoc(), ptr).getResult());
    return slot;
  }

  LogicalResult lowerBinaries() {
    for (auto binary :
         llvm::make_early_inc_range(module.getOps<gpu::BinaryOp>())) {
      if (binary.getObjects().size() != 1)
        return binary.emitError("expected exactly one object (one target)");
      auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
      if (object.getFormat() != gpu::CompilationTarget::Binary &&
          object.getFormat() != gpu::CompilationTarget::Fatbin)
        return binary.emitError(
            "expected a cubin (run cleave-cuda-compile-ptx first)");
      StringRef name = binary.getName();
      Image image;
      image.bytes = bytesGlobal(("__cleave_cubin_" + name).str(),
                                object.getObject().getValue());
      image.module = slotGlobal(("__cleave_module_" + name).str());
      images[name] = image;
      binary.erase();
    }
    return success();
  }

  /// A NUL-terminated kernel name and a function handle slot, per kernel.
  std::pair<LLVM::GlobalOp, LLVM::GlobalOp> kernelGlobals(StringRef kernel) {
    auto &entry = kernelSymbols[kernel];
    if (!entry.first) {
      std::string text = kernel.str();
      text.push_back('\0');
      entry.first = bytesGlobal(("__cleave_kname_" + kernel).str(), text);
      entry.second = slotGlobal(("__cleave_function_" + kernel).str());
    }
    return entry;
  }

  LogicalResult lowerLaunches() {
    SmallVector<gpu::LaunchFuncOp> launches;
    module.walk([&](gpu::LaunchFuncOp op) { launches.push_back(op); });
    if (launches.empty())
      return success();
    Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
    LLVM::LLVMFuncOp launchFn =
        declare(kLaunch, LLVM::LLVMVoidType::get(ctx),
                {ptr, ptr, ptr, ptr, i64, i64, i64, i64, i64, i64, i32, ptr});
    for (gpu::LaunchFuncOp op : launches)
      if (failed(lowerLaunch(op, launchFn)))
        return failure();
    return success();
  }

  LogicalResult lowerLaunch(gpu::LaunchFuncOp op, LLVM::LLVMFuncOp launchFn) {
    auto it = images.find(op.getKernelModuleName().getValue());
    if (it == images.end())
      return op.emitError("no cubin for kernel module ")
             << op.getKernelModuleName();
    if (!op.getAsyncDependencies().empty() || op.getAsyncToken() ||
        op.hasClusterSize())
      return op.emitError("asynchronous and cluster launches are not "
                          "supported (the runtime orders launches on its "
                          "compute stream)");
    auto func = op->getParentOfType<LLVM::LLVMFuncOp>();
    if (!func)
      return op.emitError("expected the host code in the LLVM dialect");
    Location loc = op.getLoc();
    Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
    SmallVector<Value> args(op.getKernelOperands());
    SmallVector<Type> argTypes;
    for (Value v : args)
      argTypes.push_back(v.getType());
    // Argument storage lives in the entry block: launches inside loops must
    // not grow the stack.
    OpBuilder entry(&func.getBody().front(), func.getBody().front().begin());
    Value one = entry.create<LLVM::ConstantOp>(loc, i64, 1);
    auto structType = LLVM::LLVMStructType::getLiteral(ctx, argTypes);
    Value storage = entry.create<LLVM::AllocaOp>(loc, ptr, structType, one, 0);
    Value count = entry.create<LLVM::ConstantOp>(
        loc, i64, std::max<int64_t>(1, args.size()));
    Value argv = entry.create<LLVM::AllocaOp>(loc, ptr, ptr, count, 0);

    OpBuilder b(op);
    for (auto [i, v] : llvm::enumerate(args)) {
      Value field = b.create<LLVM::GEPOp>(
          loc, ptr, structType, storage, ArrayRef<LLVM::GEPArg>{0, int32_t(i)});
      b.create<LLVM::StoreOp>(loc, v, field);
      Value slot = b.create<LLVM::GEPOp>(loc, ptr, ptr, argv,
                                         ArrayRef<LLVM::GEPArg>{int32_t(i)});
      b.create<LLVM::StoreOp>(loc, field, slot);
    }
    auto address = [&](LLVM::GlobalOp g) -> Value {
      return b.create<LLVM::AddressOfOp>(loc, g);
    };
    auto toI64 = [&](Value v) -> Value {
      if (v.getType() == i64)
        return v;
      return b.create<UnrealizedConversionCastOp>(loc, i64, v).getResult(0);
    };
    auto [name, function] = kernelGlobals(op.getKernelName().getValue());
    Value shared = op.getDynamicSharedMemorySize();
    if (!shared)
      shared = b.create<LLVM::ConstantOp>(loc, i32, 0);
    b.create<LLVM::CallOp>(
        loc, launchFn,
        ValueRange{address(function), address(it->second.module),
                   address(it->second.bytes), address(name),
                   toI64(op.getGridSizeX()), toI64(op.getGridSizeY()),
                   toI64(op.getGridSizeZ()), toI64(op.getBlockSizeX()),
                   toI64(op.getBlockSizeY()), toI64(op.getBlockSizeZ()), shared,
                   argv});
    op.erase();
    return success();
  }

  /// malloc/free of host code allocate device buffers; nothing else of the
  /// C library may touch memory.
  LogicalResult lowerAllocations() {
    Type i64 = IntegerType::get(ctx, 64);
    WalkResult result = module.walk([&](LLVM::CallOp call) {
      std::optional<StringRef> callee = call.getCallee();
      if (!callee)
        return WalkResult::advance();
      if (*callee == "malloc") {
        call.setCallee(declare(kAlloc, ptr, {i64}).getName());
      } else if (*callee == "free") {
        call.setCallee(
            declare(kFree, LLVM::LLVMVoidType::get(ctx), {ptr}).getName());
      } else if (*callee == "memrefCopy" || *callee == "aligned_alloc" ||
                 *callee == "memcpy" || *callee == "memset") {
        call.emitError() << "host code calls " << *callee
                         << " on what are device buffers on the GPU";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return failure();
    for (StringRef name : {"malloc", "free"})
      if (auto f = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
        if (f.isExternal() && f.symbolKnownUseEmpty(module))
          f.erase();
    return success();
  }

  /// cleave_entry_* marks the start of a step and returns once the device
  /// finished it.
  void synchronizeEntries() {
    Type voidType = LLVM::LLVMVoidType::get(ctx);
    for (auto func : llvm::to_vector(module.getOps<LLVM::LLVMFuncOp>())) {
      if (!func.getName().starts_with("cleave_entry_") || func.isExternal())
        continue;
      LLVM::LLVMFuncOp begin = declare(kStepBegin, voidType, {});
      LLVM::LLVMFuncOp sync = declare(kSynchronize, voidType, {});
      OpBuilder::atBlockBegin(&func.getBody().front())
          .create<LLVM::CallOp>(func.getLoc(), begin, ValueRange{});
      func.walk([&](LLVM::ReturnOp ret) {
        OpBuilder(ret).create<LLVM::CallOp>(ret.getLoc(), sync, ValueRange{});
      });
    }
  }

  ModuleOp module;
  MLIRContext *ctx;
  Type ptr;
  llvm::StringMap<Image> images;
  llvm::StringMap<std::pair<LLVM::GlobalOp, LLVM::GlobalOp>> kernelSymbols;
};

struct CleaveCudaLowerLaunchesPass final
    : cleave::impl::CleaveCudaLowerLaunchesPassBase<
          CleaveCudaLowerLaunchesPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(Lowering(getOperation()).run()))
      signalPassFailure();
  }
};

} // namespace
