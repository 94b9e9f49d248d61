// ZeRO inside pipeline stages: the gradients are accumulated over
// micro-batches and reduce-scattered once (ZeRO-2), parameters gathered once
// per step before the micro-batches (ZeRO-3); both equal one process.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-llama \
// RUN:   4:pp=2,dp=2,zero=2,micro=2 4:pp=2,dp=2,zero=3,micro=2,schedule=gpipe | FileCheck %s
// CHECK: ok   tiny-llama -n 4 --plan pp=2,dp=2,zero=2,micro=2
// CHECK: ok   tiny-llama -n 4 --plan pp=2,dp=2,zero=3,micro=2,schedule=gpipe
// CHECK: 2 of 2 plans equal the single-process run
