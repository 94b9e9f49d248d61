// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="tp=2" | FileCheck %s
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="tp=2" --cleave-propagate-sharding --cleave-partition | FileCheck %s --check-prefix=PART

// A tied output head whose vocabulary (33) tp does not divide stays whole:
// the first matmul that uses the table as its right-hand side (the forward
// head) decides, and the gradient's matmul (dlogits x table, whose
// "output features" are the hidden size) must not make it row-parallel
// over the hidden size afterwards. The MLP is still Megatron-split and the
// residual stream stays whole.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<33x16xf32> {cleave.param = "wte.weight"}
// CHECK-SAME: {cleave.param = "fc.weight", cleave.sharding = #cleave.sharding<@mesh, [tp, _]>}
// CHECK-SAME: {cleave.param = "proj.weight", cleave.sharding = #cleave.sharding<@mesh, [_, tp]>}

// PART-LABEL: func.func @train_step
// PART-SAME: tensor<33x16xf32> {cleave.layout = #cleave.sharding<@mesh, [_, _]>, cleave.param = "wte.weight"}
// PART: cleave.embedding %{{.*}} : (tensor<33x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
// PART-NOT: cleave.all_gather
// PART: cleave.matmul {{.*}} : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
// PART: %[[DOWN:.*]] = cleave.matmul {{.*}} : (tensor<4x8x32xf32>, tensor<16x32xf32>) -> tensor<4x8x16xf32>
// PART: cleave.all_reduce %[[DOWN]] on @mesh axes = [tp] : tensor<4x8x16xf32>
// PART-NOT: cleave.all_
// PART: cleave.matmul {{.*}} {transpose_rhs} : (tensor<4x8x16xf32>, tensor<33x16xf32>) -> tensor<4x8x33xf32>
// PART-NEXT: cleave.cross_entropy
func.func @forward(%ids: tensor<4x8xi32> {cleave.input = "tokens"},
                   %y: tensor<4x8xi32> {cleave.input = "targets"},
                   %wte: tensor<33x16xf32> {cleave.param = "wte.weight"},
                   %w1: tensor<64x16xf32> {cleave.param = "fc.weight"},
                   %w2: tensor<16x64xf32> {cleave.param = "proj.weight"}) -> tensor<f32> {
  %x = cleave.embedding %wte, %ids : (tensor<33x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %h = cleave.matmul %x, %w1 {transpose_rhs} : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
  %a = cleave.gelu %h : tensor<4x8x64xf32>
  %o = cleave.matmul %a, %w2 {transpose_rhs} : (tensor<4x8x64xf32>, tensor<16x64xf32>) -> tensor<4x8x16xf32>
  %r = cleave.add %x, %o : tensor<4x8x16xf32>
  %logits = cleave.matmul %r, %wte {transpose_rhs} : (tensor<4x8x16xf32>, tensor<33x16xf32>) -> tensor<4x8x33xf32>
  %loss = cleave.cross_entropy %logits, %y : (tensor<4x8x33xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
