// RUN: cleave-opt %s --split-input-file --cleave-auto-shard="cluster=dgx-a100-80gb gpus=8 tp=8" --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s

// A two-layer MLP on one 8-GPU node with tp fixed at 8 (graph mode: not a
// zoo transformer). The integer program finds Megatron's MLP: the first
// weight split by rows (column parallel), the second by columns (row
// parallel), one all-reduce of the partial sum before the small head.

// CHECK: remark: cleave-auto-shard: tp=8 pp=1 dp=1 cp=1 mbs=16 m=1 1f1b zero=0
// CHECK-LABEL: module attributes {cleave.plan = {micro_batch = 16 : i64, num_micro_batches = 1 : i64, recompute = "none", schedule = "1f1b", virtual_stages = 1 : i64, zero = 0 : i64}}
// CHECK: cleave.mesh @cluster(pp = 1 : nvlink, dp = 1 : nvlink, cp = 1 : nvlink, tp = 8 : nvlink)
// CHECK: func.func @forward(
// CHECK-SAME: {cleave.input = "x", cleave.sharding = #cleave.sharding<@cluster, [_, _]>}
// CHECK-SAME: {cleave.param = "fc1.weight", cleave.sharding = #cleave.sharding<@cluster, [tp, _]>}
// CHECK-SAME: {cleave.param = "fc2.weight", cleave.sharding = #cleave.sharding<@cluster, [_, tp]>}
// CHECK-SAME: -> (tensor<f32> {cleave.sharding = #cleave.sharding<@cluster, []>})
// CHECK: %[[H:.*]] = cleave.matmul %{{.*}} {cleave.stage = 0 : i64, transpose_rhs}
// CHECK: %[[G:.*]] = cleave.gelu %[[H]] {cleave.stage = 0 : i64}
// CHECK: %[[O:.*]] = cleave.matmul %[[G]], %{{.*}} {cleave.stage = 0 : i64, transpose_rhs}
// CHECK: %[[R:.*]] = cleave.sharding_constraint %[[O]] <@cluster, [_, _]> {cleave.stage = 0 : i64}
// CHECK: cleave.matmul %[[R]], %{{.*}} {cleave.stage = 0 : i64, transpose_rhs}
func.func @forward(%x: tensor<16x1024xbf16> {cleave.input = "x"},
                   %y: tensor<16xi32> {cleave.input = "y"},
                   %w1: tensor<8192x1024xbf16> {cleave.param = "fc1.weight"},
                   %w2: tensor<1024x8192xbf16> {cleave.param = "fc2.weight"},
                   %w3: tensor<64x1024xbf16> {cleave.param = "head.weight"}) -> tensor<f32> {
  %h = cleave.matmul %x, %w1 {transpose_rhs} : (tensor<16x1024xbf16>, tensor<8192x1024xbf16>) -> tensor<16x8192xbf16>
  %g = cleave.gelu %h : tensor<16x8192xbf16>
  %o = cleave.matmul %g, %w2 {transpose_rhs} : (tensor<16x8192xbf16>, tensor<1024x8192xbf16>) -> tensor<16x1024xbf16>
  %l = cleave.matmul %o, %w3 {transpose_rhs} : (tensor<16x1024xbf16>, tensor<64x1024xbf16>) -> tensor<16x64xbf16>
  %loss = cleave.cross_entropy %l, %y : (tensor<16x64xbf16>, tensor<16xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// With a large batch and small weights, tp = 8 is better spent on the
// batch: activations stay local, the weights are replicated and only their
// gradients are summed, as data parallelism does. No value changes layout.

// CHECK-LABEL: module attributes {cleave.plan
// CHECK: func.func @forward(
// CHECK-SAME: {cleave.input = "x", cleave.sharding = #cleave.sharding<@cluster, [tp, _]>}
// CHECK-SAME: {cleave.input = "y", cleave.sharding = #cleave.sharding<@cluster, [tp]>}
// CHECK-SAME: {cleave.param = "fc1.weight", cleave.sharding = #cleave.sharding<@cluster, [_, _]>}
// CHECK-NOT: sharding_constraint
// CHECK: cleave.matmul %{{.*}}, %{{.*}} {cleave.stage = 0 : i64, transpose_rhs} : (tensor<65536x256xbf16>, tensor<256x256xbf16>)
// CHECK-NOT: sharding_constraint
// CHECK: return
func.func @forward(%x: tensor<65536x256xbf16> {cleave.input = "x"},
                   %y: tensor<65536xi32> {cleave.input = "y"},
                   %w1: tensor<256x256xbf16> {cleave.param = "fc1.weight"},
                   %w2: tensor<64x256xbf16> {cleave.param = "head.weight"}) -> tensor<f32> {
  %h = cleave.matmul %x, %w1 {transpose_rhs} : (tensor<65536x256xbf16>, tensor<256x256xbf16>) -> tensor<65536x256xbf16>
  %g = cleave.gelu %h : tensor<65536x256xbf16>
  %l = cleave.matmul %g, %w2 {transpose_rhs} : (tensor<65536x256xbf16>, tensor<64x256xbf16>) -> tensor<65536x64xbf16>
  %loss = cleave.cross_entropy %l, %y : (tensor<65536x64xbf16>, tensor<65536xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
