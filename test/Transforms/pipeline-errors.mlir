// Programs and plans cleave-pipeline cannot run get an error that names the
// op or the plan entry and says why.
// RUN: split-file %s %t
// RUN: not cleave-opt %t/backwards.mlir --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce \
// RUN:   --cleave-apply-plan="pp=2 micro=2" --cleave-propagate-sharding --cleave-partition --cleave-pipeline 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BACKWARDS
// RUN: not cleave-opt %t/beyond.mlir --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce \
// RUN:   --cleave-apply-plan="pp=2 micro=2" --cleave-propagate-sharding --cleave-partition --cleave-pipeline 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BEYOND
// RUN: not cleave-opt %t/two-stages.mlir --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce \
// RUN:   --cleave-apply-plan="pp=4 micro=4" --cleave-propagate-sharding --cleave-partition --cleave-pipeline 2>&1 \
// RUN:   | FileCheck %s --check-prefix=FEWER
// RUN: not cleave-opt %t/unstaged.mlir --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce \
// RUN:   --cleave-apply-plan="pp=2 micro=2" --cleave-propagate-sharding --cleave-partition --cleave-pipeline 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNSTAGED
// RUN: not cleave-opt %t/two-stages.mlir --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce \
// RUN:   --cleave-apply-plan="dp=2" --cleave-propagate-sharding --cleave-partition --cleave-pipeline 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOAXIS
// RUN: not cleave-opt %t/two-stages.mlir --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce \
// RUN:   --cleave-apply-plan="pp=4 micro=2 schedule=interleaved virtual-stages=2" --cleave-propagate-sharding \
// RUN:   --cleave-partition --cleave-pipeline 2>&1 | FileCheck %s --check-prefix=VIRTUAL
// RUN: not cleave-opt %t/two-stages.mlir --cleave-apply-plan="pp=2 micro=2 schedule=pipedream" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SCHEDULE
// RUN: not cleave-opt %t/two-stages.mlir --cleave-apply-plan="pp=2 micro=2 virtual-stages=2" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NEEDSINTERLEAVED
// RUN: not cleave-opt %t/two-stages.mlir --cleave-apply-plan="pp=2 micro=3" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DIVIDE
// RUN: not cleave-opt %t/whole-batch.mlir --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce \
// RUN:   --cleave-apply-plan="micro=2" --cleave-propagate-sharding --cleave-partition --cleave-pipeline 2>&1 \
// RUN:   | FileCheck %s --check-prefix=WHOLEBATCH
// RUN: not cleave-opt %t/two-stages.mlir --cleave-pipeline-stages=stages=2 2>&1 | FileCheck %s --check-prefix=STAGED
// RUN: not cleave-opt %t/unstaged.mlir --cleave-pipeline-stages=stages=3 2>&1 | FileCheck %s --check-prefix=LAYERS
// RUN: cleave-opt %t/unstaged.mlir --cleave-pipeline-stages=stages=2 | FileCheck %s --check-prefix=BYLAYER

// BACKWARDS: backwards.mlir:8:{{[0-9]+}}: error: cleave-pipeline: this forward op of stage 0 uses a value of stage 1, which runs after it in every schedule
// BACKWARDS: backwards.mlir:7:{{[0-9]+}}: note: the value is computed here
// BEYOND: beyond.mlir:{{[0-9]+}}:{{[0-9]+}}: error: cleave-pipeline: stage 7 is beyond the plan's 2 stages (pp = 2, virtual stages = 1)
// FEWER: error: cleave-pipeline: the plan has 4 stages but the ops are annotated with stages 0 to 1
// UNSTAGED: error: cleave-pipeline: the plan has 2 stages but no op has a cleave.stage annotation
// NOAXIS: error: cleave-pipeline: the mesh has no pipeline axis 'pp'
// VIRTUAL: error: cleave-pipeline: the interleaved schedule needs the number of micro-batches (2) to be a multiple of pp (4)
// SCHEDULE: error: cleave-apply-plan: unknown schedule 'pipedream' (expected gpipe, 1f1b, interleaved or zb-h1)
// NEEDSINTERLEAVED: error: cleave-apply-plan: virtual-stages=2 needs schedule=interleaved
// DIVIDE: error: data parallelism over 1 devices and 3 micro-batches needs the batch of input 'features' (8) to be divisible by 3
// STAGED: error: cleave-pipeline-stages: @forward already has stage annotations
// LAYERS: error: cleave-pipeline-stages: 3 stages need at least as many layers; the parameters name 2
// Ops run on the latest stage of their layer parameters and operands.
// BYLAYER: cleave.matmul {{.*}}cleave.stage = 0 : i64
// BYLAYER: cleave.gelu {{.*}}cleave.stage = 0 : i64
// BYLAYER: cleave.matmul {{.*}}cleave.stage = 1 : i64
// BYLAYER: cleave.cross_entropy {{.*}}cleave.stage = 1 : i64

//--- backwards.mlir
module {
  func.func @forward(%x: tensor<8x16xf32> {cleave.input = "features"},
                     %y: tensor<8xi32> {cleave.input = "labels"},
                     %w0: tensor<16x16xf32> {cleave.param = "l.0.weight"},
                     %w1: tensor<10x16xf32> {cleave.param = "l.1.weight"}) -> tensor<f32> {
    %0 = cleave.matmul %x, %w0 {transpose_rhs, cleave.stage = 0 : i64} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %1 = cleave.gelu %0 {cleave.stage = 1 : i64} : tensor<8x16xf32>
    %2 = cleave.matmul %1, %w1 {transpose_rhs, cleave.stage = 0 : i64} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
    %3 = cleave.cross_entropy %2, %y {cleave.stage = 1 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    return %3 : tensor<f32>
  }
}

//--- beyond.mlir
module {
  func.func @forward(%x: tensor<8x16xf32> {cleave.input = "features"},
                     %y: tensor<8xi32> {cleave.input = "labels"},
                     %w0: tensor<16x16xf32> {cleave.param = "l.0.weight"},
                     %w1: tensor<10x16xf32> {cleave.param = "l.1.weight"}) -> tensor<f32> {
    %0 = cleave.matmul %x, %w0 {transpose_rhs, cleave.stage = 0 : i64} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %1 = cleave.gelu %0 {cleave.stage = 0 : i64} : tensor<8x16xf32>
    %2 = cleave.matmul %1, %w1 {transpose_rhs, cleave.stage = 1 : i64} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
    %3 = cleave.cross_entropy %2, %y {cleave.stage = 7 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    return %3 : tensor<f32>
  }
}

//--- whole-batch.mlir
// A sum over the batch of what the forward pass computes, read with a
// micro-batch's data (a sum of the data alone, a label count, is supported:
// pipeline-data-reduction.mlir).
// WHOLEBATCH: whole-batch.mlir:12:10: error: cleave-pipeline: this op reads a micro-batch's data and a value summed over all micro-batches that their forward passes compute (e.g. a normalization by a statistic of the whole batch's activations), so no micro-batch can run before all have; not supported (sums of the data alone, such as a label count, are)
module {
  func.func @forward(%x: tensor<8x16xf32> {cleave.input = "x"},
                     %y: tensor<8xi32> {cleave.input = "labels"},
                     %w: tensor<10x16xf32> {cleave.param = "head"}) -> tensor<f32> {
    %0 = cleave.matmul %x, %w {transpose_rhs} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
    %s = cleave.reduce_sum %0 dims = [0, 1] : tensor<8x10xf32> -> tensor<f32>
    %b = cleave.broadcast %s dims = [] : tensor<f32> -> tensor<8x16xf32>
    %1 = cleave.mul %x, %b : tensor<8x16xf32>
    %2 = cleave.matmul %1, %w {transpose_rhs} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
    %3 = cleave.cross_entropy %2, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    return %3 : tensor<f32>
  }
}

//--- two-stages.mlir
module {
  func.func @forward(%x: tensor<8x16xf32> {cleave.input = "features"},
                     %y: tensor<8xi32> {cleave.input = "labels"},
                     %w0: tensor<16x16xf32> {cleave.param = "l.0.weight"},
                     %w1: tensor<10x16xf32> {cleave.param = "l.1.weight"}) -> tensor<f32> {
    %0 = cleave.matmul %x, %w0 {transpose_rhs, cleave.stage = 0 : i64} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %1 = cleave.gelu %0 {cleave.stage = 0 : i64} : tensor<8x16xf32>
    %2 = cleave.matmul %1, %w1 {transpose_rhs, cleave.stage = 1 : i64} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
    %3 = cleave.cross_entropy %2, %y {cleave.stage = 1 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    return %3 : tensor<f32>
  }
}

//--- unstaged.mlir
module {
  func.func @forward(%x: tensor<8x16xf32> {cleave.input = "features"},
                     %y: tensor<8xi32> {cleave.input = "labels"},
                     %w0: tensor<16x16xf32> {cleave.param = "l.0.weight"},
                     %w1: tensor<10x16xf32> {cleave.param = "l.1.weight"}) -> tensor<f32> {
    %0 = cleave.matmul %x, %w0 {transpose_rhs} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %1 = cleave.gelu %0 : tensor<8x16xf32>
    %2 = cleave.matmul %1, %w1 {transpose_rhs} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
    %3 = cleave.cross_entropy %2, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    return %3 : tensor<f32>
  }
}
