// RUN: cleave-opt %s --cleave-autodiff=optimizer=sgd --cse --cleave-propagate-sharding --cleave-partition --cleave-verify-collectives | FileCheck %s

// The training step of an expert-parallel MoE layer: the backward pass moves
// the expert buffers' gradients with the mirror all-to-alls (the VJP of
// dispatch is a combine and that of combine a dispatch, with the same
// rules), and cleave-verify-collectives accepts the program.
cleave.mesh @m(ep = 2 : nvlink)

// CHECK-LABEL: func.func @train_step
// CHECK-COUNT-2: cleave.all_to_all %{{.*}} on @m axes = [ep]
// CHECK: cleave.moe_weights_grad
// CHECK: cleave.all_to_all %{{.*}} on @m axes = [ep] split_dim = 0 concat_dim = 1
// CHECK: cleave.all_to_all %{{.*}} on @m axes = [ep] split_dim = 1 concat_dim = 0
// CHECK: cleave.moe_combine %{{.*}}, %{{.*}} : (tensor<2x8x4x2xf32>, tensor<4x2x2x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NOT: cleave.all_to_all
// CHECK: return
func.func @forward(
    %in: tensor<4x8x16xf32> {cleave.input = "x", cleave.sharding = #cleave.sharding<@m, [ep, _, _]>},
    %wi: tensor<16x16xf32> {cleave.param = "in"},
    %r: tensor<4x16xf32> {cleave.param = "router"},
    %w1: tensor<4x16x32xf32> {cleave.param = "w1", cleave.sharding = #cleave.sharding<@m, [ep, _, _]>},
    %w2: tensor<4x32x16xf32> {cleave.param = "w2", cleave.sharding = #cleave.sharding<@m, [ep, _, _]>})
    -> tensor<f32> {
  %x = cleave.matmul %in, %wi {transpose_rhs} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %l = cleave.matmul %x, %r {transpose_rhs} : (tensor<4x8x16xf32>, tensor<4x16xf32>) -> tensor<4x8x4xf32>
  %c, %d = cleave.moe_router %l {top_k = 2 : i64, normalize, capacity_factor = 0.5 : f64} : (tensor<4x8x4xf32>) -> (tensor<4x8x4x2xf32>, tensor<4x8x4x2xf32>)
  %b = cleave.moe_dispatch %x, %d : (tensor<4x8x16xf32>, tensor<4x8x4x2xf32>) -> tensor<4x4x2x16xf32>
  %be = cleave.sharding_constraint %b <@m, [ep, _, _, _]> : tensor<4x4x2x16xf32>
  %f = cleave.reshape %be : tensor<4x4x2x16xf32> to tensor<4x8x16xf32>
  %h = cleave.matmul %f, %w1 : (tensor<4x8x16xf32>, tensor<4x16x32xf32>) -> tensor<4x8x32xf32>
  %s = cleave.silu %h : tensor<4x8x32xf32>
  %o = cleave.matmul %s, %w2 : (tensor<4x8x32xf32>, tensor<4x32x16xf32>) -> tensor<4x8x16xf32>
  %ob = cleave.reshape %o : tensor<4x8x16xf32> to tensor<4x4x2x16xf32>
  %og = cleave.sharding_constraint %ob <@m, [_, ep, _, _]> : tensor<4x4x2x16xf32>
  %y = cleave.moe_combine %c, %og : (tensor<4x8x4x2xf32>, tensor<4x4x2x16xf32>) -> tensor<4x8x16xf32>
  %aux = cleave.moe_aux_loss %l {top_k = 2 : i64} : (tensor<4x8x4xf32>) -> tensor<f32>
  %yy = cleave.mul %y, %y : tensor<4x8x16xf32>
  %sum = cleave.reduce_sum %yy dims = [0, 1, 2] : tensor<4x8x16xf32> -> tensor<f32>
  %loss = cleave.add %sum, %aux : tensor<f32>
  return %loss : tensor<f32>
}
