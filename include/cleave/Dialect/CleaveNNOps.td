//===- CleaveNNOps.td - Neural-network ops and their gradients -*- tablegen -*-===//
//
// Each op with an inner loop that autodiff cannot express cheaply through
// other ops has a `_grad` companion that recomputes what it needs from the
// forward inputs (no saved statistics), so both sides shard the same way.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_CLEAVENNOPS_TD
#define CLEAVE_DIALECT_CLEAVENNOPS_TD

def Cleave_MatmulOp : Cleave_ModelOp<"matmul",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable], ["getWork"]> {
  let summary = "Batched matrix product with optional transposes.";
  let description = [{
    `lhs` is `[batch..., M, K]` (`[batch..., K, M]` with `transpose_lhs`);
    `rhs` is `[batch..., K, N]` (`[batch..., N, K]` with `transpose_rhs`) with
    the same batch dimensions, or a plain matrix that is shared by every
    batch (a weight). The result is `[batch..., M, N]`; products accumulate
    in fp32 at least. Both operands have the same element type.

    ```mlir
    // a linear layer: x @ W^T with W stored [out, in] as in PyTorch
    %y = cleave.matmul %x, %w {transpose_rhs} : (tensor<8x128x768xf32>, tensor<3072x768xf32>) -> tensor<8x128x3072xf32>
    ```

    Sharding rule: batch, M and N are pass-through factors; K is a reduction
    factor, so splitting it leaves a partial sum (Megatron's row-parallel
    linear).

    With `reduce_batch` (and `transpose_lhs`; `rhs` then has the lhs rank
    and is not transposed) the batch dimensions are summed over as well: the
    result is the matrix `[M, N] = sum over batch of lhs^T rhs`, the weight
    gradient of a layer applied to every batch and position. Its batch
    factors are reductions too, so a batch or sequence split (data or
    context parallelism) leaves a partial sum rather than a gather.

    ```mlir
    // dW = sum over (b, s) of x[b, s, :]^T dy[b, s, :]
    %dw = cleave.matmul %x, %dy {reduce_batch, transpose_lhs} : (tensor<8x128x768xf32>, tensor<8x128x3072xf32>) -> tensor<768x3072xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$lhs, Cleave_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                       UnitAttr:$reduce_batch);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def Cleave_SoftmaxOp : Cleave_ModelOp<"softmax",
    [Pure, SameOperandsAndResultType, Cleave_Differentiable], ["getWork"]> {
  let summary = "Softmax along one dimension.";
  let description = [{
    `exp(x - max(x)) / sum(exp(x - max(x)))` along `dim`, computed stably.

    ```mlir
    %p = cleave.softmax %s dim = 3 : tensor<8x12x128x128xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input `dim` `=` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Cleave_SoftmaxGradOp : Cleave_ModelOp<"softmax_grad",
    [Pure, SameOperandsAndResultType], ["getWork"]> {
  let summary = "Gradient of `cleave.softmax` from its output.";
  let description = [{
    Given the softmax output `y` and the gradient `dy` of it, returns
    `y * (dy - sum(dy * y, dim))`.

    ```mlir
    %ds = cleave.softmax_grad %p, %dp dim = 3 : tensor<8x12x128x128xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$output, Cleave_FloatTensor:$grad,
                       I64Attr:$dim);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $output `,` $grad `dim` `=` $dim attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Cleave_LayerNormOp : Cleave_ModelOp<"layer_norm",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable,
     Cleave_SequenceParallel], ["getWork"]> {
  let summary = "Layer normalization over the last dimension.";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * gamma + beta`, with mean and biased
    variance over the last dimension `H`; `gamma` and `beta` are `[H]` and
    share the input's element type.

    ```mlir
    %y = cleave.layer_norm %x, %g, %b {epsilon = 1.0e-05 : f64} : (tensor<8x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<8x128x768xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_FloatTensor:$gamma,
                       Cleave_FloatTensor:$beta,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Cleave_LayerNormGradOp : Cleave_ModelOp<"layer_norm_grad",
    [Pure, InferTypeOpAdaptor], ["getWork"]> {
  let summary = "Gradients of `cleave.layer_norm`.";
  let description = [{
    From the forward input `x`, `gamma` and the result gradient `dy`, returns
    the gradients of `x`, `gamma` and `beta`. Mean and variance are
    recomputed.

    ```mlir
    %dx, %dg, %db = cleave.layer_norm_grad %x, %g, %dy : (tensor<8x128x768xf32>, tensor<768xf32>, tensor<8x128x768xf32>) -> (tensor<8x128x768xf32>, tensor<768xf32>, tensor<768xf32>)
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_FloatTensor:$gamma,
                       Cleave_FloatTensor:$grad,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Cleave_FloatTensor:$input_grad,
                      Cleave_FloatTensor:$gamma_grad,
                      Cleave_FloatTensor:$beta_grad);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Cleave_RMSNormOp : Cleave_ModelOp<"rms_norm",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable,
     Cleave_SequenceParallel], ["getWork"]> {
  let summary = "Root-mean-square normalization over the last dimension.";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * gamma` over the last dimension `H`, as
    in Llama; `gamma` is `[H]`.

    ```mlir
    %y = cleave.rms_norm %x, %g {epsilon = 1.0e-05 : f64} : (tensor<8x128x4096xf32>, tensor<4096xf32>) -> tensor<8x128x4096xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_FloatTensor:$gamma,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Cleave_RMSNormGradOp : Cleave_ModelOp<"rms_norm_grad",
    [Pure, InferTypeOpAdaptor], ["getWork"]> {
  let summary = "Gradients of `cleave.rms_norm`.";
  let description = [{
    From the forward input `x`, `gamma` and the result gradient `dy`, returns
    the gradients of `x` and `gamma`.

    ```mlir
    %dx, %dg = cleave.rms_norm_grad %x, %g, %dy : (tensor<8x128x4096xf32>, tensor<4096xf32>, tensor<8x128x4096xf32>) -> (tensor<8x128x4096xf32>, tensor<4096xf32>)
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_FloatTensor:$gamma,
                       Cleave_FloatTensor:$grad,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Cleave_FloatTensor:$input_grad,
                      Cleave_FloatTensor:$gamma_grad);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Cleave_EmbeddingOp : Cleave_ModelOp<"embedding",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable], ["getWork"],
    ["buildLocalOp"]> {
  let summary = "Looks up rows of a table by integer ids.";
  let description = [{
    `table` is `[V, H]`, `ids` any integer tensor with values in `[0, V)`;
    the result is `ids.shape + [H]`.

    ```mlir
    %e = cleave.embedding %wte, %tokens : (tensor<50304x768xf32>, tensor<8x128xi32>) -> tensor<8x128x768xf32>
    ```

    Sharding rule: `V` is a reduction factor: a device holding rows
    `[v0, v1)` contributes the rows it owns and zeros elsewhere, and the
    partial results sum to the lookup (Megatron's vocabulary-parallel
    embedding). The partitioner writes that per-device lookup with the
    optional `block` operand (an i64 scalar `b`): the table is then block `b`
    of a vocabulary split into blocks of `V` rows, so row `r` holds id
    `b * V + r`, and ids outside `[b * V, (b + 1) * V)` give zero rows.

    ```mlir
    %b = cleave.axis_index on @world axes = [tp] : tensor<i64>
    %p = cleave.embedding %wte_shard, %tokens, %b : (tensor<12576x768xf32>, tensor<8x128xi32>, tensor<i64>) -> tensor<8x128x768xf32>
    ```

    `padding_idx` (an id in `[0, V)` of the whole vocabulary) changes only
    the gradient: that row of the table gets none (PyTorch's
    `nn.Embedding(padding_idx=...)`); the lookup is unchanged.

    ```mlir
    %e = cleave.embedding %wte, %tokens {padding_idx = 0 : i64} : (tensor<1000x64xf32>, tensor<8x128xi32>) -> tensor<8x128x64xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$table, Cleave_IndexTensor:$ids,
                       Optional<Cleave_I64Scalar>:$block,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_EmbeddingGradOp : Cleave_ModelOp<"embedding_grad",
    [Pure], ["getWork"], ["buildLocalOp"]> {
  let summary = "Gradient of `cleave.embedding` with respect to the table.";
  let description = [{
    Scatter-adds each row of `dy` (`ids.shape + [H]`) into row `ids[...]` of
    a zero `[V, H]` result. With the optional `block` operand (an i64 scalar
    `b`), result row `r` stands for id `b * V + r` and ids outside that block
    are skipped: the gradient of one vocabulary shard. Tokens whose id is
    `padding_idx` (an id of the whole vocabulary) are skipped too: that row
    of the gradient stays zero.

    ```mlir
    %dwte = cleave.embedding_grad %tokens, %de : (tensor<8x128xi32>, tensor<8x128x768xf32>) -> tensor<50304x768xf32>
    ```
  }];
  let arguments = (ins Cleave_IndexTensor:$ids, Cleave_FloatTensor:$grad,
                       Optional<Cleave_I64Scalar>:$block,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_RotaryOp : Cleave_ModelOp<"rotary",
    [Pure, AllTypesMatch<["input", "result"]>, Cleave_Differentiable],
    ["getWork"], ["buildLocalOp"]> {
  let summary = "Rotary position embedding (RoPE).";
  let description = [{
    `x` is `[B, S, N, D]` (batch, sequence, heads, head dim; `D` even).
    Position `s` rotates each pair of features `(a, b)` of a head by the
    angle `s * theta^(-2i/D)` for pair `i`. Pairs are `(x[i], x[i + D/2])`
    (the `rotate_half` form of GPT-NeoX and Hugging Face Llama), or
    `(x[2i], x[2i+1])` with `interleaved` (Meta's Llama). `inverse` rotates
    by the negative angle: it is the gradient of the forward rotation.

    ```mlir
    %q2 = cleave.rotary %q {theta = 500000.0 : f64} : tensor<8x128x32x128xf32>
    ```

    Sharding rule: batch and heads are pass-through, and so is the sequence:
    a device holding rows `[b * S, (b + 1) * S)` of a split sequence (context
    or sequence parallelism) rotates them by their global positions. The
    partitioner writes that per-device op with the optional `block` operand
    (an i64 scalar `b`): row `s` is then at position `b * S + s`.

    ```mlir
    %b = cleave.axis_index on @mesh axes = [cp] : tensor<i64>
    %q2 = cleave.rotary %q block %b : tensor<i64> {theta = 500000.0 : f64} : tensor<8x64x32x128xf32>
    ```

    With `balanced = n` as well (the load-balanced layout of context
    parallelism, `cleave.mesh`'s `balanced_axes`), the `S` rows are chunks
    `b` and `2n-1-b` of a sequence cut into `2n` chunks of `S/2`: row `s` is
    at `b * S/2 + s` when `s < S/2`, else at `(2n-1-b) * S/2 + s - S/2`.
  }];
  let arguments = (ins Cleave_FloatTensor:$input,
                       Optional<Cleave_I64Scalar>:$block,
                       DefaultValuedAttr<F64Attr, "10000.0">:$theta,
                       UnitAttr:$interleaved, UnitAttr:$inverse,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$balanced);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat =
      "$input (`block` $block^ `:` type($block))? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Cleave_AttentionOp : Cleave_ModelOp<"attention",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable], ["getWork"],
    ["buildLocalOp"]> {
  let summary = "Scaled dot-product attention, optionally causal, with GQA.";
  let description = [{
    `q` is `[B, S, Hq, D]`, `k` is `[B, Skv, Hkv, D]`, `v` is
    `[B, Skv, Hkv, Dv]`; `Hq` is a multiple of `Hkv` and query head `h` uses
    key/value head `h / (Hq / Hkv)` (grouped-query attention; `Hkv = 1` is
    multi-query). The result is `[B, S, Hq, Dv]`:
    `softmax(q k^T * scale + mask) v` per batch and head, where `mask` hides
    keys after the query position when `causal` is set (then `S == Skv`).
    `scale` defaults to `1/sqrt(D)`.

    ```mlir
    %o = cleave.attention %q, %k, %v {causal} : (tensor<8x128x32x128xf32>, tensor<8x128x8x128xf32>, tensor<8x128x8x128xf32>) -> tensor<8x128x32x128xf32>
    ```

    Sharding rule: batch and heads are pass-through (heads as two factors,
    key/value head and group, so GQA heads split consistently across q and
    k/v), and so is the query sequence (context parallelism: each device
    keeps its block of queries and attends to every key); the key/value
    sequence and the head dimensions need replication, so a sequence split
    over `cp` all-gathers K and V before the op.

    With `causal`, a device's queries are masked by their global positions.
    The partitioner writes that per-device op with the optional
    `query_block` operand (an i64 scalar `b`): the `S` queries are rows
    `[b * S, (b + 1) * S)` of the `Skv` keys (`S` divides `Skv`), and query
    `i` sees keys `j <= b * S + i`.

    ```mlir
    %b = cleave.axis_index on @mesh axes = [cp] : tensor<i64>
    %o = cleave.attention %q, %k, %v, %b {causal} : (tensor<8x64x32x128xf32>, tensor<8x128x8x128xf32>, tensor<8x128x8x128xf32>, tensor<i64>) -> tensor<8x64x32x128xf32>
    ```

    With `balanced = n` as well (load-balanced context parallelism), the
    queries are chunks `b` and `2n-1-b` of `2n` chunks of `S/2` keys (`2n`
    chunks make `Skv`): query `i < S/2` is at `b * S/2 + i`, query
    `i >= S/2` at `(2n-1-b) * S/2 + i - S/2`. The keys stay in their natural
    order (the partitioner restores it after the all-gather).
  }];
  let arguments = (ins Cleave_FloatTensor:$query, Cleave_FloatTensor:$key,
                       Cleave_FloatTensor:$value,
                       Optional<Cleave_I64Scalar>:$query_block,
                       UnitAttr:$causal, OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$balanced);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// The scale applied to the scores: `scale` or 1/sqrt(head dim).
    double getScaleOrDefault();
  }];
}

def Cleave_AttentionGradOp : Cleave_ModelOp<"attention_grad",
    [Pure, InferTypeOpAdaptor], ["getWork"], ["buildLocalOp"]> {
  let summary = "Gradients of `cleave.attention`.";
  let description = [{
    From the forward operands and the result gradient `dout`, returns the
    gradients of `q`, `k` and `v`. Scores and probabilities are recomputed,
    as flash attention's backward pass does. `causal` and `scale` must match
    the forward op.

    ```mlir
    %dq, %dk, %dv = cleave.attention_grad %q, %k, %v, %do {causal} : (tensor<8x128x32x128xf32>, tensor<8x128x8x128xf32>, tensor<8x128x8x128xf32>, tensor<8x128x32x128xf32>) -> (tensor<8x128x32x128xf32>, tensor<8x128x8x128xf32>, tensor<8x128x8x128xf32>)
    ```

    Sharding rule: as `cleave.attention`'s; the query sequence is a
    reduction factor of `dk` and `dv` (each device's queries contribute
    partial key/value gradients), so under context parallelism they are
    reduce-scattered into the sequence split. `query_block` and `balanced`
    are the forward op's.
  }];
  let arguments = (ins Cleave_FloatTensor:$query, Cleave_FloatTensor:$key,
                       Cleave_FloatTensor:$value, Cleave_FloatTensor:$grad,
                       Optional<Cleave_I64Scalar>:$query_block,
                       UnitAttr:$causal, OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$balanced);
  let results = (outs Cleave_FloatTensor:$query_grad,
                      Cleave_FloatTensor:$key_grad,
                      Cleave_FloatTensor:$value_grad);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// The scale applied to the scores: `scale` or 1/sqrt(head dim).
    double getScaleOrDefault();
  }];
}

def Cleave_CrossEntropyOp : Cleave_ModelOp<"cross_entropy",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable], ["getWork"],
    ["buildLocalOp"]> {
  let summary = "Mean softmax cross-entropy of logits against integer labels.";
  let description = [{
    `logits` is `[..., V]`, `labels` has the leading shape `[...]` with
    values in `[0, V)`. The result is the scalar mean over all label
    positions of `logsumexp(logits) - logits[label]`, in f32 (f64 when the
    logits are f64).

    ```mlir
    %loss = cleave.cross_entropy %logits, %targets : (tensor<8x128x50304xf32>, tensor<8x128xi32>) -> tensor<f32>
    ```

    With `ignore_index = i`, positions whose label is `i` contribute nothing
    and are not counted: the result is the sum over the other positions
    divided by their number (PyTorch's `ignore_index`; NaN when every
    position is ignored, as in PyTorch). The optional `count` operand (a
    float scalar) replaces that number: the partitioner passes the global
    count of non-ignored labels (`cleave.label_count` all-reduced over the
    axes splitting the rows), so that each device's sum over its rows,
    divided by it, adds up to the global mean.

    ```mlir
    %loss = cleave.cross_entropy %logits, %targets {ignore_index = -1 : i64} : (tensor<8x128x50304xf32>, tensor<8x128xi32>) -> tensor<f32>
    %n = cleave.label_count %local_targets {ignore_index = -1 : i64} : (tensor<4x128xi32>) -> tensor<f32>
    %all = cleave.all_reduce %n on @world axes = [dp] : tensor<f32>
    %part = cleave.cross_entropy %local_logits, %local_targets, %all {ignore_index = -1 : i64} : (tensor<4x128x50304xf32>, tensor<4x128xi32>, tensor<f32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$logits, Cleave_IndexTensor:$labels,
                       Optional<Cleave_FloatScalar>:$count,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Cleave_FloatScalar:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_CrossEntropyGradOp : Cleave_ModelOp<"cross_entropy_grad",
    [Pure, InferTypeOpAdaptor], ["getWork"], ["buildLocalOp"]> {
  let summary = "Gradient of `cleave.cross_entropy` with respect to the logits.";
  let description = [{
    `(softmax(logits) - onehot(labels)) * dloss / N`, where `N` is the number
    of label positions.

    ```mlir
    %dlogits = cleave.cross_entropy_grad %logits, %targets, %dloss : (tensor<8x128x50304xf32>, tensor<8x128xi32>, tensor<f32>) -> tensor<8x128x50304xf32>
    ```

    `ignore_index` and `count` are those of the forward op: rows whose label
    is `ignore_index` get a zero gradient, and `N` is the number of the other
    rows, or `count` when given.
  }];
  let arguments = (ins Cleave_FloatTensor:$logits, Cleave_IndexTensor:$labels,
                       Cleave_FloatScalar:$grad,
                       Optional<Cleave_FloatScalar>:$count,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_LabelCountOp : Cleave_ModelOp<"label_count", [Pure], ["getWork"]> {
  let summary = "Number of labels that are not `ignore_index`.";
  let description = [{
    Counts the elements of `labels` different from `ignore_index`, as a
    float scalar (exact up to 2^24 in f32). The denominator of
    `cleave.cross_entropy` with `ignore_index`; the partitioner builds it on
    each device's rows and all-reduces it.

    ```mlir
    %n = cleave.label_count %targets {ignore_index = -1 : i64} : (tensor<8x128xi32>) -> tensor<f32>
    ```

    Sharding rule: every label dimension is a reduction factor (the counts
    of the blocks sum to the count).
  }];
  let arguments = (ins Cleave_IndexTensor:$labels, I64Attr:$ignore_index);
  let results = (outs Cleave_FloatScalar:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Cleave_DropoutOp : Cleave_ModelOp<"dropout",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable, Cleave_SequenceParallel],
    [], ["buildLocalOp"]> {
  let hasVerifier = 1;
  let summary = "Inverted dropout with a counter-based random stream.";
  let description = [{
    Zeroes each element with probability `rate` and scales the others by
    `1 / (1 - rate)`. The keep mask is a pure function of `seed` (an i64
    scalar the runtime derives from the run seed and the step), the op's
    `stream` id and the element's global linear index (Philox-4x32-10): it is
    the same on one device or split across many, and the gradient is the same
    op applied to the result gradient.

    ```mlir
    %y = cleave.dropout %x, %seed {rate = 1.0e-01 : f64, stream = 3 : i64} : (tensor<8x128x768xf32>, tensor<i64>) -> tensor<8x128x768xf32>
    ```

    On one block of a sharded tensor (after partitioning), `global_shape`
    gives the whole tensor's shape and the `blocks` operands (i64 scalars,
    one per dimension) the index of this block along each dimension (the
    block's offset is its index times the local size), so every element keeps
    its global index and the mask does not depend on the sharding:

    ```mlir
    %y = cleave.dropout %x, %seed, %b0, %zero, %zero {global_shape = array<i64: 8, 128, 768>, rate = 1.0e-01 : f64, stream = 3 : i64} : (tensor<4x128x768xf32>, tensor<i64>, tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<4x128x768xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_I64Scalar:$seed,
                       Variadic<Cleave_I64Scalar>:$blocks,
                       F64Attr:$rate, I64Attr:$stream,
                       OptionalAttr<DenseI64ArrayAttr>:$global_shape);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

#endif // CLEAVE_DIALECT_CLEAVENNOPS_TD
