// The whole CUDA pipeline on a small layer: kernels become one sm_90 cubin
// embedded in the host code, GEMMs runtime calls, launches and buffers the
// runtime's CUDA ABI, and the entry point brackets the step.
// REQUIRES: ptxas
// RUN: cleave-opt %s --cleave-lower-to-cuda="ptxas-report=-" -o %t.mlir 2> %t.report
// RUN: FileCheck %s < %t.mlir
// RUN: FileCheck %s --check-prefix=REPORT < %t.report
// RUN: mlir-translate --mlir-to-llvmir %t.mlir -o %t.ll

// Only LLVM dialect is left: no gpu, memref or func ops.
// CHECK-NOT: gpu.
// CHECK-DAG: llvm.mlir.global internal constant @__cleave_cubin_cleave_kernels("\7FELF
// CHECK-DAG: llvm.mlir.global internal @__cleave_module_cleave_kernels()
// CHECK-DAG: llvm.func @cleave_rt_cuda_launch(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i32, !llvm.ptr)
// CHECK-DAG: llvm.func @cleave_rt_cuda_alloc(i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @cleave_rt_cuda_free(!llvm.ptr)
// CHECK-LABEL: llvm.func @layer(
// The matmul is a GEMM call on device pointers, the rest kernels.
// CHECK: llvm.call @cleave_rt_gemm(
// CHECK: llvm.call @cleave_rt_cuda_launch(
// CHECK-NOT: llvm.call @malloc
// CHECK-NOT: llvm.call @memrefCopy
// CHECK-LABEL: llvm.func @cleave_entry_layer(
// CHECK: llvm.call @cleave_rt_cuda_step_begin()
// CHECK: llvm.call @layer(
// CHECK: llvm.call @cleave_rt_cuda_synchronize()
// CHECK-NEXT: llvm.return

// ptxas accepted every kernel, without spills.
// REPORT: kernel regs spill-st spill-ld stack smem
// REPORT: layer_k{{[0-9]+}}_block_reduce {{[0-9]+}} 0 0 0 {{[0-9]+}}
// REPORT: ptxas: {{[0-9]+}} kernels in {{[0-9.]+}} s

func.func @layer(%x: tensor<64x128xf32> {cleave.input = "x"},
                 %w: tensor<256x128xf32> {cleave.param = "w"},
                 %g: tensor<256xf32> {cleave.param = "g"},
                 %b: tensor<256xf32> {cleave.param = "b"})
    -> (tensor<64x256xf32> {cleave.output = "y"}) {
  %h = cleave.matmul %x, %w {transpose_rhs} : (tensor<64x128xf32>, tensor<256x128xf32>) -> tensor<64x256xf32>
  %n = cleave.layer_norm %h, %g, %b : (tensor<64x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<64x256xf32>
  %a = cleave.gelu %n : tensor<64x256xf32>
  %s = cleave.softmax %a dim = 1 : tensor<64x256xf32>
  return %s : tensor<64x256xf32>
}
