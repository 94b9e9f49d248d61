// A two-layer MLP classifier: forward pass and loss, with global semantics.
// The batch is split over the data-parallel axis and the hidden layer over
// the tensor-parallel axis (Megatron's column- then row-parallel linear).
//
//   cleave-opt examples/mlp.mlir
//   cleave-opt examples/mlp.mlir --cleave-print-sharding-rules

cleave.mesh @cpu(dp = 2 : host, tp = 2 : host)

func.func @loss(
    %x: tensor<32x64xf32> {cleave.input = "features",
                           cleave.sharding = #cleave.sharding<@cpu, [dp, _]>},
    %y: tensor<32xi32> {cleave.input = "labels",
                        cleave.sharding = #cleave.sharding<@cpu, [dp]>},
    %w1: tensor<256x64xf32> {cleave.param = "fc1.weight",
                             cleave.init = #cleave.init<normal, 0.02>,
                             cleave.sharding = #cleave.sharding<@cpu, [tp, _]>},
    %b1: tensor<256xf32> {cleave.param = "fc1.bias",
                          cleave.init = #cleave.init<zeros>,
                          cleave.sharding = #cleave.sharding<@cpu, [tp]>},
    %w2: tensor<10x256xf32> {cleave.param = "fc2.weight",
                             cleave.init = #cleave.init<normal, 0.02>,
                             cleave.sharding = #cleave.sharding<@cpu, [_, tp]>},
    %b2: tensor<10xf32> {cleave.param = "fc2.bias",
                         cleave.init = #cleave.init<zeros>})
    -> tensor<f32> {
  %h = cleave.matmul %x, %w1 {transpose_rhs} : (tensor<32x64xf32>, tensor<256x64xf32>) -> tensor<32x256xf32>
  %bb1 = cleave.broadcast %b1 dims = [1] : tensor<256xf32> -> tensor<32x256xf32>
  %h1 = cleave.add %h, %bb1 : tensor<32x256xf32>
  %a = cleave.gelu %h1 : tensor<32x256xf32>
  %o = cleave.matmul %a, %w2 {transpose_rhs} : (tensor<32x256xf32>, tensor<10x256xf32>) -> tensor<32x10xf32>
  %bb2 = cleave.broadcast %b2 dims = [1] : tensor<10xf32> -> tensor<32x10xf32>
  %logits = cleave.add %o, %bb2 : tensor<32x10xf32>
  %loss = cleave.cross_entropy %logits, %y : (tensor<32x10xf32>, tensor<32xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
