// A plan the planner chose for four local CPU processes runs with
// cleave-run -n 4 (partitioned by cleave-propagate-sharding and
// cleave-partition from the planner's annotations) and trains like one
// process: the same losses, step by step. The tensor-parallel size is
// fixed at 2 so that the plan has sharded weights and layout changes; the
// planner chooses everything else.
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-models --model tiny-gpt -o %t/tiny.mlir
// RUN: cleave-plan %t/tiny.mlir --cluster local-cpu --gpus 4 --tp 2 --quiet -o %t/planned.mlir | FileCheck %s --check-prefix=PLAN
// RUN: cleave-run -n 4 %t/planned.mlir --steps 5 --save-losses %t/four.st > /dev/null
// RUN: cleave-run %t/tiny.mlir --steps 5 --save-losses %t/one.st > /dev/null
// RUN: env PYTHONPATH=%cleave_src/python %python %S/Inputs/compare-losses.py %t/one.st %t/four.st | FileCheck %s
// PLAN: mesh         pp=1 dp=2 cp=1 tp=2
// PLAN: parameters
// PLAN: h.*.mlp.fc.weight {{.*}} [tp, _] x2
// CHECK: steps: 5 and 5
// CHECK: within 1e-4 of one process
// CHECK: loss falls
