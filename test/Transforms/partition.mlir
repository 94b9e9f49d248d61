// RUN: cleave-opt %s -split-input-file --cleave-propagate-sharding --cleave-partition | FileCheck %s

// The per-device program: local shapes, `cleave.layout` on arguments and
// results, and the collectives that reshard between producers and
// consumers.

// The example of the pass description: a row-parallel product leaves a
// pending sum; the replicated result all-reduces it.
cleave.mesh @m(tp = 2 : nvlink)

// CHECK-LABEL: func.func @all_reduce_partial_to_replicated
// CHECK-SAME: (%[[X:.*]]: tensor<8x8xf32> {cleave.layout = #cleave.sharding<@m, [_, tp]>},
// CHECK-SAME: %[[W:.*]]: tensor<8x4xf32> {cleave.layout = #cleave.sharding<@m, [tp, _]>})
// CHECK-SAME: -> (tensor<8x4xf32> {cleave.layout = #cleave.sharding<@m, [_, _]>})
// CHECK: %[[P:.*]] = cleave.matmul %[[X]], %[[W]] : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK: %[[R:.*]] = cleave.all_reduce %[[P]] on @m axes = [tp] : tensor<8x4xf32>
// CHECK: return %[[R]] : tensor<8x4xf32>
func.func @all_reduce_partial_to_replicated(
    %x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>},
    %w: tensor<16x4xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>}) -> tensor<8x4xf32> {
  %y = cleave.matmul %x, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// A pending sum that the consumer wants split is reduce-scattered, never
// all-reduced and then sliced (sequence parallelism's reduce-scatter).
cleave.mesh @m(tp = 2 : nvlink)

// CHECK-LABEL: func.func @reduce_scatter_partial_to_sharded
// CHECK-SAME: -> (tensor<4x4xf32> {cleave.layout = #cleave.sharding<@m, [tp, _]>})
// CHECK: %[[P:.*]] = cleave.matmul {{.*}} -> tensor<8x4xf32>
// CHECK-NOT: cleave.all_reduce
// CHECK: %[[S:.*]] = cleave.reduce_scatter %[[P]] on @m axes = [tp] dim = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK: return %[[S]]
func.func @reduce_scatter_partial_to_sharded(
    %x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>},
    %w: tensor<16x4xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>})
    -> (tensor<8x4xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>}) {
  %y = cleave.matmul %x, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// A split value that must be whole is all-gathered along its split
// dimension.
cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)

// CHECK-LABEL: func.func @all_gather
// CHECK-SAME: %[[X:.*]]: tensor<8x4xf32> {cleave.layout = #cleave.sharding<@m, [_, tp]>}
// CHECK-SAME: -> (tensor<8x16xf32> {cleave.layout = #cleave.sharding<@m, [_, _]>})
// CHECK: %[[E:.*]] = cleave.exp %[[X]] : tensor<8x4xf32>
// CHECK: %[[G:.*]] = cleave.all_gather %[[E]] on @m axes = [tp] dim = 1 : tensor<8x4xf32> -> tensor<8x16xf32>
// CHECK: return %[[G]]
func.func @all_gather(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>})
    -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _]>}) {
  %e = cleave.exp %x : tensor<8x16xf32>
  return %e : tensor<8x16xf32>
}

// -----

// A replicated value that a consumer wants split is sliced locally: no
// communication.
cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)

// CHECK-LABEL: func.func @local_shard
// CHECK-SAME: %[[X:.*]]: tensor<8x16xf32> {cleave.layout = #cleave.sharding<@m, [_, _]>}
// CHECK-SAME: -> (tensor<4x4xf32> {cleave.layout = #cleave.sharding<@m, [dp, tp]>})
// CHECK: %[[A:.*]] = cleave.shard %[[X]] on @m axes = [dp] dim = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK: %[[B:.*]] = cleave.shard %[[A]] on @m axes = [tp] dim = 1 : tensor<4x16xf32> -> tensor<4x4xf32>
// CHECK-NOT: cleave.all_
// CHECK: return %[[B]]
func.func @local_shard(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _]>})
    -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, tp]>}) {
  return %x : tensor<8x16xf32>
}

// -----

// Moving a split from one dimension to another is one all-to-all.
cleave.mesh @m(tp = 4 : nvlink)

// CHECK-LABEL: func.func @all_to_all
// CHECK-SAME: %[[X:.*]]: tensor<2x16xf32> {cleave.layout = #cleave.sharding<@m, [tp, _]>}
// CHECK-SAME: -> (tensor<8x4xf32> {cleave.layout = #cleave.sharding<@m, [_, tp]>})
// CHECK: %[[T:.*]] = cleave.all_to_all %[[X]] on @m axes = [tp] split_dim = 1 concat_dim = 0 : tensor<2x16xf32> -> tensor<8x4xf32>
// CHECK: return %[[T]]
func.func @all_to_all(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>})
    -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>}) {
  return %x : tensor<8x16xf32>
}

// -----

// Axes of size 1 (a pipeline's 'mb' with one micro-batch) move no data: the
// layout changes and the value stays, with no all-to-all, all-gather or
// slice over them (a collective over 'mb' would not be pipelined).
cleave.mesh @m(dp = 2 : ib, mb = 1 : host)

// CHECK-LABEL: func.func @unit_axes
// CHECK-SAME: %[[X:.*]]: tensor<4x16xf32> {cleave.layout = #cleave.sharding<@m, [(dp, mb), _]>}
// CHECK-SAME: -> (tensor<4x16xf32> {cleave.layout = #cleave.sharding<@m, [dp, mb]>})
// CHECK-NOT: cleave.
// CHECK: return %[[X]]
func.func @unit_axes(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [(dp, mb), _]>})
    -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, mb]>}) {
  return %x : tensor<8x16xf32>
}

// -----

// A constraint between producer and consumer reshards in place; consumers
// of the same layout share the collective.
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @constraint
// CHECK-SAME: %[[X:.*]]: tensor<4x16xf32>
// CHECK: %[[T:.*]] = cleave.all_to_all %[[X]] on @m axes = [dp] split_dim = 1 concat_dim = 0 : tensor<4x16xf32> -> tensor<8x8xf32>
// CHECK: %[[A:.*]] = cleave.exp %[[T]] : tensor<8x8xf32>
// CHECK: %[[B:.*]] = cleave.log %[[T]] : tensor<8x8xf32>
// CHECK-NOT: cleave.all_to_all
// CHECK: cleave.add %[[A]], %[[B]] : tensor<8x8xf32>
func.func @constraint(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>}) -> tensor<8x16xf32> {
  %0 = cleave.sharding_constraint %x <@m, [_, dp]> : tensor<8x16xf32>
  %1 = cleave.exp %0 : tensor<8x16xf32>
  %2 = cleave.log %0 : tensor<8x16xf32>
  %3 = cleave.add %1, %2 : tensor<8x16xf32>
  return %3 : tensor<8x16xf32>
}

// -----

// Two axes on one dimension (a 2-d mesh): the block is 1/4 of the rows;
// gathering the minor axis keeps the major one.
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @multi_axis_2d
// CHECK-SAME: %[[X:.*]]: tensor<2x16xf32> {cleave.layout = #cleave.sharding<@m, [(dp, tp), _]>}
// CHECK-SAME: -> (tensor<4x16xf32> {cleave.layout = #cleave.sharding<@m, [dp, _]>})
// CHECK: %[[E:.*]] = cleave.exp %[[X]] : tensor<2x16xf32>
// CHECK: %[[G:.*]] = cleave.all_gather %[[E]] on @m axes = [tp] dim = 0 : tensor<2x16xf32> -> tensor<4x16xf32>
// CHECK: return %[[G]]
func.func @multi_axis_2d(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [(dp, tp), _]>})
    -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>}) {
  %e = cleave.exp %x : tensor<8x16xf32>
  return %e : tensor<8x16xf32>
}

// -----

// A 3-d mesh: a batch split over dp, a tensor-parallel product over tp
// whose pending sum is all-reduced over tp only, and a result that also
// splits its rows over the third axis, cp, by a local slice.
cleave.mesh @m(cp = 2 : ib, dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @multi_axis_3d
// CHECK-SAME: %[[X:.*]]: tensor<4x8xf32> {cleave.layout = #cleave.sharding<@m, [dp, tp]>}
// CHECK-SAME: %[[W:.*]]: tensor<8x8xf32> {cleave.layout = #cleave.sharding<@m, [tp, _]>}
// CHECK-SAME: -> (tensor<2x8xf32> {cleave.layout = #cleave.sharding<@m, [(dp, cp), _]>})
// CHECK: %[[P:.*]] = cleave.matmul %[[X]], %[[W]] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[R:.*]] = cleave.all_reduce %[[P]] on @m axes = [tp] : tensor<4x8xf32>
// CHECK: %[[S:.*]] = cleave.shard %[[R]] on @m axes = [cp] dim = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK: return %[[S]]
func.func @multi_axis_3d(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, tp]>},
                         %w: tensor<16x8xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>})
    -> (tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@m, [(dp, cp), _]>}) {
  %y = cleave.matmul %x, %w : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

// Two axes gathered at once; two axes swapping dimensions (gather the
// major one, move the minor one with an all-to-all, slice the other).
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @gather_two_axes
// CHECK: cleave.all_gather %{{.*}} on @m axes = [dp, tp] dim = 0 : tensor<2x16xf32> -> tensor<8x16xf32>
func.func @gather_two_axes(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [(dp, tp), _]>})
    -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _]>}) {
  return %x : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @swap_axes
// CHECK-SAME: -> (tensor<4x8xf32> {cleave.layout = #cleave.sharding<@m, [tp, dp]>})
// CHECK: %[[G:.*]] = cleave.all_gather %{{.*}} on @m axes = [dp] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK: %[[T:.*]] = cleave.all_to_all %[[G]] on @m axes = [tp] split_dim = 0 concat_dim = 1 : tensor<8x8xf32> -> tensor<4x16xf32>
// CHECK: %[[S:.*]] = cleave.shard %[[T]] on @m axes = [dp] dim = 1 : tensor<4x16xf32> -> tensor<4x8xf32>
// CHECK: return %[[S]]
func.func @swap_axes(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, tp]>})
    -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [tp, dp]>}) {
  return %x : tensor<8x16xf32>
}

// -----

// Disagreeing user annotations: the op follows the first operand and the
// second is resharded (gathered, then sliced the other way).
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @disagreeing_operands
// CHECK-SAME: %[[A:.*]]: tensor<8x16xf32> {cleave.layout = #cleave.sharding<@m, [dp, _]>}
// CHECK-SAME: %[[B:.*]]: tensor<8x16xf32> {cleave.layout = #cleave.sharding<@m, [tp, _]>}
// CHECK: %[[G:.*]] = cleave.all_gather %[[B]] on @m axes = [tp] dim = 0 : tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK: %[[S:.*]] = cleave.shard %[[G]] on @m axes = [dp] dim = 0 : tensor<16x16xf32> -> tensor<8x16xf32>
// CHECK: cleave.add %[[A]], %[[S]] : tensor<8x16xf32>
func.func @disagreeing_operands(%a: tensor<16x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>},
                                %b: tensor<16x16xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>}) -> tensor<16x16xf32> {
  %y = cleave.add %a, %b : tensor<16x16xf32>
  return %y : tensor<16x16xf32>
}
