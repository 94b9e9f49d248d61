// RUN: cleave-opt %s --cleave-propagate-sharding --cleave-partition --cleave-lower-collectives | FileCheck %s

// The passes together: a column- then row-parallel block with dropout on a
// dp x tp mesh becomes per-device code whose block indices and reduce-scatter
// are runtime calls on the groups of the module attribute (the indices at
// the top of the function, one call per list of axes).

// CHECK: module attributes {cleave.groups = {{\[}}["dp"], ["tp"]]}
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: tensor<4x16xf32> {cleave.layout = #cleave.sharding<@m, [dp, _]>}
// CHECK-SAME: tensor<16x16xf32> {cleave.layout = #cleave.sharding<@m, [_, tp]>}
// CHECK-SAME: tensor<16x16xf32> {cleave.layout = #cleave.sharding<@m, [tp, _]>}
// CHECK-SAME: -> (tensor<4x8xf32> {cleave.layout = #cleave.sharding<@m, [dp, tp]>})
// CHECK: %[[RDP:.*]] = call @cleave_rt_group_rank(%c0_i64{{[_0-9]*}}) : (i64) -> i64
// CHECK: %[[IDP:.*]] = tensor.from_elements %[[RDP]] : tensor<i64>
// CHECK: %[[RTP:.*]] = call @cleave_rt_group_rank(%c1_i64{{[_0-9]*}}) : (i64) -> i64
// CHECK: %[[ITP:.*]] = tensor.from_elements %[[RTP]] : tensor<i64>
// CHECK: cleave.matmul {{.*}} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
// CHECK: cleave.dropout %{{.*}}, %{{.*}}, %[[IDP]], %[[ITP]] {global_shape = array<i64: 8, 32>
// CHECK: %[[P:.*]] = cleave.matmul {{.*}} -> tensor<4x16xf32>
// CHECK: %[[T:.*]] = cleave.transpose %[[P]] permutation = [1, 0] : tensor<4x16xf32> -> tensor<16x4xf32>
// CHECK: bufferization.to_memref %[[T]]
// CHECK: call @cleave_rt_reduce_scatter(%c1_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c32_i64{{[_0-9]*}})
// CHECK: %[[S:.*]] = bufferization.to_tensor %{{.*}} : memref<8x4xf32>
// CHECK: %[[R:.*]] = cleave.transpose %[[S]] permutation = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
// CHECK: return %[[R]] : tensor<4x8xf32>
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)
func.func @mlp(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>},
               %w1: tensor<16x32xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>},
               %w2: tensor<32x16xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>},
               %seed: tensor<i64>) -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, tp]>}) {
  %h = cleave.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %d = cleave.dropout %h, %seed {rate = 0.1 : f64, stream = 1 : i64} : (tensor<8x32xf32>, tensor<i64>) -> tensor<8x32xf32>
  %y = cleave.matmul %d, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
