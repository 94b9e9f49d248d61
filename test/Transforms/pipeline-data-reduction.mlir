// RUN: split-file %s %t
// RUN: cleave-opt %t/micro.mlir --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce \
// RUN:   --cleave-apply-plan="dp=2 micro=2" --cleave-propagate-sharding --cleave-partition --cleave-pipeline \
// RUN:   | FileCheck %s --check-prefix=MICRO --enable-var-scope
// RUN: cleave-opt %t/stages.mlir --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce \
// RUN:   --cleave-apply-plan="pp=2 micro=2" --cleave-propagate-sharding --cleave-partition --cleave-pipeline \
// RUN:   | FileCheck %s --check-prefix=STAGES --enable-var-scope
// RUN: cleave-opt %t/cp.mlir --cleave-autodiff --symbol-privatize=exclude=train_step --symbol-dce \
// RUN:   --cleave-apply-plan="cp=2 micro=2 cp-layout=contiguous" --cleave-propagate-sharding --cleave-partition --cleave-pipeline \
// RUN:   | FileCheck %s --check-prefix=CP --enable-var-scope

// A loss normalized by the whole batch's count of kept labels
// (cross_entropy with ignore_index, as the PyTorch front-end exports
// nanoGPT's loss): the count is a sum over micro-batches of their labels
// alone, so it runs before the micro-batches, on each micro-batch's slice of
// the labels in turn, and the passes read it (gradient accumulation and
// pipelines keep the whole batch's mean).

// MICRO-LABEL: func.func @train_step_s0(
// MICRO-SAME: %[[IDS:[^:]*]]: tensor<4xi32> {cleave.input = "ids"
// MICRO-SAME: %[[Y:[^:]*]]: tensor<4xi32> {cleave.input = "labels"
// MICRO: %[[S0:.*]] = cleave.slice %[[Y]] offsets = [0] sizes = [2]
// MICRO: %[[B0:.*]] = bufferization.alloc_tensor() copy(%[[S0]])
// MICRO: %[[C0:.*]] = cleave.label_count %[[B0]] {ignore_index = -1 : i64}
// MICRO: %[[S1:.*]] = cleave.slice %[[Y]] offsets = [2] sizes = [2]
// MICRO: %[[B1:.*]] = bufferization.alloc_tensor() copy(%[[S1]])
// MICRO: %[[C1:.*]] = cleave.label_count %[[B1]] {ignore_index = -1 : i64}
// MICRO: %[[SUM:.*]] = cleave.add %[[C0]], %[[C1]] : tensor<f32>
// MICRO: %[[COUNT:.*]] = cleave.all_reduce %[[SUM]] on @mesh axes = [dp]
// MICRO: call @train_step_f0({{.*}}, %[[B0]], %[[COUNT]])
// MICRO: call @train_step_f0({{.*}}, %[[B1]], %[[COUNT]])
// MICRO-NOT: axes = [{{.*}}mb

// With stages, the count runs on the stage of the loss (rank 1), which the
// labels are given to.
// STAGES-LABEL: func.func @train_step_s0(
// STAGES-NOT: label_count
// STAGES-LABEL: func.func @train_step_s1(
// STAGES-SAME: %[[Y:[^:]*]]: tensor<8xi32> {cleave.input = "labels"
// STAGES: %[[S0:.*]] = cleave.slice %[[Y]] offsets = [0] sizes = [4]
// STAGES: cleave.label_count
// STAGES: %[[S1:.*]] = cleave.slice %[[Y]] offsets = [4] sizes = [4]
// STAGES: cleave.label_count
// STAGES: cleave.add
// STAGES: call @train_step_f1(

// Under context parallelism the flattened [batch x sequence] labels are
// gathered over cp for the count: a collective over another axis than the
// micro-batches' is part of the data-only count, run on each micro-batch's
// labels before the micro-batches (the cp peers do the same), not taken for
// a sum over micro-batches of the integer labels.
// CP-LABEL: func.func @train_step_s0(
// CP-SAME: %{{[^:]*}}: tensor<4x4xi32> {cleave.input = "ids"
// CP-SAME: %[[Y:[^:]*]]: tensor<4x4xi32> {cleave.input = "labels"
// CP: %[[G0:.*]] = cleave.all_gather %{{.*}} on @mesh axes = [cp] dim = 1 : tensor<2x4xi32> -> tensor<2x8xi32>
// CP: %[[C0:.*]] = cleave.label_count
// CP: %[[G1:.*]] = cleave.all_gather %{{.*}} on @mesh axes = [cp] dim = 1 : tensor<2x4xi32> -> tensor<2x8xi32>
// CP: %[[C1:.*]] = cleave.label_count
// CP: %[[COUNT:.*]] = cleave.add %[[C0]], %[[C1]] : tensor<f32>
// CP: call @train_step_f0({{.*}}, %[[COUNT]])
// CP-NOT: cleave.add {{.*}} : tensor<{{.*}}xi32>

//--- cp.mlir
func.func @forward(%ids: tensor<4x8xi32> {cleave.input = "ids"},
                   %y: tensor<4x8xi32> {cleave.input = "labels"},
                   %e: tensor<10x16xf32> {cleave.param = "wte"},
                   %w: tensor<10x16xf32> {cleave.param = "head"}) -> tensor<f32> {
  %0 = cleave.embedding %e, %ids : (tensor<10x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %1 = cleave.matmul %0, %w {transpose_rhs} : (tensor<4x8x16xf32>, tensor<10x16xf32>) -> tensor<4x8x10xf32>
  %2 = cleave.reshape %1 : tensor<4x8x10xf32> to tensor<32x10xf32>
  %3 = cleave.reshape %y : tensor<4x8xi32> to tensor<32xi32>
  %4 = cleave.cross_entropy %2, %3 {ignore_index = -1 : i64} : (tensor<32x10xf32>, tensor<32xi32>) -> tensor<f32>
  return %4 : tensor<f32>
}

//--- micro.mlir
func.func @forward(%ids: tensor<8xi32> {cleave.input = "ids"},
                   %y: tensor<8xi32> {cleave.input = "labels"},
                   %e: tensor<10x16xf32> {cleave.param = "wte"},
                   %w: tensor<10x16xf32> {cleave.param = "head"}) -> tensor<f32> {
  %0 = cleave.embedding %e, %ids : (tensor<10x16xf32>, tensor<8xi32>) -> tensor<8x16xf32>
  %1 = cleave.matmul %0, %w {transpose_rhs} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
  %2 = cleave.cross_entropy %1, %y {ignore_index = -1 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %2 : tensor<f32>
}

//--- stages.mlir
func.func @forward(%ids: tensor<8xi32> {cleave.input = "ids"},
                   %y: tensor<8xi32> {cleave.input = "labels"},
                   %e: tensor<10x16xf32> {cleave.param = "wte"},
                   %w: tensor<10x16xf32> {cleave.param = "head"}) -> tensor<f32> {
  %0 = cleave.embedding %e, %ids {cleave.stage = 0 : i64} : (tensor<10x16xf32>, tensor<8xi32>) -> tensor<8x16xf32>
  %1 = cleave.matmul %0, %w {transpose_rhs, cleave.stage = 1 : i64} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
  %2 = cleave.cross_entropy %1, %y {ignore_index = -1 : i64, cleave.stage = 1 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %2 : tensor<f32>
}
