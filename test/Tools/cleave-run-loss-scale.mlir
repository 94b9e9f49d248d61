// Dynamic loss scaling for f16 (docs/cleave-run.md), as PyTorch's
// GradScaler: the step differentiates loss * scale and unscales the
// gradients in f32; a step whose gradients overflow (the squared global norm
// is inf or NaN on some rank) is skipped by every rank and halves the scale;
// --loss-scale-growth-interval good steps in a row double it.
// RUN: rm -rf %t && mkdir -p %t

// Options that make no sense are errors before anything is compiled.
// RUN: not cleave-run --model tiny-gpt --loss-scale static 2>&1 | FileCheck %s --check-prefix=KIND
// KIND: cleave-run: error: --loss-scale static: expected dynamic or none
// RUN: not cleave-run --model tiny-gpt --loss-scale-init 0 2>&1 | FileCheck %s --check-prefix=INIT
// INIT: cleave-run: error: --loss-scale-init 0: expected a finite scale in (0, 1e30]
// RUN: not cleave-run --model tiny-gpt --loss-scale-growth-interval 0 2>&1 | FileCheck %s --check-prefix=INTERVAL
// INTERVAL: cleave-run: error: --loss-scale-growth-interval 0: expected a number of steps >= 1
// RUN: not cleave-run --model tiny-gpt --loss-scale-growth 1 2>&1 | FileCheck %s --check-prefix=GROWTH
// GROWTH: cleave-run: error: --loss-scale-growth 1: expected a finite factor > 1
// RUN: not cleave-run --model tiny-gpt --loss-scale-backoff 1 2>&1 | FileCheck %s --check-prefix=BACKOFF
// BACKOFF: cleave-run: error: --loss-scale-backoff 1: expected a factor in (0, 1)

// Forced to overflow (the first scale is far above f16's range), on one
// process and on 4 ranks, with tp shards and with pipeline stages: every
// rank skips the same steps, the scale follows the rule, and it both
// shrinks and grows again.
// RUN: cleave-run --model tiny-gpt --layers 2 --hidden 32 --heads 2 --dtype f16 --steps 16 --loss-scale-init 1e6 --loss-scale-growth-interval 2 --save-losses %t/one.st | FileCheck %s --check-prefix=SKIP
// SKIP: step 1: a gradient overflowed (inf or NaN) at loss scale 1e+06: skipped on every rank; scale now 500000
// RUN: %python %S/Inputs/loss_scale.py %t/one.st 1e6 2 | FileCheck %s --check-prefix=RULE1
// RULE1: 1 ranks, skipped steps [1, 2, 3, 4,
// RULE1: rule: ok; skips: True; growth: True
// RUN: cleave-run -n 4 --plan dp=2,tp=2 --model tiny-gpt --layers 2 --hidden 32 --heads 2 --dtype f16 --steps 16 --loss-scale-init 1e6 --loss-scale-growth-interval 2 --save-losses %t/dptp.st > /dev/null
// RUN: %python %S/Inputs/loss_scale.py %t/dptp.st 1e6 2 | FileCheck %s --check-prefix=RULE4
// RUN: cleave-run -n 4 --plan pp=2,tp=2,micro=2 --model tiny-gpt --layers 2 --hidden 32 --heads 2 --dtype f16 --steps 16 --loss-scale-init 1e6 --loss-scale-growth-interval 2 --save-losses %t/pptp.st > /dev/null
// RUN: %python %S/Inputs/loss_scale.py %t/pptp.st 1e6 2 | FileCheck %s --check-prefix=RULE4
// RULE4: 4 ranks, skipped steps [1, 2, 3, 4,
// RULE4: rule: ok; skips: True; growth: True

// A skipped step changes nothing: after 3 skipped steps the parameters are
// the initial ones, and the scaler's state is saved with the optimizer's.
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --dtype f16 --steps 3 --loss-scale-init 1e9 --save-params %t/skipped.st --save-state | FileCheck %s --check-prefix=THREE
// THREE-COUNT-3: skipped on every rank
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --dtype f16 --steps 0 --save-params %t/initial.st > /dev/null
// RUN: %python %S/Inputs/loss_scale.py --same-params %t/initial.st %t/skipped.st | FileCheck %s --check-prefix=SAME
// SAME: [[N:[0-9]+]] of [[N]] parameters bit-equal
// RUN: env PYTHONPATH=%cleave_src/python %python -m cleave.tensorfile %t/skipped.st | FileCheck %s --check-prefix=STATE
// STATE-DAG: cleave.loss_scale{{[[:space:]]+}}F64{{[[:space:]]+}}[]
// STATE-DAG: cleave.loss_scale_good_steps{{[[:space:]]+}}I64{{[[:space:]]+}}[]
// STATE-DAG: cleave.skipped_steps{{[[:space:]]+}}I64{{[[:space:]]+}}[]

// The scaler's state resumes: 5 + 5 resumed steps (skips, growth and the
// update count across the split) equal 10 straight ones, bit for bit.
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --dtype f16 --steps 10 --loss-scale-init 1e6 --loss-scale-growth-interval 2 --save-params %t/straight.st > /dev/null
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --dtype f16 --steps 5 --loss-scale-init 1e6 --loss-scale-growth-interval 2 --save-params %t/half.st --save-state > /dev/null
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --dtype f16 --steps 5 --loss-scale-init 1e6 --loss-scale-growth-interval 2 --params %t/half.st --save-params %t/resumed.st > /dev/null
// RUN: cmp %t/straight.st %t/resumed.st

// bf16 (and f32) steps do not scale: no loss_scale input, no record.
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --dtype bf16 --steps 1 --save-losses %t/bf16.st > /dev/null
// RUN: env PYTHONPATH=%cleave_src/python %python -m cleave.tensorfile %t/bf16.st | FileCheck %s --check-prefix=BF16
// BF16-NOT: loss_scale
// BF16-NOT: skipped_by_rank
