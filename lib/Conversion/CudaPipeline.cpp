//===- CudaPipeline.cpp - The CUDA lowering pipeline ----------------------===//
//
// cleave (local shapes) -> host code in the LLVM dialect that launches sm_90
// cubins and calls the runtime (cuBLASLt GEMMs, NCCL collectives). The
// tensor level and bufferization are the CPU pipeline's; see docs/cuda.md.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::cleave;

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

static bool allFunctions(func::FuncOp *) { return true; }

/// Bufferization exactly as the CPU pipeline (identity layouts at function
/// boundaries, results into caller-provided buffers), GEMMs to runtime calls.
static void addBufferization(OpPassManager &pm) {
  pm.addPass(createCleavePrepareBufferizationPass());
  bufferization::OneShotBufferizationOptions bufferization;
  bufferization.bufferizeFunctionBoundaries = true;
  bufferization.setFunctionBoundaryTypeConversion(
      bufferization::LayoutMapOption::IdentityLayoutMap);
  pm.addPass(bufferization::createOneShotBufferizePass(bufferization));
  bufferization::BufferResultsToOutParamsOpts outParams;
  outParams.hoistStaticAllocs = true;
  outParams.filterFn = allFunctions;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  pm.addPass(createCleaveCudaGemmEpiloguesPass());
  pm.addPass(createCleaveLinalgToRuntimePass());
  bufferization::BufferDeallocationPipelineOptions dealloc;
  bufferization::buildBufferDeallocationPipeline(pm, dealloc);
}

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

/// Host code: the CPU pipeline's LLVM lowering plus the launches.
static void addHostLowering(OpPassManager &pm) {
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  ConvertFuncToLLVMPassOptions funcOptions;
  funcOptions.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcOptions));
  pm.addPass(createConvertIndexToLLVMPass());
  GpuToLLVMConversionPassOptions launches;
  launches.hostBarePtrCallConv = true;
  launches.kernelBarePtrCallConv = true;
  pm.addPass(createGpuToLLVMConversionPass(launches));
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::cleave::buildCUDALoweringPipeline(
    OpPassManager &pm, const CUDAPipelineOptions &options) {
  // Tensor level: the CPU pipeline's front half (once every rank's
  // communication is proven to match, it becomes runtime calls, on device
  // buffers here).
  pm.addPass(createCleaveVerifyCollectivesPass());
  pm.addPass(createCleaveLowerCollectivesPass());
  pm.addPass(createCleaveLowerToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCleaveFuseElementwisePass());
  pm.addPass(createCanonicalizerPass());
  addBufferization(pm);

  CleaveCudaMapToGpuPassOptions kernels;
  kernels.blockSize = options.blockSize;
  kernels.vectorBits = options.vectorBits;
  pm.addPass(createCleaveCudaMapToGpuPass(kernels));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  addDeviceLowering(pm, options);
  addHostLowering(pm);

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

namespace {
/// The textual options of `cleave-lower-to-cuda`.
struct CUDAPipelineCLOptions
    : public PassPipelineOptions<CUDAPipelineCLOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("GPU architecture"),
                           llvm::cl::init("sm_90")};
  Option<std::string> ptxas{*this, "ptxas",
                            llvm::cl::desc("Path of ptxas (default: found "
                                           "under CUDA_HOME or "
                                           "/usr/local/cuda)"),
                            llvm::cl::init("")};
  Option<std::string> report{
      *this, "ptxas-report",
      llvm::cl::desc("Write ptxas' per-kernel resource usage to this JSON "
                     "file ('-': a table on stderr)"),
      llvm::cl::init("")};
  Option<int64_t> blockSize{*this, "block-size",
                            llvm::cl::desc("Threads per block"),
                            llvm::cl::init(256)};
  Option<int64_t> vectorBits{*this, "vector-bits",
                             llvm::cl::desc("Vector access width (0: none)"),
                             llvm::cl::init(128)};
};
} // namespace

void mlir::cleave::registerCUDAPipeline() {
  PassPipelineRegistration<CUDAPipelineCLOptions>(
      "cleave-lower-to-cuda",
      "Lower a cleave program with local shapes to host code in the LLVM "
      "dialect that launches sm_90 cubins and calls the CUDA runtime",
      [](OpPassManager &pm, const CUDAPipelineCLOptions &cl) {
        CUDAPipelineOptions options;
        options.chip = cl.chip;
        options.ptxas = cl.ptxas;
        options.ptxasReport = cl.report;
        options.blockSize = cl.blockSize;
        options.vectorBits = cl.vectorBits;
        buildCUDALoweringPipeline(pm, options);
      });
}
