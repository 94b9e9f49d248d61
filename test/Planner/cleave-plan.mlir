// RUN: cleave-plan --model gpt3-175b --cluster dgx-a100-80gb --gpus 64 --global-batch 64 --top 3 --quiet --json %t.json -o %t.mlir | FileCheck %s
// RUN: FileCheck %s --check-prefix=JSON < %t.json
// RUN: FileCheck %s --check-prefix=IR < %t.mlir
// RUN: not cleave-plan --model gpt3-175b --cluster dgx-a100-80gb --gpus 8 --global-batch 8 --max-pp 2 --quiet 2>&1 | FileCheck %s --check-prefix=NOFIT
// RUN: not cleave-plan --model gpt3-175b --cluster tpu-v5 --gpus 8 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not cleave-plan %s --cluster local-cpu --global-batch 8 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: cleave-models --model tiny-gpt --vocab 100 --seq 16 -o %t.v100.mlir
// RUN: cleave-plan %t.v100.mlir --model tiny-gpt --cluster local-cpu --gpus 4 --quiet | FileCheck %s --check-prefix=FIT
// RUN: not cleave-plan %t.v100.mlir --model tiny-llama --cluster local-cpu --quiet 2>&1 | FileCheck %s --check-prefix=NOTIT
// RUN: cleave-plan --model gpt3-175b --layers 8 --hidden 2048 --heads 16 --seq 1024 --untied-embeddings --cluster dgx-a100-80gb --gpus 8 --global-batch 8 --top 2 --quiet | FileCheck %s --check-prefix=SHAPE
// RUN: not cleave-plan --model gpt3-175b --layers 0 --gpus 8 2>&1 | FileCheck %s --check-prefix=BADSHAPE
// RUN: not cleave-plan --model gpt3-175b --heads 7 --gpus 8 2>&1 | FileCheck %s --check-prefix=BADHEADS

// The planning tool on a zoo preset: the chosen plan with its step time,
// MFU, memory per GPU and where the time goes; the runners-up with why each
// lost; the intra-op sharding of each stage; JSON and the annotated module.

// CHECK: model    gpt3-175b (175B parameters, 96 layers, seq 2048)
// CHECK: cluster  dgx-a100-80gb: 64 x a100-sxm4-80gb (8 per node), 85.1 GB usable of 85.1 GB (0% headroom) per GPU
// CHECK: search   {{[0-9]+}} candidate plans on {{[0-9]+}} meshes; {{[0-9]+}} visited, {{[0-9]+}} simulated
// CHECK: chosen plan
// CHECK-NEXT:   mesh         pp={{[0-9]+}} dp={{[0-9]+}} cp={{[0-9]+}} tp={{[0-9]+}}
// CHECK:   step         {{[0-9.]+}} s, {{[0-9]+}} tokens/s, MFU {{[0-9.]+}}%
// CHECK:   memory/GPU   {{[0-9.]+}} GB on stage {{[0-9]+}}: parameters
// CHECK:   #  plan{{ +}}step{{ +}}MFU{{ +}}mem/GPU  why it lost
// CHECK-NEXT:   1  pp{{.*}}chosen
// CHECK-NEXT:   2  pp{{.*}}+{{[0-9.]+}}% step time
// CHECK-NEXT:   3  pp{{.*}}+{{[0-9.]+}}% step time
// CHECK: intra-op sharding (integer program per pipeline stage, repeated layers solved once)
// CHECK: stage{{s?}} {{[0-9,]+}}: {{[0-9]+}} repeated layers {{.*}}optimal
// CHECK: parameters
// CHECK:   h.*.attn.q.weight {{.*}} x96
// CHECK: layout changes (forward collectives; backward collectives)

// JSON: "chosen": {
// JSON: "mfu":
// JSON: "step_time_s":
// JSON: "mode": "transformer"
// JSON: "runners_up": [
// JSON: "lost_because": "+

// IR: module attributes {cleave.model = "gpt3-175b", cleave.plan = {micro_batch = {{[0-9]+}} : i64
// IR: cleave.mesh @cluster(pp = {{[0-9]+}} : {{nvlink|ib}}, dp = {{[0-9]+}} : {{nvlink|ib}}, cp = {{[0-9]+}} : {{nvlink|ib}}, tp = {{[0-9]+}} : nvlink)

// GPT-3 does not fit one node with at most two pipeline stages: the report
// says which constraint fails and by how much.
// NOFIT: no plan fits:
// NOFIT-NEXT: memory: the plan needing the least memory ({{.*}}) needs {{[0-9.]+}} GB per GPU on stage {{[0-9]+}} (parameters {{.*}}), {{[0-9.]+}} GB ({{[0-9.]+}}%) over the 85.1 GB usable of 85.1 GB (0% headroom)
// NOFIT-NEXT: constraints in effect: pp at most 2, 8 GPUs (relaxing them may help)
// NOFIT-NEXT: (preset gpt3-175b, priced like any module: 96 layers, hidden 12288, 96 heads, vocabulary 50257 read from the module; kernels priced from its ops)

// BAD: cleave-plan: error: cluster: unknown cluster preset 'tpu-v5'

// An input module's batch is the global batch.
// A preset built with another vocabulary and sequence length is still the
// preset: the planner takes both from the module.
// FIT: model    tiny-gpt (0.108M parameters, 2 layers, seq 16)
// FIT: intra-op sharding (integer program per pipeline stage
// NOTIT: cleave-plan: error: model: the module has 107520 parameters, preset 'tiny-llama' has 82368

// BATCH: cleave-plan: error: global batch: 8 differs from the module's batch of 4 (input 'x'); the module is one global step
func.func @forward(%x: tensor<4x8xf32> {cleave.input = "x"},
                   %y: tensor<4xi32> {cleave.input = "y"},
                   %w: tensor<8x8xf32> {cleave.param = "w"}) -> tensor<f32> {
  %h = cleave.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %loss = cleave.cross_entropy %h, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// A published run's shape without a preset of its own: the preset with
// --layers --hidden --heads --seq (--kv-heads --ffn --vocab) and untied
// embeddings: 8 x 12 x 2048^2 + 2 x 50257 x 2048 + 1024 x 2048 + norms.
// SHAPE: model    gpt3-175b (611M parameters, 8 layers, seq 1024)
// SHAPE: chosen plan
// SHAPE: step {{.*}} MFU {{[0-9.]+}}%
// BADSHAPE: cleave-plan: error: --layers: expected an integer >= 1, got 0
// BADHEADS: cleave-plan: error: model: hidden (12288) must be divisible by heads (7)
