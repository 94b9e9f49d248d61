//===- Lowering.cpp - The CPU and CUDA lowering pipelines -----------------===//
//
// One list of passes, two targets. The tensor level, bufferization and the
// host's LLVM lowering are shared; the CPU turns the remaining linalg ops
// into loops, CUDA into kernels compiled to cubins (docs/cuda.md).
//
//===----------------------------------------------------------------------===//

#include "cleave/Pipelines/Lowering.h"
#include "cleave/Conversion/Passes.h"
#include "cleave/Dialect/CleaveDialect.h"
#include "cleave/Pipelines/Compile.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/MemRef/Transforms/AllocationOpInterfaceImpl.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::cleave;

void mlir::cleave::registerCPULoweringDialects(DialectRegistry &registry) {
  registry.insert<CleaveDialect, arith::ArithDialect, vector::VectorDialect,
                  bufferization::BufferizationDialect, cf::ControlFlowDialect,
                  func::FuncDialect, linalg::LinalgDialect, LLVM::LLVMDialect,
                  math::MathDialect, memref::MemRefDialect, scf::SCFDialect,
                  tensor::TensorDialect>();
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  scf::registerBufferizableOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(
      registry);
  arith::registerBufferDeallocationOpInterfaceExternalModels(registry);
  cf::registerBufferDeallocationOpInterfaceExternalModels(registry);
  scf::registerBufferDeallocationOpInterfaceExternalModels(registry);
  memref::registerAllocationOpInterfaceExternalModels(registry);
}

void mlir::cleave::registerCUDALoweringDialects(DialectRegistry &registry) {
  registerCPULoweringDialects(registry);
  registry.insert<affine::AffineDialect, gpu::GPUDialect, NVVM::NVVMDialect>();
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  // gpu-module-to-binary translates kernels to LLVM IR in-process.
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
}

//===----------------------------------------------------------------------===//
// The shared list
//===----------------------------------------------------------------------===//

/// Tensor level, once every rank's communication is proven to match:
/// communication becomes runtime calls (on device buffers for CUDA), compute
/// linalg, fused. Attention is tiled (flash) with `attentionTile` > 0.
static void addTensorLevel(OpPassManager &pm, int64_t attentionTile) {
  pm.addPass(createCleaveVerifyCollectivesPass());
  pm.addPass(createCleaveLowerCollectivesPass());
  CleaveLowerToLinalgPassOptions linalg;
  linalg.attentionTile = attentionTile;
  pm.addPass(createCleaveLowerToLinalgPass(linalg));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCleaveFuseElementwisePass());
  pm.addPass(createCanonicalizerPass());
}

/// Every function gets out-parameters. (Given explicitly: the default of
/// BufferResultsToOutParamsOpts::filterFn in LLVM 19 is a function_ref to a
/// temporary lambda, which dangles once the options are copied.)
static bool allFunctions(func::FuncOp *) { return true; }

/// Buffers: identity layouts at function boundaries, results written into
/// caller-provided buffers; GEMMs (with their fused epilogues on CUDA)
/// become runtime calls.
static void addBufferization(OpPassManager &pm, Target target) {
  // CUDA frees buffers at the end of the step: there, the buffer that users
  // of one shared tensor.empty write in turn is reuse, not a long life.
  CleavePrepareBufferizationPassOptions prepare;
  prepare.unshareEmpties = target == Target::CPU;
  pm.addPass(createCleavePrepareBufferizationPass(prepare));
  bufferization::OneShotBufferizationOptions bufferization;
  bufferization.bufferizeFunctionBoundaries = true;
  bufferization.setFunctionBoundaryTypeConversion(
      bufferization::LayoutMapOption::IdentityLayoutMap);
  pm.addPass(bufferization::createOneShotBufferizePass(bufferization));
  bufferization::BufferResultsToOutParamsOpts outParams;
  outParams.hoistStaticAllocs = true;
  outParams.filterFn = allFunctions;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  if (target == Target::CUDA)
    pm.addPass(createCleaveCudaGemmEpiloguesPass());
  pm.addPass(createCleaveLinalgToRuntimePass());
  bufferization::BufferDeallocationPipelineOptions dealloc;
  bufferization::buildBufferDeallocationPipeline(pm, dealloc);
}

/// Host code to the LLVM dialect with the bare-pointer convention. The CPU
/// computes exp/tanh/erf with inline polynomials and converts f32 to and
/// from bf16 with integer arithmetic (round to nearest even): LLVM would
/// otherwise call `__truncsfbf2`, which only libgcc 13+ and compiler-rt
/// define, so bf16 programs failed to link on a stock Debian 12. CUDA host
/// code also lowers kernel launches. Both expand the arith ops that have no
/// LLVM lowering (the flash attention's tile bounds use `ceildivui`).
static void addHostLowering(OpPassManager &pm, Target target) {
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  if (target == Target::CPU)
    pm.addPass(createCleaveApproximateMathPass());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = target == Target::CPU;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  // CPU buffers come from the runtime's allocator, which counts them
  // (cleave_rt_memory_stats); CUDA host code's malloc/free become device
  // allocations in cleave-cuda-lower-launches.
  FinalizeMemRefToLLVMConversionPassOptions memrefOptions;
  memrefOptions.useGenericFunctions = target == Target::CPU;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefOptions));
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  ConvertFuncToLLVMPassOptions funcOptions;
  funcOptions.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcOptions));
  pm.addPass(createConvertIndexToLLVMPass());
  if (target == Target::CUDA) {
    GpuToLLVMConversionPassOptions launches;
    launches.hostBarePtrCallConv = true;
    launches.kernelBarePtrCallConv = true;
    pm.addPass(createGpuToLLVMConversionPass(launches));
  }
  pm.addPass(createReconcileUnrealizedCastsPass());
}

//===----------------------------------------------------------------------===//
// CPU
//===----------------------------------------------------------------------===//

void mlir::cleave::buildCPULoweringPipeline(OpPassManager &pm,
                                            const CPUPipelineOptions &options) {
  addTensorLevel(pm, options.attentionTile);
  addBufferization(pm, Target::CPU);
  // Buffers die at their last use, not at the end of the step.
  pm.addPass(createCleaveEarlyDeallocPass());
  // Loops, one function per loop nest (for LLVM's sake).
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(createCleaveOutlineKernelsPass());
  addHostLowering(pm, Target::CPU);
  pm.addPass(createCleaveEmitEntryPointsPass());
  (void)options;
}

//===----------------------------------------------------------------------===//
// CUDA
//===----------------------------------------------------------------------===//

/// Kernels: NVVM for the chip, aligned vector accesses.
static void addDeviceLowering(OpPassManager &pm,
                              const CUDAPipelineOptions &options) {
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = "+ptx78";
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createLowerAffinePass());
  device.addPass(createConvertSCFToCFPass());
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.useBarePtrCallConv = true;
  nvvm.indexBitwidth = 64;
  device.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  device.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCleaveCudaAlignVectorAccessPass());
}

void mlir::cleave::buildCUDALoweringPipeline(
    OpPassManager &pm, const CUDAPipelineOptions &options) {
  addTensorLevel(pm, options.attentionTile);
  addBufferization(pm, Target::CUDA);
  CleaveCudaMapToGpuPassOptions kernels;
  kernels.blockSize = options.blockSize;
  kernels.vectorBits = options.vectorBits;
  pm.addPass(createCleaveCudaMapToGpuPass(kernels));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // The layers' kernels are identical: each distinct one is compiled once.
  pm.addPass(createCleaveCudaDedupKernelsPass());
  addDeviceLowering(pm, options);
  addHostLowering(pm, Target::CUDA);

  // PTX in-process, then cubins from ptxas; launches become runtime calls.
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
  CleaveCudaCompilePtxPassOptions ptxas;
  ptxas.chip = options.chip;
  ptxas.ptxas = options.ptxas;
  ptxas.report = options.ptxasReport;
  pm.addPass(createCleaveCudaCompilePtxPass(ptxas));
  pm.addPass(createCleaveEmitEntryPointsPass());
  pm.addPass(createCleaveCudaLowerLaunchesPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

llvm::Error mlir::cleave::lowerForTarget(ModuleOp module, Target target,
                                         const CPUPipelineOptions &cpu,
                                         const CUDAPipelineOptions &cuda) {
  DiagnosticCollector diags(module.getContext());
  PassManager pm(module.getContext());
  if (target == Target::CUDA)
    buildCUDALoweringPipeline(pm, cuda);
  else
    buildCPULoweringPipeline(pm, cpu);
  if (failed(pm.run(module)))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::Twine("lowering for ") +
            (target == Target::CUDA ? "CUDA" : "the CPU") + " failed:\n" +
            diags.text);
  return llvm::Error::success();
}
