// Five AdamW steps of the zoo's tiny-moe (a Llama whose feed-forwards are
// 4 routed experts, top-2, capacity factor 1, plus a shared expert, with
// the balance loss) under data and tensor parallelism: each rank's losses
// and the gathered parameters equal the single-process run. The router runs
// on each device's sequences (the group factor follows the batch split);
// the balance loss is a partial sum all-reduced like the cross entropy.
// Expert parallelism (the named plan ep=N): moe-ep.mlir.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-moe \
// RUN:   2:dp=2 2:tp=2 4:dp=2,tp=2 | FileCheck %s
// CHECK: tiny-moe: one process
// CHECK-NOT: FAIL
// CHECK: 3 of 3 plans equal the single-process run
