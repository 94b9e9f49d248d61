// cleave-pipeline on a 4-layer MLP whose forward ops carry cleave.stage
// (one layer per stage). Every schedule gives each pipeline rank its passes
// in the order of the cost model's pipelineOrders, and
// cleave-verify-collectives proves the sends and receives match.
//
// RUN: cleave-opt %s --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce --canonicalize --cse \
// RUN:   --cleave-apply-plan="pp=4 micro=4" --cleave-propagate-sharding --cleave-partition --cleave-pipeline \
// RUN:   --cleave-verify-collectives > %t.1f1b.mlir
// RUN: FileCheck %s --check-prefix=IR < %t.1f1b.mlir
// RUN: grep -o -E "func.func @train_step_s[0-9]|call @train_step_[fbw][0-9]+" %t.1f1b.mlir | FileCheck %s --check-prefix=ONEF1B
//
// RUN: cleave-opt %s --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce --canonicalize --cse \
// RUN:   --cleave-apply-plan="pp=4 micro=2 schedule=gpipe" --cleave-propagate-sharding --cleave-partition --cleave-pipeline \
// RUN:   --cleave-verify-collectives | grep -o -E "func.func @train_step_s[0-9]|call @train_step_[fbw][0-9]+" \
// RUN:   | FileCheck %s --check-prefix=GPIPE
//
// RUN: cleave-opt %s --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce --canonicalize --cse \
// RUN:   --cleave-apply-plan="pp=4 micro=4 schedule=zb-h1" --cleave-propagate-sharding --cleave-partition --cleave-pipeline \
// RUN:   --cleave-verify-collectives > %t.zb.mlir
// RUN: grep -o -E "func.func @train_step_s[0-9]|call @train_step_[fbw][0-9]+" %t.zb.mlir | FileCheck %s --check-prefix=ZB
// RUN: FileCheck %s --check-prefix=ZBIR < %t.zb.mlir
//
// Two ranks with two model chunks each (stages 0 and 2 on rank 0), and
// data parallelism inside every stage.
// RUN: cleave-opt %s --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce --canonicalize --cse \
// RUN:   --cleave-apply-plan="pp=2 dp=2 micro=4 schedule=interleaved virtual-stages=2" --cleave-propagate-sharding \
// RUN:   --cleave-partition --cleave-pipeline --cleave-verify-collectives > %t.inter.mlir
// RUN: grep -o -E "func.func @train_step_s[0-9]|call @train_step_[fbw][0-9]+" %t.inter.mlir | FileCheck %s --check-prefix=INTER
// RUN: FileCheck %s --check-prefix=INTERIR < %t.inter.mlir

// The micro-batch axis is gone from the mesh; the stage functions are named.
// IR: cleave.pipeline = {axis = "pp", stages = [@train_step_s0, @train_step_s1, @train_step_s2, @train_step_s3]}
// IR-SAME: num_micro_batches = 4 : i64, schedule = "1f1b"
// IR: cleave.mesh @mesh(pp = 4 : ib, dp = 1 : ib)
// One micro-batch's forward pass of stage 1 returns what its backward pass
// keeps (the pre-activation) and what stage 2 reads (the activation). It
// reads the bias itself and broadcasts it (the broadcast fuses into the
// add): the rank function neither computes nor keeps the bias broadcast to
// the activations' shape.
// IR: func.func private @train_step_f1(%{{.*}}: tensor<2x64xf32>, %{{.*}}: tensor<64x64xf32>, %[[BIAS:.*]]: tensor<64xf32>) -> (tensor<2x64xf32>, tensor<2x64xf32>)
// IR: cleave.broadcast %[[BIAS]] dims = [1] : tensor<64xf32> -> tensor<2x64xf32>
// IR-NOT: cleave.broadcast
// IR: func.func private @train_step_b1(
// IR-SAME: -> (tensor<64xf32>, tensor<2x64xf32>, tensor<64x64xf32>)
// Rank 0 slices micro-batches out of its block of the batch.
// IR-LABEL: func.func @train_step_s0(%{{.*}}: tensor<8x32xf32> {cleave.input = "features"
// IR: cleave.slice %{{.*}} offsets = [0, 0] sizes = [2, 32]
// IR: cleave.send %{{.*}} on @mesh axes = [pp] to 1 : tensor<2x64xf32>
// IR-LABEL: func.func @train_step_s1(
// IR: %[[X0:.*]] = cleave.recv on @mesh axes = [pp] from 0 : tensor<2x64xf32>
// IR: %[[F0:.*]]:2 = call @train_step_f1(%[[X0]], %{{.*}}, %{{.*}}) : (tensor<2x64xf32>, tensor<64x64xf32>, tensor<64xf32>)
// IR: %[[G0:.*]] = cleave.recv on @mesh axes = [pp] from 2 : tensor<2x64xf32>
// IR: %[[B0:.*]]:3 = call @train_step_b1(%[[F0]]#0, %[[G0]],
// IR: cleave.send %[[B0]]#1 on @mesh axes = [pp] to 0 : tensor<2x64xf32>
// Gradients accumulate over micro-batches, each right after its backward
// pass (a barrier keeps the fusion from merging the sums into one op after
// the last micro-batch), then the optimizer runs once.
// IR: %[[B1:.*]]:3 = call @train_step_b1(
// IR: %[[SUM:.*]] = cleave.add %[[B0]]#2, %[[B1]]#2 : tensor<64x64xf32>
// IR-NEXT: %[[ACC:.*]] = cleave.optimization_barrier %[[SUM]] : tensor<64x64xf32>
// IR: %[[B2:.*]]:3 = call @train_step_b1(
// IR: %[[SUM2:.*]] = cleave.add %[[ACC]], %[[B2]]#2 : tensor<64x64xf32>
// IR-NEXT: cleave.optimization_barrier %[[SUM2]] : tensor<64x64xf32>
// IR: cleave.adamw %{{.*}}, %{{.*}} : (tensor<64x64xf32>
// Every rank returns the loss: rank 3 computes it, the others add zeros.
// IR: %[[Z:.*]] = cleave.constant dense<0.000000e+00> : tensor<f32>
// IR: cleave.all_reduce %[[Z]] on @mesh axes = [pp]  : tensor<f32>
// IR-LABEL: func.func @train_step_s3(
// IR-NOT: cleave.constant dense<0.000000e+00> : tensor<f32>
// IR: cleave.all_reduce %{{.*}} on @mesh axes = [pp]  : tensor<f32>

// 1F1B (pp = 4, 4 micro-batches): pp - rank - 1 warm-up forwards.
// ONEF1B-LABEL: func.func @train_step_s0
// ONEF1B-COUNT-4: call @train_step_f0
// ONEF1B-COUNT-4: call @train_step_b0
// ONEF1B-LABEL: func.func @train_step_s1
// ONEF1B-NEXT: call @train_step_f1
// ONEF1B-NEXT: call @train_step_f1
// ONEF1B-NEXT: call @train_step_f1
// ONEF1B-NEXT: call @train_step_b1
// ONEF1B-NEXT: call @train_step_f1
// ONEF1B-NEXT: call @train_step_b1
// ONEF1B-NEXT: call @train_step_b1
// ONEF1B-NEXT: call @train_step_b1
// ONEF1B-LABEL: func.func @train_step_s2
// ONEF1B-NEXT: call @train_step_f2
// ONEF1B-NEXT: call @train_step_f2
// ONEF1B-NEXT: call @train_step_b2
// ONEF1B-NEXT: call @train_step_f2
// ONEF1B-NEXT: call @train_step_b2
// ONEF1B-NEXT: call @train_step_f2
// ONEF1B-NEXT: call @train_step_b2
// ONEF1B-NEXT: call @train_step_b2
// ONEF1B-LABEL: func.func @train_step_s3
// ONEF1B-COUNT-4: call @train_step_f3{{[[:space:]]+}}call @train_step_b3
// ONEF1B-NOT: call

// GPipe: every forward, then every backward.
// GPIPE-LABEL: func.func @train_step_s0
// GPIPE-NEXT: call @train_step_f0
// GPIPE-NEXT: call @train_step_f0
// GPIPE-NEXT: call @train_step_b0
// GPIPE-NEXT: call @train_step_b0
// GPIPE-NEXT: func.func @train_step_s1
// GPIPE-NEXT: call @train_step_f1
// GPIPE-NEXT: call @train_step_f1
// GPIPE-NEXT: call @train_step_b1
// GPIPE-NEXT: call @train_step_b1
// GPIPE-LABEL: func.func @train_step_s3
// GPIPE-NEXT: call @train_step_f3
// GPIPE-NEXT: call @train_step_f3
// GPIPE-NEXT: call @train_step_b3
// GPIPE-NEXT: call @train_step_b3
// GPIPE-NOT: call

// ZB-H1: the backward pass splits into B (input gradients, which the
// previous stage waits for) and W (weight gradients). Stage 0 has no
// previous stage: its B pass is empty, and a pass without ops is not
// called.
// ZB-LABEL: func.func @train_step_s0
// ZB-COUNT-4: call @train_step_f0
// ZB-COUNT-4: call @train_step_w0
// ZB-NOT: call @train_step_b0
// ZB-LABEL: func.func @train_step_s1
// ZB-NEXT: call @train_step_f1
// ZB-NEXT: call @train_step_f1
// ZB-NEXT: call @train_step_f1
// ZB-NEXT: call @train_step_b1
// ZB-NEXT: call @train_step_f1
// ZB-NEXT: call @train_step_b1
// ZB-NEXT: call @train_step_w1
// ZB-NEXT: call @train_step_b1
// ZB-NEXT: call @train_step_w1
// ZB-NEXT: call @train_step_b1
// ZB-NEXT: call @train_step_w1
// ZB-NEXT: call @train_step_w1
// ZB-LABEL: func.func @train_step_s3
// ZB-COUNT-4: call @train_step_f3{{[[:space:]]+}}call @train_step_b3
// ZB-COUNT-4: call @train_step_w3
// ZB-NOT: call
// B returns the gradient of the stage's input and what W reads (the
// gradient of the pre-activation); W returns the weight gradients.
// ZBIR: func.func private @train_step_b1({{.*}}) -> (tensor<2x64xf32>, tensor<2x64xf32>)
// ZBIR-NEXT: cleave.gelu_grad
// ZBIR-NEXT: cleave.matmul
// ZBIR-NEXT: return
// ZBIR: func.func private @train_step_w1({{.*}}) -> (tensor<64xf32>, tensor<64x64xf32>)

// Interleaved, two chunks per rank (pp = 2, stages 0 and 2 on rank 0).
// INTERIR: cleave.mesh @mesh(pp = 2 : ib, dp = 2 : ib)
// INTERIR: cleave.all_reduce %{{.*}} on @mesh axes = [dp]  : tensor<64x64xf32>
// INTER-LABEL: func.func @train_step_s0
// INTER-NEXT: call @train_step_f0
// INTER-NEXT: call @train_step_f0
// INTER-NEXT: call @train_step_f2
// INTER-NEXT: call @train_step_f2
// INTER-NEXT: call @train_step_f0
// INTER-NEXT: call @train_step_b2
// INTER-NEXT: call @train_step_f0
// INTER-NEXT: call @train_step_b2
// INTER-NEXT: call @train_step_f2
// INTER-NEXT: call @train_step_b0
// INTER-NEXT: call @train_step_f2
// INTER-NEXT: call @train_step_b0
// INTER-NEXT: call @train_step_b2
// INTER-NEXT: call @train_step_b2
// INTER-NEXT: call @train_step_b0
// INTER-NEXT: call @train_step_b0
// INTER-NEXT: func.func @train_step_s1
// INTER-NEXT: call @train_step_f1
// INTER-NEXT: call @train_step_f1
// INTER-NEXT: call @train_step_f3
// INTER-NEXT: call @train_step_b3
// INTER-NEXT: call @train_step_f3
// INTER-NEXT: call @train_step_b3
// INTER-NEXT: call @train_step_f1
// INTER-NEXT: call @train_step_b1
// INTER-NEXT: call @train_step_f1
// INTER-NEXT: call @train_step_b1
// INTER-NEXT: call @train_step_f3
// INTER-NEXT: call @train_step_b3
// INTER-NEXT: call @train_step_f3
// INTER-NEXT: call @train_step_b3
// INTER-NEXT: call @train_step_b1
// INTER-NEXT: call @train_step_b1
// INTER-NOT: call

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
    %4 = cleave.matmul %3, %arg4 {transpose_rhs, cleave.stage = 1 : i64} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %5 = cleave.broadcast %arg5 dims = [1] {cleave.stage = 1 : i64} : tensor<64xf32> -> tensor<8x64xf32>
    %6 = cleave.add %4, %5 {cleave.stage = 1 : i64} : tensor<8x64xf32>
    %7 = cleave.gelu %6 {cleave.stage = 1 : i64} : tensor<8x64xf32>
    %8 = cleave.matmul %7, %arg6 {transpose_rhs, cleave.stage = 2 : i64} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %9 = cleave.broadcast %arg7 dims = [1] {cleave.stage = 2 : i64} : tensor<64xf32> -> tensor<8x64xf32>
    %10 = cleave.add %8, %9 {cleave.stage = 2 : i64} : tensor<8x64xf32>
    %11 = cleave.gelu %10 {cleave.stage = 2 : i64} : tensor<8x64xf32>
    %12 = cleave.matmul %11, %arg8 {transpose_rhs, cleave.stage = 3 : i64} : (tensor<8x64xf32>, tensor<10x64xf32>) -> tensor<8x10xf32>
    %13 = cleave.broadcast %arg9 dims = [1] {cleave.stage = 3 : i64} : tensor<10xf32> -> tensor<8x10xf32>
    %14 = cleave.add %12, %13 {cleave.stage = 3 : i64} : tensor<8x10xf32>
    %15 = cleave.cross_entropy %14, %arg1 {cleave.stage = 3 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    return %15 : tensor<f32>
  }
}
