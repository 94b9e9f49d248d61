// Dropout in a pipeline: the partitioned program numbers its random blocks
// with cleave.axis_index over [dp, mb]; cleave-pipeline gives each pass call
// the index of its micro-batch (dp * micro-batches + mb), so every
// micro-batch draws the same mask as in one process, in its forward pass
// and again in its backward pass.
// RUN: cleave-opt %s --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce --canonicalize --cse \
// RUN:   --cleave-apply-plan="pp=2 dp=2 micro=2" --cleave-propagate-sharding --cleave-partition --cleave-pipeline \
// RUN:   --cleave-verify-collectives | FileCheck %s

// CHECK: func.func private @train_step_f0(%{{.*}}: tensor<2x16xf32>, %{{.*}}: tensor<16x16xf32>, %[[SEED:.*]]: tensor<i64>, %[[BLOCK:.*]]: tensor<i64>)
// CHECK: cleave.dropout %{{.*}}, %[[SEED]], %[[BLOCK]], %{{.*}} {global_shape = array<i64: 8, 16>
// CHECK: func.func private @train_step_b0(%{{.*}}: tensor<2x16xf32>, %[[BSEED:.*]]: tensor<i64>, %[[BBLOCK:.*]]: tensor<i64>,
// CHECK: cleave.dropout %{{.*}}, %[[BSEED]], %[[BBLOCK]], %{{.*}} {global_shape = array<i64: 8, 16>
// CHECK-LABEL: func.func @train_step_s0(
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2 : i64
// CHECK: %[[DP:.*]] = cleave.axis_index on @mesh axes = [dp] : tensor<i64>
// CHECK: %[[E:.*]] = tensor.extract %[[DP]][] : tensor<i64>
// CHECK: %[[M:.*]] = arith.muli %[[E]], %[[TWO]] : i64
// CHECK: %[[I0:.*]] = arith.addi %[[ZERO]], %[[M]] : i64
// CHECK: %[[B0:.*]] = tensor.from_elements %[[I0]] : tensor<i64>
// CHECK: call @train_step_f0(%{{.*}}, %{{.*}}, %{{.*}}, %[[B0]])
// CHECK: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK: %[[I1:.*]] = arith.addi %[[ONE]], %{{.*}} : i64
// CHECK: %[[B1:.*]] = tensor.from_elements %[[I1]] : tensor<i64>
// CHECK: call @train_step_f0(%{{.*}}, %{{.*}}, %{{.*}}, %[[B1]])
// CHECK: call @train_step_b0(%{{.*}}, %{{.*}}, %[[B0]],
// CHECK: call @train_step_b0(%{{.*}}, %{{.*}}, %[[B1]],
// CHECK-NOT: axes = [{{.*}}mb

module {
  func.func @forward(%x: tensor<8x16xf32> {cleave.input = "features"},
                     %y: tensor<8xi32> {cleave.input = "labels"},
                     %seed: tensor<i64> {cleave.input = "seed"},
                     %w0: tensor<16x16xf32> {cleave.param = "l.0.weight"},
                     %w1: tensor<10x16xf32> {cleave.param = "l.1.weight"}) -> tensor<f32> {
    %0 = cleave.matmul %x, %w0 {transpose_rhs, cleave.stage = 0 : i64} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %1 = cleave.dropout %0, %seed {rate = 1.000000e-01 : f64, stream = 0 : i64, cleave.stage = 0 : i64} : (tensor<8x16xf32>, tensor<i64>) -> tensor<8x16xf32>
    %2 = cleave.matmul %1, %w1 {transpose_rhs, cleave.stage = 1 : i64} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
    %3 = cleave.cross_entropy %2, %y {cleave.stage = 1 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    return %3 : tensor<f32>
  }
}
