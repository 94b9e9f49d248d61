// Gradient accumulation without pipelining (pp = 1): micro-batches run one
// after another on one rank, and under data parallelism the accumulated
// gradients are all-reduced once per step; both equal one process.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-gpt \
// RUN:   1:micro=4 2:dp=2,micro=2 | FileCheck %s
// CHECK: ok   tiny-gpt -n 1 --plan micro=4
// CHECK: ok   tiny-gpt -n 2 --plan dp=2,micro=2
// CHECK: 2 of 2 plans equal the single-process run
