// Plans cleave-remat cannot honour: errors naming the option and the reason,
// before anything runs.
// RUN: cleave-opt %s -split-input-file --cleave-remat -verify-diagnostics
// RUN: not cleave-opt %s -split-input-file --cleave-remat=mode=partial 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not cleave-run --model tiny-mlp --plan recompute=full --steps 1 2>&1 | FileCheck %s --check-prefix=CLI

// MODE: error: cleave-remat: unknown mode 'partial' (expected none, selective or full)
// CLI: error: loc("tiny-mlp"): cleave-remat: recompute=full recomputes layers, but no parameter of @train_step names a layer
// CLI: cleave-run: error: partitioning the training step failed

// Recomputation on a program without layers (no numbered parameter names).
module attributes {cleave.plan = {recompute = "full"}} {
  // expected-error @below {{cleave-remat: recompute=full recomputes layers, but no parameter of @train_step names a layer (a numbered component, like 'h.3.' or 'layers.3.')}}
  func.func @train_step(%x: tensor<4x8xf32> {cleave.input = "x"},
                        %w: tensor<8x8xf32> {cleave.param = "fc.weight"},
                        %lr: tensor<f32> {cleave.input = "lr"})
      -> (tensor<8x8xf32> {cleave.output = "fc.weight"}, tensor<f32> {cleave.output = "loss"}) {
    %y = cleave.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %l = cleave.reduce_sum %y dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %g = cleave.matmul %x, %y {transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
    %w2 = cleave.sgd %w, %g, %lr {weight_decay = 0.0 : f64} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<f32>) -> tensor<8x8xf32>
    return %w2, %l : tensor<8x8xf32>, tensor<f32>
  }
}

// -----

// Selective recomputation needs an attention core.
module attributes {cleave.plan = {recompute = "selective"}} {
  // expected-error @below {{cleave-remat: recompute=selective recomputes the attention core, but the layers of @train_step have no cleave.attention}}
  func.func @train_step(%x: tensor<4x8xf32> {cleave.input = "x"},
                        %w: tensor<8x8xf32> {cleave.param = "h.0.fc.weight"},
                        %lr: tensor<f32> {cleave.input = "lr"})
      -> (tensor<8x8xf32> {cleave.output = "h.0.fc.weight"}, tensor<f32> {cleave.output = "loss"}) {
    %y = cleave.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %l = cleave.reduce_sum %y dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %g = cleave.matmul %x, %y {transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
    %w2 = cleave.sgd %w, %g, %lr {weight_decay = 0.0 : f64} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<f32>) -> tensor<8x8xf32>
    return %w2, %l : tensor<8x8xf32>, tensor<f32>
  }
}

// -----

// A kind per pipeline rank needs the ops' stages.
module attributes {cleave.plan = {recompute = "full", recompute_per_stage = ["full", "none"]}} {
  func.func @train_step(%x: tensor<4x8xf32> {cleave.input = "x"},
                        %w: tensor<8x8xf32> {cleave.param = "h.0.fc.weight"},
                        %lr: tensor<f32> {cleave.input = "lr"})
      -> (tensor<8x8xf32> {cleave.output = "h.0.fc.weight"}, tensor<f32> {cleave.output = "loss"}) {
    // expected-error @below {{cleave-remat: cleave.plan recompute_per_stage gives 2 pipeline ranks, but layer 0 has no pipeline stage (cleave.stage)}}
    %y = cleave.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %l = cleave.reduce_sum %y dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %g = cleave.matmul %x, %y {transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
    %w2 = cleave.sgd %w, %g, %lr {weight_decay = 0.0 : f64} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<f32>) -> tensor<8x8xf32>
    return %w2, %l : tensor<8x8xf32>, tensor<f32>
  }
}

// -----

// A function without a loss is not a training step.
module attributes {cleave.plan = {recompute = "full"}} {
  // expected-error @below {{cleave-remat: @train_step has no result named "loss" (cleave.output); it is not a training step}}
  func.func @train_step(%x: tensor<4x8xf32> {cleave.input = "x"})
      -> (tensor<4x8xf32> {cleave.output = "y"}) {
    return %x : tensor<4x8xf32>
  }
}
