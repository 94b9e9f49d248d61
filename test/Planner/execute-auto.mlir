// cleave-run --plan auto: the planner chooses the plan for the local ranks
// (cluster local-cpu, no pipeline) on the training step, and the ranks
// train like one process - the same losses, step by step. On 2 ranks it
// chooses data parallelism, on 8 tensor and data parallelism, each with a
// ZeRO stage (optimizer state, and at stage 3 parameters, split over dp).
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-run --model tiny-gpt --steps 5 --save-losses %t/one.st > /dev/null
// RUN: cleave-run -n 2 --model tiny-gpt --plan auto --steps 5 --save-losses %t/two.st | FileCheck %s --check-prefix=TWO
// RUN: env PYTHONPATH=%cleave_src/python %python %S/Inputs/compare-losses.py %t/one.st %t/two.st | FileCheck %s
// RUN: cleave-run -n 8 --model tiny-gpt --plan auto --steps 5 --save-losses %t/eight.st | FileCheck %s --check-prefix=EIGHT
// RUN: env PYTHONPATH=%cleave_src/python %python %S/Inputs/compare-losses.py %t/one.st %t/eight.st | FileCheck %s
// TWO: plan (planner, 2 local ranks): tp=1 pp=1 dp=2 cp=1 {{.*}} zero={{[1-3]}}
// TWO: for 2 ranks on mesh (pp=1, dp=2, cp=1, tp=1)
// EIGHT: plan (planner, 8 local ranks): tp=2 pp=1 dp=4 cp=1 {{.*}} zero={{[1-3]}}
// EIGHT: for 8 ranks on mesh (pp=1, dp=4, cp=1, tp=2)
// A program that is not a transformer (an MLP read from tensor files) is
// planned in graph mode (integer program per mesh) and runs too.
// RUN: cleave-run --model tiny-mlp --inputs %S/../Tools/Inputs/mlp-batches.safetensors --steps 3 --save-losses %t/mlp-one.st > /dev/null
// RUN: cleave-run -n 4 --model tiny-mlp --inputs %S/../Tools/Inputs/mlp-batches.safetensors --plan auto --steps 3 --save-losses %t/mlp-four.st | FileCheck %s --check-prefix=MLP
// RUN: env PYTHONPATH=%cleave_src/python %python %S/Inputs/compare-losses.py %t/mlp-one.st %t/mlp-four.st | FileCheck %s --check-prefix=SAME
// MLP: plan (planner, 4 local ranks): {{.*}} pp=1
// MLP: for 4 ranks on mesh
// SAME: steps: 3 and 3
// SAME: within 1e-4 of one process
// CHECK: steps: 5 and 5
// CHECK: within 1e-4 of one process
// CHECK: loss falls
