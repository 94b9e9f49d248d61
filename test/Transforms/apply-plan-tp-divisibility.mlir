// RUN: not cleave-opt %s --cleave-autodiff --cleave-apply-plan="tp=3" 2>&1 | FileCheck %s

// A weight that tp does not divide stays whole (a tied head over a
// vocabulary of 65); a tp that divides no weight at all is an error naming
// the first one.

// CHECK: error: tensor parallelism over 3 devices splits no matmul weight: parameter 'fc.weight' is 64 x 16, and tp must divide the dimension it splits
func.func @forward(%x: tensor<4x16xf32> {cleave.input = "x"},
                   %y: tensor<4xi32> {cleave.input = "y"},
                   %w1: tensor<64x16xf32> {cleave.param = "fc.weight"},
                   %w2: tensor<16x64xf32> {cleave.param = "proj.weight"}) -> tensor<f32> {
  %h = cleave.matmul %x, %w1 {transpose_rhs} : (tensor<4x16xf32>, tensor<64x16xf32>) -> tensor<4x64xf32>
  %a = cleave.relu %h : tensor<4x64xf32>
  %o = cleave.matmul %a, %w2 {transpose_rhs} : (tensor<4x64xf32>, tensor<16x64xf32>) -> tensor<4x16xf32>
  %l = cleave.cross_entropy %o, %y : (tensor<4x16xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
