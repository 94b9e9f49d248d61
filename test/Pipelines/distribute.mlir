// RUN: cleave-opt %s --cleave-distribute="plan=dp=2 ranks=2" | FileCheck %s --check-prefix=DP
// RUN: cleave-opt %s --cleave-distribute="plan=tp=2,dp=2 ranks=4 optimizer=sgd" | FileCheck %s --check-prefix=DPTP
// RUN: cleave-opt %s --cleave-distribute="plan=dp=2 ranks=2" --cleave-lower-to-cpu | FileCheck %s --check-prefix=CPU
// RUN: cleave-opt %s --cleave-distribute="plan=dp=2,micro=2 ranks=2" | FileCheck %s --check-prefix=PIPE
// RUN: not cleave-opt %s --cleave-distribute="plan=dp=2,fsdp" 2>&1 | FileCheck %s --check-prefix=SPELL
// RUN: not cleave-opt %s --cleave-distribute="plan=auto" 2>&1 | FileCheck %s --check-prefix=AUTO

// The front half as cleave-run runs it (lib/Pipelines, FrontHalf.h): the
// training step of @forward, the named plan, propagation, partitioning and
// the proof that the ranks' collectives match; the result has local shapes
// and lowers with the back half.

// Data parallel: the batch is split over the two ranks, the weight whole.
// DP: cleave.mesh @mesh(dp = 2 : ib)
// DP-LABEL: func.func @train_step
// DP-SAME: %{{[^:]+}}: tensor<4x16xf32> {cleave.input = "x"
// DP-SAME: %{{[^:]+}}: tensor<4xi32> {cleave.input = "y"
// DP-SAME: %{{[^:]+}}: tensor<8x16xf32> {{{[^}]*}}cleave.param = "w"
// DP: cleave.all_reduce

// With tensor parallelism as well (dp from the ranks tp leaves over: 2).
// DPTP: cleave.mesh @mesh(dp = 2 : ib, tp = 2 : nvlink)
// DPTP-LABEL: func.func @train_step
// DPTP-SAME: %{{[^:]+}}: tensor<4x16xf32> {cleave.input = "x"

// CPU: llvm.func @cleave_entry_train_step

// Micro-batches make a pipeline schedule of the training step alone (the
// forward function, whose loss would still be summed over micro-batches,
// is dropped), and the gradient and the loss are reduced over dp in one
// bucket after the last micro-batch (128 + 1 elements).
// PIPE: cleave.pipeline = {axis = "pp", stages = [@train_step_s0]}
// PIPE-NOT: func.func @forward
// PIPE-LABEL: func.func @train_step_s0
// PIPE: call @train_step_b0
// PIPE: call @train_step_b0
// PIPE: cleave.all_reduce %{{.*}} on @mesh axes = [dp]  : tensor<129xf32>
// PIPE-NOT: cleave.all_reduce

// SPELL: cleave-distribute plan: cannot read 'fsdp' (expected dp=N, tp=N, ep=N, cp=N, cp-layout=balanced|contiguous, sp, zero=K, pp=N, micro=N, schedule=gpipe|1f1b|interleaved|zb-h1, virtual=N, recompute=none|selective|full[/...], layers=N/N/...)
// AUTO: cleave-distribute plan: 'auto' needs the planner: run cleave-auto-shard first, then cleave-distribute without a plan

func.func @forward(%x: tensor<8x16xf32> {cleave.input = "x"},
                   %y: tensor<8xi32> {cleave.input = "y"},
                   %w: tensor<8x16xf32> {cleave.param = "w"}) -> tensor<f32> {
  %z = cleave.matmul %x, %w {transpose_rhs} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x8xf32>
  %l = cleave.cross_entropy %z, %y : (tensor<8x8xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
