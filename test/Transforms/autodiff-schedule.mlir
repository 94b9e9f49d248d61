// RUN: cleave-opt %s --split-input-file --cleave-autodiff="lr-schedule=cosine warmup-steps=10 decay-steps=30 lr-min=6e-5" | FileCheck %s
// RUN: cleave-opt %s --split-input-file --cleave-autodiff="optimizer=sgd warmup-steps=5" | FileCheck %s --check-prefix=SGD
// RUN: cleave-opt %s --split-input-file --cleave-autodiff | FileCheck %s --check-prefix=NONE
// RUN: cleave-opt %s --split-input-file --cleave-autodiff="grad-clip=1.0" | FileCheck %s --check-prefix=CLIP
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="grad-clip=-1" 2>&1 | FileCheck %s --check-prefix=CLIPNEG
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="lr-schedule=linear warmup-steps=10 decay-steps=5" 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="lr-schedule=step" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="lr-schedule=cosine decay-steps=5 lr-min=-1" 2>&1 | FileCheck %s --check-prefix=MIN

// A learning-rate schedule: the `lr` input becomes the peak rate, every
// update reads the scheduled rate of the step, and each pipeline stage has
// its own cleave.lr_schedule (a stage needs no other's scalar).

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[LR:[^:]*]]: tensor<f32> {cleave.input = "lr"}
// CHECK-SAME: %[[T:[^:]*]]: tensor<f32> {cleave.input = "step"}
// CHECK: %[[R0:.*]] = cleave.lr_schedule %[[LR]], %[[T]] {cleave.stage = 0 : i64, decay = #cleave.lr_decay<cosine>, decay_steps = 30 : i64, min_lr = 6.000000e-05 : f64, warmup_steps = 10 : i64}
// CHECK: cleave.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[R0]], %[[T]] {cleave.stage = 0 : i64}
// CHECK: %[[R1:.*]] = cleave.lr_schedule %[[LR]], %[[T]] {cleave.stage = 1 : i64
// CHECK: cleave.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[R1]], %[[T]] {cleave.stage = 1 : i64}
// CHECK-NOT: cleave.lr_schedule

// SGD gets a step input for the schedule (it has none otherwise).
// SGD-LABEL: func.func @train_step
// SGD-SAME: %[[LR:[^:]*]]: tensor<f32> {cleave.input = "lr"}
// SGD-SAME: %[[T:[^:]*]]: tensor<f32> {cleave.input = "step"}
// SGD: %[[R:.*]] = cleave.lr_schedule %[[LR]], %[[T]] {cleave.stage = 0 : i64, decay = #cleave.lr_decay<constant>, warmup_steps = 5 : i64}
// SGD: cleave.sgd %{{.*}}, %{{.*}}, %[[R]]

// Without a schedule the step is as before.
// NONE-LABEL: func.func @train_step
// NONE-NOT: cleave.lr_schedule

// Global-norm clipping: one sum of squares per parameter on its stage, the
// coefficient min(1, C / (norm + 1e-6)), every gradient scaled by it before
// its update.
// CLIP-LABEL: func.func @train_step
// CLIP: %[[SQ0:.*]] = cleave.mul %[[G0:.*]], %[[G0]] {cleave.stage = 0 : i64}
// CLIP: %[[S0:.*]] = cleave.reduce_sum %[[SQ0]] dims = [0, 1] {cleave.stage = 0 : i64} : tensor<4x4xf32> -> tensor<f32>
// CLIP: %[[SQ1:.*]] = cleave.mul %[[G1:.*]], %[[G1]] {cleave.stage = 1 : i64}
// CLIP: %[[S1:.*]] = cleave.reduce_sum %[[SQ1]] dims = [0, 1] {cleave.stage = 1 : i64} : tensor<4x4xf32> -> tensor<f32>
// CLIP: %[[TOTAL:.*]] = cleave.add %[[S0]], %[[S1]] : tensor<f32>
// CLIP: %[[NORM:.*]] = cleave.sqrt %[[TOTAL]] : tensor<f32>
// CLIP: %[[EPS:.*]] = cleave.add %[[NORM]], %{{.*}} : tensor<f32>
// CLIP: %[[RATIO:.*]] = cleave.div %{{.*}}, %[[EPS]] : tensor<f32>
// CLIP: %[[COEFF:.*]] = cleave.min %{{.*}}, %[[RATIO]] : tensor<f32>
// CLIP: %[[B0:.*]] = cleave.broadcast %[[COEFF]] dims = [] {cleave.stage = 0 : i64} : tensor<f32> -> tensor<4x4xf32>
// CLIP: %[[C0:.*]] = cleave.mul %[[G0]], %[[B0]] {cleave.stage = 0 : i64}
// CLIP: %[[B1:.*]] = cleave.broadcast %[[COEFF]] dims = [] {cleave.stage = 1 : i64} : tensor<f32> -> tensor<4x4xf32>
// CLIP: %[[C1:.*]] = cleave.mul %[[G1]], %[[B1]] {cleave.stage = 1 : i64}
// CLIP: cleave.adamw %{{.*}}, %[[C0]],
// CLIP: cleave.adamw %{{.*}}, %[[C1]],
// CLIPNEG: error: cleave-autodiff: grad-clip must be a finite number > 0 (0: no clipping), got -1

// ORDER: error: cleave-autodiff: decay-steps (5) must be >= warmup-steps (10)
// KIND: error: cleave-autodiff: unknown lr-schedule 'step' (expected constant, cosine or linear)
// MIN: error: cleave-autodiff: lr-min must be a finite number >= 0, got -1
func.func @forward(%w1: tensor<4x4xf32> {cleave.param = "h.0.w"},
                   %w2: tensor<4x4xf32> {cleave.param = "h.1.w"},
                   %x: tensor<8x4xf32> {cleave.input = "x"},
                   %y: tensor<8xi32> {cleave.input = "y"}) -> tensor<f32> {
  %0 = cleave.matmul %x, %w1 {cleave.stage = 0 : i64} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %1 = cleave.matmul %0, %w2 {cleave.stage = 1 : i64} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %2 = cleave.cross_entropy %1, %y {cleave.stage = 1 : i64} : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
  return %2 : tensor<f32>
}
