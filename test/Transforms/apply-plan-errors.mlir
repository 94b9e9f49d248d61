// RUN: cleave-opt %s -split-input-file --cleave-apply-plan="dp=3" -verify-diagnostics
// RUN: not cleave-opt %s --cleave-apply-plan="tp=1 sp=true" 2>&1 | FileCheck %s --check-prefix=SP
// RUN: not cleave-opt %s --cleave-apply-plan="tp=2 zero=1" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not cleave-opt %s --cleave-apply-plan="dp=2 zero=4" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not cleave-opt %s --cleave-apply-plan="dp=0" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not cleave-opt %s -split-input-file --cleave-apply-plan="cp=3" 2>&1 | FileCheck %s --check-prefix=CP
// RUN: not cleave-run --model tiny-mlp --plan dp=2,tp=2 -n 2 --steps 1 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not cleave-run --model tiny-mlp --plan dp=2,fsdp -n 4 --steps 1 2>&1 | FileCheck %s --check-prefix=SPEC

// Plans that do not fit the program or each other: errors that name the
// tensor or the options.

// SP: error: cleave-apply-plan: sequence parallelism (sp) needs tp > 1
// ZERO: error: cleave-apply-plan: ZeRO shards over the data-parallel axis; it needs dp > 1
// RANGE: error: cleave-apply-plan: dp, tp, ep, cp, pp and micro must be >= 1 and zero in 0..3
// CP: error: context parallelism (cp=3) needs the sequence (dimension 1) of input 'x' (16) to be divisible by 3

// A plan whose mesh does not have as many devices as there are ranks.
// WORLD: cleave-run: error: the plan's mesh (dp=2, tp=2) has 4 devices but there are 2 ranks (-n 2)
// SPEC: --plan: cannot read 'fsdp' (expected dp=N, tp=N, ep=N, cp=N, cp-layout=balanced|contiguous, sp, zero=K, pp=N, micro=N

// A batch that the data-parallel degree does not divide.
// expected-error @below {{data parallelism over 3 devices needs the batch of input 'x' (4) to be divisible by 3}}
func.func @train_step(%x: tensor<4x16xf32> {cleave.input = "x"},
                      %w: tensor<16x16xf32> {cleave.param = "w"}) -> tensor<4x16xf32> {
  %y = cleave.matmul %x, %w : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// A module that already has a mesh (and so, possibly, a plan).
// expected-error @below {{cleave-apply-plan: the module already has a cleave.mesh}}
module {
  cleave.mesh @m(dp = 3 : ib)
  func.func @train_step(%x: tensor<6x16xf32> {cleave.input = "x"}) -> tensor<6x16xf32> {
    return %x : tensor<6x16xf32>
  }
}
