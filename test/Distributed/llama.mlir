// Five AdamW steps of the zoo Llama (RMSNorm, SwiGLU, rotary embeddings,
// grouped-query attention) under the manual plans on 2, 4 and 8 ranks: each
// rank's losses and the gathered parameters equal the single-process run.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-llama \
// RUN:   2:dp=2 2:tp=2,sp 4:zero=3 4:dp=2,tp=2,sp 8:dp=2,tp=4 \
// RUN:   8:dp=2,tp=2,sp,zero=2 | FileCheck %s
// CHECK: tiny-llama: one process
// CHECK-NOT: FAIL
// CHECK: 6 of 6 plans equal the single-process run
