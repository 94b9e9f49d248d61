// Five AdamW steps of the zoo MLP under every manual plan on 1, 2, 4 and 8
// ranks: each rank's losses and the gathered parameters equal the
// single-process run (criterion in equality.py).
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-mlp \
// RUN:   --synthetic-inputs 1:dp=1 2:dp=2 2:tp=2 4:zero=1 4:zero=2 8:zero=3 \
// RUN:   4:dp=2,tp=2 8:dp=2,tp=4 | FileCheck %s
// CHECK: tiny-mlp: one process
// CHECK-NOT: FAIL
// CHECK: 8 of 8 plans equal the single-process run
