// cleave-run --plan auto with constraints: tensor parallelism fixed at 2
// and ZeRO stage 1 (optimizer state split over dp, gradients reduced whole
// before the update) on 4 local ranks trains like one process.
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-run --model tiny-gpt --steps 5 --save-losses %t/one.st > /dev/null
// RUN: cleave-run -n 4 --model tiny-gpt --plan auto,tp=2,zero=1 --steps 5 --save-losses %t/four.st | FileCheck %s --check-prefix=PLAN
// RUN: env PYTHONPATH=%cleave_src/python %python %S/Inputs/compare-losses.py %t/one.st %t/four.st | FileCheck %s
// RUN: not cleave-run -n 4 --model tiny-gpt --plan auto,cp=2 2>&1 | FileCheck %s --check-prefix=BAD
// PLAN: plan (planner, 4 local ranks): tp=2 pp=1 dp=2 cp=1 {{.*}} zero=1
// PLAN: for 4 ranks on mesh (pp=1, dp=2, cp=1, tp=2)
// CHECK: steps: 5 and 5
// CHECK: within 1e-4 of one process
// CHECK: loss falls
// BAD: cleave-run: error: --plan auto: cannot read 'cp=2' (expected tp=N, pp=P or zero=K)
