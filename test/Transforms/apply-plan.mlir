// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="dp=2" | FileCheck %s --check-prefix=DP
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="tp=2" | FileCheck %s --check-prefix=TP
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="dp=2 tp=2" --cleave-propagate-sharding --cleave-partition | FileCheck %s --check-prefix=TP-PART
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="tp=2 sp=true" | FileCheck %s --check-prefix=SP
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="tp=2 sp=true" --cleave-propagate-sharding --cleave-partition | FileCheck %s --check-prefix=SP-PART
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="dp=2 zero=1" | FileCheck %s --check-prefix=Z1
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="dp=2 zero=1" --cleave-propagate-sharding --cleave-partition | FileCheck %s --check-prefix=Z1-PART
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="dp=2 zero=2" --cleave-propagate-sharding --cleave-partition | FileCheck %s --check-prefix=Z2-PART
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="dp=2 zero=3" | FileCheck %s --check-prefix=Z3
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="dp=2 zero=3" --cleave-propagate-sharding --cleave-partition | FileCheck %s --check-prefix=Z3-PART
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="dp=2 tp=2 zero=1" | FileCheck %s --check-prefix=TPZ1
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="dp=2 cp=2" | FileCheck %s --check-prefix=CP
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="dp=2 cp=2" --cleave-propagate-sharding --cleave-partition | FileCheck %s --check-prefix=CP-PART
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="cp=2 tp=2 sp=true" | FileCheck %s --check-prefix=CP-SP
// RUN: cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="cp=2 tp=2 sp=true" --cleave-propagate-sharding --cleave-partition | FileCheck %s --check-prefix=CP-SP-PART

// Named plans on the training step of a one-layer transformer-style block
// (layer norm, MLP up and down, residual, dropout, output head,
// cross-entropy): the annotations each plan writes, and for each the
// collectives that propagation and partitioning make of them.

// Data parallelism: the batch of every data input splits over dp;
// parameters, the seed and the optimizer inputs stay whole.
// DP: module attributes {cleave.plan = {zero = 0 : i64}}
// DP: cleave.mesh @mesh(dp = 2 : ib)
// DP-LABEL: func.func @train_step
// DP-SAME: {cleave.input = "x", cleave.sharding = #cleave.sharding<@mesh, [dp, _, _]>}
// DP-SAME: {cleave.input = "y", cleave.sharding = #cleave.sharding<@mesh, [dp, _]>}
// DP-SAME: %{{[^:]+}}: tensor<i64> {cleave.input = "seed"},
// DP-SAME: %{{[^:]+}}: tensor<64x16xf32> {cleave.param = "fc.weight"},
// DP-NOT: cleave.sharding_constraint

// Megatron tensor parallelism: the up projection is column-parallel (its
// output features, the first dimension of an [out, in] weight), the down
// projection row-parallel (its input features), the output head
// column-parallel over the vocabulary.
// TP: cleave.mesh @mesh(tp = 2 : nvlink)
// TP-LABEL: func.func @train_step
// TP-SAME: %{{[^:]+}}: tensor<4x8x16xf32> {cleave.input = "x"},
// TP-SAME: {cleave.param = "fc.weight", cleave.sharding = #cleave.sharding<@mesh, [tp, _]>}
// TP-SAME: {cleave.param = "proj.weight", cleave.sharding = #cleave.sharding<@mesh, [_, tp]>}
// TP-SAME: {cleave.param = "head.weight", cleave.sharding = #cleave.sharding<@mesh, [tp, _]>}
// TP-NOT: cleave.sharding_constraint

// dp x tp per device: the hidden activations are split by tp, the down
// projection's partial sums are all-reduced over tp where they meet the
// residual, the logits gathered for the loss; gradients are all-reduced
// over dp.
// TP-PART: cleave.mesh @mesh(dp = 2 : ib, tp = 2 : nvlink)
// TP-PART-LABEL: func.func @train_step
// TP-PART: %[[H:.*]] = cleave.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
// TP-PART: %[[A:.*]] = cleave.gelu %[[H]] : tensor<2x8x32xf32>
// TP-PART: %[[O:.*]] = cleave.matmul %[[A]], %{{.*}} {transpose_rhs} : (tensor<2x8x32xf32>, tensor<16x32xf32>) -> tensor<2x8x16xf32>
// TP-PART: %[[R:.*]] = cleave.all_reduce %[[O]] on @mesh axes = [tp] : tensor<2x8x16xf32>
// TP-PART: cleave.add %{{.*}}, %[[R]] : tensor<2x8x16xf32>
// TP-PART: %[[L:.*]] = cleave.matmul {{.*}} -> tensor<2x8x16xf32>
// TP-PART: %[[G:.*]] = cleave.all_gather %[[L]] on @mesh axes = [tp] dim = 2 : tensor<2x8x16xf32> -> tensor<2x8x32xf32>
// TP-PART: cleave.cross_entropy %[[G]]
// TP-PART: cleave.all_reduce %{{.*}} on @mesh axes = [dp] : tensor<32x16xf32>
// TP-PART: cleave.all_reduce %{{.*}} on @mesh axes = [dp] : tensor<16x32xf32>
// TP-PART-NOT: cleave.reduce_scatter

// Context parallelism: data inputs split their sequence (dimension 1) over
// cp as well; the mesh orders dp before cp.
// CP: cleave.mesh @mesh(dp = 2 : ib, cp = 2 : ib)
// CP-LABEL: func.func @train_step
// CP-SAME: {cleave.input = "x", cleave.sharding = #cleave.sharding<@mesh, [dp, cp, _]>}
// CP-SAME: {cleave.input = "y", cleave.sharding = #cleave.sharding<@mesh, [dp, cp]>}
// CP-NOT: cleave.sharding_constraint

// Per device, every token-wise op runs on a 2 x 4 block; the norm's weight
// gradients and the loss are summed over dp and cp.
// CP-PART-LABEL: func.func @train_step
// CP-PART-SAME: %{{[^:]+}}: tensor<2x4x16xf32> {cleave.input = "x", cleave.layout = #cleave.sharding<@mesh, [dp, cp, _]>}
// CP-PART: cleave.layer_norm %{{.*}} -> tensor<2x4x16xf32>
// CP-PART: cleave.matmul %{{.*}} {transpose_rhs} : (tensor<2x4x16xf32>, tensor<64x16xf32>) -> tensor<2x4x64xf32>
// CP-PART: cleave.all_reduce %gamma_grad on @mesh axes = [dp, cp]
// CP-PART: cleave.all_reduce %beta_grad on @mesh axes = [dp, cp]

// With sp, the norms' sequence is split over tp inside each cp block.
// CP-SP-LABEL: func.func @train_step
// CP-SP: cleave.sharding_constraint %{{.*}} <@mesh, [_, (cp, tp), _]> : tensor<4x8x16xf32>
// CP-SP-NEXT: cleave.layer_norm

// Per device, the norm's output is gathered over tp only: the MLP runs on
// the device's cp block of the sequence.
// CP-SP-PART-LABEL: func.func @train_step
// CP-SP-PART: %[[LN:.*]] = cleave.layer_norm %{{.*}} -> tensor<4x2x16xf32>
// CP-SP-PART-NEXT: %[[G:.*]] = cleave.all_gather %[[LN]] on @mesh axes = [tp] dim = 1 : tensor<4x2x16xf32> -> tensor<4x4x16xf32>
// CP-SP-PART-NEXT: cleave.matmul %[[G]], %{{.*}} {transpose_rhs} : (tensor<4x4x16xf32>, tensor<32x16xf32>) -> tensor<4x4x32xf32>

// Sequence parallelism: the inputs of the layer norm and of the dropouts
// are pinned to split the sequence over tp.
// SP-LABEL: func.func @train_step
// SP: cleave.sharding_constraint %{{.*}} <@mesh, [_, tp, _]> : tensor<4x8x16xf32>
// SP-NEXT: cleave.layer_norm
// SP: cleave.sharding_constraint %{{.*}} <@mesh, [_, tp, _]> : tensor<4x8x16xf32>
// SP-NEXT: cleave.dropout
// SP: cleave.sharding_constraint %{{.*}} <@mesh, [_, tp, _]> : tensor<4x8x16xf32>
// SP-NEXT: cleave.dropout
// SP-NOT: cleave.sharding_constraint
// SP: return

// Per device, the row-parallel product's pending sum is reduce-scattered
// onto the sequence split instead of all-reduced, and the sequence is
// gathered before the next column-parallel product.
// SP-PART-LABEL: func.func @train_step
// SP-PART-SAME: %{{[^:]+}}: tensor<4x4x16xf32> {cleave.input = "x", cleave.layout = #cleave.sharding<@mesh, [_, tp, _]>}
// SP-PART: %[[LN:.*]] = cleave.layer_norm %{{.*}} : (tensor<4x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x4x16xf32>
// SP-PART: %[[FULL:.*]] = cleave.all_gather %[[LN]] on @mesh axes = [tp] dim = 1 : tensor<4x4x16xf32> -> tensor<4x8x16xf32>
// SP-PART: cleave.matmul %[[FULL]], %{{.*}} {transpose_rhs} : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
// SP-PART: %[[DOWN:.*]] = cleave.matmul {{.*}} : (tensor<4x8x32xf32>, tensor<16x32xf32>) -> tensor<4x8x16xf32>
// SP-PART: cleave.reduce_scatter %[[DOWN]] on @mesh axes = [tp] dim = 1 : tensor<4x8x16xf32> -> tensor<4x4x16xf32>
// SP-PART: cleave.dropout {{.*}} -> tensor<4x4x16xf32>

// ZeRO-1: the optimizer state splits over dp (its first dimension that
// divides); gradients are pinned to the parameter's layout (all-reduced
// whole), and parameters stay whole.
// Z1-LABEL: func.func @train_step
// Z1-SAME: {cleave.param = "ln.weight", cleave.sharding = #cleave.sharding<@mesh, [_]>}
// Z1-SAME: {cleave.param = "fc.weight", cleave.sharding = #cleave.sharding<@mesh, [_, _]>}
// Z1-SAME: {cleave.sharding = #cleave.sharding<@mesh, [dp]>, cleave.state = "ln.weight.exp_avg"}
// Z1-SAME: {cleave.sharding = #cleave.sharding<@mesh, [dp, _]>, cleave.state = "fc.weight.exp_avg"}
// Z1-SAME: {cleave.sharding = #cleave.sharding<@mesh, [dp, _]>, cleave.state = "proj.weight.exp_avg_sq"}
// Z1: %[[GW:.*]] = cleave.sharding_constraint %{{.*}} <@mesh, [_, _]> : tensor<64x16xf32>
// Z1: cleave.adamw %{{.*}}, %[[GW]], %{{.*}} : (tensor<64x16xf32>

// Per device: the gradient is reduce-scattered (the all-reduce the
// replicated gradient asks for, used only by the update's block of it,
// becomes a reduce-scatter: ShardOp's canonicalization), then the update
// runs on a slice of parameter, gradient and state, and the new parameter
// is gathered.
// Z1-PART-LABEL: func.func @train_step
// Z1-PART-SAME: %[[W:[^:]+]]: tensor<64x16xf32> {cleave.layout = #cleave.sharding<@mesh, [_, _]>, cleave.param = "fc.weight"}
// Z1-PART-SAME: tensor<32x16xf32> {cleave.layout = #cleave.sharding<@mesh, [dp, _]>, cleave.state = "fc.weight.exp_avg"}
// Z1-PART-NOT: cleave.all_reduce %{{.*}} : tensor<64x16xf32>
// Z1-PART: %[[WS:.*]] = cleave.shard %[[W]] on @mesh axes = [dp] dim = 0 : tensor<64x16xf32> -> tensor<32x16xf32>
// Z1-PART: %[[GS:.*]] = cleave.reduce_scatter %{{.*}} on @mesh axes = [dp] dim = 0 : tensor<64x16xf32> -> tensor<32x16xf32>
// Z1-PART: %[[NEW:.*]], %{{.*}}, %{{.*}} = cleave.adamw %[[WS]], %[[GS]], {{.*}} : (tensor<32x16xf32>
// Z1-PART: cleave.all_gather %[[NEW]] on @mesh axes = [dp] dim = 0 : tensor<32x16xf32> -> tensor<64x16xf32>

// ZeRO-2: gradients are reduce-scattered instead.
// Z2-PART-LABEL: func.func @train_step
// Z2-PART-NOT: cleave.all_reduce %{{.*}} : tensor<64x16xf32>
// Z2-PART: %[[GS:.*]] = cleave.reduce_scatter %{{.*}} on @mesh axes = [dp] dim = 0 : tensor<64x16xf32> -> tensor<32x16xf32>
// Z2-PART: cleave.adamw %{{.*}}, %[[GS]], {{.*}} : (tensor<32x16xf32>

// ZeRO-3: parameters split over dp too and are pinned whole before every
// use but the update (FSDP's gather).
// Z3-LABEL: func.func @train_step
// Z3-SAME: %[[W:[^:]+]]: tensor<64x16xf32> {cleave.param = "fc.weight", cleave.sharding = #cleave.sharding<@mesh, [dp, _]>}
// Z3: %[[WG:.*]] = cleave.sharding_constraint %[[W]] <@mesh, [_, _]> : tensor<64x16xf32>
// Z3-NEXT: cleave.matmul %{{.*}}, %[[WG]] {transpose_rhs}
// Z3: cleave.adamw %[[W]],

// Per device: one gather of each parameter serves forward and backward;
// gradients are reduce-scattered, the update is local, nothing is
// gathered after it.
// Z3-PART-LABEL: func.func @train_step
// Z3-PART-SAME: %[[W:[^:]+]]: tensor<32x16xf32> {cleave.layout = #cleave.sharding<@mesh, [dp, _]>, cleave.param = "fc.weight"}
// Z3-PART: %[[WG:.*]] = cleave.all_gather %[[W]] on @mesh axes = [dp] dim = 0 : tensor<32x16xf32> -> tensor<64x16xf32>
// Z3-PART: cleave.matmul %{{.*}}, %[[WG]] {transpose_rhs}
// Z3-PART-NOT: cleave.all_gather %[[W]]
// Z3-PART: cleave.matmul %{{.*}}, %[[WG]] :
// Z3-PART: %[[GS:.*]] = cleave.reduce_scatter %{{.*}} on @mesh axes = [dp] dim = 0 : tensor<64x16xf32> -> tensor<32x16xf32>
// Z3-PART: %[[NEW:.*]], %{{.*}}, %{{.*}} = cleave.adamw %[[W]], %[[GS]]
// Z3-PART-NOT: cleave.all_gather %[[NEW]]
// Z3-PART: return

// ZeRO with tensor parallelism: the state refines the parameter's tp split
// with dp.
// TPZ1-LABEL: func.func @train_step
// TPZ1-SAME: {cleave.param = "fc.weight", cleave.sharding = #cleave.sharding<@mesh, [tp, _]>}
// TPZ1-SAME: {cleave.param = "proj.weight", cleave.sharding = #cleave.sharding<@mesh, [_, tp]>}
// TPZ1-SAME: {cleave.sharding = #cleave.sharding<@mesh, [(tp, dp), _]>, cleave.state = "fc.weight.exp_avg"}
// TPZ1-SAME: {cleave.sharding = #cleave.sharding<@mesh, [dp, tp]>, cleave.state = "proj.weight.exp_avg"}
func.func @forward(%x: tensor<4x8x16xf32> {cleave.input = "x"},
                   %y: tensor<4x8xi32> {cleave.input = "y"},
                   %seed: tensor<i64> {cleave.input = "seed"},
                   %g: tensor<16xf32> {cleave.param = "ln.weight"},
                   %bb: tensor<16xf32> {cleave.param = "ln.bias"},
                   %w1: tensor<64x16xf32> {cleave.param = "fc.weight"},
                   %w2: tensor<16x64xf32> {cleave.param = "proj.weight"},
                   %head: tensor<32x16xf32> {cleave.param = "head.weight"}) -> tensor<f32> {
  %ln = cleave.layer_norm %x, %g, %bb : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %h = cleave.matmul %ln, %w1 {transpose_rhs} : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
  %a = cleave.gelu %h : tensor<4x8x64xf32>
  %o = cleave.matmul %a, %w2 {transpose_rhs} : (tensor<4x8x64xf32>, tensor<16x64xf32>) -> tensor<4x8x16xf32>
  %r = cleave.add %x, %o : tensor<4x8x16xf32>
  %d = cleave.dropout %r, %seed {rate = 0.1 : f64, stream = 1 : i64} : (tensor<4x8x16xf32>, tensor<i64>) -> tensor<4x8x16xf32>
  %logits = cleave.matmul %d, %head {transpose_rhs} : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  %loss = cleave.cross_entropy %logits, %y : (tensor<4x8x32xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
