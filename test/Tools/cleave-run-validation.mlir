// Validation loss (docs/cleave-run.md): --val-data FILE --eval-every N
// --eval-steps K runs @eval_step, the program's @forward with dropout off,
// partitioned with the training step's plan, on K batches after every N-th
// step and after the last; rank 0 prints the mean and --save-losses keeps
// it (val_loss, val_step).
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/Inputs/validation.py tokens %t

// Bad input is an error before anything runs, naming the option and file.
// RUN: not cleave-run --model tiny-gpt --eval-every 2 2>&1 | FileCheck %s --check-prefix=NOVAL
// NOVAL: cleave-run: error: --eval-every: there is no validation data (give --val-data)
// RUN: not cleave-run --model tiny-gpt --data %t/train.bin --val-data %t/val.bin --eval-steps 0 2>&1 | FileCheck %s --check-prefix=STEPS
// STEPS: cleave-run: error: --eval-steps 0: expected a number of batches >= 1
// RUN: not cleave-run --model tiny-gpt --data %t/train.bin --val-data %t/val.bin --eval-every -1 2>&1 | FileCheck %s --check-prefix=EVERY
// EVERY: cleave-run: error: --eval-every -1: expected a number of steps >= 0
// RUN: not cleave-run --model tiny-gpt --val-data %t/val.bin 2>&1 | FileCheck %s --check-prefix=CORPUS
// CORPUS: cleave-run: error: --val-data {{.*}}val.bin: validation data is like the training data: give the training data with --data (a token file) or --inputs
// RUN: not cleave-run --model tiny-gpt --data %t/train.bin --val-data %t/valbig.bin 2>&1 | FileCheck %s --check-prefix=VOCAB
// VOCAB: cleave-run: error: --val-data {{.*}}valbig.bin: token 0 is {{[0-9]+}}, outside the vocabulary of 65 tokens that the model is trained on (another tokenizer, or --token-bytes 2 is not the file's)
// RUN: not cleave-run --model tiny-gpt --data %t/train.bin --val-data %t/val4.bin 2>&1 | FileCheck %s --check-prefix=WIDTH
// WIDTH: cleave-run: error: --val-data {{.*}}val4.bin: every second 16-bit token is 0: the file holds 4-byte tokens, but --token-bytes is 2
// RUN: not cleave-run --model tiny-gpt --data %t/train.bin --val-data %t/val.bin --token-bytes 4 2>&1 | FileCheck %s --check-prefix=WIDTH4
// WIDTH4: cleave-run: error: --val-data {{.*}}val.bin: token 0 is {{[0-9]+}}, outside the vocabulary of 65 tokens
// RUN: not cleave-run --model tiny-gpt --data %t/train.bin --val-data %t/odd.bin 2>&1 | FileCheck %s --check-prefix=ODD
// ODD: cleave-run: error: --val-data {{.*}}odd.bin: 2001 bytes are not a whole number of 2-byte tokens (--token-bytes 2)
// RUN: not cleave-run --model tiny-gpt --data %t/train.bin --val-data %t/val.bin --save-losses %t/val.bin 2>&1 | FileCheck %s --check-prefix=OVER
// OVER: cleave-run: error: --save-losses {{.*}}val.bin is the --val-data input; refusing to write over it
// RUN: not cleave-run %s --inputs %S/Inputs/mlp-batches.safetensors --val-data %S/Inputs/validation.py 2>&1 | FileCheck %s --check-prefix=NOTFILE
// NOTFILE: cleave-run: error: --val-data {{.*}}validation.py:
// RUN: not cleave-run %s --inputs %S/Inputs/mlp-batches.safetensors --val-data %S/Inputs/mlp-batches.safetensors --eval-steps 5 2>&1 | FileCheck %s --check-prefix=FEW
// FEW: cleave-run: error: --val-data {{.*}}mlp-batches.safetensors: the inputs file holds 4 steps of 'features'; step 5 was requested

// Evaluation after steps 2 and 4; the losses file keeps them. Evaluating
// does not change training: the parameters equal a run without it.
// RUN: cleave-run --model tiny-gpt --layers 2 --hidden 32 --heads 2 --data %t/train.bin --val-data %t/val.bin --eval-every 2 --eval-steps 3 --steps 4 --save-losses %t/one.st --save-params %t/with.st | FileCheck %s --check-prefix=EVAL
// EVAL: step 1/4
// EVAL: step 2  val loss {{[0-9.]+}} (mean of 3 batches)
// EVAL: step 4/4
// EVAL: step 4  val loss {{[0-9.]+}} (mean of 3 batches)
// RUN: cleave-run --model tiny-gpt --layers 2 --hidden 32 --heads 2 --data %t/train.bin --steps 4 --save-params %t/without.st > /dev/null
// RUN: cmp %t/with.st %t/without.st
// RUN: env PYTHONPATH=%cleave_src/python %python -m cleave.tensorfile %t/one.st | FileCheck %s --check-prefix=SAVED
// SAVED: val_loss{{[[:space:]]+}}F64{{[[:space:]]+}}[2]
// SAVED: val_step{{[[:space:]]+}}I64{{[[:space:]]+}}[2]

// On 4 ranks the evaluation step is sharded like the training step (tp
// splits its matrices, ZeRO-3 gathers its parameters, cp splits the
// sequence): the same validation losses after the same steps.
// RUN: cleave-run -n 4 --plan dp=2,tp=2 --model tiny-gpt --layers 2 --hidden 32 --heads 2 --data %t/train.bin --val-data %t/val.bin --eval-every 2 --eval-steps 3 --steps 4 --save-losses %t/dptp.st > /dev/null
// RUN: cleave-run -n 4 --plan dp=4,zero=3 --model tiny-gpt --layers 2 --hidden 32 --heads 2 --data %t/train.bin --val-data %t/val.bin --eval-every 2 --eval-steps 3 --steps 4 --save-losses %t/zero3.st > /dev/null
// RUN: cleave-run -n 4 --plan dp=2,cp=2 --model tiny-gpt --layers 2 --hidden 32 --heads 2 --data %t/train.bin --val-data %t/val.bin --eval-every 2 --eval-steps 3 --steps 4 --save-losses %t/cp.st > /dev/null
// RUN: %python %S/Inputs/validation.py same %t/one.st %t/dptp.st %t/zero3.st %t/cp.st | FileCheck %s --check-prefix=SAME
// SAME: one.st: val_step [2, 4]
// SAME-COUNT-3: equal

// Pipelines and accumulation: cleave-pipeline schedules @eval_step on the
// training step's stages and micro-batches (forward passes only; the loss
// summed over both). --accumulate 2 of 2 sequences is the batch of 4;
// the planner's choice (ZeRO-3 here) shards @eval_step like its step.
// RUN: cleave-run -n 4 --plan pp=2,tp=2 --model tiny-gpt --layers 2 --hidden 32 --heads 2 --data %t/train.bin --val-data %t/val.bin --eval-every 2 --eval-steps 3 --steps 4 --save-losses %t/pptp.st > /dev/null
// RUN: cleave-run -n 4 --plan pp=2,dp=2,micro=2,schedule=zb-h1 --model tiny-gpt --layers 2 --hidden 32 --heads 2 --data %t/train.bin --val-data %t/val.bin --eval-every 2 --eval-steps 3 --steps 4 --save-losses %t/ppdp.st > /dev/null
// RUN: cleave-run --accumulate 2 --batch 2 --model tiny-gpt --layers 2 --hidden 32 --heads 2 --data %t/train.bin --val-data %t/val.bin --eval-every 2 --eval-steps 3 --steps 4 --save-losses %t/acc.st > /dev/null
// RUN: cleave-run -n 4 --plan auto --model tiny-gpt --layers 2 --hidden 32 --heads 2 --data %t/train.bin --val-data %t/val.bin --eval-every 2 --eval-steps 3 --steps 4 --save-losses %t/auto.st 2>&1 | FileCheck %s --check-prefix=AUTO
// AUTO-NOT: warning
// AUTO: plan (planner, 4 local ranks)
// AUTO-NOT: warning
// RUN: %python %S/Inputs/validation.py same %t/one.st %t/pptp.st %t/ppdp.st %t/acc.st %t/auto.st | FileCheck %s --check-prefix=PIPE
// PIPE: one.st: val_step [2, 4]
// PIPE-COUNT-4: equal

// Dropout is off in evaluation: with --lr 0 the weights stay, and the
// validation loss with --dropout 0.5 is the one without dropout.
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --data %t/train.bin --val-data %t/val.bin --steps 1 --lr 0 --save-losses %t/nodrop.st > /dev/null
// RUN: cleave-run --model tiny-gpt --layers 1 --hidden 32 --heads 2 --data %t/train.bin --val-data %t/val.bin --steps 1 --lr 0 --dropout 0.5 --save-losses %t/drop.st > /dev/null
// RUN: %python %S/Inputs/validation.py same %t/nodrop.st %t/drop.st | FileCheck %s --check-prefix=DROP
// DROP: drop.st: equal

// A program with per-step tensors takes a tensors file of the same inputs.
// RUN: cleave-run %s --inputs %S/Inputs/mlp-batches.safetensors --val-data %S/Inputs/mlp-batches.safetensors --eval-steps 4 --steps 2 | FileCheck %s --check-prefix=TENSORS
// TENSORS: step 2  val loss {{[0-9.]+}} (mean of 4 batches)

func.func @forward(%w: tensor<10x32xf32> {cleave.param = "w"},
                   %x: tensor<8x32xf32> {cleave.input = "features"},
                   %y: tensor<8xi32> {cleave.input = "labels"}) -> tensor<f32> {
  %0 = cleave.matmul %x, %w {transpose_rhs} : (tensor<8x32xf32>, tensor<10x32xf32>) -> tensor<8x10xf32>
  %1 = cleave.cross_entropy %0, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %1 : tensor<f32>
}
