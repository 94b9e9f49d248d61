// RUN: cleave-opt %s | cleave-opt | FileCheck %s
// RUN: cleave-opt %s --mlir-print-op-generic | cleave-opt | FileCheck %s

// Round trip of every op and attribute of the cleave dialect.

// CHECK: cleave.mesh @world(dp = 2 : ib, tp = 4 : nvlink)
cleave.mesh @world(dp = 2 : ib, tp = 4 : nvlink)
// CHECK: cleave.mesh @cube(pp = 2 : ib, dp = 2 : roce, tp = 2 : nvlink)
cleave.mesh @cube(pp = 2 : ib, dp = 2 : roce, tp = 2 : nvlink)
// CHECK: cleave.mesh @host(x = 4 : host, y = 1 : pcie, z = 1 : ethernet)
cleave.mesh @host(x = 4 : host, y = 1 : pcie, z = 1 : ethernet)

// CHECK-LABEL: func.func @attributes
// CHECK-SAME: cleave.input = "tokens", cleave.sharding = #cleave.sharding<@world, [dp, _]>
// CHECK-SAME: cleave.init = #cleave.init<normal, 2.000000e-02>, cleave.param = "w"
// CHECK-SAME: cleave.sharding = #cleave.sharding<@world, [_, (dp, tp)]>
// CHECK-SAME: cleave.init = #cleave.init<zeros>, cleave.param = "b"
// CHECK-SAME: cleave.init = #cleave.init<uniform, 1.000000e-01>
// CHECK-SAME: cleave.init = #cleave.init<ones>
// CHECK-SAME: -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@world, [dp, _], partial = [tp]>})
func.func @attributes(
    %tokens: tensor<8x4xi32> {cleave.input = "tokens", cleave.sharding = #cleave.sharding<@world, [dp, _]>},
    %w: tensor<16x16xf32> {cleave.param = "w", cleave.init = #cleave.init<normal, 0.02>,
                           cleave.sharding = #cleave.sharding<@world, [_, (dp, tp)]>},
    %b: tensor<16xf32> {cleave.param = "b", cleave.init = #cleave.init<zeros>},
    %u: tensor<16xf32> {cleave.param = "u", cleave.init = #cleave.init<uniform, 0.1>},
    %g: tensor<16xf32> {cleave.param = "g", cleave.init = #cleave.init<ones>},
    %x: tensor<8x16xf32>)
    -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@world, [dp, _], partial = [tp]>}) {
  // CHECK: cleave.shardings = [#cleave.sharding<@world, [dp, tp]>]
  %0 = cleave.add %x, %x {cleave.shardings = [#cleave.sharding<@world, [dp, tp]>]} : tensor<8x16xf32>
  // CHECK: cleave.sharding_constraint %{{.*}} <@world, [dp, _]> : tensor<8x16xf32>
  %1 = cleave.sharding_constraint %0 <@world, [dp, _]> : tensor<8x16xf32>
  // CHECK: #cleave.sharding<@world, []>
  %s = cleave.reduce_sum %1 dims = [0, 1] {cleave.shardings = [#cleave.sharding<@world, []>]} : tensor<8x16xf32> -> tensor<f32>
  return %1 : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xbf16> {
  // CHECK: cleave.constant dense<5.000000e-01> : tensor<4x8xf32>
  %c = cleave.constant dense<0.5> : tensor<4x8xf32>
  // CHECK: cleave.add %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %0 = cleave.add %a, %b : tensor<4x8xf32>
  // CHECK: cleave.sub
  %1 = cleave.sub %0, %c : tensor<4x8xf32>
  // CHECK: cleave.mul
  %2 = cleave.mul %1, %b : tensor<4x8xf32>
  // CHECK: cleave.div
  %3 = cleave.div %2, %a : tensor<4x8xf32>
  // CHECK: cleave.max
  %4 = cleave.max %3, %a : tensor<4x8xf32>
  // CHECK: cleave.min
  %5 = cleave.min %4, %b : tensor<4x8xf32>
  // CHECK: cleave.pow
  %6 = cleave.pow %5, %c : tensor<4x8xf32>
  // CHECK: cleave.neg
  %7 = cleave.neg %6 : tensor<4x8xf32>
  // CHECK: cleave.exp
  %8 = cleave.exp %7 : tensor<4x8xf32>
  // CHECK: cleave.log
  %9 = cleave.log %8 : tensor<4x8xf32>
  // CHECK: cleave.sqrt
  %10 = cleave.sqrt %9 : tensor<4x8xf32>
  // CHECK: cleave.rsqrt
  %11 = cleave.rsqrt %10 : tensor<4x8xf32>
  // CHECK: cleave.tanh
  %12 = cleave.tanh %11 : tensor<4x8xf32>
  // CHECK: cleave.sigmoid
  %13 = cleave.sigmoid %12 : tensor<4x8xf32>
  // CHECK: cleave.relu
  %14 = cleave.relu %13 : tensor<4x8xf32>
  // CHECK: cleave.silu
  %15 = cleave.silu %14 : tensor<4x8xf32>
  // CHECK: cleave.gelu %{{.*}} : tensor<4x8xf32>
  %16 = cleave.gelu %15 : tensor<4x8xf32>
  // CHECK: cleave.gelu %{{.*}} {approximate = #cleave.gelu_approx<none>} : tensor<4x8xf32>
  %17 = cleave.gelu %16 {approximate = #cleave.gelu_approx<none>} : tensor<4x8xf32>
  // CHECK: cleave.gelu_grad %{{.*}}, %{{.*}} {approximate = #cleave.gelu_approx<none>} : tensor<4x8xf32>
  %18 = cleave.gelu_grad %16, %17 {approximate = #cleave.gelu_approx<none>} : tensor<4x8xf32>
  // CHECK: cleave.silu_grad
  %19 = cleave.silu_grad %14, %18 : tensor<4x8xf32>
  // CHECK: cleave.relu_grad
  %20 = cleave.relu_grad %13, %19 : tensor<4x8xf32>
  // CHECK: cleave.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xbf16>
  %21 = cleave.cast %20 : tensor<4x8xf32> to tensor<4x8xbf16>
  return %21 : tensor<4x8xbf16>
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<2x4x8xf32>) -> (tensor<8xf32>, tensor<2x8xf32>, tensor<2x4xf32>) {
  // CHECK: cleave.reduce_sum %{{.*}} dims = [0, 1] : tensor<2x4x8xf32> -> tensor<8xf32>
  %0 = cleave.reduce_sum %x dims = [0, 1] : tensor<2x4x8xf32> -> tensor<8xf32>
  // CHECK: cleave.reduce_mean %{{.*}} dims = [1] : tensor<2x4x8xf32> -> tensor<2x8xf32>
  %1 = cleave.reduce_mean %x dims = [1] : tensor<2x4x8xf32> -> tensor<2x8xf32>
  // CHECK: cleave.reduce_max %{{.*}} dims = [2] : tensor<2x4x8xf32> -> tensor<2x4xf32>
  %2 = cleave.reduce_max %x dims = [2] : tensor<2x4x8xf32> -> tensor<2x4xf32>
  return %0, %1, %2 : tensor<8xf32>, tensor<2x8xf32>, tensor<2x4xf32>
}

// The barrier of recomputation: the identity, on any tensor.
// CHECK-LABEL: func.func @optimization_barrier
func.func @optimization_barrier(%x: tensor<2x4xf32>, %i: tensor<2xi32>) -> (tensor<2x4xf32>, tensor<2xi32>) {
  // CHECK: cleave.optimization_barrier %{{.*}} : tensor<2x4xf32>
  %0 = cleave.optimization_barrier %x : tensor<2x4xf32>
  // CHECK: cleave.optimization_barrier %{{.*}} : tensor<2xi32>
  %1 = cleave.optimization_barrier %i : tensor<2xi32>
  return %0, %1 : tensor<2x4xf32>, tensor<2xi32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<2x4x12xf32>, %b: tensor<12xf32>) -> tensor<2x4x3x8xf32> {
  // CHECK: cleave.reshape %{{.*}} : tensor<2x4x12xf32> to tensor<2x4x3x4xf32>
  %0 = cleave.reshape %x : tensor<2x4x12xf32> to tensor<2x4x3x4xf32>
  // CHECK: cleave.transpose %{{.*}} permutation = [0, 2, 1, 3] : tensor<2x4x3x4xf32> -> tensor<2x3x4x4xf32>
  %1 = cleave.transpose %0 permutation = [0, 2, 1, 3] : tensor<2x4x3x4xf32> -> tensor<2x3x4x4xf32>
  // CHECK: cleave.broadcast %{{.*}} dims = [2] : tensor<12xf32> -> tensor<2x4x12xf32>
  %2 = cleave.broadcast %b dims = [2] : tensor<12xf32> -> tensor<2x4x12xf32>
  // CHECK: cleave.slice %{{.*}} offsets = [0, 0, 2] sizes = [2, 4, 5] strides = [1, 1, 2] : tensor<2x4x12xf32> -> tensor<2x4x5xf32>
  %3 = cleave.slice %2 offsets = [0, 0, 2] sizes = [2, 4, 5] strides = [1, 1, 2] : tensor<2x4x12xf32> -> tensor<2x4x5xf32>
  // CHECK: cleave.concat %{{.*}}, %{{.*}} dim = 3 : (tensor<2x4x3x4xf32>, tensor<2x4x3x4xf32>) -> tensor<2x4x3x8xf32>
  %4 = cleave.concat %0, %0 dim = 3 : (tensor<2x4x3x4xf32>, tensor<2x4x3x4xf32>) -> tensor<2x4x3x8xf32>
  // CHECK: cleave.pad %{{.*}} low = [0, 1, 0] high = [0, 2, 1] interior = [0, 0, 1] : tensor<2x4x5xf32> -> tensor<2x7x10xf32>
  %5 = cleave.pad %3 low = [0, 1, 0] high = [0, 2, 1] interior = [0, 0, 1] : tensor<2x4x5xf32> -> tensor<2x7x10xf32>
  // CHECK: cleave.pad %{{.*}} low = [1] high = [1] interior = [0] {value = -1.000000e+00 : f64} : tensor<12xf32> -> tensor<14xf32>
  %6 = cleave.pad %b low = [1] high = [1] interior = [0] {value = -1.0 : f64} : tensor<12xf32> -> tensor<14xf32>
  return %4 : tensor<2x4x3x8xf32>
}

// CHECK-LABEL: func.func @nn
func.func @nn(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %g: tensor<8xf32>, %bb: tensor<8xf32>,
              %ids: tensor<2x4xi32>, %table: tensor<10x8xf32>, %seed: tensor<i64>) {
  // CHECK: cleave.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %0 = cleave.matmul %x, %w {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  // CHECK: cleave.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %xt = cleave.transpose %x permutation = [0, 2, 1] : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %1 = cleave.matmul %xt, %xt {transpose_lhs} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  // CHECK: cleave.matmul %{{.*}}, %{{.*}} {reduce_batch, transpose_lhs} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %dw = cleave.matmul %x, %0 {reduce_batch, transpose_lhs} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>) -> tensor<8x16xf32>
  // CHECK: cleave.softmax %{{.*}} dim = 2 : tensor<2x4x4xf32>
  %2 = cleave.softmax %1 dim = 2 : tensor<2x4x4xf32>
  // CHECK: cleave.softmax_grad %{{.*}}, %{{.*}} dim = 2 : tensor<2x4x4xf32>
  %3 = cleave.softmax_grad %2, %1 dim = 2 : tensor<2x4x4xf32>
  // CHECK: cleave.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %4 = cleave.layer_norm %x, %g, %bb {epsilon = 1.0e-6 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // CHECK: cleave.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %5:3 = cleave.layer_norm_grad %x, %g, %4 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: cleave.rms_norm %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %6 = cleave.rms_norm %x, %g : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // CHECK: cleave.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %7:2 = cleave.rms_norm_grad %x, %g, %6 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  // CHECK: cleave.embedding %{{.*}}, %{{.*}} : (tensor<10x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %8 = cleave.embedding %table, %ids : (tensor<10x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  // CHECK: cleave.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<10x8xf32>
  %9 = cleave.embedding_grad %ids, %8 : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<10x8xf32>
  // CHECK: cleave.dropout %{{.*}}, %{{.*}} {rate = 1.000000e-01 : f64, stream = 7 : i64} : (tensor<2x4x8xf32>, tensor<i64>) -> tensor<2x4x8xf32>
  %10 = cleave.dropout %8, %seed {rate = 0.1 : f64, stream = 7 : i64} : (tensor<2x4x8xf32>, tensor<i64>) -> tensor<2x4x8xf32>
  // CHECK: cleave.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %11 = cleave.cross_entropy %0, %ids : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  // CHECK: cleave.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x16xf32>
  %12 = cleave.cross_entropy_grad %0, %ids, %11 : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x16xf32>
  return
}

// Ignored labels (PyTorch's ignore_index) and a padding row (padding_idx).
// CHECK-LABEL: func.func @ignored_labels
func.func @ignored_labels(%logits: tensor<2x4x16xf32>, %ids: tensor<2x4xi32>, %table: tensor<10x8xf32>) {
  // CHECK: cleave.cross_entropy %{{.*}}, %{{.*}} {ignore_index = -1 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %0 = cleave.cross_entropy %logits, %ids {ignore_index = -1 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  // CHECK: cleave.label_count %{{.*}} {ignore_index = -1 : i64} : (tensor<2x4xi32>) -> tensor<f32>
  %n = cleave.label_count %ids {ignore_index = -1 : i64} : (tensor<2x4xi32>) -> tensor<f32>
  // CHECK: cleave.cross_entropy %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<f32>
  %1 = cleave.cross_entropy %logits, %ids, %n {ignore_index = -100 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<f32>
  // CHECK: cleave.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = -1 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>, tensor<f32>) -> tensor<2x4x16xf32>
  %2 = cleave.cross_entropy_grad %logits, %ids, %0, %n {ignore_index = -1 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>, tensor<f32>) -> tensor<2x4x16xf32>
  // CHECK: cleave.embedding %{{.*}}, %{{.*}} {padding_idx = 0 : i64} : (tensor<10x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %3 = cleave.embedding %table, %ids {padding_idx = 0 : i64} : (tensor<10x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  // CHECK: cleave.embedding_grad %{{.*}}, %{{.*}} {padding_idx = 9 : i64} : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<10x8xf32>
  %4 = cleave.embedding_grad %ids, %3 {padding_idx = 9 : i64} : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<10x8xf32>
  return
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>) {
  // CHECK: cleave.rotary %{{.*}} : tensor<2x8x4x16xf32>
  %0 = cleave.rotary %q : tensor<2x8x4x16xf32>
  // CHECK: cleave.rotary %{{.*}} {interleaved, inverse, theta = 5.000000e+05 : f64} : tensor<2x8x2x16xf32>
  %1 = cleave.rotary %k {theta = 500000.0 : f64, interleaved, inverse} : tensor<2x8x2x16xf32>
  // CHECK: cleave.attention %{{.*}}, %{{.*}}, %{{.*}} {causal} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32>
  %2 = cleave.attention %0, %1, %v {causal} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32>
  // CHECK: cleave.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
  %3:3 = cleave.attention_grad %0, %1, %v, %2 {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
  return
}

// A device's block of a sequence split for context parallelism: the rotary
// block and the query block of a causal attention.
// CHECK-LABEL: func.func @attention_blocks
func.func @attention_blocks(%q: tensor<2x4x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>, %b: tensor<i64>) {
  // CHECK: cleave.rotary %{{.*}} block %{{.*}} : tensor<i64> {theta = 5.000000e+05 : f64} : tensor<2x4x4x16xf32>
  %0 = cleave.rotary %q block %b : tensor<i64> {theta = 500000.0 : f64} : tensor<2x4x4x16xf32>
  // CHECK: cleave.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal} : (tensor<2x4x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<i64>) -> tensor<2x4x4x16xf32>
  %1 = cleave.attention %0, %k, %v, %b {causal} : (tensor<2x4x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<i64>) -> tensor<2x4x4x16xf32>
  // CHECK: cleave.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal} : (tensor<2x4x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x4x4x16xf32>, tensor<i64>) -> (tensor<2x4x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
  %2:3 = cleave.attention_grad %0, %k, %v, %1, %b {causal} : (tensor<2x4x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x4x4x16xf32>, tensor<i64>) -> (tensor<2x4x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
  return
}

// CHECK-LABEL: func.func @optimizers
func.func @optimizers(%p: tensor<4x4xf32>, %g: tensor<4x4xf32>, %gb: tensor<4x4xbf16>,
                      %m: tensor<4x4xf32>, %v: tensor<4x4xf32>, %lr: tensor<f32>, %t: tensor<f32>) {
  // CHECK: cleave.sgd %{{.*}}, %{{.*}}, %{{.*}} {weight_decay = 1.000000e-02 : f64} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %0 = cleave.sgd %p, %g, %lr {weight_decay = 0.01 : f64} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  // CHECK: cleave.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {beta2 = 0.94999999999999996 : f64} : (tensor<4x4xf32>, tensor<4x4xbf16>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  %1:3 = cleave.adamw %p, %gb, %m, %v, %lr, %t {beta2 = 0.95 : f64} : (tensor<4x4xf32>, tensor<4x4xbf16>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  // CHECK: cleave.lr_schedule %{{.*}}, %{{.*}} {decay = #cleave.lr_decay<cosine>, decay_steps = 30 : i64, min_lr = 6.000000e-05 : f64, warmup_steps = 10 : i64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %2 = cleave.lr_schedule %lr, %t {decay = #cleave.lr_decay<cosine>, warmup_steps = 10 : i64, decay_steps = 30 : i64, min_lr = 6.0e-05 : f64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  // CHECK: cleave.lr_schedule %{{.*}}, %{{.*}} {decay = #cleave.lr_decay<linear>} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %3 = cleave.lr_schedule %lr, %t {decay = #cleave.lr_decay<linear>} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: cleave.all_reduce %{{.*}} on @world axes = [dp, tp] : tensor<8x16xf32>
  %0 = cleave.all_reduce %x on @world axes = [dp, tp] : tensor<8x16xf32>
  // CHECK: cleave.all_reduce %{{.*}} on @world axes = [tp] reduction = avg : tensor<8x16xf32>
  %1 = cleave.all_reduce %0 on @world axes = [tp] reduction = avg : tensor<8x16xf32>
  // CHECK: cleave.all_gather %{{.*}} on @world axes = [tp] dim = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  %2 = cleave.all_gather %1 on @world axes = [tp] dim = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  // CHECK: cleave.reduce_scatter %{{.*}} on @world axes = [tp] dim = 1 : tensor<8x64xf32> -> tensor<8x16xf32>
  %3 = cleave.reduce_scatter %2 on @world axes = [tp] dim = 1 : tensor<8x64xf32> -> tensor<8x16xf32>
  // CHECK: cleave.reduce_scatter %{{.*}} on @world axes = [dp] dim = 0 reduction = min : tensor<8x16xf32> -> tensor<4x16xf32>
  %4 = cleave.reduce_scatter %3 on @world axes = [dp] dim = 0 reduction = min : tensor<8x16xf32> -> tensor<4x16xf32>
  // CHECK: cleave.all_to_all %{{.*}} on @world axes = [tp] split_dim = 1 concat_dim = 0 : tensor<8x16xf32> -> tensor<32x4xf32>
  %5 = cleave.all_to_all %3 on @world axes = [tp] split_dim = 1 concat_dim = 0 : tensor<8x16xf32> -> tensor<32x4xf32>
  // CHECK: cleave.collective_permute %{{.*}} on @world axes = [tp] pairs = [0 -> 1, 1 -> 2, 2 -> 3, 3 -> 0] : tensor<8x16xf32>
  %6 = cleave.collective_permute %3 on @world axes = [tp] pairs = [0 -> 1, 1 -> 2, 2 -> 3, 3 -> 0] : tensor<8x16xf32>
  // CHECK: cleave.send %{{.*}} on @cube axes = [pp] to 1 : tensor<8x16xf32>
  cleave.send %6 on @cube axes = [pp] to 1 : tensor<8x16xf32>
  // CHECK: cleave.recv on @cube axes = [pp] from 1 : tensor<8x16xf32>
  %7 = cleave.recv on @cube axes = [pp] from 1 : tensor<8x16xf32>
  return %7 : tensor<8x16xf32>
}

// Start/wait pairs of asynchronous communication.
// CHECK-LABEL: func.func @async_collectives
func.func @async_collectives(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x64xf32>, tensor<4x16xf32>, tensor<8x16xf32>) {
  // CHECK: %[[R0:.*]] = cleave.all_reduce_start %{{.*}} on @world axes = [dp] reduction = avg : tensor<8x16xf32> -> !cleave.request<tensor<8x16xf32>>
  %r0 = cleave.all_reduce_start %x on @world axes = [dp] reduction = avg : tensor<8x16xf32> -> !cleave.request<tensor<8x16xf32>>
  // CHECK: %[[R1:.*]] = cleave.all_gather_start %{{.*}} on @world axes = [tp] dim = 1 : tensor<8x16xf32> -> !cleave.request<tensor<8x64xf32>>
  %r1 = cleave.all_gather_start %x on @world axes = [tp] dim = 1 : tensor<8x16xf32> -> !cleave.request<tensor<8x64xf32>>
  // CHECK: %[[R2:.*]] = cleave.reduce_scatter_start %{{.*}} on @world axes = [dp] dim = 0 : tensor<8x16xf32> -> !cleave.request<tensor<4x16xf32>>
  %r2 = cleave.reduce_scatter_start %x on @world axes = [dp] dim = 0 : tensor<8x16xf32> -> !cleave.request<tensor<4x16xf32>>
  // CHECK: %[[R3:.*]] = cleave.send_start %{{.*}} on @cube axes = [pp] to 1 : tensor<8x16xf32> -> !cleave.request
  %r3 = cleave.send_start %x on @cube axes = [pp] to 1 : tensor<8x16xf32> -> !cleave.request
  // CHECK: %[[R4:.*]] = cleave.recv_start on @cube axes = [pp] from 1 : !cleave.request<tensor<8x16xf32>>
  %r4 = cleave.recv_start on @cube axes = [pp] from 1 : !cleave.request<tensor<8x16xf32>>
  // CHECK: cleave.wait %[[R0]] : !cleave.request<tensor<8x16xf32>> -> tensor<8x16xf32>
  %0 = cleave.wait %r0 : !cleave.request<tensor<8x16xf32>> -> tensor<8x16xf32>
  // CHECK: cleave.wait %[[R1]] : !cleave.request<tensor<8x64xf32>> -> tensor<8x64xf32>
  %1 = cleave.wait %r1 : !cleave.request<tensor<8x64xf32>> -> tensor<8x64xf32>
  // CHECK: cleave.wait %[[R2]] : !cleave.request<tensor<4x16xf32>> -> tensor<4x16xf32>
  %2 = cleave.wait %r2 : !cleave.request<tensor<4x16xf32>> -> tensor<4x16xf32>
  // CHECK: cleave.wait %[[R3]] : !cleave.request{{$}}
  cleave.wait %r3 : !cleave.request
  // CHECK: cleave.wait %[[R4]] : !cleave.request<tensor<8x16xf32>> -> tensor<8x16xf32>
  %3 = cleave.wait %r4 : !cleave.request<tensor<8x16xf32>> -> tensor<8x16xf32>
  return %0, %1, %2, %3 : tensor<8x16xf32>, tensor<8x64xf32>, tensor<4x16xf32>, tensor<8x16xf32>
}

// Start/wait pairs of all_to_all and collective_permute.
// CHECK-LABEL: func.func @async_exchanges
func.func @async_exchanges(%x: tensor<8x16xf32>) -> (tensor<32x4xf32>, tensor<8x16xf32>) {
  // CHECK: %[[A:.*]] = cleave.all_to_all_start %{{.*}} on @world axes = [tp] split_dim = 1 concat_dim = 0 : tensor<8x16xf32> -> !cleave.request<tensor<32x4xf32>>
  %a = cleave.all_to_all_start %x on @world axes = [tp] split_dim = 1 concat_dim = 0 : tensor<8x16xf32> -> !cleave.request<tensor<32x4xf32>>
  // CHECK: %[[P:.*]] = cleave.collective_permute_start %{{.*}} on @world axes = [tp] pairs = [0 -> 1, 1 -> 2, 2 -> 3, 3 -> 0] : tensor<8x16xf32> -> !cleave.request<tensor<8x16xf32>>
  %p = cleave.collective_permute_start %x on @world axes = [tp] pairs = [0 -> 1, 1 -> 2, 2 -> 3, 3 -> 0] : tensor<8x16xf32> -> !cleave.request<tensor<8x16xf32>>
  // CHECK: cleave.wait %[[P]] : !cleave.request<tensor<8x16xf32>> -> tensor<8x16xf32>
  %1 = cleave.wait %p : !cleave.request<tensor<8x16xf32>> -> tensor<8x16xf32>
  // CHECK: cleave.wait %[[A]] : !cleave.request<tensor<32x4xf32>> -> tensor<32x4xf32>
  %0 = cleave.wait %a : !cleave.request<tensor<32x4xf32>> -> tensor<32x4xf32>
  return %0, %1 : tensor<32x4xf32>, tensor<8x16xf32>
}

// Per-device views and the per-device forms of position-dependent ops.
// CHECK-LABEL: func.func @per_device
func.func @per_device(%x: tensor<8x16xf32>, %table: tensor<5x8xf32>, %ids: tensor<2x4xi32>, %seed: tensor<i64>) -> (tensor<8x4xf32>, tensor<2x4x8xf32>, tensor<5x8xf32>, tensor<8x4xf32>) {
  // CHECK: cleave.axis_index on @world axes = [dp, tp] : tensor<i64>
  %i = cleave.axis_index on @world axes = [dp, tp] : tensor<i64>
  // CHECK: cleave.shard %{{.*}} on @world axes = [tp] dim = 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  %0 = cleave.shard %x on @world axes = [tp] dim = 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  // CHECK: cleave.embedding %{{.*}}, %{{.*}}, %{{.*}} : (tensor<5x8xf32>, tensor<2x4xi32>, tensor<i64>) -> tensor<2x4x8xf32>
  %1 = cleave.embedding %table, %ids, %i : (tensor<5x8xf32>, tensor<2x4xi32>, tensor<i64>) -> tensor<2x4x8xf32>
  // CHECK: cleave.embedding_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4xi32>, tensor<2x4x8xf32>, tensor<i64>) -> tensor<5x8xf32>
  %2 = cleave.embedding_grad %ids, %1, %i : (tensor<2x4xi32>, tensor<2x4x8xf32>, tensor<i64>) -> tensor<5x8xf32>
  // CHECK: cleave.dropout %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {global_shape = array<i64: 8, 16>, rate = 1.000000e-01 : f64, stream = 1 : i64}
  %3 = cleave.dropout %0, %seed, %i, %i {global_shape = array<i64: 8, 16>, rate = 0.1 : f64, stream = 1 : i64} : (tensor<8x4xf32>, tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<8x4xf32>
  return %0, %1, %2, %3 : tensor<8x4xf32>, tensor<2x4x8xf32>, tensor<5x8xf32>, tensor<8x4xf32>
}

// Plan annotations (docs/plans.md).
// CHECK-LABEL: module @planned
// CHECK-SAME: cleave.pipeline = {axis = "pp", entries = {eval_step = [@e0, @e1]}, stages = [@s0, @s1]}
// CHECK-SAME: cleave.plan = {micro_batch = 1 : i64, num_micro_batches = 8 : i64, recompute = "selective", recompute_per_stage = ["selective", "none"], schedule = "1f1b", virtual_stages = 1 : i64, zero = 1 : i64}
// CHECK: cleave.exp %{{.*}} {cleave.stage = 1 : i64}
module @planned attributes {cleave.plan = {zero = 1, recompute = "selective", recompute_per_stage = ["selective", "none"], micro_batch = 1, num_micro_batches = 8, schedule = "1f1b", virtual_stages = 1}, cleave.pipeline = {axis = "pp", stages = [@s0, @s1], entries = {eval_step = [@e0, @e1]}}, cleave.groups = [["dp"], ["dp", "tp"]]} {
  func.func @s0(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = cleave.exp %x {cleave.stage = 1} : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func @s1(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// Mixture of experts: routing, dispatch to expert buffers, combine, the
// balance loss and the gradient companions.
// CHECK-LABEL: func.func @moe
func.func @moe(%logits: tensor<2x8x4xf32>, %x: tensor<2x8x16xf32>, %out: tensor<4x2x4x16xf32>, %dloss: tensor<f32>) {
  // CHECK: cleave.moe_router %{{.*}} {capacity_factor = 1.000000e+00 : f64, normalize, top_k = 2 : i64} : (tensor<2x8x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>)
  %0:2 = cleave.moe_router %logits {top_k = 2 : i64, normalize, capacity_factor = 1.0 : f64} : (tensor<2x8x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>)
  // CHECK: cleave.moe_router %{{.*}} {sigmoid, top_k = 3 : i64} : (tensor<2x8x4xf32>) -> (tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>)
  %1:2 = cleave.moe_router %logits {top_k = 3 : i64, sigmoid} : (tensor<2x8x4xf32>) -> (tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>)
  // CHECK: cleave.moe_router_grad %{{.*}}, %{{.*}}, %{{.*}} {normalize, top_k = 2 : i64} : (tensor<2x8x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4xf32>
  %2 = cleave.moe_router_grad %logits, %0#1, %0#0 {top_k = 2 : i64, normalize} : (tensor<2x8x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4xf32>
  // CHECK: cleave.moe_dispatch %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<2x8x4x4xf32>) -> tensor<4x2x4x16xf32>
  %3 = cleave.moe_dispatch %x, %0#1 : (tensor<2x8x16xf32>, tensor<2x8x4x4xf32>) -> tensor<4x2x4x16xf32>
  // CHECK: cleave.moe_combine %{{.*}}, %{{.*}} : (tensor<2x8x4x4xf32>, tensor<4x2x4x16xf32>) -> tensor<2x8x16xf32>
  %4 = cleave.moe_combine %0#0, %out : (tensor<2x8x4x4xf32>, tensor<4x2x4x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: cleave.moe_weights_grad %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<4x2x4x16xf32>) -> tensor<2x8x4x4xf32>
  %5 = cleave.moe_weights_grad %x, %out : (tensor<2x8x16xf32>, tensor<4x2x4x16xf32>) -> tensor<2x8x4x4xf32>
  // CHECK: cleave.moe_aux_loss %{{.*}} {top_k = 2 : i64} : (tensor<2x8x4xf32>) -> tensor<f32>
  %6 = cleave.moe_aux_loss %logits {top_k = 2 : i64} : (tensor<2x8x4xf32>) -> tensor<f32>
  // CHECK: cleave.moe_aux_loss_grad %{{.*}}, %{{.*}} {sigmoid, top_k = 2 : i64} : (tensor<2x8x4xf32>, tensor<f32>) -> tensor<2x8x4xf32>
  %7 = cleave.moe_aux_loss_grad %logits, %dloss {top_k = 2 : i64, sigmoid} : (tensor<2x8x4xf32>, tensor<f32>) -> tensor<2x8x4xf32>
  return
}
