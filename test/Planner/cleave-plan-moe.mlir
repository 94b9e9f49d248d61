// RUN: cleave-plan --model mixtral-8x7b --cluster dgx-h100 --gpus 64 --global-batch 256 --top 3 --quiet --json %t.json | FileCheck %s
// RUN: FileCheck %s --check-prefix=JSON < %t.json
// RUN: cleave-plan --model mixtral-8x7b --cluster dgx-h100 --gpus 64 --global-batch 256 --max-pp 4 --top 2 --quiet | FileCheck %s --check-prefix=PP4
// RUN: cleave-plan --model gpt3-175b --cluster dgx-a100-80gb --gpus 8 --global-batch 8 --layers 4 --top 1 --quiet | FileCheck %s --check-prefix=DENSE
// RUN: cleave-run --model tiny-moe -n 2 --plan ep=2 --predict --steps 1 2>&1 | FileCheck %s --check-prefix=PREDICT

// Expert parallelism in the plan search (docs/planner.md): for a mixture of
// experts the search tries every ep that divides dp and the experts, jointly
// with the mesh, and the report says why the chosen plan's ep won against
// the best plan of the other kind, with the all-to-alls' exposed time and
// the experts' load factor.

// Mixtral 8x7B on 64 H100s: an 8-stage pipeline keeps ep = 1; the best
// plan with ep (the experts one per GPU, no pipeline) is slower, its
// all-to-alls and its busiest rank's dropless load included.
// CHECK: model    mixtral-8x7b (46.7B parameters, 32 layers, seq 4096)
// CHECK: chosen plan
// CHECK-NEXT:   mesh         pp={{[0-9]+}} dp={{[0-9]+}} cp={{[0-9]+}} tp={{[0-9]+}}
// CHECK: expert parallelism: no expert parallelism (ep=1); the best plan with expert parallelism (ep > 1) (tp={{[0-9]+}} pp={{[0-9]+}} dp={{[0-9]+}} ep={{[0-9]+}} {{.*}}) lost: +{{[0-9.]+}}% step time{{.*}}; under ep={{[0-9]+}} the all-to-alls expose {{[0-9.]+}} ms and the busiest rank computes 125% of the mean expert load (dropless: the imbalance prior)

// JSON: "expert_alternative": {
// JSON: "ep": {{[2-8]}},
// JSON: "exposed_ep_communication": {{[0-9.e-]+}},
// JSON: "expert_parallel": "no expert parallelism (ep=1); the best plan with expert parallelism

// Up to 4 stages the experts' gradient reduction over all data-parallel
// ranks costs more than the all-to-alls: ep wins.
// PP4: chosen plan
// PP4-NEXT:   mesh         pp={{[0-9]+}} dp={{[0-9]+}} (ep=8 of them split the experts) cp=1 tp=1
// PP4: time {{.*}}exposed EP communication {{[0-9.]+}}%
// PP4: 1  pp{{[0-9]+}} dp{{[0-9]+}} ep8 {{.*}}chosen
// PP4: expert parallelism: ep=8 (experts 1 per GPU); the best plan without expert parallelism ({{.*}}) lost: +{{[0-9.]+}}% step time, mostly exposed DP communication

// A dense model: no ep, no ep line.
// DENSE: chosen plan
// DENSE-NOT: {{ ep=| ep[0-9]}}
// DENSE-NOT: expert parallelism

// The named plan ep=2 reaches the cost model (costPlanOf): dp counts the
// expert-parallel ranks there, and the preset's formulas price it.
// PREDICT: predicted step: {{.*}}(cost model: --predict, tp=1 pp=1 dp=2 ep=2 cp=1 mbs=2 m=1 {{.*}} priced by the preset's formulas on local-cpu (built-in), 2 ranks)
