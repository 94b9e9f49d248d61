// RUN: cleave-opt %s --cleave-propagate-sharding --cleave-partition | FileCheck %s

// A pending sum over tp that the consumer wants split over (cp, tp) on one
// dimension: slice over cp first (no communication), then reduce-scatter
// over tp, which moves a quarter of the bytes of an all-reduce.
cleave.mesh @m(cp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @partial_to_two_axes
// CHECK: %[[P:.*]] = cleave.matmul
// CHECK: %[[S:.*]] = cleave.shard %[[P]] on @m axes = [cp] dim = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK: cleave.reduce_scatter %[[S]] on @m axes = [tp] dim = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NOT: cleave.all_reduce
func.func @partial_to_two_axes(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>},
                               %w: tensor<16x8xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>})
    -> (tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@m, [(cp, tp), _]>}) {
  %y = cleave.matmul %x, %w : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
