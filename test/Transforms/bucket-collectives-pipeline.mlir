// cleave-bucket-collectives on a pipelined program: the data-parallel
// reductions of the accumulated gradients in every pipeline rank's epilogue
// become one bucket per rank; collectives over the pipeline axis stay.
//
// RUN: cleave-opt %s -split-input-file --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce --canonicalize --cse \
// RUN:   --cleave-apply-plan="pp=2 dp=2 micro=2" --cleave-propagate-sharding --cleave-partition --cleave-pipeline \
// RUN:   --cleave-bucket-collectives --cleave-verify-collectives 2>&1 | FileCheck %s
// Without buckets: one all-reduce per gradient.
// RUN: cleave-opt %s -split-input-file --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce --canonicalize --cse \
// RUN:   --cleave-apply-plan="pp=2 dp=2 micro=2" --cleave-propagate-sharding --cleave-partition --cleave-pipeline \
// RUN:   --cleave-bucket-collectives=bucket-bytes=0 2>&1 | FileCheck %s --check-prefix=OFF

// Rank 0 holds fc0 and fc1 (4 gradients, 6,272 floats), rank 1 fc2 and the
// head (4,810 floats) and the loss (1): one all-reduce over dp each, after
// the last micro-batch's backward pass, before the optimizer; the loss's
// all-reduce over pp stays.
// CHECK-LABEL: func.func @train_step_s0(
// CHECK: call @train_step_b0(
// CHECK: call @train_step_b0(
// CHECK: cleave.concat {{.*}} -> tensor<6272xf32>
// CHECK-NEXT: cleave.all_reduce %{{.*}} on @mesh axes = [dp] {{.*}}: tensor<6272xf32>
// CHECK-NOT: cleave.all_reduce {{.*}} axes = [dp]
// CHECK: cleave.adamw
// CHECK: cleave.all_reduce %{{.*}} on @mesh axes = [pp]
// CHECK-LABEL: func.func @train_step_s1(
// CHECK: cleave.concat {{.*}} -> tensor<4811xf32>
// CHECK-NEXT: cleave.all_reduce %{{.*}} on @mesh axes = [dp] {{.*}}: tensor<4811xf32>
// CHECK-NOT: cleave.all_reduce {{.*}} axes = [dp]
// CHECK: cleave.adamw
// CHECK: cleave.all_reduce %{{.*}} on @mesh axes = [pp]

// OFF-LABEL: func.func @train_step_s0(
// OFF-COUNT-4: cleave.all_reduce %{{.*}} on @mesh axes = [dp]
// OFF-NOT: cleave.concat
// OFF-LABEL: func.func @train_step_s1(

module attributes {cleave.model = "custom"} {
  func.func @forward(
      %arg0: tensor<8x32xf32> {cleave.input = "features"},
      %arg1: tensor<8xi32> {cleave.input = "labels"},
      %arg2: tensor<64x32xf32> {cleave.init = #cleave.init<normal, 2.000000e-02>, cleave.param = "fc0.weight"},
      %arg3: tensor<64xf32> {cleave.init = #cleave.init<zeros>, cleave.param = "fc0.bias"},
      %arg4: tensor<64x64xf32> {cleave.init = #cleave.init<normal, 2.000000e-02>, cleave.param = "fc1.weight"},
      %arg5: tensor<64xf32> {cleave.init = #cleave.init<zeros>, cleave.param = "fc1.bias"},
      %arg6: tensor<64x64xf32> {cleave.init = #cleave.init<normal, 2.000000e-02>, cleave.param = "fc2.weight"},
      %arg7: tensor<64xf32> {cleave.init = #cleave.init<zeros>, cleave.param = "fc2.bias"},
      %arg8: tensor<10x64xf32> {cleave.init = #cleave.init<normal, 2.000000e-02>, cleave.param = "head.weight"},
      %arg9: tensor<10xf32> {cleave.init = #cleave.init<zeros>, cleave.param = "head.bias"})
      -> tensor<f32> {
    %0 = cleave.matmul %arg0, %arg2 {transpose_rhs, cleave.stage = 0 : i64} : (tensor<8x32xf32>, tensor<64x32xf32>) -> tensor<8x64xf32>
    %1 = cleave.broadcast %arg3 dims = [1] {cleave.stage = 0 : i64} : tensor<64xf32> -> tensor<8x64xf32>
    %2 = cleave.add %0, %1 {cleave.stage = 0 : i64} : tensor<8x64xf32>
    %3 = cleave.gelu %2 {cleave.stage = 0 : i64} : tensor<8x64xf32>
    %4 = cleave.matmul %3, %arg4 {transpose_rhs, cleave.stage = 0 : i64} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %5 = cleave.broadcast %arg5 dims = [1] {cleave.stage = 0 : i64} : tensor<64xf32> -> tensor<8x64xf32>
    %6 = cleave.add %4, %5 {cleave.stage = 0 : i64} : tensor<8x64xf32>
    %7 = cleave.gelu %6 {cleave.stage = 0 : i64} : tensor<8x64xf32>
    %8 = cleave.matmul %7, %arg6 {transpose_rhs, cleave.stage = 1 : i64} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %9 = cleave.broadcast %arg7 dims = [1] {cleave.stage = 1 : i64} : tensor<64xf32> -> tensor<8x64xf32>
    %10 = cleave.add %8, %9 {cleave.stage = 1 : i64} : tensor<8x64xf32>
    %11 = cleave.gelu %10 {cleave.stage = 1 : i64} : tensor<8x64xf32>
    %12 = cleave.matmul %11, %arg8 {transpose_rhs, cleave.stage = 1 : i64} : (tensor<8x64xf32>, tensor<10x64xf32>) -> tensor<8x10xf32>
    %13 = cleave.broadcast %arg9 dims = [1] {cleave.stage = 1 : i64} : tensor<10xf32> -> tensor<8x10xf32>
    %14 = cleave.add %12, %13 {cleave.stage = 1 : i64} : tensor<8x10xf32>
    %15 = cleave.cross_entropy %14, %arg1 {cleave.stage = 1 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    return %15 : tensor<f32>
  }
}
