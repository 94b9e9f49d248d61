// cleave-pipeline-stages: the even split, the planner's split
// (layers-per-stage) with empty first and last stages, and its errors.
// RUN: cleave-opt %s --cleave-pipeline-stages=stages=2 | FileCheck %s --check-prefix=EVEN
// RUN: cleave-opt %s --cleave-pipeline-stages="stages=2 layers-per-stage=1,2" | FileCheck %s --check-prefix=SPLIT
// RUN: cleave-opt %s --cleave-pipeline-stages="stages=3 layers-per-stage=0,3,0" | FileCheck %s --check-prefix=ENDS
// RUN: not cleave-opt %s --cleave-pipeline-stages="stages=3 layers-per-stage=1,2" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not cleave-opt %s --cleave-pipeline-stages="stages=3 layers-per-stage=2,0,1" 2>&1 | FileCheck %s --check-prefix=MIDDLE
// RUN: not cleave-opt %s --cleave-pipeline-stages="stages=2 layers-per-stage=1,1" 2>&1 | FileCheck %s --check-prefix=SUM

// Three layers (l.0 to l.2), an embedding before them and a norm, a head and
// a loss after them.
func.func @forward(%tokens: tensor<8xi32> {cleave.input = "tokens"},
                   %labels: tensor<8xi32> {cleave.input = "labels"},
                   %wte: tensor<10x16xf32> {cleave.param = "wte.weight"},
                   %w0: tensor<16x16xf32> {cleave.param = "l.0.weight"},
                   %w1: tensor<16x16xf32> {cleave.param = "l.1.weight"},
                   %w2: tensor<16x16xf32> {cleave.param = "l.2.weight"},
                   %head: tensor<10x16xf32> {cleave.param = "head.weight"}) -> tensor<f32> {
  %x = cleave.embedding %wte, %tokens : (tensor<10x16xf32>, tensor<8xi32>) -> tensor<8x16xf32>
  %0 = cleave.matmul %x, %w0 {transpose_rhs} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %1 = cleave.matmul %0, %w1 {transpose_rhs} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %2 = cleave.matmul %1, %w2 {transpose_rhs} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %3 = cleave.gelu %2 : tensor<8x16xf32>
  %4 = cleave.matmul %3, %head {transpose_rhs} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
  %5 = cleave.cross_entropy %4, %labels : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %5 : tensor<f32>
}

// The even split: the first stage gets the extra layer.
// EVEN-LABEL: func.func @forward
// EVEN: cleave.embedding {{.*}}cleave.stage = 0 : i64
// EVEN: cleave.matmul {{.*}}cleave.stage = 0 : i64
// EVEN: cleave.matmul {{.*}}cleave.stage = 0 : i64
// EVEN: cleave.matmul {{.*}}cleave.stage = 1 : i64
// EVEN: cleave.cross_entropy {{.*}}cleave.stage = 1 : i64

// SPLIT-LABEL: func.func @forward
// SPLIT: cleave.embedding {{.*}}cleave.stage = 0 : i64
// SPLIT: cleave.matmul {{.*}}cleave.stage = 0 : i64
// SPLIT: cleave.matmul {{.*}}cleave.stage = 1 : i64
// SPLIT: cleave.matmul {{.*}}cleave.stage = 1 : i64
// SPLIT: cleave.gelu {{.*}}cleave.stage = 1 : i64

// The first stage holds only the embedding; the last what follows the last
// layer's last use of its parameters.
// ENDS-LABEL: func.func @forward
// ENDS: cleave.embedding {{.*}}cleave.stage = 0 : i64
// ENDS: cleave.matmul {{.*}}cleave.stage = 1 : i64
// ENDS: cleave.matmul {{.*}}cleave.stage = 1 : i64
// ENDS: cleave.matmul {{.*}}cleave.stage = 1 : i64
// ENDS: cleave.gelu {{.*}}cleave.stage = 2 : i64
// ENDS: cleave.matmul {{.*}}cleave.stage = 2 : i64
// ENDS: cleave.cross_entropy {{.*}}cleave.stage = 2 : i64

// COUNT: error: cleave-pipeline-stages: layers-per-stage has 2 entries for 3 stages
// MIDDLE: error: cleave-pipeline-stages: layers-per-stage gives stage 1 0 layers; every stage but the first and the last needs at least one
// SUM: error: cleave-pipeline-stages: layers-per-stage holds 2 layers, the parameters name 3 (numbered components like 'h.3.')
