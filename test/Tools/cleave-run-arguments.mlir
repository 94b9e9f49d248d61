// Options out of range, outputs that would overwrite inputs or cannot be
// written: a clear error before anything is compiled or run, and nothing
// written.
// RUN: rm -rf %t && mkdir -p %t
// RUN: not cleave-run --model tiny-gpt -n 0 2>&1 | FileCheck %s --check-prefix=N0
// N0: cleave-run: error: -n 0: expected a number of ranks in 1..1024
// RUN: not cleave-run --model tiny-gpt -n -2 2>&1 | FileCheck %s --check-prefix=NNEG
// NNEG: cleave-run: error: -n -2: expected a number of ranks in 1..1024
// RUN: not cleave-run --model tiny-gpt --steps -5 2>&1 | FileCheck %s --check-prefix=STEPS
// STEPS: cleave-run: error: --steps -5: expected a number of steps >= 0
// RUN: not cleave-run --model tiny-gpt --lr -1 2>&1 | FileCheck %s --check-prefix=LR
// LR: cleave-run: error: --lr -1: expected a finite number >= 0
// RUN: not cleave-run --model tiny-gpt --lr nan 2>&1 | FileCheck %s --check-prefix=LRNAN
// LRNAN: cleave-run: error: --lr nan: expected a finite number >= 0
// RUN: not cleave-run --model tiny-gpt --beta2 1 2>&1 | FileCheck %s --check-prefix=BETA
// BETA: cleave-run: error: --beta2 1: expected a number in [0, 1)
// RUN: not cleave-run --model tiny-gpt --eps 0 2>&1 | FileCheck %s --check-prefix=EPS
// EPS: cleave-run: error: --eps 0: expected a finite number > 0
// RUN: not cleave-run --model tiny-gpt --log-every 0 2>&1 | FileCheck %s --check-prefix=LOG
// LOG: cleave-run: error: --log-every 0: expected a number >= 1
// RUN: not cleave-run --model tiny-gpt --layers 0 2>&1 | FileCheck %s --check-prefix=LAYERS
// LAYERS: cleave-run: error: --layers 0: expected a size >= 1
// RUN: not cleave-run --model tiny-gpt --dropout 1.5 2>&1 | FileCheck %s --check-prefix=DROP
// DROP: cleave-run: error: --dropout 1.5: expected a rate in [0, 1)
// RUN: not cleave-run --model tiny-gpt --resume 2>&1 | FileCheck %s --check-prefix=RESUME
// RESUME: cleave-run: error: --resume needs --checkpoint DIR
// RUN: not cleave-run --model tiny-gpt -n 2 --max-restarts 1 2>&1 | FileCheck %s --check-prefix=RESTARTS
// RESTARTS: cleave-run: error: --max-restarts needs --checkpoint DIR
// RUN: not cleave-run --model tiny-gpt --checkpoint %t/ck --checkpoint-every -1 2>&1 | FileCheck %s --check-prefix=EVERY
// EVERY: cleave-run: error: --checkpoint-every -1: expected a number of steps >= 0
// RUN: env CLEAVE_CHECKPOINT_NICE=abc not cleave-run --model tiny-gpt --checkpoint %t/ck 2>&1 | FileCheck %s --check-prefix=NICE
// RUN: env CLEAVE_CHECKPOINT_NICE=25 not cleave-run --model tiny-gpt --checkpoint %t/ck 2>&1 | FileCheck %s --check-prefix=NICE
// NICE: cleave-run: error: CLEAVE_CHECKPOINT_NICE='{{abc|25}}': expected the checkpoint writer's nice value, an integer from 0 (the training's priority, the default) to 19
// RUN: not cleave-run --model tiny-gpt --heartbeat-timeout 0 2>&1 | FileCheck %s --check-prefix=HB
// HB: cleave-run: error: --heartbeat-timeout 0: expected a number of seconds > 0
// RUN: not cleave-run --model tiny-gpt --on-nan retry 2>&1 | FileCheck %s --check-prefix=ONNAN
// ONNAN: cleave-run: error: --on-nan retry: expected stop, skip or rollback
// RUN: not cleave-run --model tiny-gpt --on-nan rollback 2>&1 | FileCheck %s --check-prefix=ROLLBACK
// ROLLBACK: cleave-run: error: --on-nan rollback needs --checkpoint DIR and --checkpoint-every N
// RUN: not cleave-run --model tiny-gpt -n 2 --checkpoint %t/ck --max-restarts 1 --restart-ranks 3 2>&1 | FileCheck %s --check-prefix=SHRINK
// SHRINK: cleave-run: error: --restart-ranks 3: expected a number of ranks in 1..N with -n N and --max-restarts
// RUN: not cleave-run --model tiny-gpt -n 2 --plan-for tp=2 2>&1 | FileCheck %s --check-prefix=PLANFOR
// PLANFOR: cleave-run: error: --plan-for tp=2: expected N:PLAN with N a number of ranks in 1..1024
// RUN: not cleave-run --model tiny-gpt -n 2 --plan-for 2:tp=2 --plan-for 2:dp=2 2>&1 | FileCheck %s --check-prefix=PLANFOR2
// PLANFOR2: cleave-run: error: --plan-for 2:dp=2: expected one plan per world size (2 has two)

// Saving over the training data is refused, and the data stays as it was.
// RUN: %python -c "import struct,sys; sys.stdout.buffer.write(struct.pack('<100H', *([1]*100)))" > %t/tokens.bin
// RUN: cp %t/tokens.bin %t/tokens.orig
// RUN: not cleave-run --model tiny-gpt --data %t/tokens.bin --vocab 65 --steps 1 --save-params %t/tokens.bin 2>&1 | FileCheck %s --check-prefix=OVERDATA
// RUN: cmp %t/tokens.bin %t/tokens.orig
// OVERDATA: cleave-run: error: --save-params {{.*}}tokens.bin is the --data input; refusing to write over it (choose another path)
// RUN: not cleave-run %s --save-losses %s 2>&1 | FileCheck %s --check-prefix=OVERPROG
// OVERPROG: error: --save-losses {{.*}}cleave-run-arguments.mlir is the --program input
// Two outputs on one file (spelled differently).
// RUN: cd %t && not cleave-run --model tiny-gpt --steps 1 --save-params out.st --save-losses ./out.st 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: cleave-run: error: --save-losses and --save-params name the same file ./out.st

// An unwritable output is reported before the first step, not after.
// RUN: not cleave-run --model tiny-gpt --steps 1 --save-params %t/missing-dir/p.st 2>&1 | FileCheck %s --check-prefix=NODIR
// NODIR-NOT: step
// NODIR: cleave-run: error: --save-params {{.*}}missing-dir/p.st: cannot write in the directory {{.*}}missing-dir (No such file or directory)
// RUN: not cleave-run --model tiny-gpt --steps 1 --save-losses %t 2>&1 | FileCheck %s --check-prefix=ISDIR
// ISDIR: cleave-run: error: --save-losses {{.*}} is a directory; expected a file path

func.func @forward(%w: tensor<4x4xf32> {cleave.param = "w"}) -> tensor<f32> {
  %0 = cleave.reduce_sum %w dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}
