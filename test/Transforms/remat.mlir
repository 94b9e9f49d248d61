// cleave-remat on a two-layer transformer (layers h.0 and h.1: norm,
// attention, MLP with a tied weight; then a final norm and a tied head).
//
// RUN: cleave-opt %s --cleave-autodiff=optimizer=sgd --canonicalize --cse --cleave-remat=mode=full > %t.full
// RUN: FileCheck %s --check-prefix=FULL < %t.full
// RUN: FileCheck %s --check-prefix=KEPT < %t.full
// RUN: cleave-opt %s --cleave-autodiff=optimizer=sgd --canonicalize --cse --cleave-remat=mode=selective | FileCheck %s --check-prefix=SEL
// RUN: cleave-opt %s --cleave-autodiff=optimizer=sgd --canonicalize --cse --cleave-remat=mode=none | FileCheck %s --check-prefix=NONE
// RUN: cleave-opt %s --cleave-pipeline-stages=stages=2 --cleave-autodiff=optimizer=sgd --canonicalize --cse --cleave-remat | FileCheck %s --check-prefix=STAGE
// RUN: cleave-opt %s --cleave-autodiff=optimizer=sgd --canonicalize --cse --cleave-remat=mode=full --cleave-apply-plan="dp=2" --cleave-propagate-sharding --cleave-partition --cleave-verify-collectives | FileCheck %s --check-prefix=PART

// The module's plan: no recomputation on the first pipeline rank, full on
// the second (the STAGE run; the others name the kind with mode=).
module attributes {cleave.plan = {recompute = "full", recompute_per_stage = ["none", "full"]}} {
  func.func @forward(%tokens: tensor<2x8xi32> {cleave.input = "tokens"},
                     %targets: tensor<2x8xi32> {cleave.input = "targets"},
                     %wte: tensor<16x8xf32> {cleave.param = "wte.weight"},
                     %g0: tensor<8xf32> {cleave.param = "h.0.ln.weight"},
                     %b0: tensor<8xf32> {cleave.param = "h.0.ln.bias"},
                     %wq0: tensor<8x8xf32> {cleave.param = "h.0.attn.q.weight"},
                     %wk0: tensor<8x8xf32> {cleave.param = "h.0.attn.k.weight"},
                     %wv0: tensor<8x8xf32> {cleave.param = "h.0.attn.v.weight"},
                     %wo0: tensor<8x8xf32> {cleave.param = "h.0.attn.o.weight"},
                     %wf0: tensor<16x8xf32> {cleave.param = "h.0.mlp.fc.weight"},
                     %g1: tensor<8xf32> {cleave.param = "h.1.ln.weight"},
                     %b1: tensor<8xf32> {cleave.param = "h.1.ln.bias"},
                     %wq1: tensor<8x8xf32> {cleave.param = "h.1.attn.q.weight"},
                     %wk1: tensor<8x8xf32> {cleave.param = "h.1.attn.k.weight"},
                     %wv1: tensor<8x8xf32> {cleave.param = "h.1.attn.v.weight"},
                     %wo1: tensor<8x8xf32> {cleave.param = "h.1.attn.o.weight"},
                     %wf1: tensor<16x8xf32> {cleave.param = "h.1.mlp.fc.weight"},
                     %gf: tensor<8xf32> {cleave.param = "ln_f.weight"},
                     %bf: tensor<8xf32> {cleave.param = "ln_f.bias"},
                     %cf1: tensor<16xf32> {cleave.param = "h.1.mlp.fc.bias"}) -> tensor<f32> {
    %x0 = cleave.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x8xi32>) -> tensor<2x8x8xf32>
    // layer 0
    %n0 = cleave.layer_norm %x0, %g0, %b0 : (tensor<2x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x8xf32>
    %q0 = cleave.matmul %n0, %wq0 {transpose_rhs} : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
    %k0 = cleave.matmul %n0, %wk0 {transpose_rhs} : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
    %v0 = cleave.matmul %n0, %wv0 {transpose_rhs} : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
    %qh0 = cleave.reshape %q0 : tensor<2x8x8xf32> to tensor<2x8x2x4xf32>
    %kh0 = cleave.reshape %k0 : tensor<2x8x8xf32> to tensor<2x8x2x4xf32>
    %vh0 = cleave.reshape %v0 : tensor<2x8x8xf32> to tensor<2x8x2x4xf32>
    %a0 = cleave.attention %qh0, %kh0, %vh0 {causal} : (tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> tensor<2x8x2x4xf32>
    %m0 = cleave.reshape %a0 : tensor<2x8x2x4xf32> to tensor<2x8x8xf32>
    %o0 = cleave.matmul %m0, %wo0 {transpose_rhs} : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
    %r0 = cleave.add %x0, %o0 : tensor<2x8x8xf32>
    %f0 = cleave.matmul %r0, %wf0 {transpose_rhs} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
    %e0 = cleave.gelu %f0 : tensor<2x8x16xf32>
    %p0 = cleave.matmul %e0, %wf0 : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
    %x1 = cleave.add %r0, %p0 : tensor<2x8x8xf32>
    // layer 1
    %n1 = cleave.layer_norm %x1, %g1, %b1 : (tensor<2x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x8xf32>
    %q1 = cleave.matmul %n1, %wq1 {transpose_rhs} : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
    %k1 = cleave.matmul %n1, %wk1 {transpose_rhs} : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
    %v1 = cleave.matmul %n1, %wv1 {transpose_rhs} : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
    %qh1 = cleave.reshape %q1 : tensor<2x8x8xf32> to tensor<2x8x2x4xf32>
    %kh1 = cleave.reshape %k1 : tensor<2x8x8xf32> to tensor<2x8x2x4xf32>
    %vh1 = cleave.reshape %v1 : tensor<2x8x8xf32> to tensor<2x8x2x4xf32>
    %a1 = cleave.attention %qh1, %kh1, %vh1 {causal} : (tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> tensor<2x8x2x4xf32>
    %m1 = cleave.reshape %a1 : tensor<2x8x2x4xf32> to tensor<2x8x8xf32>
    %o1 = cleave.matmul %m1, %wo1 {transpose_rhs} : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
    %r1 = cleave.add %x1, %o1 : tensor<2x8x8xf32>
    %w1 = cleave.matmul %r1, %wf1 {transpose_rhs} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
    %c1 = cleave.broadcast %cf1 dims = [2] : tensor<16xf32> -> tensor<2x8x16xf32>
    %f1 = cleave.add %w1, %c1 : tensor<2x8x16xf32>
    %e1 = cleave.gelu %f1 : tensor<2x8x16xf32>
    %p1 = cleave.matmul %e1, %wf1 : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
    %x2 = cleave.add %r1, %p1 : tensor<2x8x8xf32>
    // head
    %nf = cleave.layer_norm %x2, %gf, %bf : (tensor<2x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x8xf32>
    %logits = cleave.matmul %nf, %wte {transpose_rhs} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
    %loss = cleave.cross_entropy %logits, %targets : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// Full: layer 1's backward pass begins by recomputing the layer from its
// input (the residual stream %[[X1]]) through a barrier; the forward norm,
// attention and MLP values are read only by forward ops.
// FULL-LABEL: func.func @train_step
// FULL: %[[N1:.*]] = cleave.layer_norm %[[X1:.*]], %arg10, %arg11
// FULL: %[[LOSS:.*]] = cleave.cross_entropy
// FULL: %[[B1:.*]] = cleave.optimization_barrier %[[X1]] : tensor<2x8x8xf32>
// The bias broadcast is recomputed too, from a barrier on the parameter
// (the forward one, as large as an activation, is not kept: KEPT).
// FULL-NEXT: %[[BC1:.*]] = cleave.optimization_barrier %arg19 : tensor<16xf32>
// FULL-NEXT: %[[RN1:.*]] = cleave.layer_norm %[[B1]], %arg10, %arg11
// FULL-NEXT: cleave.matmul %[[RN1]], %arg12 {transpose_rhs}
// FULL: %[[RA1:.*]] = cleave.attention
// FULL: %[[RC1:.*]] = cleave.broadcast %[[BC1]] dims = [2]
// FULL-NEXT: %[[RF1:.*]] = cleave.add %{{.*}}, %[[RC1]]
// FULL-NEXT: %[[RG1:.*]] = cleave.gelu %[[RF1]]
// FULL: cleave.matmul %[[RG1]], %{{.*}} {reduce_batch, transpose_lhs}
// The norm's gradient reads the kept layer input.
// FULL: cleave.layer_norm_grad %[[X1]], %arg10
// Layer 0's recomputation starts from the embedding.
// FULL: %[[B0:.*]] = cleave.optimization_barrier %[[X0:.*]] : tensor<2x8x8xf32>
// FULL-NEXT: cleave.layer_norm %[[B0]], %arg3, %arg4
// FULL: cleave.layer_norm_grad %[[X0]], %arg3
// FULL-NOT: cleave.optimization_barrier
// FULL: return

// The forward values of layer 1 have no backward reader left: the weight
// gradients of q, k and v read the recomputed norm, the recomputed MLP its
// own bias broadcast.
// KEPT-LABEL: func.func @train_step
// KEPT: %[[N1:.*]] = cleave.layer_norm %[[X1:.*]], %arg10, %arg11
// KEPT: %[[C1:.*]] = cleave.broadcast %arg19
// KEPT: cleave.cross_entropy
// KEPT-NOT: %[[N1]]{{[^0-9]}}
// KEPT-NOT: %[[C1]]{{[^0-9]}}
// KEPT: return

// Selective: only the attention runs again, from the kept q, k and v; the
// weight gradient of the output projection reads the recomputed output.
// SEL-LABEL: func.func @train_step
// SEL: cleave.attention
// SEL: %[[A1:.*]] = cleave.attention %[[Q:.*]], %[[K:.*]], %[[V:.*]] {causal}
// SEL: %[[BQ:.*]] = cleave.optimization_barrier %[[Q]]
// SEL-NEXT: %[[BK:.*]] = cleave.optimization_barrier %[[K]]
// SEL-NEXT: %[[BV:.*]] = cleave.optimization_barrier %[[V]]
// SEL-NEXT: %[[RA:.*]] = cleave.attention %[[BQ]], %[[BK]], %[[BV]] {causal}
// SEL-NEXT: %[[RO:.*]] = cleave.reshape %[[RA]] : tensor<2x8x2x4xf32> to tensor<2x8x8xf32>
// SEL-NEXT: cleave.matmul %{{.*}}, %[[RO]] {reduce_batch, transpose_lhs}
// SEL: cleave.attention_grad %[[Q]], %[[K]], %[[V]]
// Then layer 0's.
// SEL: cleave.optimization_barrier
// SEL-NEXT: cleave.optimization_barrier
// SEL-NEXT: cleave.optimization_barrier
// SEL-NEXT: cleave.attention
// SEL-NOT: cleave.optimization_barrier
// SEL: return

// NONE-LABEL: func.func @train_step
// NONE-NOT: cleave.optimization_barrier

// Per pipeline rank: layer 1 (stage 1) is recomputed, layer 0 (stage 0)
// is not; the recomputed ops keep their stage.
// STAGE-LABEL: func.func @train_step
// STAGE: cleave.optimization_barrier %{{.*}} {cleave.stage = 1 : i64}
// STAGE-NEXT: cleave.optimization_barrier %arg19 {cleave.stage = 1 : i64}
// STAGE-NEXT: cleave.layer_norm %{{.*}}, %arg10, %arg11 {cleave.stage = 1 : i64}
// STAGE-NOT: cleave.optimization_barrier
// STAGE: return

// Partitioned over dp: the barriers and recomputed ops take local shapes.
// PART-LABEL: func.func @train_step
// PART: cleave.optimization_barrier %{{.*}} : tensor<1x8x8xf32>
// PART-NEXT: cleave.optimization_barrier %arg19 : tensor<16xf32>
// PART-NEXT: cleave.layer_norm %{{.*}} -> tensor<1x8x8xf32>
