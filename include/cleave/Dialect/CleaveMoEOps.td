//===- CleaveMoEOps.td - Mixture-of-experts ops -------------*- tablegen -*-===//
//
// A mixture-of-experts layer in the dense, GShard form: tokens are split
// into groups `G` of `S` tokens; the router turns `[G, S, E]` logits into
// one-hot dispatch and combine tensors `[G, S, E, C]` (C slots per expert
// and group), `cleave.moe_dispatch` gathers tokens into expert buffers
// `[E, G, C, H]`, the experts run as batched GEMMs over `E`, and
// `cleave.moe_combine` brings their outputs back to `[G, S, H]`. Every op
// is a fixed-shape einsum, so the sharding rules carry the expert factor
// and splitting it over a mesh axis makes the partitioner insert the
// `all_to_all` between the group-split token side and the expert-split
// expert side (forward and backward) with no MoE-specific code.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_CLEAVEMOEOPS_TD
#define CLEAVE_DIALECT_CLEAVEMOEOPS_TD

/// The routing attributes shared by the router, the auxiliary loss and their
/// gradients.
defvar Cleave_MoERoutingArgs = (ins I64Attr:$top_k, UnitAttr:$sigmoid);

def Cleave_MoERouterOp : Cleave_ModelOp<"moe_router",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable], ["getWork"]> {
  let summary = "Top-k routing of tokens to expert slots.";
  let description = [{
    `logits` is `[G, S, E]`: for each of `G` groups of `S` tokens, a score
    per expert. Each token picks the `top_k` experts with the highest
    logits; on equal logits the lower expert index wins. Scores are
    `softmax(logits)` over `E` (Mixtral), or `sigmoid(logits)` with
    `sigmoid` (DeepSeek-V3). With `normalize`, the gates of a token's
    selected experts are their scores divided by the sum of the selected
    scores; otherwise the gates are the scores.

    Each expert has `C` slots per group. Selections take slots in a fixed
    order: all first choices in token order, then all second choices, and
    so on (Switch/GShard priority). A selection finding its expert's slots
    full is dropped: the token gets nothing from that expert. `C` is
    `min(S, ceil(capacity_factor * S * top_k / E))`; without
    `capacity_factor` the router is dropless: `C = S`, which holds every
    token any expert can get.

    The results are `[G, S, E, C]`: `combine` holds the gate of token `s`
    at the slot `c` it took in expert `e` (zero elsewhere) and `dispatch`
    holds 1 there (0 elsewhere).

    ```mlir
    %combine, %dispatch = cleave.moe_router %logits {top_k = 2 : i64, normalize, capacity_factor = 1.0 : f64} : (tensor<2x8x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>)
    ```

    Sharding rule: `G` is a pass-through factor; `S` (the slot order),
    `E` (the top-k) and `C` need replication. The gradient flows through
    `combine` only (the choice of slots is piecewise constant), computed by
    `cleave.moe_router_grad`.
  }];
  let arguments = !con((ins Cleave_FloatTensor:$logits), Cleave_MoERoutingArgs,
                       (ins UnitAttr:$normalize,
                            OptionalAttr<F64Attr>:$capacity_factor));
  let results = (outs Cleave_FloatTensor:$combine,
                      Cleave_FloatTensor:$dispatch);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// Slots per expert and group: C for `tokens` tokens per group.
    int64_t getCapacity(int64_t tokens, int64_t experts);
  }];
}

def Cleave_MoERouterGradOp : Cleave_ModelOp<"moe_router_grad",
    [Pure, InferTypeOpAdaptor], ["getWork"]> {
  let summary = "Gradient of `cleave.moe_router` with respect to the logits.";
  let description = [{
    From the forward `logits`, the forward `dispatch` result and the
    gradient of `combine`, returns the gradient of the logits: the gate
    gradient of each kept selection (`sum_c dcombine * dispatch`), through
    the normalization over the selected experts and the softmax or sigmoid.
    The selection is recomputed from the logits.

    ```mlir
    %dlogits = cleave.moe_router_grad %logits, %dispatch, %dcombine {top_k = 2 : i64, normalize} : (tensor<2x8x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4xf32>
    ```
  }];
  let arguments = !con((ins Cleave_FloatTensor:$logits,
                            Cleave_FloatTensor:$dispatch,
                            Cleave_FloatTensor:$grad),
                       Cleave_MoERoutingArgs, (ins UnitAttr:$normalize));
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Cleave_MoEDispatchOp : Cleave_ModelOp<"moe_dispatch",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable], ["getWork"]> {
  let summary = "Gathers tokens into expert buffers.";
  let description = [{
    `input` is `[G, S, H]`, `weights` is `[G, S, E, C]` (the router's
    `dispatch` one-hot); the result is the expert buffer `[E, G, C, H]`:
    `result[e, g, c, h] = sum_s weights[g, s, e, c] * input[g, s, h]`.
    Slot `c` of expert `e` holds the token the router placed there, or
    zeros; the order is the router's, so it is deterministic.

    ```mlir
    %buf = cleave.moe_dispatch %x, %dispatch : (tensor<2x8x16xf32>, tensor<2x8x4x4xf32>) -> tensor<4x2x4x16xf32>
    ```

    Sharding rule: `G`, `E`, `C`, `H` are pass-through factors, `S` a
    reduction factor. With the token side split on `G` and the experts'
    weights on `E` over the same axis, the partitioner moves the buffer
    from a `G` split to an `E` split with an `all_to_all`. The gradient of
    `input` is `cleave.moe_combine` of the result gradient; `weights` is
    treated as data (the router's piecewise-constant choice) and gets no
    gradient.
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_FloatTensor:$weights);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Cleave_MoECombineOp : Cleave_ModelOp<"moe_combine",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable], ["getWork"]> {
  let summary = "Sums expert outputs back into token order, weighted by gates.";
  let description = [{
    `weights` is `[G, S, E, C]` (the router's `combine` gates), `experts`
    is `[E, G, C, H]`; the result is `[G, S, H]`:
    `result[g, s, h] = sum_{e, c} weights[g, s, e, c] * experts[e, g, c, h]`.
    A dropped token gets zeros (the residual connection carries it).

    ```mlir
    %y = cleave.moe_combine %combine, %out : (tensor<2x8x4x4xf32>, tensor<4x2x4x16xf32>) -> tensor<2x8x16xf32>
    ```

    Sharding rule: `G`, `S`, `H` are pass-through factors, `E` and `C`
    reduction factors. Gradients: `cleave.moe_dispatch` of the result
    gradient for `experts`, `cleave.moe_weights_grad` for `weights`.
  }];
  let arguments = (ins Cleave_FloatTensor:$weights,
                       Cleave_FloatTensor:$experts);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Cleave_MoEWeightsGradOp : Cleave_ModelOp<"moe_weights_grad",
    [Pure, InferTypeOpAdaptor], ["getWork"]> {
  let summary = "Gradient of `cleave.moe_combine` with respect to its weights.";
  let description = [{
    `grad` is `[G, S, H]`, `experts` is `[E, G, C, H]`; the result is
    `[G, S, E, C]`: `sum_h grad[g, s, h] * experts[e, g, c, h]`.

    ```mlir
    %dw = cleave.moe_weights_grad %dy, %out : (tensor<2x8x16xf32>, tensor<4x2x4x16xf32>) -> tensor<2x8x4x4xf32>
    ```

    Sharding rule: `G`, `S`, `E`, `C` are pass-through factors, `H` a
    reduction factor.
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_FloatTensor:$experts);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Cleave_MoEAuxLossOp : Cleave_ModelOp<"moe_aux_loss",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable], ["getWork"]> {
  let summary = "Switch-style load-balancing loss of a router, summed over groups.";
  let description = [{
    For `[G, S, E]` logits routed as `cleave.moe_router` does (same `top_k`
    and `sigmoid`), returns `sum_g E * sum_e f[g, e] * P[g, e]`, where
    `f[g, e]` is the fraction of the group's `S * top_k` selections that
    chose `e` (before capacity drops) and `P[g, e]` the mean over the group's
    tokens of the router probability of `e`: the softmax, or with `sigmoid`
    the sigmoid scores normalized to sum 1 per token (DeepSeek-V3's
    sequence-wise balance loss). A balanced group contributes 1. The result
    is a scalar in f32 (f64 for f64 logits); divide by the number of groups
    for the mean. `f` is a constant for the gradient, as in Switch.

    ```mlir
    %aux = cleave.moe_aux_loss %logits {top_k = 2 : i64} : (tensor<2x8x4xf32>) -> tensor<f32>
    ```

    Sharding rule: `G` is a reduction factor (each device's groups give a
    partial sum); `S` and `E` need replication.
  }];
  let arguments = !con((ins Cleave_FloatTensor:$logits), Cleave_MoERoutingArgs);
  let results = (outs Cleave_FloatScalar:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Cleave_MoEAuxLossGradOp : Cleave_ModelOp<"moe_aux_loss_grad",
    [Pure, InferTypeOpAdaptor], ["getWork"]> {
  let summary = "Gradient of `cleave.moe_aux_loss` with respect to the logits.";
  let description = [{
    `E * f[g, e] / S * dloss` through the softmax (or the normalized
    sigmoid), with `f` recomputed from the logits.

    ```mlir
    %dlogits = cleave.moe_aux_loss_grad %logits, %dloss {top_k = 2 : i64} : (tensor<2x8x4xf32>, tensor<f32>) -> tensor<2x8x4xf32>
    ```
  }];
  let arguments = !con((ins Cleave_FloatTensor:$logits,
                            Cleave_FloatScalar:$grad),
                       Cleave_MoERoutingArgs);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

#endif // CLEAVE_DIALECT_CLEAVEMOEOPS_TD
