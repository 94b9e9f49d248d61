// RUN: cleave-opt %s --cleave-autodiff="loss-scaling=1" | FileCheck %s
// RUN: cleave-opt %s --cleave-autodiff="loss-scaling=1 grad-clip=1.0" | FileCheck %s --check-prefix=CLIP
// RUN: cleave-opt %s --cleave-autodiff="loss-scaling=1 optimizer=sgd" | FileCheck %s --check-prefix=SGD
// RUN: not cleave-opt %s --cleave-autodiff="loss-scaling=1 optimizer=none" 2>&1 | FileCheck %s --check-prefix=NONE

// Dynamic loss scaling (f16 compute): the gradients are those of
// loss * loss_scale, computed in f32 from the f16 loss, and are unscaled in
// f32 before the update; the step returns the squared global norm for the
// trainer's overflow check, and AdamW's bias correction reads the `update`
// count (skipped steps are no updates), not `step`.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x4xf32> {cleave.param = "w"}
// CHECK-SAME: %[[S:[^:]*]]: tensor<f32> {cleave.input = "loss_scale"}
// CHECK-SAME: {cleave.input = "lr"}
// CHECK-SAME: %{{[^:]*}}: tensor<f32> {cleave.input = "step"}
// CHECK-SAME: %[[U:[^:]*]]: tensor<f32> {cleave.input = "update"}
// CHECK-SAME: {cleave.output = "loss"}, tensor<f32> {cleave.output = "grad_norm_sq"})
// CHECK: %[[LOSS:.*]] = cleave.reduce_sum {{.*}} -> tensor<f16>
// CHECK: %[[WIDE:.*]] = cleave.cast %[[LOSS]] : tensor<f16> to tensor<f32>
// CHECK: cleave.mul %[[WIDE]], %[[S]] : tensor<f32>
// CHECK: %[[INV:.*]] = cleave.div %{{.*}}, %[[S]] : tensor<f32>
// CHECK: %[[SPREAD:.*]] = cleave.broadcast %[[INV]] dims = [] : tensor<f32> -> tensor<4x4xf32>
// CHECK: %[[G:.*]] = cleave.mul %{{.*}}, %[[SPREAD]] : tensor<4x4xf32>
// CHECK: %[[SQ:.*]] = cleave.mul %[[G]], %[[G]]
// CHECK: %[[NORM:.*]] = cleave.reduce_sum %[[SQ]] dims = [0, 1]
// CHECK: cleave.adamw %[[W]], %[[G]], %{{.*}}, %{{.*}}, %{{.*}}, %[[U]]
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %[[LOSS]], %[[NORM]]

// With clipping, the same sum of squares gives the clip coefficient.
// CLIP-LABEL: func.func @train_step
// CLIP: %[[NORM:.*]] = cleave.reduce_sum %{{.*}} dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
// CLIP: cleave.sqrt %[[NORM]]
// CLIP-NOT: cleave.reduce_sum
// CLIP: return {{.*}}, %[[NORM]] :

// SGD has no bias correction: no update input.
// SGD-LABEL: func.func @train_step
// SGD-SAME: {cleave.input = "loss_scale"}
// SGD-NOT: "update"
// SGD: cleave.sgd

// NONE: error: cleave-autodiff: loss-scaling needs an optimizer (it skips updates on overflow)

func.func @forward(%w: tensor<4x4xf32> {cleave.param = "w"},
                   %x: tensor<2x4xf16> {cleave.input = "x"}) -> tensor<f16> {
  %w16 = cleave.cast %w : tensor<4x4xf32> to tensor<4x4xf16>
  %0 = cleave.matmul %x, %w16 : (tensor<2x4xf16>, tensor<4x4xf16>) -> tensor<2x4xf16>
  %1 = cleave.reduce_sum %0 dims = [0, 1] : tensor<2x4xf16> -> tensor<f16>
  return %1 : tensor<f16>
}
