// RUN: cleave-models --model tiny-gpt --locations -o %t.mlir
// RUN: sed -E 's/cleave\.gelu ([^ ]+) : ([^ ]+)/cleave.gelu_grad \1, \1 : \2/' %t.mlir > %t-bad.mlir
// RUN: not cleave-plan %t-bad.mlir --cluster local-cpu --gpus 4 --quiet 2>&1 | FileCheck %s

// A module the planner cannot price names the op, where it is, and what
// its interfaces lack. tiny-gpt with its GELUs replaced by gelu_grad (an
// op with a sharding rule and a cost rule but no gradient rule) still
// matches the preset, but the planner prices every transformer from its
// ops (docs/planner.md), forward and backward, so the missing gradient
// rule is an error rather than a plan priced by the preset's formulas.
// CHECK: cleave-plan: error: op 'cleave.gelu_grad' at loc("tiny-gpt.h.0.mlp") has no gradient rule (VJPOpInterface): the planner cannot price its backward pass
