// RUN: not cleave-opt %s --split-input-file --cleave-auto-shard="cluster=local-cpu gpus=2" --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s
// RUN: not cleave-opt %s --split-input-file --cleave-auto-shard="cluster=tpu-v5" --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=CLUSTER
// RUN: not cleave-opt %s --split-input-file --cleave-auto-shard="cluster=local-cpu global-batch=8" --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=BATCH

// CLUSTER: error: cleave-auto-shard: cluster: unknown cluster preset 'tpu-v5' (known: dgx-a100-40gb, dgx-a100-80gb, dgx-h100, dgx-h200), local-cpu, or a JSON file path
// BATCH: error: cleave-auto-shard: global batch: 8 differs from the module's batch of 4 (input 'x'); the module is one global step

// Two 16 GiB weights (with gradients and Adam state) cannot fit two
// processes of 12 GiB however they are split: the error names the
// constraint and by how much it fails.
// CHECK: error: cleave-auto-shard: no plan fits
// CHECK-NEXT: memory: the plan needing the least memory (pp1 {{.*}}) needs {{[0-9.]+}} GB per GPU on stage 0 ({{.*}}), {{[0-9.]+}} GB ({{[0-9.]+}}%) over the 12.9 GB usable of 12.9 GB (0% headroom)
func.func @forward(%x: tensor<4x65536xf32> {cleave.input = "x"},
                   %y: tensor<4xi32> {cleave.input = "y"},
                   %w1: tensor<65536x65536xf32> {cleave.param = "w1"},
                   %w2: tensor<65536x65536xf32> {cleave.param = "w2"},
                   %w3: tensor<64x65536xf32> {cleave.param = "w3"}) -> tensor<f32> {
  %h = cleave.matmul %x, %w1 {transpose_rhs} : (tensor<4x65536xf32>, tensor<65536x65536xf32>) -> tensor<4x65536xf32>
  %o = cleave.matmul %h, %w2 {transpose_rhs} : (tensor<4x65536xf32>, tensor<65536x65536xf32>) -> tensor<4x65536xf32>
  %l = cleave.matmul %o, %w3 {transpose_rhs} : (tensor<4x65536xf32>, tensor<64x65536xf32>) -> tensor<4x64xf32>
  %loss = cleave.cross_entropy %l, %y : (tensor<4x64xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// CHECK: error: cleave-auto-shard: function @forward has no loss to plan for: expected a result named "loss" (cleave.output) or exactly one scalar float result
func.func @forward(%x: tensor<4x8xf32> {cleave.input = "x"}) -> tensor<4x8xf32> {
  return %x : tensor<4x8xf32>
}

// -----

// CHECK: error: cleave-auto-shard: the module already carries a plan (cleave.plan); cleave-auto-shard plans modules without one
module attributes {cleave.plan = {zero = 0 : i64}} {
  func.func @forward(%x: tensor<4x8xf32> {cleave.input = "x"},
                     %y: tensor<4xi32> {cleave.input = "y"}) -> tensor<f32> {
    %loss = cleave.cross_entropy %x, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
