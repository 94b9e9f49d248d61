// Five AdamW steps of the zoo GPT (learned positions, LayerNorm, GELU MLP,
// dropout off) under every manual plan on 1, 2, 4 and 8 ranks: each rank's
// losses and the gathered parameters equal the single-process run.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-gpt \
// RUN:   1:dp=1 2:dp=2 2:tp=2 2:tp=2,sp 2:zero=1 4:zero=2 4:zero=3 \
// RUN:   4:dp=2,tp=2 8:dp=2,tp=2,sp 8:dp=8,zero=3 8:dp=2,tp=4,sp,zero=1 \
// RUN:   | FileCheck %s
// CHECK: tiny-gpt: one process
// CHECK-NOT: FAIL
// CHECK: 11 of 11 plans equal the single-process run
