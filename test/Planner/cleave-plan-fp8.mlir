// fp8 as a planning precision: Transformer Engine fp8 linear layers (their
// casts and amax/scale updates priced), attention, norms and the output
// layer in bf16. The built module carries fp8 weights, the plan says f8e4m3,
// and a GPU without an fp8 rate is refused with the field named.
// RUN: cleave-plan --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 64 --dtype fp8 --top 1 --quiet --json %t.json -o %t.mlir | FileCheck %s
// RUN: FileCheck --check-prefix=JSON --input-file=%t.json %s
// RUN: FileCheck --check-prefix=IR --input-file=%t.mlir %s
// RUN: not cleave-plan --model llama3-8b --cluster dgx-a100-80gb --gpus 8 --global-batch 64 --dtype f8e4m3 --quiet -o /dev/null | FileCheck --check-prefix=A100 %s
// RUN: not cleave-plan --model llama3-8b --dtype fp9 -o /dev/null 2>&1 | FileCheck --check-prefix=BAD %s

// CHECK: model    llama3-8b
// CHECK: chosen plan
// CHECK: step {{[0-9.]+}} s, {{[0-9]+}} tokens/s, MFU {{[0-9.]+}}%

// JSON: "plan": "tp={{[0-9]+}} pp={{[0-9]+}} dp={{[0-9]+}} cp={{[0-9]+}} {{.*}} f8e4m3 attention=flash"

// IR: module attributes {cleave.model = "llama3-8b"
// IR: f8E4M3FN

// A100: no plan fits:
// A100: plan.dtype: f8e4m3 is not supported by a100-sxm4-80gb (no peak rate)

// BAD: --dtype: expected f32, bf16, f16, f8e4m3 or fp8, got 'fp9'
