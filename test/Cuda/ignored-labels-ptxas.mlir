// Cross-entropy with ignored labels (its label count and the gradient's
// mask) and an embedding with a padding row, trained with AdamW, through the
// whole CUDA pipeline: every kernel lowers and ptxas accepts it for sm_90.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-opt %s --cleave-autodiff | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/ce.json" -o /dev/null
// RUN: %python %S/Inputs/check_ptxas_report.py %t/ce.json --label ignored-labels --max-registers 128 | FileCheck %s

// CHECK: ignored-labels: {{[0-9]+}} kernels, at most {{[0-9]+}} registers ({{.*}}), 0 bytes spilled
func.func @forward(%t: tensor<64x32xf32> {cleave.param = "t"},
                   %w: tensor<64x32xf32> {cleave.param = "w"},
                   %ids: tensor<4x16xi32> {cleave.input = "ids"},
                   %y: tensor<4x16xi32> {cleave.input = "y"}) -> tensor<f32> {
  %0 = cleave.embedding %t, %ids {padding_idx = 0 : i64} : (tensor<64x32xf32>, tensor<4x16xi32>) -> tensor<4x16x32xf32>
  %1 = cleave.matmul %0, %w {transpose_rhs} : (tensor<4x16x32xf32>, tensor<64x32xf32>) -> tensor<4x16x64xf32>
  %2 = cleave.cross_entropy %1, %y {ignore_index = -1 : i64} : (tensor<4x16x64xf32>, tensor<4x16xi32>) -> tensor<f32>
  %n = cleave.label_count %y {ignore_index = -1 : i64} : (tensor<4x16xi32>) -> tensor<f32>
  %3 = cleave.mul %2, %n : tensor<f32>
  return %3 : tensor<f32>
}
