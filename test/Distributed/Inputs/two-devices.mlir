// A hand-sharded training step for a mesh of two devices.
cleave.mesh @m(dp = 2 : host)
func.func @forward(%w: tensor<4x4xf32> {cleave.param = "w", cleave.init = #cleave.init<normal, 0.1>},
                   %x: tensor<8x4xf32> {cleave.input = "features", cleave.sharding = #cleave.sharding<@m, [dp, _]>},
                   %y: tensor<8xi32> {cleave.input = "labels"}) -> tensor<f32> {
  %0 = cleave.matmul %x, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %1 = cleave.cross_entropy %0, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
  return %1 : tensor<f32>
}
