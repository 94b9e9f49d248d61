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
