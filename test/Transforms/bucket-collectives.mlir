// RUN: cleave-opt %s -split-input-file --cleave-bucket-collectives | FileCheck %s
// RUN: cleave-opt %s -split-input-file --cleave-bucket-collectives=bucket-bytes=16639 | FileCheck %s --check-prefix=SMALL
// RUN: cleave-opt %s -split-input-file --cleave-bucket-collectives=bucket-bytes=0 | FileCheck %s --check-prefix=OFF
// RUN: cleave-opt %s -split-input-file --cleave-bucket-collectives --cleave-verify-collectives -o /dev/null
// RUN: not cleave-opt %s -split-input-file --cleave-bucket-collectives=bucket-bytes=-1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEG

// NEG: bucket-bytes must be >= 0, got -1

// Gradient all-reduces interleaved with their optimizer updates: one
// bucket, placed right after the last gradient is computed (%gb), before
// the first update.
cleave.mesh @m(dp = 2 : ib)

// CHECK-LABEL: func.func @grads
// CHECK-SAME: (%[[X:.*]]: tensor<64x64xf32>, %[[Y:.*]]: tensor<64xf32>)
// CHECK: %[[GA:.*]] = cleave.add %[[X]], %[[X]] : tensor<64x64xf32>
// CHECK: %[[GB:.*]] = cleave.add %[[Y]], %[[Y]] : tensor<64xf32>
// CHECK: %[[FA:.*]] = cleave.reshape %[[GA]] : tensor<64x64xf32> to tensor<4096xf32>
// CHECK: %[[CAT:.*]] = cleave.concat %[[FA]], %[[GB]] dim = 0 : (tensor<4096xf32>, tensor<64xf32>) -> tensor<4160xf32>
// CHECK: %[[SUM:.*]] = cleave.all_reduce %[[CAT]] on @m axes = [dp] reduction = avg : tensor<4160xf32>
// CHECK: %[[SA:.*]] = cleave.slice %[[SUM]] offsets = [0] sizes = [4096] strides = [1] : tensor<4160xf32> -> tensor<4096xf32>
// CHECK: %[[SB:.*]] = cleave.slice %[[SUM]] offsets = [4096] sizes = [64] strides = [1] : tensor<4160xf32> -> tensor<64xf32>
// CHECK: %[[RA:.*]] = cleave.reshape %[[SA]] : tensor<4096xf32> to tensor<64x64xf32>
// CHECK-NOT: cleave.all_reduce
// CHECK: %[[UA:.*]] = cleave.mul %[[RA]], %[[X]]
// CHECK: %[[UB:.*]] = cleave.mul %[[SB]], %[[Y]]
// CHECK: return %[[UA]], %[[UB]]

// With a bucket of 16639 bytes (one byte less than both gradients) the two
// gradients do not fit together: both collectives stay.
// SMALL-LABEL: func.func @grads
// SMALL-NOT: cleave.concat
// SMALL-COUNT-2: cleave.all_reduce

// OFF-LABEL: func.func @grads
// OFF-NOT: cleave.concat
// OFF-COUNT-2: cleave.all_reduce
func.func @grads(%x: tensor<64x64xf32>, %y: tensor<64xf32>) -> (tensor<64x64xf32>, tensor<64xf32>) {
  %ga = cleave.add %x, %x : tensor<64x64xf32>
  %gb = cleave.add %y, %y : tensor<64xf32>
  %a = cleave.all_reduce %ga on @m axes = [dp] reduction = avg : tensor<64x64xf32>
  %ua = cleave.mul %a, %x : tensor<64x64xf32>
  %b = cleave.all_reduce %gb on @m axes = [dp] reduction = avg : tensor<64xf32>
  %ub = cleave.mul %b, %y : tensor<64xf32>
  return %ua, %ub : tensor<64x64xf32>, tensor<64xf32>
}

// -----

// A result used before the next collective's operand is ready cannot wait
// for it: two buckets of one (unchanged). Different reductions never share
// a bucket.
cleave.mesh @m(dp = 2 : ib)

// CHECK-LABEL: func.func @dependent
// CHECK-NOT: cleave.concat
// CHECK: cleave.all_reduce %{{.*}} on @m axes = [dp]  : tensor<8xf32>
// CHECK: cleave.all_reduce %{{.*}} on @m axes = [dp]  : tensor<8xf32>
// CHECK: cleave.all_reduce %{{.*}} on @m axes = [dp] reduction = max : tensor<8xf32>
func.func @dependent(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %a = cleave.all_reduce %x on @m axes = [dp] : tensor<8xf32>
  %b = cleave.add %a, %a : tensor<8xf32>
  %c = cleave.all_reduce %b on @m axes = [dp] : tensor<8xf32>
  %d = cleave.all_reduce %x on @m axes = [dp] reduction = max : tensor<8xf32>
  return %c, %d : tensor<8xf32>, tensor<8xf32>
}

// -----

// ZeRO: reduce-scatters along dimension 0 keep each device's block of every
// member ([group size, elements per device], concatenated along 1), and
// all-gathers cut their result the same way. The same parameter gathered
// twice is gathered once. Gathers along another dimension stay.
cleave.mesh @m(dp = 2 : ib)

// CHECK-LABEL: func.func @zero
// CHECK-SAME: (%[[W:.*]]: tensor<4x3xf32>, %[[V:.*]]: tensor<2xf32>, %[[U:.*]]: tensor<4x2xf32>)
// The bucket of gathers runs just before its first use (%g1), after the
// gather along dimension 1.
// CHECK: cleave.all_gather %[[U]] on @m axes = [dp] dim = 1
// CHECK: %[[PW:.*]] = cleave.reshape %[[W]] : tensor<4x3xf32> to tensor<12xf32>
// CHECK: %[[CAT:.*]] = cleave.concat %[[PW]], %[[V]] dim = 0 : (tensor<12xf32>, tensor<2xf32>) -> tensor<14xf32>
// CHECK: %[[ALL:.*]] = cleave.all_gather %[[CAT]] on @m axes = [dp] dim = 0 : tensor<14xf32> -> tensor<28xf32>
// CHECK: %[[ROWS:.*]] = cleave.reshape %[[ALL]] : tensor<28xf32> to tensor<2x14xf32>
// CHECK: %[[SW:.*]] = cleave.slice %[[ROWS]] offsets = [0, 0] sizes = [2, 12] strides = [1, 1] : tensor<2x14xf32> -> tensor<2x12xf32>
// CHECK: %[[SV:.*]] = cleave.slice %[[ROWS]] offsets = [0, 12] sizes = [2, 2] strides = [1, 1] : tensor<2x14xf32> -> tensor<2x2xf32>
// CHECK: %[[FW:.*]] = cleave.reshape %[[SW]] : tensor<2x12xf32> to tensor<8x3xf32>
// CHECK: %[[FV:.*]] = cleave.reshape %[[SV]] : tensor<2x2xf32> to tensor<4xf32>
// CHECK: %[[G1:.*]] = cleave.mul %[[FW]], %[[FW]] : tensor<8x3xf32>
// CHECK: %[[G2:.*]] = cleave.mul %[[FV]], %[[FV]] : tensor<4xf32>
// CHECK: %[[R1:.*]] = cleave.reshape %[[G1]] : tensor<8x3xf32> to tensor<2x12xf32>
// CHECK: %[[R2:.*]] = cleave.reshape %[[G2]] : tensor<4xf32> to tensor<2x2xf32>
// CHECK: %[[RCAT:.*]] = cleave.concat %[[R1]], %[[R2]] dim = 1 : (tensor<2x12xf32>, tensor<2x2xf32>) -> tensor<2x14xf32>
// CHECK: %[[RFLAT:.*]] = cleave.reshape %[[RCAT]] : tensor<2x14xf32> to tensor<28xf32>
// CHECK: %[[RS:.*]] = cleave.reduce_scatter %[[RFLAT]] on @m axes = [dp] dim = 0  : tensor<28xf32> -> tensor<14xf32>
// CHECK: cleave.slice %[[RS]] offsets = [0] sizes = [12]
// CHECK: cleave.slice %[[RS]] offsets = [12] sizes = [2]
// CHECK-NOT: cleave.reduce_scatter
// CHECK-NOT: cleave.all_gather %[[W]]
// CHECK: return
func.func @zero(%w: tensor<4x3xf32>, %v: tensor<2xf32>, %u: tensor<4x2xf32>) -> (tensor<4x3xf32>, tensor<2xf32>, tensor<8x3xf32>, tensor<4x4xf32>) {
  %fw = cleave.all_gather %w on @m axes = [dp] dim = 0 : tensor<4x3xf32> -> tensor<8x3xf32>
  %fv = cleave.all_gather %v on @m axes = [dp] dim = 0 : tensor<2xf32> -> tensor<4xf32>
  %fu = cleave.all_gather %u on @m axes = [dp] dim = 1 : tensor<4x2xf32> -> tensor<4x4xf32>
  %g1 = cleave.mul %fw, %fw : tensor<8x3xf32>
  %g2 = cleave.mul %fv, %fv : tensor<4xf32>
  %again = cleave.all_gather %w on @m axes = [dp] dim = 0 : tensor<4x3xf32> -> tensor<8x3xf32>
  %s1 = cleave.reduce_scatter %g1 on @m axes = [dp] dim = 0 : tensor<8x3xf32> -> tensor<4x3xf32>
  %s2 = cleave.reduce_scatter %g2 on @m axes = [dp] dim = 0 : tensor<4xf32> -> tensor<2xf32>
  return %s1, %s2, %again, %fu : tensor<4x3xf32>, tensor<2xf32>, tensor<8x3xf32>, tensor<4x4xf32>
}

// -----

// ZeRO-3's parameter gathers (ready at the start of the step) run as one
// bucket just before the first use of any member, not at the start of the
// step: only one bucket of gathered parameters is alive ahead of time.
cleave.mesh @m(dp = 2 : ib)
// CHECK-LABEL: func.func @gather_just_in_time
// CHECK: %[[A:.*]] = cleave.add %{{.*}}, %{{.*}} : tensor<4xf32>
// CHECK: %[[B:.*]] = cleave.add %[[A]], %[[A]] : tensor<4xf32>
// CHECK: cleave.all_gather %{{.*}} on @m axes = [dp] dim = 0 : tensor<14xf32> -> tensor<28xf32>
// CHECK: cleave.add %{{.*}}, %[[B]] : tensor<4xf32>
func.func @gather_just_in_time(%x: tensor<4xf32>, %w: tensor<4x3xf32>, %v: tensor<2xf32>) -> (tensor<4xf32>, tensor<8x3xf32>, tensor<4xf32>) {
  %a = cleave.add %x, %x : tensor<4xf32>
  %b = cleave.add %a, %a : tensor<4xf32>
  %fw = cleave.all_gather %w on @m axes = [dp] dim = 0 : tensor<4x3xf32> -> tensor<8x3xf32>
  %fv = cleave.all_gather %v on @m axes = [dp] dim = 0 : tensor<2xf32> -> tensor<4xf32>
  %c = cleave.add %fv, %b : tensor<4xf32>
  return %b, %fw, %c : tensor<4xf32>, tensor<8x3xf32>, tensor<4xf32>
}

// -----

// A pipelined program: the data-parallel gradients of each pipeline rank's
// function share a bucket; collectives over the pipeline axis (the tied
// embedding's gradient, the loss) are never bucketed, since the pipeline
// ranks of their group run different functions.
// CHECK-LABEL: func.func @s0
// CHECK: cleave.all_reduce %{{.*}} on @m axes = [dp]  : tensor<8xf32>
// CHECK: cleave.all_reduce %{{.*}} on @m axes = [pp]  : tensor<4xf32>
// CHECK: cleave.all_reduce %{{.*}} on @m axes = [pp]  : tensor<f32>
// CHECK-NOT: cleave.all_reduce
// CHECK-LABEL: func.func @s1
// CHECK: cleave.all_reduce %{{.*}} on @m axes = [pp]  : tensor<4xf32>
// CHECK: cleave.all_reduce %{{.*}} on @m axes = [pp]  : tensor<f32>
// OFF-LABEL: func.func @s0
// OFF-COUNT-2: cleave.all_reduce %{{.*}} on @m axes = [dp]
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @m(pp = 2 : ib, dp = 2 : ib)
  func.func @s0(%e: tensor<4xf32>, %w: tensor<4xf32>, %l: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) {
    %te = cleave.all_reduce %e on @m axes = [pp] : tensor<4xf32>
    %tl = cleave.all_reduce %l on @m axes = [pp] : tensor<f32>
    %ge = cleave.all_reduce %e on @m axes = [dp] : tensor<4xf32>
    %gw = cleave.all_reduce %w on @m axes = [dp] : tensor<4xf32>
    return %te, %ge, %gw, %tl : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>
  }
  func.func @s1(%e: tensor<4xf32>, %l: tensor<f32>) -> (tensor<4xf32>, tensor<f32>) {
    %te = cleave.all_reduce %e on @m axes = [pp] : tensor<4xf32>
    %tl = cleave.all_reduce %l on @m axes = [pp] : tensor<f32>
    return %te, %tl : tensor<4xf32>, tensor<f32>
  }
}
