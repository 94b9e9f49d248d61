// Zoo programs carry locations that name the model, the layer and the
// weight, so that an error on a zoo model says where in the model it is
// (they were all unknown locations before). cleave-models prints them with
// --locations; tools that build the model in-process see them directly.
// RUN: cleave-models --model tiny-gpt --locations | FileCheck %s --check-prefix=LOCS
// RUN: cleave-models --model tiny-gpt --locations | not cleave-opt --cleave-apply-plan="tp=3" 2>&1 | FileCheck %s --check-prefix=TP
// RUN: cleave-models --model tiny-gpt --locations | not cleave-opt --cleave-apply-plan="dp=3" 2>&1 | FileCheck %s --check-prefix=DP
// RUN: not cleave-run --model tiny-gpt --plan dp=3 -n 3 --steps 1 2>&1 | FileCheck %s --check-prefix=DP

// Arguments are named after their parameter or input, ops after their
// layer, and a linear layer's matmul and bias after its weight.
// LOCS-DAG: loc("tiny-gpt")
// LOCS-DAG: loc("tiny-gpt.tokens")
// LOCS-DAG: loc("tiny-gpt.wte.weight")
// LOCS-DAG: loc("tiny-gpt.h.1.mlp.fc.weight")
// LOCS-DAG: loc("tiny-gpt.embedding")
// LOCS-DAG: loc("tiny-gpt.h.0.attn")
// LOCS-DAG: loc("tiny-gpt.h.0.attn.q")
// LOCS-DAG: loc("tiny-gpt.h.1.mlp.proj")
// LOCS-DAG: loc("tiny-gpt.head")
// LOCS-NOT: loc(unknown)

// The plan's errors point at the parameter or the input they name.
// TP: error: loc("tiny-gpt.h.0.attn.q.weight"): tensor parallelism over 3 devices splits no matmul weight: parameter 'h.0.attn.q.weight' is 64 x 64
// DP: error: loc("tiny-gpt.tokens"): data parallelism over 3 devices needs the batch of input 'tokens' (4) to be divisible by 3
