// When memory is short, the planner trades time for it: here (a cluster
// file whose ranks have 0.8 MB each) it chooses four micro-batches and full
// recomputation on 4 local ranks. --plan auto executes them: a plan that is
// more than dp, tp and ZeRO runs as its named plan (micro-batches on the
// plan's micro-batch axis, cleave-remat), and trains like one process.
// RUN: env CLEAVE_LOCAL_CPU_SPEC=%S/Inputs/small-memory cleave-run -n 4 --plan auto,pp=1 --model tiny-gpt --batch 16 --steps 1 | FileCheck %s --check-prefix=PLAN
// PLAN: plan (planner, 4 local ranks): tp=1 pp=1 dp=4 cp=1 mbs=1 m=4 {{.*}} recompute=full
// PLAN-NEXT: compiled as --plan dp=4,tp=1,zero={{[0-3]}},pp=1,micro=4,schedule=1f1b,recompute=full
// RUN: env CLEAVE_LOCAL_CPU_SPEC=%S/Inputs/small-memory %python %S/../Distributed/equality.py --cleave-run cleave-run --model tiny-gpt --batch 16 \
// RUN:   4:auto,pp=1 | FileCheck %s
// CHECK: ok   tiny-gpt -n 4 --plan auto,pp=1
// CHECK: 1 of 1 plans equal the single-process run

func.func @unused() {
  return
}
