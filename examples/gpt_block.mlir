// One GPT-2-style transformer block (pre-norm, causal multi-head attention,
// GELU MLP, residuals, dropout) with global semantics. Shapes: batch 4,
// sequence 32, hidden 128, 4 heads of 32, MLP 512.
//
// Sharding annotations give the Megatron tensor-parallel plan: QKV and fc1
// weights split by output rows (column-parallel), projection and fc2 weights
// split by input columns (row-parallel); the batch is data parallel.
//
//   cleave-opt examples/gpt_block.mlir
//   cleave-opt examples/gpt_block.mlir --cleave-print-sharding-rules

cleave.mesh @cpu(dp = 2 : host, tp = 2 : host)

func.func @block(
    %x: tensor<4x32x128xf32> {cleave.input = "hidden",
                              cleave.sharding = #cleave.sharding<@cpu, [dp, _, _]>},
    %seed: tensor<i64> {cleave.input = "seed"},
    %ln1_g: tensor<128xf32> {cleave.param = "ln_1.weight", cleave.init = #cleave.init<ones>},
    %ln1_b: tensor<128xf32> {cleave.param = "ln_1.bias", cleave.init = #cleave.init<zeros>},
    %wqkv: tensor<384x128xf32> {cleave.param = "attn.c_attn.weight",
                                cleave.init = #cleave.init<normal, 0.02>,
                                cleave.sharding = #cleave.sharding<@cpu, [tp, _]>},
    %wo: tensor<128x128xf32> {cleave.param = "attn.c_proj.weight",
                              cleave.init = #cleave.init<normal, 0.02>,
                              cleave.sharding = #cleave.sharding<@cpu, [_, tp]>},
    %ln2_g: tensor<128xf32> {cleave.param = "ln_2.weight", cleave.init = #cleave.init<ones>},
    %ln2_b: tensor<128xf32> {cleave.param = "ln_2.bias", cleave.init = #cleave.init<zeros>},
    %w1: tensor<512x128xf32> {cleave.param = "mlp.c_fc.weight",
                              cleave.init = #cleave.init<normal, 0.02>,
                              cleave.sharding = #cleave.sharding<@cpu, [tp, _]>},
    %w2: tensor<128x512xf32> {cleave.param = "mlp.c_proj.weight",
                              cleave.init = #cleave.init<normal, 0.02>,
                              cleave.sharding = #cleave.sharding<@cpu, [_, tp]>})
    -> tensor<4x32x128xf32> {
  // Attention.
  %n1 = cleave.layer_norm %x, %ln1_g, %ln1_b : (tensor<4x32x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<4x32x128xf32>
  %qkv = cleave.matmul %n1, %wqkv {transpose_rhs} : (tensor<4x32x128xf32>, tensor<384x128xf32>) -> tensor<4x32x384xf32>
  %qkv4 = cleave.reshape %qkv : tensor<4x32x384xf32> to tensor<4x32x3x4x32xf32>
  %q5 = cleave.slice %qkv4 offsets = [0, 0, 0, 0, 0] sizes = [4, 32, 1, 4, 32] strides = [1, 1, 1, 1, 1] : tensor<4x32x3x4x32xf32> -> tensor<4x32x1x4x32xf32>
  %k5 = cleave.slice %qkv4 offsets = [0, 0, 1, 0, 0] sizes = [4, 32, 1, 4, 32] strides = [1, 1, 1, 1, 1] : tensor<4x32x3x4x32xf32> -> tensor<4x32x1x4x32xf32>
  %v5 = cleave.slice %qkv4 offsets = [0, 0, 2, 0, 0] sizes = [4, 32, 1, 4, 32] strides = [1, 1, 1, 1, 1] : tensor<4x32x3x4x32xf32> -> tensor<4x32x1x4x32xf32>
  %q = cleave.reshape %q5 : tensor<4x32x1x4x32xf32> to tensor<4x32x4x32xf32>
  %k = cleave.reshape %k5 : tensor<4x32x1x4x32xf32> to tensor<4x32x4x32xf32>
  %v = cleave.reshape %v5 : tensor<4x32x1x4x32xf32> to tensor<4x32x4x32xf32>
  %att = cleave.attention %q, %k, %v {causal} : (tensor<4x32x4x32xf32>, tensor<4x32x4x32xf32>, tensor<4x32x4x32xf32>) -> tensor<4x32x4x32xf32>
  %att3 = cleave.reshape %att : tensor<4x32x4x32xf32> to tensor<4x32x128xf32>
  %proj = cleave.matmul %att3, %wo {transpose_rhs} : (tensor<4x32x128xf32>, tensor<128x128xf32>) -> tensor<4x32x128xf32>
  %drop1 = cleave.dropout %proj, %seed {rate = 0.1 : f64, stream = 0 : i64} : (tensor<4x32x128xf32>, tensor<i64>) -> tensor<4x32x128xf32>
  %r1 = cleave.add %x, %drop1 : tensor<4x32x128xf32>
  // MLP.
  %n2 = cleave.layer_norm %r1, %ln2_g, %ln2_b : (tensor<4x32x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<4x32x128xf32>
  %h = cleave.matmul %n2, %w1 {transpose_rhs} : (tensor<4x32x128xf32>, tensor<512x128xf32>) -> tensor<4x32x512xf32>
  %a = cleave.gelu %h : tensor<4x32x512xf32>
  %o = cleave.matmul %a, %w2 {transpose_rhs} : (tensor<4x32x512xf32>, tensor<128x512xf32>) -> tensor<4x32x128xf32>
  %drop2 = cleave.dropout %o, %seed {rate = 0.1 : f64, stream = 1 : i64} : (tensor<4x32x128xf32>, tensor<i64>) -> tensor<4x32x128xf32>
  %r2 = cleave.add %r1, %drop2 : tensor<4x32x128xf32>
  return %r2 : tensor<4x32x128xf32>
}
