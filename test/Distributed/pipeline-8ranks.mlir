// Eight ranks: 4 stages x 2 data-parallel replicas, and 2 stages x 2
// replicas x 2-way tensor parallelism inside each stage, train tiny-gpt
// exactly like one process.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-gpt --extra "--layers 4 --batch 8" \
// RUN:   8:pp=4,dp=2,micro=4 8:pp=2,dp=2,tp=2,micro=2 | FileCheck %s
// CHECK: ok   tiny-gpt -n 8 --plan pp=4,dp=2,micro=4
// CHECK: ok   tiny-gpt -n 8 --plan pp=2,dp=2,tp=2,micro=2
// CHECK: 2 of 2 plans equal the single-process run
