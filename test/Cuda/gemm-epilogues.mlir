// RUN: cleave-opt %s --split-input-file --cleave-cuda-gemm-epilogues | FileCheck %s

// A linear layer: zero fill, GEMM, reshape, bias addition. The addition
// becomes cuBLASLt's bias epilogue writing the layer's output; the GEMM's
// own buffer goes.
// CHECK-LABEL: func.func @linear
// CHECK-NOT: linalg.
// CHECK-NOT: memref.alloc
// CHECK: %[[PX:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CHECK: %[[PW:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CHECK: %[[PY:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CHECK: %[[PB:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// dtype f32 (0), A as stored, B transposed, m 128, n 64, k 32, lda 32,
// ldb 32, ldc 64, epilogue BIAS (1).
// CHECK: call @cleave_rt_cuda_gemm_epilogue(%c0_i32, %c0_i32{{.*}}, %c1_i32, %c128_i64, %c64_i64, %c32_i64, %[[PX]], %c32_i64{{.*}}, %[[PW]], %c32_i64{{.*}}, %[[PY]], %c64_i64{{.*}}, %c1_i32{{.*}}, %[[PB]])
// CHECK-NEXT: return
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last = affine_map<(d0, d1, d2) -> (d2)>
func.func @linear(%x: memref<128x32xf32>, %w: memref<64x32xf32>, %b: memref<64xf32>, %y: memref<4x32x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() {alignment = 64 : i64} : memref<128x64xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<128x64xf32>)
  linalg.matmul_transpose_b ins(%x, %w : memref<128x32xf32>, memref<64x32xf32>) outs(%c : memref<128x64xf32>)
  %c3 = memref.expand_shape %c [[0, 1], [2]] output_shape [4, 32, 64] : memref<128x64xf32> into memref<4x32x64xf32>
  linalg.generic {indexing_maps = [#id, #last, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%c3, %b : memref<4x32x64xf32>, memref<64xf32>) outs(%y : memref<4x32x64xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %s = arith.addf %in, %bias : f32
    linalg.yield %s : f32
  }
  memref.dealloc %c : memref<128x64xf32>
  return
}

// -----

// bf16, computing in f32 (widened operands, narrowed sum): dtype 2.
// CHECK-LABEL: func.func @linear_bf16
// CHECK: call @cleave_rt_cuda_gemm_epilogue(%c2_i32,
#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
func.func @linear_bf16(%x: memref<16x32xbf16>, %w: memref<32x8xbf16>, %b: memref<8xbf16>, %y: memref<16x8xbf16>) {
  %c = memref.alloc() : memref<16x8xbf16>
  linalg.matmul ins(%x, %w : memref<16x32xbf16>, memref<32x8xbf16>) outs(%c : memref<16x8xbf16>)
  linalg.generic {indexing_maps = [#id, #last, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %b : memref<16x8xbf16>, memref<8xbf16>) outs(%y : memref<16x8xbf16>) {
  ^bb0(%in: bf16, %bias: bf16, %out: bf16):
    %p = arith.extf %in : bf16 to f32
    %q = arith.extf %bias : bf16 to f32
    %s = arith.addf %q, %p : f32
    %t = arith.truncf %s : f32 to bf16
    linalg.yield %t : bf16
  }
  memref.dealloc %c : memref<16x8xbf16>
  return
}

// -----

// The GEMM output is read by someone else too (a gradient needs it): kept.
// CHECK-LABEL: func.func @shared
// CHECK-NOT: cleave_rt_cuda_gemm_epilogue
// CHECK: linalg.matmul
#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
func.func @shared(%x: memref<16x32xf32>, %w: memref<32x8xf32>, %b: memref<8xf32>, %y: memref<16x8xf32>, %z: memref<16x8xf32>) {
  %c = memref.alloc() : memref<16x8xf32>
  linalg.matmul ins(%x, %w : memref<16x32xf32>, memref<32x8xf32>) outs(%c : memref<16x8xf32>)
  linalg.generic {indexing_maps = [#id, #last, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %b : memref<16x8xf32>, memref<8xf32>) outs(%y : memref<16x8xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %s = arith.addf %in, %bias : f32
    linalg.yield %s : f32
  }
  memref.copy %c, %z : memref<16x8xf32> to memref<16x8xf32>
  return
}

// -----

// Something writes memory between the GEMM and the addition (it could write
// the GEMM's operands): kept. Not an addition of a row bias: kept.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: cleave_rt_cuda_gemm_epilogue
#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
#first = affine_map<(d0, d1) -> (d0)>
func.func @not_fused(%x: memref<8x8xf32>, %w: memref<8x8xf32>, %b: memref<8xf32>, %y: memref<8x8xf32>) {
  %c = memref.alloc() : memref<8x8xf32>
  linalg.matmul ins(%x, %w : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%x : memref<8x8xf32>)
  linalg.generic {indexing_maps = [#id, #last, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %b : memref<8x8xf32>, memref<8xf32>) outs(%y : memref<8x8xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %s = arith.addf %in, %bias : f32
    linalg.yield %s : f32
  }
  %d = memref.alloc() : memref<8x8xf32>
  linalg.matmul ins(%x, %w : memref<8x8xf32>, memref<8x8xf32>) outs(%d : memref<8x8xf32>)
  linalg.generic {indexing_maps = [#id, #first, #id], iterator_types = ["parallel", "parallel"]}
      ins(%d, %b : memref<8x8xf32>, memref<8xf32>) outs(%y : memref<8x8xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %s = arith.addf %in, %bias : f32
    linalg.yield %s : f32
  }
  return
}
