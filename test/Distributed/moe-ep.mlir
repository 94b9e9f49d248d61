// Five AdamW steps of the zoo's tiny-moe (4 routed experts, top-2, a shared
// expert, the balance loss) under the named expert-parallel plans: each
// rank's losses and the gathered parameters equal the single-process run
// (equality.py's criterion). The expert weights are split over ep, the
// tokens over dp and ep, and the partitioner's all-to-alls move the expert
// buffers; cleave-verify-collectives (the first pass of the lowering)
// accepts every program. The whole file: 60 s at load 8 on the shared
// 2-core machine with an empty compile cache (mostly compiling the ten
// programs), 5 s with it; with the four micro-batched runs added, 70 s at
// load 4-5 with part of the cache warm.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-moe \
// RUN:   2:ep=2 4:ep=4 4:ep=2,dp=2 4:ep=2,tp=2 4:ep=2,pp=2 \
// RUN:   8:ep=2,dp=2,tp=2 | FileCheck %s
// CHECK: tiny-moe: one process
// CHECK-NOT: FAIL
// CHECK: 6 of 6 plans equal the single-process run

// Micro-batches: the batch splits over [dp, mb, ep], so each micro-batch's
// all-to-alls stay inside it; a pipeline (pp=2), micro-batches without one
// (pp=1, gradient accumulation), and both with dp on 8 ranks.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-moe \
// RUN:   4:ep=2,pp=2,micro=2 4:ep=2,dp=2,micro=2 8:ep=2,dp=2,pp=2,micro=2 \
// RUN:   | FileCheck %s --check-prefix=MICRO
// MICRO: tiny-moe: one process
// MICRO-NOT: FAIL
// MICRO: 3 of 3 plans equal the single-process run

// Token dropping: at capacity factor 0.75 every expert has 12 slots per
// sequence for 16 selections on average, so selections are dropped; the
// router runs per sequence, so the drops are those of one process.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-moe \
// RUN:   --extra "--capacity-factor 0.75" 2:ep=2 4:ep=2,dp=2 \
// RUN:   4:ep=2,pp=2,micro=2 | FileCheck %s --check-prefix=DROP
// DROP: tiny-moe: one process
// DROP-NOT: FAIL
// DROP: 3 of 3 plans equal the single-process run
