// cleave-run --plan auto runs planner-chosen pipelines. The planner plans the
// training step for the local ranks; a choice with pp > 1 runs as its named
// plan (stages cut from the forward function before differentiation, then
// cleave-pipeline), and equals one process (equality.py: losses and final
// parameters). `auto,pp=P` fixes the pipeline size and lets the planner
// choose the rest: data parallelism, micro-batches, schedule, ZeRO stage.
// RUN: cleave-run -n 8 --model tiny-gpt --layers 4 --plan auto,pp=4 --steps 1 | FileCheck %s --check-prefix=PLAN
// PLAN: plan (planner, 8 local ranks): tp=1 pp=4 dp=2 {{.*}}; predicted step
// PLAN-NEXT: compiled as --plan dp=2,tp=1,{{.*}}pp=4,micro={{[0-9]+}},schedule=
// PLAN: for 8 ranks on mesh (pp=4, dp=2)
//
// One sequence per data-parallel replica (batch 4 over dp=4, one
// micro-batch) with ZeRO-3, and a Llama (GQA, SwiGLU, untied head):
// RUN: %python %S/../Distributed/equality.py --cleave-run cleave-run --model tiny-gpt --extra "--layers 4" \
// RUN:   4:auto,pp=2 8:auto,pp=4 8:pp=2,dp=4,micro=1,zero=3 | FileCheck %s
// RUN: %python %S/../Distributed/equality.py --cleave-run cleave-run --model tiny-llama \
// RUN:   4:auto,pp=2 | FileCheck %s --check-prefix=LLAMA
// CHECK: ok   tiny-gpt -n 4 --plan auto,pp=2
// CHECK: ok   tiny-gpt -n 8 --plan auto,pp=4
// CHECK: ok   tiny-gpt -n 8 --plan pp=2,dp=4,micro=1,zero=3
// CHECK: 3 of 3 plans equal the single-process run
// LLAMA: ok   tiny-llama -n 4 --plan auto,pp=2
// LLAMA: 1 of 1 plans equal the single-process run

func.func @unused() {
  return
}
