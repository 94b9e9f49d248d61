// RUN: cleave-opt %s -split-input-file --cleave-propagate-sharding --cleave-partition | FileCheck %s

// The load-balanced layout of context parallelism (cleave.mesh's
// balanced_axes): with cp = 2 the sequence of 8 is cut into 4 chunks of 2
// and device r holds chunks r and 3-r. The position-dependent ops get
// `balanced = 2` beside their block index; keys and values are all-gathered
// (device-major: chunks 0, 3, 1, 2) and put back into the natural order
// (chunks at offsets 0, 4, 6, 2) before the attention, which masks by the
// queries' balanced positions.
cleave.mesh @m(cp = 2 : ib) {balanced_axes = ["cp"]}

// Function arguments and results stay contiguous (the runtime's blocks), so
// an argument split over the balanced axis is read whole, permuted into the
// balanced order (chunks 0, 3, 1, 2 at offsets 0, 6, 2, 4) and split.
// CHECK-LABEL: func.func @attention_balanced
// CHECK-SAME: %[[Q:[^:]+]]: tensor<2x8x2x16xf32> {cleave.layout = #cleave.sharding<@m, [_, _, _, _]>}
// CHECK: %[[Q0:.*]] = cleave.slice %[[Q]] offsets = [0, 0, 0, 0] sizes = [2, 2, 2, 16]
// CHECK: %[[Q3:.*]] = cleave.slice %[[Q]] offsets = [0, 6, 0, 0] sizes = [2, 2, 2, 16]
// CHECK: %[[Q1:.*]] = cleave.slice %[[Q]] offsets = [0, 2, 0, 0] sizes = [2, 2, 2, 16]
// CHECK: %[[Q2:.*]] = cleave.slice %[[Q]] offsets = [0, 4, 0, 0] sizes = [2, 2, 2, 16]
// CHECK: %[[QP:.*]] = cleave.concat %[[Q0]], %[[Q3]], %[[Q1]], %[[Q2]] dim = 1
// CHECK: %[[QS:.*]] = cleave.shard %[[QP]] on @m axes = [cp] dim = 1 : tensor<2x8x2x16xf32> -> tensor<2x4x2x16xf32>
// CHECK: %[[B0:.*]] = cleave.axis_index on @m axes = [cp] : tensor<i64>
// CHECK: %[[RQ:.*]] = cleave.rotary %[[QS]] block %[[B0]] : tensor<i64> {balanced = 2 : i64} : tensor<2x4x2x16xf32>
// CHECK: %[[B1:.*]] = cleave.axis_index on @m axes = [cp] : tensor<i64>
// CHECK: %[[RK:.*]] = cleave.rotary %{{.*}} block %[[B1]] : tensor<i64> {balanced = 2 : i64} : tensor<2x4x2x16xf32>
// CHECK: %[[KG:.*]] = cleave.all_gather %[[RK]] on @m axes = [cp] dim = 1 : tensor<2x4x2x16xf32> -> tensor<2x8x2x16xf32>
// CHECK: %[[K0:.*]] = cleave.slice %[[KG]] offsets = [0, 0, 0, 0] sizes = [2, 2, 2, 16]
// CHECK: %[[K1:.*]] = cleave.slice %[[KG]] offsets = [0, 4, 0, 0] sizes = [2, 2, 2, 16]
// CHECK: %[[K2:.*]] = cleave.slice %[[KG]] offsets = [0, 6, 0, 0] sizes = [2, 2, 2, 16]
// CHECK: %[[K3:.*]] = cleave.slice %[[KG]] offsets = [0, 2, 0, 0] sizes = [2, 2, 2, 16]
// CHECK: %[[KF:.*]] = cleave.concat %[[K0]], %[[K1]], %[[K2]], %[[K3]] dim = 1
// CHECK: %[[B2:.*]] = cleave.axis_index on @m axes = [cp] : tensor<i64>
// CHECK: %[[O:.*]] = cleave.attention %[[RQ]], %[[KF]], %{{.*}}, %[[B2]] {balanced = 2 : i64, causal} : (tensor<2x4x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<i64>) -> tensor<2x4x2x16xf32>
// CHECK: %[[OG:.*]] = cleave.all_gather %[[O]] on @m axes = [cp] dim = 1
// CHECK: %[[OF:.*]] = cleave.concat
// CHECK: return %[[OF]] : tensor<2x8x2x16xf32>
func.func @attention_balanced(
    %q: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, cp, _, _]>},
    %k: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, cp, _, _]>},
    %v: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, cp, _, _]>}) -> tensor<2x8x2x16xf32> {
  %rq = cleave.rotary %q : tensor<2x8x2x16xf32>
  %rk = cleave.rotary %k : tensor<2x8x2x16xf32>
  %o = cleave.attention %rq, %rk, %v {causal} : (tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x2x16xf32>
  return %o : tensor<2x8x2x16xf32>
}

// -----

// The gradient: dk is each device's partial sum; where it is wanted split
// over cp it is permuted into the balanced order (chunks 0, 3, 1, 2 at
// offsets 0, 6, 2, 4) before the reduce-scatter, so each device gets the
// sums of its own two chunks.
cleave.mesh @m(cp = 2 : ib) {balanced_axes = ["cp"]}

// CHECK-LABEL: func.func @attention_grad_balanced
// CHECK: %[[B:.*]] = cleave.axis_index on @m axes = [cp] : tensor<i64>
// CHECK: %{{.*}}, %[[DK:.*]], %{{.*}} = cleave.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[B]] {balanced = 2 : i64, causal}
// CHECK: %[[P0:.*]] = cleave.slice %[[DK]] offsets = [0, 0, 0, 0]
// CHECK: %[[P1:.*]] = cleave.slice %[[DK]] offsets = [0, 6, 0, 0]
// CHECK: %[[P2:.*]] = cleave.slice %[[DK]] offsets = [0, 2, 0, 0]
// CHECK: %[[P3:.*]] = cleave.slice %[[DK]] offsets = [0, 4, 0, 0]
// CHECK: %[[PK:.*]] = cleave.concat %[[P0]], %[[P1]], %[[P2]], %[[P3]] dim = 1
// CHECK: cleave.reduce_scatter %[[PK]] on @m axes = [cp] dim = 1 : tensor<2x8x2x16xf32> -> tensor<2x4x2x16xf32>
func.func @attention_grad_balanced(
    %q: tensor<2x8x2x16xf32>, %k: tensor<2x8x2x16xf32>,
    %v: tensor<2x8x2x16xf32>, %do: tensor<2x8x2x16xf32>) -> tensor<f32> {
  %qs = cleave.sharding_constraint %q <@m, [_, cp, _, _]> : tensor<2x8x2x16xf32>
  %dos = cleave.sharding_constraint %do <@m, [_, cp, _, _]> : tensor<2x8x2x16xf32>
  %g:3 = cleave.attention_grad %qs, %k, %v, %dos {causal} : (tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
  %dk = cleave.sharding_constraint %g#1 <@m, [_, cp, _, _]> : tensor<2x8x2x16xf32>
  %r = cleave.relu %dk : tensor<2x8x2x16xf32>
  %s = cleave.reduce_sum %r dims = [0, 1, 2, 3] : tensor<2x8x2x16xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A whole value (the token ids every device reads) split over the balanced
// axis: permuted into the balanced order, then each device keeps its block
// (a learned position table is cut the same way).
cleave.mesh @m(cp = 2 : ib) {balanced_axes = ["cp"]}

// CHECK-LABEL: func.func @shard_balanced
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x8xf32> {cleave.layout = #cleave.sharding<@m, [_, _]>}
// CHECK: %[[C0:.*]] = cleave.slice %[[X]] offsets = [0, 0] sizes = [2, 2]
// CHECK: %[[C3:.*]] = cleave.slice %[[X]] offsets = [0, 6] sizes = [2, 2]
// CHECK: %[[C1:.*]] = cleave.slice %[[X]] offsets = [0, 2] sizes = [2, 2]
// CHECK: %[[C2:.*]] = cleave.slice %[[X]] offsets = [0, 4] sizes = [2, 2]
// CHECK: %[[P:.*]] = cleave.concat %[[C0]], %[[C3]], %[[C1]], %[[C2]] dim = 1
// CHECK: cleave.shard %[[P]] on @m axes = [cp] dim = 1 : tensor<2x8xf32> -> tensor<2x4xf32>
func.func @shard_balanced(%x: tensor<2x8xf32> {cleave.sharding = #cleave.sharding<@m, [_, _]>}) -> tensor<f32> {
  %0 = cleave.sharding_constraint %x <@m, [_, cp]> : tensor<2x8xf32>
  %1 = cleave.relu %0 : tensor<2x8xf32>
  %2 = cleave.reduce_sum %1 dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %2 : tensor<f32>
}
