// cleave-pipeline with several entries (entry=train_step,eval_step): each
// partitioned step is scheduled on the same stages and micro-batches. The
// forward-only @eval_step gets forward passes alone (no empty backward pass
// is built or called), sends its activations like the training step, and
// sums its loss over micro-batches, dp and pp. `cleave.pipeline` lists its
// rank functions under `entries`, and cleave-verify-collectives checks
// both schedules.
// RUN: split-file %s %t
// RUN: cleave-opt %t/two.mlir --cleave-autodiff --symbol-privatize=exclude=train_step,eval_step --symbol-dce --canonicalize --cse \
// RUN:   --cleave-apply-plan="pp=2 dp=2 micro=2" --cleave-propagate-sharding --cleave-partition \
// RUN:   --cleave-pipeline=entry=train_step,eval_step --cleave-verify-collectives | FileCheck %s
// RUN: not cleave-opt %t/two.mlir --cleave-autodiff --symbol-privatize=exclude=train_step,eval_step --symbol-dce \
// RUN:   --cleave-apply-plan="pp=2 dp=2 micro=2" --cleave-propagate-sharding --cleave-partition \
// RUN:   --cleave-pipeline=entry=train_step,evaluate 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: cleave-opt %t/mismatch.mlir --cleave-verify-collectives -verify-diagnostics -o /dev/null

// CHECK: module attributes {cleave.pipeline = {axis = "pp", entries = {eval_step = [@eval_step_s0, @eval_step_s1]}, stages = [@train_step_s0, @train_step_s1]}
// CHECK-NOT: func.func private @eval_step_b
// CHECK-LABEL: func.func @eval_step_s0(
// CHECK: call @eval_step_f0(
// CHECK-NEXT: cleave.send %{{.*}} on @mesh axes = [pp] to 1 : tensor<2x16xf32>
// CHECK: call @eval_step_f0(
// CHECK-NEXT: cleave.send %{{.*}} on @mesh axes = [pp] to 1 : tensor<2x16xf32>
// CHECK-NOT: call
// CHECK: cleave.all_reduce %{{.*}} on @mesh axes = [pp] : tensor<f32>
// CHECK-LABEL: func.func @eval_step_s1(
// CHECK: cleave.recv on @mesh axes = [pp] from 0 : tensor<2x16xf32>
// CHECK: call @eval_step_f1(
// CHECK: cleave.recv on @mesh axes = [pp] from 0 : tensor<2x16xf32>
// CHECK: call @eval_step_f1(
// CHECK-NOT: call
// CHECK: cleave.all_reduce %{{.*}} on @mesh axes = [dp] : tensor<f32>
// CHECK: cleave.all_reduce %{{.*}} on @mesh axes = [pp] : tensor<f32>
// CHECK-NOT: func.func private @eval_step_b

// MISSING: error: cleave-pipeline: no function @evaluate with a body

//--- two.mlir
module {
    func.func @forward(%x: tensor<8x16xf32> {cleave.input = "features"},
                       %y: tensor<8xi32> {cleave.input = "labels"},
                       %w0: tensor<16x16xf32> {cleave.param = "l.0.weight"},
                       %w1: tensor<10x16xf32> {cleave.param = "l.1.weight"}) -> tensor<f32> {
      %0 = cleave.matmul %x, %w0 {transpose_rhs, cleave.stage = 0 : i64} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
      %1 = cleave.relu %0 {cleave.stage = 0 : i64} : tensor<8x16xf32>
      %2 = cleave.matmul %1, %w1 {transpose_rhs, cleave.stage = 1 : i64} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
      %3 = cleave.cross_entropy %2, %y {cleave.stage = 1 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
      return %3 : tensor<f32>
    }
    func.func @eval_step(%x: tensor<8x16xf32> {cleave.input = "features"},
                       %y: tensor<8xi32> {cleave.input = "labels"},
                       %w0: tensor<16x16xf32> {cleave.param = "l.0.weight"},
                       %w1: tensor<10x16xf32> {cleave.param = "l.1.weight"}) -> (tensor<f32> {cleave.output = "loss"}) {
      %0 = cleave.matmul %x, %w0 {transpose_rhs, cleave.stage = 0 : i64} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
      %1 = cleave.relu %0 {cleave.stage = 0 : i64} : tensor<8x16xf32>
      %2 = cleave.matmul %1, %w1 {transpose_rhs, cleave.stage = 1 : i64} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
      %3 = cleave.cross_entropy %2, %y {cleave.stage = 1 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
      return %3 : tensor<f32>
    }
}

//--- mismatch.mlir
// The evaluation schedule is checked too: stage 1 of @eval_step never
// receives what stage 0 sends.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1], entries = {eval_step = [@e0, @e1]}}} {
  cleave.mesh @world(pp = 2 : ib)
  func.func @s0(%x: tensor<4xf32>) -> tensor<4xf32> {
    cleave.send %x on @world axes = [pp] to 1 : tensor<4xf32>
    return %x : tensor<4xf32>
  }
  func.func @s1(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = cleave.recv on @world axes = [pp] from 0 : tensor<4xf32>
    return %y : tensor<4xf32>
  }
  func.func @e0(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @below {{rank 0 (pp=0) waits forever in send of tensor<4xf32> to rank 1 (pp=1) along [pp]: rank 1 (pp=1) returns from @e1 without receiving it}}
    cleave.send %x on @world axes = [pp] to 1 : tensor<4xf32>
    return %x : tensor<4xf32>
  }
  // expected-note @below {{rank 1 (pp=1) runs @e1, which ends here}}
  func.func @e1(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
