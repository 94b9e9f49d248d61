// The planner's per-stage choices, run by name, train tiny-gpt exactly like
// one process (equality.py):
// * the layer split (`layers=`, the planner's layers_per_chunk): 1 and 3
//   layers on 2 stages, and 4 stages whose first holds only the embedding
//   and whose last only the final norm, the head and the loss (Llama 3's
//   split);
// * recomputation per pipeline rank (`recompute=full/none`, the planner's
//   recompute_per_stage).
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-gpt --extra "--layers 4" \
// RUN:   4:pp=2,layers=1/3 4:pp=4,layers=0/2/2/0 2:pp=2,micro=2,recompute=full/none | FileCheck %s
// CHECK: ok   tiny-gpt -n 4 --plan pp=2,layers=1/3
// CHECK: ok   tiny-gpt -n 4 --plan pp=4,layers=0/2/2/0
// CHECK: ok   tiny-gpt -n 2 --plan pp=2,micro=2,recompute=full/none
// CHECK: 3 of 3 plans equal the single-process run
//
// A split that does not hold the model's layers stops before any step.
// RUN: not cleave-run -n 2 --model tiny-gpt --layers 4 --plan pp=2,layers=1/1 --steps 1 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SUM
// SUM: cleave-pipeline-stages: layers-per-stage holds 2 layers, the parameters name 4
// SUM-NOT: step 1/1

func.func @unused() {
  return
}
