// ZeRO inside pipeline stages: the gradients are accumulated over
// micro-batches and reduce-scattered once (ZeRO-2), parameters gathered once
// per step before the micro-batches (ZeRO-3); both equal one process.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-llama \
// RUN:   4:pp=2,dp=2,zero=2,micro=2 4:pp=2,dp=2,zero=3,micro=2,schedule=gpipe | FileCheck %s
// CHECK: ok   tiny-llama -n 4 --plan pp=2,dp=2,zero=2,micro=2
// CHECK: ok   tiny-llama -n 4 --plan pp=2,dp=2,zero=3,micro=2,schedule=gpipe
// CHECK: 2 of 2 plans equal the single-process run

// ZeRO-3 with tp and micro-batches (the planner chooses it under memory
// pressure): a bias gathered over dp and broadcast to the activations'
// shape is broadcast at the micro-batch's local shape (ShardOp's
// canonicalization in cleave-partition); before, a slice along the
// micro-batch axis was left, which cleave-pipeline cannot schedule.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-gpt --batch 16 \
// RUN:   4:dp=2,tp=2,zero=3,micro=4 | FileCheck %s --check-prefix=TP
// TP: ok   tiny-gpt -n 4 --plan dp=2,tp=2,zero=3,micro=4
// TP: 1 of 1 plans equal the single-process run
