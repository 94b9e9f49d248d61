// RUN: not cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="ep=3" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not cleave-opt %s --cleave-autodiff --cse --cleave-apply-plan="ep=2 pp=2 micro=2" 2>&1 | FileCheck %s --check-prefix=MICRO
// RUN: not cleave-run --model tiny-moe -n 4 --plan ep=2,pp=2,micro=8 --steps 1 2>&1 | FileCheck %s --check-prefix=RUN-MICRO
// RUN: not cleave-opt %s --cleave-apply-plan="ep=0" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not cleave-opt %s -split-input-file --cleave-apply-plan="ep=2" 2>&1 | FileCheck %s --check-prefix=DENSE
// RUN: not cleave-run --model tiny-llama --plan ep=2 -n 2 --steps 1 2>&1 | FileCheck %s --check-prefix=RUN-DENSE
// RUN: not cleave-run --model tiny-llama --capacity-factor 0.5 --steps 1 2>&1 | FileCheck %s --check-prefix=CAPACITY
// RUN: not cleave-run --model tiny-moe --capacity-factor -1 --steps 1 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// Expert-parallel plans that do not fit the program: errors name the
// weight, the experts and ep (or the batch that dp x micro x ep must
// divide), before any step runs.

// DIVIDE: error: expert parallelism (ep=3) needs ep to divide the experts, and parameter 'w1' has 4 experts (its dimension 0)
// MICRO: error: data parallelism over 1 devices, expert parallelism over 2 and 2 micro-batches needs the batch of input 'x' (6) to be divisible by 4
// RUN-MICRO: error: loc("tiny-moe.tokens"): data parallelism over 1 devices, expert parallelism over 2 and 8 micro-batches needs the batch of input 'tokens' (4) to be divisible by 16
// RUN-MICRO-NEXT: cleave-run: error: partitioning the training step failed
// RANGE: error: cleave-apply-plan: dp, tp, ep, cp, pp and micro must be >= 1 and zero in 0..3
// DENSE: error: expert parallelism (ep=2) needs expert weights, and 'dense' has none (no mixture-of-experts layer
// RUN-DENSE: error: loc("tiny-llama"): expert parallelism (ep=2) needs expert weights, and 'train_step' has none
// RUN-DENSE-NEXT: cleave-run: error: partitioning the training step failed
// CAPACITY: cleave-run: error: --capacity-factor: model 'tiny-llama' has no experts
// NEGATIVE: capacity_factor must be >= 0 (0: dropless), got -1

func.func @forward(
    %in: tensor<6x8x16xf32> {cleave.input = "x"},
    %r: tensor<4x16xf32> {cleave.param = "router"},
    %w1: tensor<4x16x32xf32> {cleave.param = "w1"},
    %w2: tensor<4x32x16xf32> {cleave.param = "w2"})
    -> tensor<f32> {
  %l = cleave.matmul %in, %r {transpose_rhs} : (tensor<6x8x16xf32>, tensor<4x16xf32>) -> tensor<6x8x4xf32>
  %c, %d = cleave.moe_router %l {top_k = 2 : i64, capacity_factor = 0.5 : f64} : (tensor<6x8x4xf32>) -> (tensor<6x8x4x2xf32>, tensor<6x8x4x2xf32>)
  %b = cleave.moe_dispatch %in, %d : (tensor<6x8x16xf32>, tensor<6x8x4x2xf32>) -> tensor<4x6x2x16xf32>
  %f = cleave.reshape %b : tensor<4x6x2x16xf32> to tensor<4x12x16xf32>
  %h = cleave.matmul %f, %w1 : (tensor<4x12x16xf32>, tensor<4x16x32xf32>) -> tensor<4x12x32xf32>
  %o = cleave.matmul %h, %w2 : (tensor<4x12x32xf32>, tensor<4x32x16xf32>) -> tensor<4x12x16xf32>
  %ob = cleave.reshape %o : tensor<4x12x16xf32> to tensor<4x6x2x16xf32>
  %y = cleave.moe_combine %c, %ob : (tensor<6x8x4x2xf32>, tensor<4x6x2x16xf32>) -> tensor<6x8x16xf32>
  %sum = cleave.reduce_sum %y dims = [0, 1, 2] : tensor<6x8x16xf32> -> tensor<f32>
  return %sum : tensor<f32>
}

// -----

// A dense program: no weight has an expert dimension (a 3-d weight that
// only an elementwise op uses is not one).
func.func @dense(%x: tensor<4x16xf32> {cleave.input = "x"},
                 %w: tensor<16x16xf32> {cleave.param = "w"},
                 %s: tensor<2x4x16xf32> {cleave.param = "s"}) -> (tensor<4x16xf32>, tensor<2x4x16xf32>) {
  %y = cleave.matmul %x, %w : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %t = cleave.mul %s, %s : tensor<2x4x16xf32>
  return %y, %t : tensor<4x16xf32>, tensor<2x4x16xf32>
}
