// RUN: cleave-opt %s --split-input-file --cleave-lower-to-linalg --verify-diagnostics | FileCheck %s

// Elementwise ops become generics computing in f32; bf16 is widened on read
// and narrowed on write.
// CHECK-LABEL: func.func @gelu_bf16
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK: ^bb0(%[[IN:.*]]: bf16, %{{.*}}: bf16):
// CHECK: %[[X:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK: math.tanh
// CHECK: %[[R:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK: linalg.yield %[[R]] : bf16
func.func @gelu_bf16(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %0 = cleave.gelu %x : tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// Matmuls with a shared weight become one 2-D GEMM over all rows.
// CHECK-LABEL: func.func @linear
// CHECK: %[[A:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1, 2]] : tensor<2x4x8xf32> into tensor<64xf32>
// CHECK: %[[A2:.*]] = tensor.expand_shape %[[A]] {{\[\[}}0, 1]] output_shape [8, 8] : tensor<64xf32> into tensor<8x8xf32>
// CHECK: %[[C:.*]] = linalg.fill
// CHECK: linalg.matmul_transpose_b ins(%[[A2]], %{{.*}} : tensor<8x8xf32>, tensor<16x8xf32>) outs(%[[C]] : tensor<8x16xf32>)
func.func @linear(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>) -> tensor<2x4x16xf32> {
  %0 = cleave.matmul %x, %w {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// -----

// Attention: head-major copies, two batched GEMMs, a masked softmax.
// CHECK-LABEL: func.func @attention
// CHECK: linalg.batch_matmul_transpose_b {{.*}} : tensor<8x4x16xf32>, tensor<8x4x16xf32>) outs(%{{.*}} : tensor<8x4x4xf32>)
// CHECK: arith.cmpi ugt
// CHECK: arith.select
// CHECK: math.exp
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<8x4x4xf32>, tensor<8x4x16xf32>)
func.func @attention(%q: tensor<2x4x4x16xf32>, %k: tensor<2x4x2x16xf32>) -> tensor<2x4x4x16xf32> {
  %0 = cleave.attention %q, %k, %k {causal} : (tensor<2x4x4x16xf32>, tensor<2x4x2x16xf32>, tensor<2x4x2x16xf32>) -> tensor<2x4x4x16xf32>
  return %0 : tensor<2x4x4x16xf32>
}

// -----

// Dropout draws from Philox-4x32-10 keyed by the seed.
// CHECK-LABEL: func.func @dropout
// CHECK: tensor.extract %{{.*}}[] : tensor<i64>
// CHECK: linalg.generic
// CHECK-COUNT-20: arith.mului_extended
// CHECK: arith.cmpf oge
func.func @dropout(%x: tensor<16xf32>, %seed: tensor<i64>) -> tensor<16xf32> {
  %0 = cleave.dropout %x, %seed {rate = 0.25 : f64, stream = 1 : i64} : (tensor<16xf32>, tensor<i64>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// Collectives are left for the communication lowering.
cleave.mesh @m(dp = 2 : host)
// CHECK-LABEL: func.func @collective
// CHECK: cleave.all_reduce
func.func @collective(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = cleave.all_reduce %x on @m axes = [dp] : tensor<4xf32>
  return %0 : tensor<4xf32>
}
