// RUN: cleave-opt %s --cleave-propagate-sharding --cleave-partition | FileCheck %s

// Expert parallelism through the sharding rules alone: the tokens are split
// by sequence (the router's group factor) and the expert weights by expert
// over the same axis 'ep'. The expert buffer leaves cleave.moe_dispatch
// split by group and the batched expert GEMM wants it split by expert: the
// partitioner moves it with an all_to_all, and back before cleave.moe_combine.
cleave.mesh @m(ep = 2 : nvlink)

// CHECK-LABEL: func.func @expert_parallel
// CHECK: cleave.moe_router %{{.*}} : (tensor<2x8x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>)
// CHECK: %[[B:.*]] = cleave.moe_dispatch %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<2x8x4x4xf32>) -> tensor<4x2x4x16xf32>
// CHECK: %[[T:.*]] = cleave.all_to_all %[[B]] on @m axes = [ep] split_dim = 0 concat_dim = 1 : tensor<4x2x4x16xf32> -> tensor<2x4x4x16xf32>
// CHECK: cleave.matmul %{{.*}}, %{{.*}} : (tensor<2x16x16xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
// CHECK: cleave.all_to_all %{{.*}} on @m axes = [ep] split_dim = 1 concat_dim = 0 : tensor<2x4x4x16xf32> -> tensor<4x2x4x16xf32>
// CHECK: cleave.moe_combine %{{.*}}, %{{.*}} : (tensor<2x8x4x4xf32>, tensor<4x2x4x16xf32>) -> tensor<2x8x16xf32>
func.func @expert_parallel(
    %x: tensor<4x8x16xf32> {cleave.sharding = #cleave.sharding<@m, [ep, _, _]>},
    %r: tensor<4x16xf32>,
    %w1: tensor<4x16x32xf32> {cleave.sharding = #cleave.sharding<@m, [ep, _, _]>},
    %w2: tensor<4x32x16xf32> {cleave.sharding = #cleave.sharding<@m, [ep, _, _]>})
    -> (tensor<4x8x16xf32> {cleave.sharding = #cleave.sharding<@m, [ep, _, _]>}) {
  %l = cleave.matmul %x, %r {transpose_rhs} : (tensor<4x8x16xf32>, tensor<4x16xf32>) -> tensor<4x8x4xf32>
  %c, %d = cleave.moe_router %l {top_k = 2 : i64, capacity_factor = 1.0 : f64} : (tensor<4x8x4xf32>) -> (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>)
  %b = cleave.moe_dispatch %x, %d : (tensor<4x8x16xf32>, tensor<4x8x4x4xf32>) -> tensor<4x4x4x16xf32>
  %be = cleave.sharding_constraint %b <@m, [ep, _, _, _]> : tensor<4x4x4x16xf32>
  %f = cleave.reshape %be : tensor<4x4x4x16xf32> to tensor<4x16x16xf32>
  %h = cleave.matmul %f, %w1 : (tensor<4x16x16xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  %s = cleave.silu %h : tensor<4x16x32xf32>
  %o = cleave.matmul %s, %w2 : (tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<4x16x16xf32>
  %ob = cleave.reshape %o : tensor<4x16x16xf32> to tensor<4x4x4x16xf32>
  %og = cleave.sharding_constraint %ob <@m, [_, ep, _, _]> : tensor<4x4x4x16xf32>
  %y = cleave.moe_combine %c, %og : (tensor<4x8x4x4xf32>, tensor<4x4x4x16xf32>) -> tensor<4x8x16xf32>
  return %y : tensor<4x8x16xf32>
}
