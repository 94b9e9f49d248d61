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
