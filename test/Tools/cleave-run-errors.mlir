// Bad input to cleave-run: a clear error, before compiling where possible,
// and nothing written.
// RUN: rm -rf %t && mkdir -p %t
// RUN: not cleave-run --model tiny-gpt --data %t/missing.bin --steps 1 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: cleave-run: error: rank 0: token_file_open: cannot open {{.*}}missing.bin: No such file or directory

// RUN: printf 'abc' > %t/odd.bin
// RUN: not cleave-run --model tiny-gpt --data %t/odd.bin --steps 1 2>&1 | FileCheck %s --check-prefix=ODD
// ODD: odd.bin: its size 3 bytes is not a multiple of the token size 2

// RUN: printf '\001\000\002\000\003\000' > %t/short.bin
// RUN: not cleave-run --model tiny-gpt --data %t/short.bin --steps 1 2>&1 | FileCheck %s --check-prefix=SHORT
// SHORT: short.bin has 3 tokens, too few for seq_len 32 (needs 33)

// A token id outside the model's vocabulary is named with its position.
// RUN: %python -c "import struct,sys; sys.stdout.buffer.write(struct.pack('<100H', *([1]*50 + [9999] + [2]*49)))" > %t/big.bin
// RUN: not cleave-run --model tiny-gpt --data %t/big.bin --vocab 65 --steps 1 2>&1 | FileCheck %s --check-prefix=VOCAB
// VOCAB: big.bin: token at position 50 is 9999, not below the vocabulary size 65

// RUN: not cleave-run %s --data %t/big.bin --steps 1 2>&1 | FileCheck %s --check-prefix=NEEDVOCAB
// NEEDVOCAB: token data needs --vocab for a program read from a file

// Parameters of another model: every mismatch is listed, nothing is saved.
// RUN: cleave-run --model tiny-mlp --inputs %S/Inputs/mlp-batches.safetensors --steps 1 --save-params %t/mlp.st > /dev/null
// RUN: not cleave-run --model tiny-llama --params %t/mlp.st --steps 1 --save-params %t/out.st 2>&1 | FileCheck %s --check-prefix=WRONG
// RUN: not test -e %t/out.st
// WRONG: cleave-run: error: {{.*}}mlp.st does not match the model:
// WRONG: missing parameter 'tok_embeddings.weight'
// WRONG: the file has 'fc0.weight', which the model does not have

// A diverging run stops at the first non-finite loss and saves nothing.
// RUN: not cleave-run --model tiny-mlp --inputs %S/Inputs/mlp-batches.safetensors --steps 4 --lr 1e35 --save-params %t/nan.st 2>&1 | FileCheck %s --check-prefix=NAN
// RUN: not test -e %t/nan.st
// NAN: cleave-run: error: rank 0: the loss is {{NaN|infinite}} at step {{[2-4]}}; parameters keep their values from before the step

func.func @forward(%w: tensor<4x4xf32> {cleave.param = "w"},
                   %tokens: tensor<2x3xi32> {cleave.input = "tokens"},
                   %targets: tensor<2x3xi32> {cleave.input = "targets"}) -> tensor<f32> {
  %0 = cleave.reduce_sum %w dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}
