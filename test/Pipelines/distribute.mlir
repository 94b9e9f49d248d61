// RUN: cleave-opt %s --cleave-distribute="plan=dp=2 ranks=2" | FileCheck %s --check-prefix=DP
// RUN: cleave-opt %s --cleave-distribute="plan=tp=2,dp=2 ranks=4 optimizer=sgd" | FileCheck %s --check-prefix=DPTP
// RUN: cleave-opt %s --cleave-distribute="plan=dp=2 ranks=2" --cleave-lower-to-cpu | FileCheck %s --check-prefix=CPU
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

// SPELL: cleave-distribute plan: cannot read 'fsdp' (expected dp=N, tp=N, ep=N, cp=N, cp-layout=balanced|contiguous, sp, zero=K, pp=N, micro=N, schedule=gpipe|1f1b|interleaved|zb-h1, virtual=N, recompute=none|selective|full[/...], layers=N/N/...)
// AUTO: cleave-distribute plan: 'auto' needs the planner: run cleave-auto-shard first, then cleave-distribute without a plan

func.func @forward(%x: tensor<8x16xf32> {cleave.input = "x"},
                   %y: tensor<8xi32> {cleave.input = "y"},
                   %w: tensor<8x16xf32> {cleave.param = "w"}) -> tensor<f32> {
  %z = cleave.matmul %x, %w {transpose_rhs} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x8xf32>
  %l = cleave.cross_entropy %z, %y : (tensor<8x8xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
