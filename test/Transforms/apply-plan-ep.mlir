// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="ep=2" | FileCheck %s --check-prefix=EP
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="ep=2 dp=2" | FileCheck %s --check-prefix=EPDP
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="ep=2 dp=2 zero=1" | FileCheck %s --check-prefix=ZERO
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="ep=2 pp=2 micro=2" | FileCheck %s --check-prefix=MICRO
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="ep=2 dp=2" --cleave-propagate-sharding --cleave-partition --cleave-verify-collectives | FileCheck %s --check-prefix=PART

// The named plan ep=N on a training step with one MoE layer (the zoo's
// form: router, dispatch, batched expert GEMMs, combine, balance loss). The
// expert weights are found by their rule (dimension 0 is the batch factor
// of a batched matmul), not by name; the dense weights and the router stay
// replicated. The pins sit where the rules move between the token side
// (groups split over [dp, ep], with micro-batches [dp, mb, ep]) and the
// expert side (experts split over ep), forward and backward.

// EP: cleave.mesh @mesh(ep = 2 : ib)
// EP-LABEL: func.func @train_step(
// EP-SAME: cleave.input = "x", cleave.sharding = #cleave.sharding<@mesh, [ep, _, _]>
// EP-SAME: {cleave.param = "in"}
// EP-SAME: {cleave.param = "router"}
// EP-SAME: {cleave.param = "w1", cleave.sharding = #cleave.sharding<@mesh, [ep, _, _]>}
// EP-SAME: {cleave.param = "w2", cleave.sharding = #cleave.sharding<@mesh, [ep, _, _]>}
// EP: cleave.moe_dispatch
// EP-NEXT: cleave.sharding_constraint %{{.*}} <@mesh, [ep, _, _, _]>
// EP: cleave.sharding_constraint %{{.*}} <@mesh, [_, ep, _, _]>
// EP-NEXT: cleave.moe_combine
// EP: cleave.sharding_constraint %{{.*}} <@mesh, [_, ep, _, _]>
// EP-NEXT: cleave.moe_weights_grad
// EP-NEXT: cleave.moe_dispatch
// EP-NEXT: cleave.sharding_constraint %{{.*}} <@mesh, [ep, _, _, _]>
// EP: cleave.sharding_constraint %{{.*}} <@mesh, [_, ep, _, _]>
// EP-NEXT: cleave.moe_combine
// EP-NOT: cleave.sharding_constraint

// EPDP: cleave.mesh @mesh(dp = 2 : ib, ep = 2 : ib)
// EPDP-LABEL: func.func @train_step(
// EPDP-SAME: cleave.input = "x", cleave.sharding = #cleave.sharding<@mesh, [(dp, ep), _, _]>
// EPDP-SAME: {cleave.param = "w1", cleave.sharding = #cleave.sharding<@mesh, [ep, _, _]>}
// EPDP: cleave.moe_dispatch
// EPDP-NEXT: cleave.sharding_constraint %{{.*}} <@mesh, [ep, dp, _, _]>
// EPDP: cleave.sharding_constraint %{{.*}} <@mesh, [_, (dp, ep), _, _]>
// EPDP-NEXT: cleave.moe_combine

// Micro-batches: the batch splits over [dp, mb, ep], ep the minor axis, so
// each pin moves ep alone and the expert buffers stay split over mb: every
// all-to-all stays inside its micro-batch (docs/pipeline.md shows the
// pipelined step: test/Transforms/pipeline-ep.mlir).
// MICRO: cleave.mesh @mesh(pp = 2 : ib, mb = 2 : host, ep = 2 : ib)
// MICRO-LABEL: func.func @train_step(
// MICRO-SAME: cleave.input = "x", cleave.sharding = #cleave.sharding<@mesh, [(mb, ep), _, _]>
// MICRO-SAME: {cleave.param = "w1", cleave.sharding = #cleave.sharding<@mesh, [ep, _, _]>}
// MICRO: cleave.moe_dispatch
// MICRO-NEXT: cleave.sharding_constraint %{{.*}} <@mesh, [ep, mb, _, _]>
// MICRO: cleave.sharding_constraint %{{.*}} <@mesh, [_, (mb, ep), _, _]>
// MICRO-NEXT: cleave.moe_combine

// ZeRO-1: the expert weights' state is split over dp after ep, the dense
// parameters' over dp and ep (every ep rank holds them whole).
// ZERO-LABEL: func.func @train_step(
// ZERO-SAME: {cleave.sharding = #cleave.sharding<@mesh, [(dp, ep), _]>, cleave.state = "in.exp_avg"}
// ZERO-SAME: {cleave.sharding = #cleave.sharding<@mesh, [(ep, dp), _, _]>, cleave.state = "w1.exp_avg"}

// Forward: one all-to-all into the experts and one back; backward the
// mirror pair. Expert gradients are reduced over dp only, the others over
// dp and ep.
// PART-LABEL: func.func @train_step(
// PART-SAME: tensor<1x8x16xf32>
// PART-SAME: tensor<2x16x32xf32> {cleave.layout = #cleave.sharding<@mesh, [ep, _, _]>, cleave.param = "w1"}
// PART: cleave.moe_dispatch {{.*}} -> tensor<4x1x2x16xf32>
// PART-NEXT: cleave.all_to_all %{{.*}} on @mesh axes = [ep] split_dim = 0 concat_dim = 1 : tensor<4x1x2x16xf32> -> tensor<2x2x2x16xf32>
// PART: cleave.all_to_all %{{.*}} on @mesh axes = [ep] split_dim = 1 concat_dim = 0 : tensor<2x2x2x16xf32> -> tensor<4x1x2x16xf32>
// PART-NEXT: cleave.moe_combine
// PART-COUNT-2: cleave.all_to_all %{{.*}} on @mesh axes = [ep]
// PART-NOT: cleave.all_to_all
// PART-DAG: cleave.all_reduce %{{.*}} on @mesh axes = [dp]{{.*}}: tensor<2x16x32xf32>
// PART-DAG: cleave.all_reduce %{{.*}} on @mesh axes = [dp, ep]{{.*}}: tensor<4x16xf32>
func.func @forward(
    %in: tensor<4x8x16xf32> {cleave.input = "x"},
    %wi: tensor<16x16xf32> {cleave.param = "in"},
    %r: tensor<4x16xf32> {cleave.param = "router"},
    %w1: tensor<4x16x32xf32> {cleave.param = "w1"},
    %w2: tensor<4x32x16xf32> {cleave.param = "w2"})
    -> tensor<f32> {
  %x = cleave.matmul %in, %wi {transpose_rhs} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %l = cleave.matmul %x, %r {transpose_rhs} : (tensor<4x8x16xf32>, tensor<4x16xf32>) -> tensor<4x8x4xf32>
  %c, %d = cleave.moe_router %l {top_k = 2 : i64, normalize, capacity_factor = 0.5 : f64} : (tensor<4x8x4xf32>) -> (tensor<4x8x4x2xf32>, tensor<4x8x4x2xf32>)
  %b = cleave.moe_dispatch %x, %d : (tensor<4x8x16xf32>, tensor<4x8x4x2xf32>) -> tensor<4x4x2x16xf32>
  %f = cleave.reshape %b : tensor<4x4x2x16xf32> to tensor<4x8x16xf32>
  %h = cleave.matmul %f, %w1 : (tensor<4x8x16xf32>, tensor<4x16x32xf32>) -> tensor<4x8x32xf32>
  %s = cleave.silu %h : tensor<4x8x32xf32>
  %o = cleave.matmul %s, %w2 : (tensor<4x8x32xf32>, tensor<4x32x16xf32>) -> tensor<4x8x16xf32>
  %ob = cleave.reshape %o : tensor<4x8x16xf32> to tensor<4x4x2x16xf32>
  %y = cleave.moe_combine %c, %ob : (tensor<4x8x4x2xf32>, tensor<4x4x2x16xf32>) -> tensor<4x8x16xf32>
  %aux = cleave.moe_aux_loss %l {top_k = 2 : i64} : (tensor<4x8x4xf32>) -> tensor<f32>
  %yy = cleave.mul %y, %y : tensor<4x8x16xf32>
  %sum = cleave.reduce_sum %yy dims = [0, 1, 2] : tensor<4x8x16xf32> -> tensor<f32>
  %loss = cleave.add %sum, %aux : tensor<f32>
  return %loss : tensor<f32>
}
