// ZeRO under expert parallelism: the expert weights' optimizer state (and
// with ZeRO-3 the weights) is split over dp after ep, the dense parameters'
// over dp and ep, as Megatron's distributed optimizer splits them (every ep
// rank holds the dense parameters whole and reduces their gradients over dp
// and ep). Five AdamW steps of tiny-moe equal the single-process run
// (equality.py's criterion), with micro-batches too; about 25 s.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-moe \
// RUN:   4:ep=2,dp=2,zero=1 4:ep=2,dp=2,zero=3 4:ep=2,dp=2,micro=2,zero=3 | FileCheck %s
// CHECK: tiny-moe: one process
// CHECK-NOT: FAIL
// CHECK: 3 of 3 plans equal the single-process run
