// The model zoo emits verified programs for each architecture.
// RUN: cleave-models --model tiny-gpt --dropout 0.1 | cleave-opt | FileCheck %s --check-prefix=GPT
// RUN: cleave-models --model tiny-llama | cleave-opt | FileCheck %s --check-prefix=LLAMA
// RUN: cleave-models --model tiny-mlp --dtype bf16 | cleave-opt | FileCheck %s --check-prefix=MLP
// RUN: cleave-models --model tiny-moe | cleave-opt | FileCheck %s --check-prefix=MOE
// RUN: cleave-models --model llama3-405b | cleave-opt | FileCheck %s --check-prefix=BIG
// RUN: not cleave-models --model tiny-llama --kv-heads 3 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not cleave-models --model gpt5 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: cleave-models --list | FileCheck %s --check-prefix=LIST
// RUN: cleave-models --model tiny-gpt --dropout 0.1 | grep -c cleave.dropout | FileCheck %s --check-prefix=DROPOUTS

// GPT: func.func @forward(%{{.*}}: tensor<4x32xi32> {cleave.input = "tokens"}, %{{.*}}: tensor<4x32xi32> {cleave.input = "targets"}, %{{.*}}: tensor<i64> {cleave.input = "seed"}
// GPT-SAME: cleave.param = "wte.weight"
// GPT-SAME: cleave.init = #cleave.init<normal, 1.000000e-02>, cleave.param = "h.1.mlp.proj.weight"
// GPT-COUNT-2: cleave.attention %{{.*}} {causal}
// GPT: cleave.matmul %{{.*}}, %arg3 {transpose_rhs} : (tensor<4x32x64xf32>, tensor<65x64xf32>) -> tensor<4x32x65xf32>
// GPT: cleave.cross_entropy

// One dropout after the embeddings, two per layer.
// DROPOUTS: 5

// LLAMA: cleave.param = "layers.0.attention.wk.weight"
// LLAMA-SAME: cleave.param = "output.weight"
// LLAMA: cleave.rms_norm
// LLAMA: cleave.rotary %{{.*}} : tensor<4x32x4x16xf32>
// LLAMA: cleave.rotary %{{.*}} : tensor<4x32x2x16xf32>
// LLAMA: cleave.attention %{{.*}} {causal} : (tensor<4x32x4x16xf32>, tensor<4x32x2x16xf32>, tensor<4x32x2x16xf32>) -> tensor<4x32x4x16xf32>
// LLAMA: cleave.silu

// MLP: %{{.*}}: tensor<8x32xbf16> {cleave.input = "features"}
// MLP: cleave.cast %{{.*}} : tensor<64x32xf32> to tensor<64x32xbf16>
// MLP: cleave.cross_entropy %{{.*}}, %{{.*}} : (tensor<8x10xbf16>, tensor<8xi32>) -> tensor<f32>

// BIG: module attributes {cleave.model = "llama3-405b"}
// BIG: cleave.param = "layers.125.feed_forward.w2.weight"

// BAD: cleave-models: error: invalid model configuration: heads (4) must be a multiple of kv_heads (3)
// UNKNOWN: cleave-models: error: unknown preset 'gpt5' (see --list)
// LIST: llama3-405b      llama      126   16384    128     8    53248   128256   8192     405.853B

// A Llama block whose feed-forward is 4 routed experts (top-2, capacity 1:
// 16 slots per expert and sequence) plus one shared expert, and the
// balance loss added to the cross entropy.
// MOE: cleave.param = "layers.0.feed_forward.gate.weight"
// MOE-SAME: cleave.param = "layers.0.feed_forward.experts.w1"
// MOE-SAME: cleave.param = "layers.0.feed_forward.shared_experts.w1.weight"
// MOE: cleave.moe_router %{{.*}} {capacity_factor = 1.000000e+00 : f64, normalize, top_k = 2 : i64} : (tensor<4x32x4xf32>) -> (tensor<4x32x4x16xf32>, tensor<4x32x4x16xf32>)
// MOE: cleave.moe_dispatch %{{.*}} : (tensor<4x32x64xf32>, tensor<4x32x4x16xf32>) -> tensor<4x4x16x64xf32>
// MOE: cleave.matmul %{{.*}}, %{{.*}} : (tensor<4x64x64xf32>, tensor<4x64x32xf32>) -> tensor<4x64x32xf32>
// MOE: cleave.moe_combine %{{.*}} : (tensor<4x32x4x16xf32>, tensor<4x4x16x64xf32>) -> tensor<4x32x64xf32>
// MOE: cleave.moe_aux_loss %{{.*}} {top_k = 2 : i64} : (tensor<4x32x4xf32>) -> tensor<f32>
// MOE: cleave.cross_entropy
