// Dropout in a pipeline draws the single-process masks: every micro-batch
// numbers its random blocks by its position in the batch.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-gpt --extra "--dropout 0.1" \
// RUN:   2:pp=2,micro=2 4:pp=2,dp=2,micro=2,schedule=zb-h1 | FileCheck %s
// CHECK: ok   tiny-gpt -n 2 --plan pp=2,micro=2
// CHECK: ok   tiny-gpt -n 4 --plan pp=2,dp=2,micro=2,schedule=zb-h1
// CHECK: 2 of 2 plans equal the single-process run
