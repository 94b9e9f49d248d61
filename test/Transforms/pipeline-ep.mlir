// Expert parallelism in a pipeline with micro-batches: cleave-apply-plan
// splits the batch over [dp, mb, ep] (ep the minor axis, so the
// partitioner's all-to-alls move ep alone and stay inside a micro-batch).
// A rank function reads its replica's block of the data, [dp] (all
// micro-batches of the replica, every ep block of each), cuts micro-batch m
// out of it (rows [m * ep * b, (m + 1) * ep * b)) and keeps its ep block
// with cleave.shard: the same rows of the global batch as block
// (dp, m, ep) of [dp, mb, ep], so dropout's block numbers still match.
// The expert gradients are summed over the micro-batches, then reduced over
// dp; the dense ones over dp and ep.
// RUN: cleave-opt %s --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce --canonicalize --cse \
// RUN:   --cleave-apply-plan="pp=2 dp=2 ep=2 micro=2" --cleave-propagate-sharding --cleave-partition --cleave-pipeline \
// RUN:   --cleave-verify-collectives | FileCheck %s

// CHECK: cleave.mesh @mesh(pp = 2 : ib, dp = 2 : ib, ep = 2 : ib)
// CHECK-LABEL: func.func private @train_step_f1(
// CHECK: cleave.moe_dispatch {{.*}} -> tensor<4x1x2x16xf32>
// CHECK-NEXT: cleave.all_to_all %{{.*}} on @mesh axes = [ep] split_dim = 0 concat_dim = 1 : tensor<4x1x2x16xf32> -> tensor<2x2x2x16xf32>
// CHECK: cleave.all_to_all %{{.*}} on @mesh axes = [ep] split_dim = 1 concat_dim = 0 : tensor<2x2x2x16xf32> -> tensor<4x1x2x16xf32>
// CHECK-NEXT: cleave.moe_combine
// CHECK-LABEL: func.func private @train_step_b1(
// CHECK-COUNT-2: cleave.all_to_all %{{.*}} on @mesh axes = [ep]
// CHECK-LABEL: func.func @train_step_s0(
// CHECK-SAME: %[[X:.*]]: tensor<4x8x16xf32> {cleave.input = "x", cleave.layout = #cleave.sharding<@mesh, [dp, _, _]>}
// CHECK: %[[M0:.*]] = cleave.slice %[[X]] offsets = [0, 0, 0] sizes = [2, 8, 16] strides = [1, 1, 1] : tensor<4x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[B0:.*]] = cleave.shard %[[M0]] on @mesh axes = [ep] dim = 0 : tensor<2x8x16xf32> -> tensor<1x8x16xf32>
// CHECK-NEXT: %[[C0:.*]] = bufferization.alloc_tensor() copy(%[[B0]])
// CHECK-NEXT: call @train_step_f0(%[[C0]],
// CHECK: %[[M1:.*]] = cleave.slice %[[X]] offsets = [2, 0, 0] sizes = [2, 8, 16]
// CHECK-NEXT: cleave.shard %[[M1]] on @mesh axes = [ep] dim = 0
// CHECK: cleave.all_reduce %{{.*}} on @mesh axes = [dp, ep] {{.*}}: tensor<16x16xf32>
// CHECK-LABEL: func.func @train_step_s1(
// CHECK-DAG: cleave.all_reduce %{{.*}} on @mesh axes = [dp, ep] {{.*}}: tensor<4x16xf32>
// CHECK-DAG: cleave.all_reduce %{{.*}} on @mesh axes = [dp] {{.*}}: tensor<2x16x32xf32>
// CHECK-DAG: cleave.all_reduce %{{.*}} on @mesh axes = [dp] {{.*}}: tensor<2x32x16xf32>
// CHECK-NOT: axes = [{{.*}}mb

func.func @forward(
    %in: tensor<8x8x16xf32> {cleave.input = "x"},
    %wi: tensor<16x16xf32> {cleave.param = "in"},
    %r: tensor<4x16xf32> {cleave.param = "router"},
    %w1: tensor<4x16x32xf32> {cleave.param = "w1"},
    %w2: tensor<4x32x16xf32> {cleave.param = "w2"})
    -> tensor<f32> {
  %x = cleave.matmul %in, %wi {transpose_rhs, cleave.stage = 0 : i64} : (tensor<8x8x16xf32>, tensor<16x16xf32>) -> tensor<8x8x16xf32>
  %l = cleave.matmul %x, %r {transpose_rhs, cleave.stage = 1 : i64} : (tensor<8x8x16xf32>, tensor<4x16xf32>) -> tensor<8x8x4xf32>
  %c, %d = cleave.moe_router %l {top_k = 2 : i64, normalize, capacity_factor = 0.5 : f64, cleave.stage = 1 : i64} : (tensor<8x8x4xf32>) -> (tensor<8x8x4x2xf32>, tensor<8x8x4x2xf32>)
  %b = cleave.moe_dispatch %x, %d {cleave.stage = 1 : i64} : (tensor<8x8x16xf32>, tensor<8x8x4x2xf32>) -> tensor<4x8x2x16xf32>
  %f = cleave.reshape %b {cleave.stage = 1 : i64} : tensor<4x8x2x16xf32> to tensor<4x16x16xf32>
  %h = cleave.matmul %f, %w1 {cleave.stage = 1 : i64} : (tensor<4x16x16xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  %o = cleave.matmul %h, %w2 {cleave.stage = 1 : i64} : (tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<4x16x16xf32>
  %ob = cleave.reshape %o {cleave.stage = 1 : i64} : tensor<4x16x16xf32> to tensor<4x8x2x16xf32>
  %y = cleave.moe_combine %c, %ob {cleave.stage = 1 : i64} : (tensor<8x8x4x2xf32>, tensor<4x8x2x16xf32>) -> tensor<8x8x16xf32>
  %yy = cleave.mul %y, %y {cleave.stage = 1 : i64} : tensor<8x8x16xf32>
  %sum = cleave.reduce_sum %yy dims = [0, 1, 2] {cleave.stage = 1 : i64} : tensor<8x8x16xf32> -> tensor<f32>
  return %sum : tensor<f32>
}
