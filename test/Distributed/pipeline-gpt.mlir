// Pipelines train tiny-gpt exactly like one process (equality.py: losses
// within 1e-5 relative on every rank, final parameters within 1e-5 max|p| +
// 0.01 lr): 1F1B and GPipe on 2 stages (the tied embedding travels to the
// head's stage and its gradient back), 2 stages x 2 data-parallel replicas
// (gradients accumulated over micro-batches, then all-reduced over dp
// once), and 2 stages with sequence-parallel Megatron TP inside.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-gpt \
// RUN:   2:pp=2,micro=2 2:pp=2,micro=4,schedule=gpipe 4:pp=2,dp=2,micro=2 4:pp=2,tp=2,sp,micro=2 | FileCheck %s
// CHECK: ok   tiny-gpt -n 2 --plan pp=2,micro=2
// CHECK: ok   tiny-gpt -n 2 --plan pp=2,micro=4,schedule=gpipe
// CHECK: ok   tiny-gpt -n 4 --plan pp=2,dp=2,micro=2
// CHECK: ok   tiny-gpt -n 4 --plan pp=2,tp=2,sp,micro=2
// CHECK: 4 of 4 plans equal the single-process run
