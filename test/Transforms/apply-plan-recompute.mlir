// cleave-apply-plan records one recomputation kind per pipeline rank (the
// planner's recompute_per_stage) for cleave-remat, and rejects lists that do
// not fit the plan.
// RUN: cleave-opt %s --cleave-pipeline-stages=stages=2 --cleave-autodiff=optimizer=sgd \
// RUN:   --cleave-apply-plan="pp=2 micro=2 recompute=selective/full" | FileCheck %s
// RUN: cleave-opt %s --cleave-apply-plan="recompute=selective" | FileCheck %s --check-prefix=ONE
// RUN: not cleave-opt %s --cleave-apply-plan="pp=2 micro=2 recompute=full/none/full" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=COUNT
// RUN: not cleave-opt %s --cleave-apply-plan="pp=2 micro=2 recompute=full/some" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=KIND

// CHECK: cleave.plan = {{{.*}}recompute = "full", recompute_per_stage = ["selective", "full"]
// ONE: cleave.plan = {{{.*}}recompute = "selective"
// ONE-NOT: recompute_per_stage
// COUNT: error: cleave-apply-plan: recompute=full/none/full gives 3 pipeline ranks, the plan has pp = 2
// KIND: error: cleave-apply-plan: unknown recompute 'some' (expected none, selective or full, or one of them per pipeline rank: full/none)

func.func @forward(%x: tensor<8x16xf32> {cleave.input = "features"},
                   %y: tensor<8xi32> {cleave.input = "labels"},
                   %w0: tensor<16x16xf32> {cleave.param = "l.0.weight"},
                   %w1: tensor<10x16xf32> {cleave.param = "l.1.weight"}) -> tensor<f32> {
  %0 = cleave.matmul %x, %w0 {transpose_rhs} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %1 = cleave.gelu %0 : tensor<8x16xf32>
  %2 = cleave.matmul %1, %w1 {transpose_rhs} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
  %3 = cleave.cross_entropy %2, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %3 : tensor<f32>
}
