// RUN: cleave-opt %s --cleave-linalg-to-runtime | FileCheck %s

// CHECK: func.func private @cleave_rt_gemm(i32, i32, i32, i64, i64, i64, i64, f64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f64, !llvm.ptr, i64, i64)

// CHECK-LABEL: func.func @gemms
func.func @gemms(%a: memref<8x16xf32>, %b: memref<4x16xf32>, %c: memref<8x4xf32>,
                 %x: memref<3x5x7xbf16>, %y: memref<3x5x2xbf16>, %z: memref<3x7x2xbf16>) {
  // A [8,16] times B^T ([4,16] stored): dtype f32 (0), ta 0, tb 1, batch 1,
  // m 8, n 4, k 16, lda = row stride 16, ldb 16, ldc 4.
  // CHECK: call @cleave_rt_gemm(%c0_i32, %c0_i32_{{[0-9]+}}, %c1_i32, %c1_i64, %c8_i64, %c4_i64, %c16_i64,
  linalg.matmul_transpose_b ins(%a, %b : memref<8x16xf32>, memref<4x16xf32>) outs(%c : memref<8x4xf32>)
  // Batched A^T B in bf16 (dtype 2) with batch strides from the layouts.
  // CHECK: call @cleave_rt_gemm(%c2_i32, %c1_i32_{{[0-9]+}}, %c0_i32_{{[0-9]+}}, %c3_i64, %c7_i64, %c2_i64, %c5_i64,
  // CHECK-NOT: linalg.batch_matmul_transpose_a
  linalg.batch_matmul_transpose_a ins(%x, %y : memref<3x5x7xbf16>, memref<3x5x2xbf16>) outs(%z : memref<3x7x2xbf16>)
  return
}

// A GEMM right after a zero fill of its output overwrites it (beta = 0)
// and the fill goes; after any other op it accumulates (beta = 1).
// CHECK-LABEL: func.func @beta
// CHECK-NOT: linalg.fill
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK: call @cleave_rt_gemm({{.*}}, %[[ZERO]], {{.*}})
// CHECK-NOT: %[[ZERO]]
// CHECK: call @cleave_rt_gemm(
// CHECK-NOT: %[[ZERO]]
// CHECK: return
func.func @beta(%a: memref<8x16xf32>, %b: memref<16x4xf32>, %c: memref<8x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x4xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x4xf32>) outs(%c : memref<8x4xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x4xf32>) outs(%c : memref<8x4xf32>)
  return
}
