// RUN: cleave-opt %s --split-input-file --cleave-autodiff --verify-diagnostics | FileCheck %s
// RUN: cleave-opt %s --split-input-file --cleave-autodiff="optimizer=none" --verify-diagnostics | FileCheck %s --check-prefix=GRADS
// RUN: cleave-opt %s --split-input-file --cleave-autodiff="optimizer=sgd weight-decay=0.5 no-decay-vectors=true" --verify-diagnostics | FileCheck %s --check-prefix=SGD

// A linear classifier: the weight is used by a matmul, the bias through a
// broadcast; both get AdamW updates with two moments each.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:.*]]: tensor<10x4xf32> {cleave.init = #cleave.init<normal, 2.000000e-02>, cleave.param = "w"}
// CHECK-SAME: %[[B:.*]]: tensor<10xf32> {cleave.param = "b"}
// CHECK-SAME: %[[X:.*]]: tensor<8x4xf32> {cleave.input = "x"}
// CHECK-SAME: %[[Y:.*]]: tensor<8xi32> {cleave.input = "y"}
// CHECK-SAME: %[[MW:.*]]: tensor<10x4xf32> {cleave.state = "w.exp_avg"}
// CHECK-SAME: %[[VW:.*]]: tensor<10x4xf32> {cleave.state = "w.exp_avg_sq"}
// CHECK-SAME: %[[MB:.*]]: tensor<10xf32> {cleave.state = "b.exp_avg"}
// CHECK-SAME: %[[VB:.*]]: tensor<10xf32> {cleave.state = "b.exp_avg_sq"}
// CHECK-SAME: %[[LR:.*]]: tensor<f32> {cleave.input = "lr"}
// CHECK-SAME: %[[T:.*]]: tensor<f32> {cleave.input = "step"}
// CHECK-SAME: -> (tensor<10x4xf32> {cleave.output = "w"}, tensor<10x4xf32> {cleave.output = "w.exp_avg"}, tensor<10x4xf32> {cleave.output = "w.exp_avg_sq"}, tensor<10xf32> {cleave.output = "b"}, tensor<10xf32> {cleave.output = "b.exp_avg"}, tensor<10xf32> {cleave.output = "b.exp_avg_sq"}, tensor<f32> {cleave.output = "loss"})
// CHECK: %[[MM:.*]] = cleave.matmul %[[X]], %[[W]] {transpose_rhs}
// CHECK: %[[LOGITS:.*]] = cleave.add %[[MM]]
// CHECK: %[[LOSS:.*]] = cleave.cross_entropy %[[LOGITS]], %[[Y]]
// CHECK: %[[ONE:.*]] = cleave.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DLOGITS:.*]] = cleave.cross_entropy_grad %[[LOGITS]], %[[Y]], %[[ONE]]
// CHECK: %[[DB:.*]] = cleave.reduce_sum %[[DLOGITS]] dims = [0] : tensor<8x10xf32> -> tensor<10xf32>
// CHECK: %[[DW:.*]] = cleave.matmul %[[DLOGITS]], %[[X]] {transpose_lhs} : (tensor<8x10xf32>, tensor<8x4xf32>) -> tensor<10x4xf32>
// CHECK: cleave.adamw %[[W]], %[[DW]], %[[MW]], %[[VW]], %[[LR]], %[[T]]
// CHECK: cleave.adamw %[[B]], %[[DB]], %[[MB]], %[[VB]], %[[LR]], %[[T]]

// GRADS-LABEL: func.func @train_step
// GRADS-SAME: -> (tensor<10x4xf32> {cleave.output = "grad:w"}, tensor<10xf32> {cleave.output = "grad:b"}, tensor<f32> {cleave.output = "loss"})

// SGD-LABEL: func.func @train_step
// SGD: cleave.sgd %{{.*}}, %{{.*}}, %{{.*}} {weight_decay = 5.000000e-01 : f64} : (tensor<10x4xf32>
// SGD: cleave.sgd %{{.*}}, %{{.*}}, %{{.*}} : (tensor<10xf32>
func.func @forward(%w: tensor<10x4xf32> {cleave.param = "w", cleave.init = #cleave.init<normal, 0.02>},
                   %b: tensor<10xf32> {cleave.param = "b"},
                   %x: tensor<8x4xf32> {cleave.input = "x"},
                   %y: tensor<8xi32> {cleave.input = "y"}) -> tensor<f32> {
  %0 = cleave.matmul %x, %w {transpose_rhs} : (tensor<8x4xf32>, tensor<10x4xf32>) -> tensor<8x10xf32>
  %1 = cleave.broadcast %b dims = [1] : tensor<10xf32> -> tensor<8x10xf32>
  %2 = cleave.add %0, %1 : tensor<8x10xf32>
  %3 = cleave.cross_entropy %2, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// -----

// A value used twice gets the sum of both gradients; an unused parameter is
// returned unchanged (no update), as torch.optim skips it.

// GRADS-LABEL: func.func @train_step
// GRADS: cleave.constant dense<1.000000e+00> : tensor<f32>
// GRADS: %[[G1:.*]] = cleave.mul %{{.*}}, %{{.*}} : tensor<4xf32>
// GRADS: %[[G2:.*]] = cleave.mul %{{.*}}, %{{.*}} : tensor<4xf32>
// GRADS: cleave.add %[[G1]], %[[G2]] : tensor<4xf32>
// CHECK-LABEL: func.func @train_step
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %arg1, %arg4, %arg5, %{{.*}} :
func.func @forward(%p: tensor<4xf32> {cleave.param = "p"},
                   %unused: tensor<4xf32> {cleave.param = "unused"}) -> tensor<f32> {
  %0 = cleave.exp %p : tensor<4xf32>
  %1 = cleave.mul %0, %0 : tensor<4xf32>
  %2 = cleave.reduce_sum %1 dims = [0] : tensor<4xf32> -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

func.func @forward(%p: tensor<4x8xf32> {cleave.param = "p"}) -> tensor<f32> {
  // expected-error @below {{'cleave.reduce_max' op has no gradient rule (VJPOpInterface), but the loss depends on parameters through it}}
  %0 = cleave.reduce_max %p dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %1 = cleave.reduce_sum %0 dims = [0] : tensor<4xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// expected-error @below {{cleave-autodiff: @forward must return one scalar float loss, got '(tensor<4xf32>) -> tensor<4xf32>'}}
func.func @forward(%p: tensor<4xf32> {cleave.param = "p"}) -> tensor<4xf32> {
  return %p : tensor<4xf32>
}

// -----

// Ignored labels and a padding row: the gradient ops carry ignore_index and
// padding_idx from their forward ops.

// GRADS-LABEL: func.func @train_step
// GRADS: %[[E:.*]] = cleave.embedding %{{.*}}, %{{.*}} {padding_idx = 0 : i64}
// GRADS: cleave.cross_entropy %{{.*}}, %{{.*}} {ignore_index = -1 : i64}
// GRADS: cleave.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = -1 : i64}
// GRADS: cleave.embedding_grad %{{.*}}, %{{.*}} {padding_idx = 0 : i64} : (tensor<2x4xi32>, tensor<2x4x10xf32>) -> tensor<10x10xf32>
func.func @forward(%t: tensor<10x10xf32> {cleave.param = "t"},
                   %ids: tensor<2x4xi32> {cleave.input = "ids"},
                   %y: tensor<2x4xi32> {cleave.input = "y"}) -> tensor<f32> {
  %0 = cleave.embedding %t, %ids {padding_idx = 0 : i64} : (tensor<10x10xf32>, tensor<2x4xi32>) -> tensor<2x4x10xf32>
  %1 = cleave.cross_entropy %0, %y {ignore_index = -1 : i64} : (tensor<2x4x10xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %1 : tensor<f32>
}
