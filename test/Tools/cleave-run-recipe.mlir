// The training recipe's options (docs/cleave-run.md): nonsense is an error
// before anything is compiled, and the schedule drives the updates.
// RUN: rm -rf %t && mkdir -p %t
// RUN: not cleave-run --model tiny-gpt --lr-schedule cosine --warmup-steps 10 --decay-steps 5 2>&1 | FileCheck %s --check-prefix=ORDER
// ORDER: cleave-run: error: --decay-steps 5: expected a step >= --warmup-steps 10: the decay starts after the warmup
// RUN: not cleave-run --model tiny-gpt --lr-schedule linear --warmup-steps 200 2>&1 | FileCheck %s --check-prefix=DEFAULT
// DEFAULT: cleave-run: error: --decay-steps 100: expected a step >= --warmup-steps 200
// RUN: not cleave-run --model tiny-gpt --lr-schedule cosine --lr-min -1e-5 2>&1 | FileCheck %s --check-prefix=MINNEG
// MINNEG: cleave-run: error: --lr-min -1e-05: expected a finite number in [0, --lr] (--lr is 0.001)
// RUN: not cleave-run --model tiny-gpt --lr-schedule cosine --lr-min 0.01 2>&1 | FileCheck %s --check-prefix=MINBIG
// MINBIG: cleave-run: error: --lr-min 0.01: expected a finite number in [0, --lr] (--lr is 0.001)
// RUN: not cleave-run --model tiny-gpt --lr-schedule step 2>&1 | FileCheck %s --check-prefix=KIND
// KIND: cleave-run: error: --lr-schedule step: expected constant, cosine or linear
// RUN: not cleave-run --model tiny-gpt --decay-steps 50 2>&1 | FileCheck %s --check-prefix=CONST
// CONST: cleave-run: error: --decay-steps 50: expected no decay with --lr-schedule constant (choose cosine or linear)
// RUN: not cleave-run --model tiny-gpt --warmup-steps -1 2>&1 | FileCheck %s --check-prefix=WARM
// WARM: cleave-run: error: --warmup-steps -1: expected a number of steps >= 0
// RUN: not cleave-run --model tiny-gpt --grad-clip 0 2>&1 | FileCheck %s --check-prefix=CLIP
// CLIP: cleave-run: error: --grad-clip 0: expected a finite norm > 0
// RUN: not cleave-run --model tiny-gpt --grad-clip nan 2>&1 | FileCheck %s --check-prefix=CLIPNAN
// CLIPNAN: cleave-run: error: --grad-clip nan: expected a finite norm > 0
// RUN: not cleave-run --model tiny-gpt --accumulate 0 2>&1 | FileCheck %s --check-prefix=ACC
// ACC: cleave-run: error: --accumulate 0: expected a number of batches in 1..4096
// RUN: not cleave-run --model tiny-gpt -n 2 --plan auto --accumulate 2 2>&1 | FileCheck %s --check-prefix=ACCAUTO
// ACCAUTO: cleave-run: error: --accumulate 2: expected a named --plan (the planner does not choose micro-batches here)

// Accumulation runs the step as micro-batches of --batch sequences: the
// zoo model's step takes 2 x 4, in 2 micro-batches of 4 (the mb axis).
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --batch 4 --steps 1 --accumulate 2 | FileCheck %s --check-prefix=ACCUM
// ACCUM: batch 8 x
// ACCUM: step 1/1

// A program with its own training step cannot take them.
// RUN: cleave-opt %s --cleave-autodiff -o %t/step.mlir
// RUN: not cleave-run %t/step.mlir --grad-clip 1 --inputs %S/Inputs/mlp-batches.safetensors 2>&1 | FileCheck %s --check-prefix=OWN
// OWN: cleave-run: error: --grad-clip: the program {{.*}}step.mlir has its own @train_step, which this option cannot change; give the program's @forward instead

// The rate reaches --lr-min = 0 at step 2 and stays there: steps 3 and 4
// leave the parameters as step 2 left them (AdamW with lr 0), while the
// constant rate keeps training.
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --steps 2 --lr-schedule cosine --warmup-steps 1 --decay-steps 2 --save-params %t/two.st > /dev/null
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --steps 4 --lr-schedule cosine --warmup-steps 1 --decay-steps 2 --save-params %t/four.st > /dev/null
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --steps 4 --save-params %t/constant.st > /dev/null
// RUN: cmp %t/two.st %t/four.st
// RUN: not cmp -s %t/two.st %t/constant.st

// The step counter is training state: saved with --save-state, it resumes
// the schedule, AdamW's bias correction, the batches and the dropout seeds,
// so 3 + 3 resumed steps equal 6 straight ones, bit for bit.
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --dropout 0.1 --lr-schedule cosine --warmup-steps 2 --decay-steps 6 --steps 6 --save-params %t/straight.st > /dev/null
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --dropout 0.1 --lr-schedule cosine --warmup-steps 2 --decay-steps 6 --steps 3 --save-params %t/half.st --save-state > /dev/null
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --dropout 0.1 --lr-schedule cosine --warmup-steps 2 --decay-steps 6 --steps 3 --params %t/half.st --save-params %t/resumed.st | FileCheck %s --check-prefix=RESUME
// RESUME: resuming after step 3 (the step counter in {{.*}}half.st)
// RUN: cmp %t/straight.st %t/resumed.st
// RUN: env PYTHONPATH=%cleave_src/python %python -m cleave.tensorfile %t/half.st | FileCheck %s --check-prefix=COUNTER
// COUNTER: cleave.step{{[[:space:]]+}}I64{{[[:space:]]+}}[]

func.func @forward(%w: tensor<10x4xf32> {cleave.param = "w"},
                   %x: tensor<8x4xf32> {cleave.input = "x"},
                   %y: tensor<8xi32> {cleave.input = "y"}) -> tensor<f32> {
  %0 = cleave.matmul %x, %w {transpose_rhs} : (tensor<8x4xf32>, tensor<10x4xf32>) -> tensor<8x10xf32>
  %1 = cleave.cross_entropy %0, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %1 : tensor<f32>
}
