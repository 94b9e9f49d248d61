// When memory is short, the planner trades time for it: here (a cluster
// file whose ranks have 1.15 MB each) it chooses micro-batches and
// recomputation on 4 local ranks (with ZeRO-3's gathered parameters kept
// for the backward pass, and each micro-batch's gradients beside their sum,
// as Cleave's step keeps them, it also splits the layers over tp). --plan
// auto executes them: a plan that is more than dp, tp and ZeRO runs as its
// named plan (micro-batches on the plan's micro-batch axis, cleave-remat),
// and trains like one process.
// RUN: env CLEAVE_LOCAL_CPU_SPEC=%S/Inputs/small-memory cleave-run -n 4 --plan auto,pp=1 --model tiny-gpt --batch 16 --steps 1 | FileCheck %s --check-prefix=PLAN
// PLAN: plan (planner, 4 local ranks): tp={{[124]}} pp=1 dp={{[124]}} cp=1 {{.*}}mbs={{[12]}} m={{[2-9]}} {{.*}} recompute={{full|selective}}
// PLAN-NEXT: compiled as --plan dp={{[124]}},tp={{[124]}},{{.*}}pp=1,micro={{[2-9]}},schedule=1f1b,recompute={{full|selective}}
// RUN: env CLEAVE_LOCAL_CPU_SPEC=%S/Inputs/small-memory %python %S/../Distributed/equality.py --cleave-run cleave-run --model tiny-gpt --batch 16 \
// RUN:   4:auto,pp=1 | FileCheck %s
// CHECK: ok   tiny-gpt -n 4 --plan auto,pp=1
// CHECK: 1 of 1 plans equal the single-process run
//
// With 1.0 MB a rank, ZeRO over cp alone (dp = 1) would fit, but cleave-run
// shards ZeRO over dp only, so the planner of local ranks does not choose
// it: it picks tensor parallelism with more micro-batches, which runs.
// RUN: env CLEAVE_LOCAL_CPU_SPEC=%S/Inputs/tiny-memory cleave-run -n 4 --plan auto,pp=1 --model tiny-gpt --batch 16 --steps 2 | FileCheck %s --check-prefix=TINY
// TINY: plan (planner, 4 local ranks): tp={{[0-9]}} pp=1 dp={{[0-9]}} cp=1 {{.*}} zero=0 recompute=full
// TINY-NEXT: compiled as --plan
// TINY: step time: first step

func.func @unused() {
  return
}
