// RUN: cleave-opt %s --canonicalize --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @reshape_chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x12xf32>)
// CHECK-NEXT: %[[R:.*]] = cleave.reshape %[[X]] : tensor<2x12xf32> to tensor<6x4xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_chain(%x: tensor<2x12xf32>) -> tensor<6x4xf32> {
  %0 = cleave.reshape %x : tensor<2x12xf32> to tensor<24xf32>
  %1 = cleave.reshape %0 : tensor<24xf32> to tensor<6x4xf32>
  return %1 : tensor<6x4xf32>
}

// -----

// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<2x12xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identities(%x: tensor<2x12xf32>) -> tensor<2x12xf32> {
  %0 = cleave.reshape %x : tensor<2x12xf32> to tensor<2x12xf32>
  %1 = cleave.transpose %0 permutation = [0, 1] : tensor<2x12xf32> -> tensor<2x12xf32>
  %2 = cleave.cast %1 : tensor<2x12xf32> to tensor<2x12xf32>
  return %2 : tensor<2x12xf32>
}

// -----

// A reshape round trip folds away; the real transpose stays.
// CHECK-LABEL: func.func @round_trip
// CHECK-SAME: (%[[X:.*]]: tensor<2x12xf32>)
// CHECK-NEXT: %[[T:.*]] = cleave.transpose %[[X]] permutation = [1, 0]
// CHECK-NEXT: return %[[T]]
func.func @round_trip(%x: tensor<2x12xf32>) -> tensor<12x2xf32> {
  %0 = cleave.reshape %x : tensor<2x12xf32> to tensor<24xf32>
  %1 = cleave.reshape %0 : tensor<24xf32> to tensor<2x12xf32>
  %2 = cleave.transpose %1 permutation = [1, 0] : tensor<2x12xf32> -> tensor<12x2xf32>
  return %2 : tensor<12x2xf32>
}

// -----

// Unused pure ops disappear; collectives are effects and stay.
cleave.mesh @m(dp = 2 : ib)
// CHECK-LABEL: func.func @dead
// CHECK-NOT: cleave.exp
// CHECK: cleave.all_reduce
// CHECK-NEXT: return
func.func @dead(%x: tensor<4xf32>) {
  %0 = cleave.exp %x : tensor<4xf32>
  %1 = cleave.all_reduce %x on @m axes = [dp] : tensor<4xf32>
  return
}

// -----

// The block of a broadcast along a dimension it added is the broadcast at
// the block's shape; along a dimension of the operand it stays a shard.
// CHECK-LABEL: func.func @shard_of_broadcast
// CHECK-SAME: (%[[B:.*]]: tensor<32xf32>)
// CHECK-NEXT: %[[L:.*]] = cleave.broadcast %[[B]] dims = [2] {cleave.stage = 1 : i64} : tensor<32xf32> -> tensor<2x8x32xf32>
// CHECK-NEXT: %[[F:.*]] = cleave.broadcast %[[B]] dims = [2] : tensor<32xf32> -> tensor<16x8x32xf32>
// CHECK-NEXT: %[[S:.*]] = cleave.shard %[[F]] on @mesh axes = [tp] dim = 2 : tensor<16x8x32xf32> -> tensor<16x8x16xf32>
// CHECK-NEXT: return %[[L]], %[[S]]
cleave.mesh @mesh(dp = 4 : nvlink, mb = 2 : nvlink, tp = 2 : nvlink)
func.func @shard_of_broadcast(%b: tensor<32xf32>) -> (tensor<2x8x32xf32>, tensor<16x8x16xf32>) {
  %0 = cleave.broadcast %b dims = [2] {cleave.stage = 1 : i64} : tensor<32xf32> -> tensor<16x8x32xf32>
  %1 = cleave.shard %0 on @mesh axes = [dp, mb] dim = 0 : tensor<16x8x32xf32> -> tensor<2x8x32xf32>
  %2 = cleave.broadcast %b dims = [2] : tensor<32xf32> -> tensor<16x8x32xf32>
  %3 = cleave.shard %2 on @mesh axes = [tp] dim = 2 : tensor<16x8x32xf32> -> tensor<16x8x16xf32>
  return %1, %3 : tensor<2x8x32xf32>, tensor<16x8x16xf32>
}

// -----

// The block of an all-reduce over the same group, used by nothing else, is
// a reduce-scatter (ZeRO-1's gradient); it keeps the reduction and the
// stage. An all-reduce that is used elsewhere (a gradient norm), or a
// shard over other axes, stays.
// CHECK-LABEL: func.func @shard_of_all_reduce
// CHECK-SAME: (%[[G:.*]]: tensor<8x4xf32>, %[[H:.*]]: tensor<8x4xf32>)
// CHECK-NEXT: %[[RS:.*]] = cleave.reduce_scatter %[[G]] on @mesh axes = [dp, cp] dim = 1 reduction = avg {cleave.stage = 1 : i64} : tensor<8x4xf32> -> tensor<8x1xf32>
// CHECK-NEXT: %[[AR:.*]] = cleave.all_reduce %[[H]] on @mesh axes = [dp]
// CHECK-NEXT: %[[S1:.*]] = cleave.shard %[[AR]] on @mesh axes = [dp] dim = 0
// CHECK-NEXT: %[[AR2:.*]] = cleave.all_reduce %[[H]] on @mesh axes = [dp, cp]
// CHECK-NEXT: %[[S2:.*]] = cleave.shard %[[AR2]] on @mesh axes = [cp, dp] dim = 0
// CHECK-NEXT: return %[[RS]], %[[S1]], %[[AR]], %[[S2]]
cleave.mesh @mesh(dp = 2 : ib, cp = 2 : ib)
func.func @shard_of_all_reduce(%g: tensor<8x4xf32>, %h: tensor<8x4xf32>) -> (tensor<8x1xf32>, tensor<4x4xf32>, tensor<8x4xf32>, tensor<2x4xf32>) {
  %0 = cleave.all_reduce %g on @mesh axes = [dp, cp] reduction = avg {cleave.stage = 1 : i64} : tensor<8x4xf32>
  %1 = cleave.shard %0 on @mesh axes = [dp, cp] dim = 1 : tensor<8x4xf32> -> tensor<8x1xf32>
  %2 = cleave.all_reduce %h on @mesh axes = [dp] : tensor<8x4xf32>
  %3 = cleave.shard %2 on @mesh axes = [dp] dim = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %4 = cleave.all_reduce %h on @mesh axes = [dp, cp] : tensor<8x4xf32>
  %5 = cleave.shard %4 on @mesh axes = [cp, dp] dim = 0 : tensor<8x4xf32> -> tensor<2x4xf32>
  return %1, %3, %2, %5 : tensor<8x1xf32>, tensor<4x4xf32>, tensor<8x4xf32>, tensor<2x4xf32>
}
