//===- Passes.td - Cleave passes ---------------------------*- tablegen -*-===//
//
// Every pass: record CleaveFooPass, flag cleave-foo, file Foo.cpp, test
// test/Transforms/foo.mlir, DEBUG_TYPE = the flag.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_PASSES_TD
#define CLEAVE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def CleavePrintShardingRulesPass
    : Pass<"cleave-print-sharding-rules", "::mlir::ModuleOp"> {
  let summary = "Reports the sharding rule of every op and checks it.";
  let description = [{
    For every op that implements `ShardingRuleOpInterface`, checks the rule
    against the op's types (one factor list per dimension, factor sizes
    multiplying to the dimension size, pass-through factors present in every
    result) and reports it as a remark. This is the tool for compiler
    engineers adding an op: it shows the rule propagation and partitioning
    will see.

    ```mlir
    %y = cleave.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
    // remark: sharding rule: ([i, k], [k, j]) -> ([i, j]) {i=8, j=32, k=16} reduction={k}
    ```

    The pass fails if any rule is inconsistent with its op.
  }];
}

def CleaveAutodiffPass : Pass<"cleave-autodiff", "::mlir::ModuleOp"> {
  let summary = "Builds the training step from a forward function and its loss.";
  let description = [{
    Takes the function `entry` (default `@forward`), which returns a scalar
    loss, and adds the function `output` (default `@train_step`) that runs
    the forward pass, the backward pass and the optimizer update of every
    parameter (arguments marked `cleave.param`):

    ```mlir
    func.func @forward(%w: tensor<4x4xf32> {cleave.param = "w"},
                       %x: tensor<2x4xf32> {cleave.input = "x"},
                       %y: tensor<2xi32> {cleave.input = "y"}) -> tensor<f32>
    // becomes, with optimizer=adamw, also:
    func.func @train_step(%w: ... {cleave.param = "w"}, %x: ..., %y: ...,
                          %m: tensor<4x4xf32> {cleave.state = "w.exp_avg"},
                          %v: tensor<4x4xf32> {cleave.state = "w.exp_avg_sq"},
                          %lr: tensor<f32> {cleave.input = "lr"},
                          %step: tensor<f32> {cleave.input = "step"})
        -> (tensor<4x4xf32> {cleave.output = "w"},
            tensor<4x4xf32> {cleave.output = "w.exp_avg"},
            tensor<4x4xf32> {cleave.output = "w.exp_avg_sq"},
            tensor<f32> {cleave.output = "loss"})
    ```

    The pass is generic: every op on the path from a parameter to the loss
    gives its operand gradients through `VJPOpInterface`; gradients of values
    used several times are summed. An op without a gradient rule on that path
    is an error at the op. A parameter the loss does not depend on is left
    unchanged, as `torch.optim` skips parameters without gradients.
    Parameters are f32 master weights: with bf16 compute, the forward casts
    them and the cast's gradient brings the gradient back to f32.

    `optimizer=none` returns the loss and one gradient per parameter
    (`cleave.output = "grad:<name>"`) instead of updating.

    A learning-rate schedule (`lr-schedule=cosine|linear`, `warmup-steps`,
    `decay-steps`, `lr-min`) turns the `lr` input into the peak rate: the
    step gets a `step` input (also with SGD) and every update reads
    `cleave.lr_schedule %lr, %step` (one per pipeline stage) instead of
    `%lr`:

    ```mlir
    %lr_t = cleave.lr_schedule %lr, %step {decay = #cleave.lr_decay<cosine>, decay_steps = 30 : i64, min_lr = 6.0e-05 : f64, warmup_steps = 10 : i64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %w2, %m2, %v2 = cleave.adamw %w, %dw, %m, %v, %lr_t, %step {...}
    ```

    `grad-clip=C` (> 0) clips the global gradient norm before the updates,
    as `torch.nn.utils.clip_grad_norm_`: every gradient is multiplied by
    `min(1, C / (sqrt(sum of all squared gradient elements) + 1e-6))`,
    written with ordinary ops (one `reduce_sum` of the squares per
    parameter, on the parameter's stage), so that `cleave-partition`
    completes each partial sum over the mesh axes that shard its gradient.

    `loss-scaling` (dynamic loss scaling for f16, as PyTorch's GradScaler)
    adds the f32 inputs `loss_scale` and, with AdamW, `update` (the updates
    done + 1, which AdamW's bias correction reads instead of `step`: a
    skipped step is no update). The gradients are those of
    `loss * loss_scale`, multiplied by `1 / loss_scale` in f32 before
    clipping and the update, and the step returns the squared global norm
    of the unscaled gradients as `cleave.output = "grad_norm_sq"` (the sum
    clipping uses; the partitioner completes it over every sharding axis,
    so it is the same on every rank). It is infinite or NaN when any
    gradient overflowed: the trainer then discards the step's outputs on
    every rank and halves the scale.

    ```mlir
    %s = cleave.mul %loss, %loss_scale : tensor<f32>   // differentiated
    %inv = cleave.div %one, %loss_scale : tensor<f32>  // gradients * %inv
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The forward function returning the scalar loss">,
    Option<"output", "output", "std::string", /*default=*/"\"train_step\"",
           "The name of the function to create">,
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "adamw, sgd or none (return gradients)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"epsilon", "epsilon", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.01",
           "Decoupled weight decay (AdamW) or L2 penalty (SGD)">,
    Option<"noDecayVectors", "no-decay-vectors", "bool", /*default=*/"false",
           "Exempt parameters of rank < 2 (biases, norm weights) from weight "
           "decay, as nanoGPT does">,
    Option<"lrSchedule", "lr-schedule", "std::string",
           /*default=*/"\"constant\"",
           "Decay after the warmup: constant, cosine or linear "
           "(cleave.lr_schedule)">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "Steps of linear learning-rate warmup">,
    Option<"decaySteps", "decay-steps", "int64_t", /*default=*/"0",
           "The step at which the decay reaches lr-min">,
    Option<"lrMin", "lr-min", "double", /*default=*/"0.0",
           "The learning rate at the end of the decay">,
    Option<"gradClip", "grad-clip", "double", /*default=*/"0.0",
           "Clip the global gradient norm to this value before the "
           "optimizer update (0: no clipping)">,
    Option<"lossScaling", "loss-scaling", "bool", /*default=*/"false",
           "Dynamic loss scaling (fp16): differentiate loss * loss_scale, "
           "unscale the gradients, return their squared norm "
           "(grad_norm_sq) for the trainer's overflow check">
  ];
}

def CleaveEstimatePass : Pass<"cleave-estimate", "::mlir::ModuleOp"> {
  let summary = "Estimates the time of each function on a cluster.";
  let description = [{
    A bridge from IR to the cost model (`lib/CostModel`): for every function,
    sums the FLOPs of its ops (`CostOpInterface`) and the bytes of their
    operand and result tensors, prices each op with the roofline of the
    cluster's GPU, prices every collective (all_reduce, all_gather,
    reduce_scatter, all_to_all, send/recv, collective_permute) with the
    NCCL-like collective model on the group its mesh axes form (axes on
    `nvlink`, `pcie` or `host` links inside a node, `ib`, `roce` or
    `ethernet` axes across nodes), and reports the totals as a remark.

    On a global-view module the FLOPs are those of the whole computation on
    one GPU; on a per-device module (local shapes plus collectives) they
    are one device's. The pass knows no op by name: FLOPs come from the
    interface, bytes from types, and the collective kind from the op's
    mnemonic through the cost model.

    ```mlir
    // cleave-opt --cleave-estimate="cluster=dgx-h100"
    cleave.mesh @world(dp = 4 : ib, tp = 8 : nvlink)
    func.func @step(%x: tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16> {
      %y = cleave.all_reduce %x on @world axes = [tp] : tensor<1024x1024xbf16>
      return %y : tensor<1024x1024xbf16>
    }
    // remark: cleave-estimate on dgx-h100: 0 FLOP, 0 bytes moved by compute,
    //   compute 0.000 us, communication 14.440 us (tp 14.440 us), total 14.440 us
    ```

    Options select the cluster: a preset and a node count (default: enough
    nodes of 8 GPUs for the largest mesh), or a JSON cluster file.
  }];
  let options = [
    Option<"cluster", "cluster", "std::string",
           /*default=*/"CLEAVE_DEFAULT_CLUSTER",
           "Cluster preset (dgx-a100-40gb, dgx-a100-80gb, dgx-h100, "
           "dgx-h200) (default: dgx-a100-80gb)">,
    Option<"clusterFile", "cluster-file", "std::string", /*default=*/"\"\"",
           "JSON cluster file (docs/cost-model.md); overrides the preset">,
    Option<"nodes", "nodes", "int", /*default=*/"0",
           "Nodes of the preset cluster (0: enough for the largest mesh)">
  ];
}

def CleavePropagateShardingPass
    : Pass<"cleave-propagate-sharding", "::mlir::ModuleOp"> {
  let summary = "Completes partial sharding annotations through the ops' rules.";
  let description = [{
    Gives every tensor of every function a `#cleave.sharding`, starting from
    the user's annotations (docs/plans.md): `cleave.sharding` on arguments,
    `cleave.sharding_constraint` ops and existing `cleave.shardings`. It knows
    no op by name: each op's factor rule (`ShardingRuleOpInterface`) turns the
    shardings of the tensors it knows into mesh axes per factor, and those
    into shardings of the tensors it does not know yet.

    The policy is deterministic. Ops are visited in program order, then in
    reverse, until nothing changes. At each op, user annotations propose
    first (operands before results), then propagated operands, then
    propagated results; the first proposal for a factor wins, a factor that
    must not be split (the softmax dimension) takes none, and a proposal
    whose axis another factor holds is dropped. A tensor receives a sharding
    once, and only one that splits something or is a pending sum, so later
    visits can still split values that are replicated so far; a later
    proposal may also split the dimensions that a propagated sharding leaves
    whole, keeping its splits (a consumer's sequence split over `cp` on a
    value its producer split over `dp` only: the key and value gradients of
    attention under `dp` x `cp` are then reduce-scattered rather than
    all-reduced, and the ops after them keep their sequence block), and a
    pending sum may become pending over more axes (their bias gradients,
    summed over batch and sequence, pending over `dp` and `cp` instead of
    gathering the gradients over `cp`). Existing splits and user
    annotations are never changed. What stays unknown is replicated. A dimension made of several factors (the query
    heads of grouped-query attention are key/value heads times the group) is
    only split into contiguous blocks: a minor factor keeps axes only while
    every factor before it is split completely. A reduction factor split
    over an axis leaves the results without it as partial sums (`partial =
    [axis]`): the partitioner reduces them where a consumer needs the full
    value.

    A user annotation that refines another (ZeRO's optimizer state is split
    over `[tp, dp]` where its parameter is split over `[tp]`) wins over it.
    Two user annotations that contradict each other at one op (both split
    the same dimension differently, or put one axis on two dimensions) get a
    warning naming both, with a note at each annotation; the earlier one
    wins and the partitioner reshards the other operand (that is what a
    storage layout such as FSDP's needs, so it is not an error):

    ```mlir
    // warning: sharding annotations disagree: operand #1 splits a dimension
    //   of size 16 over [tp], but operand #0 already splits it (or uses the
    //   axes) as [dp]; the op follows operand #0 and operand #1 is resharded
    %y = cleave.add %a, %b : tensor<16x16xf32>
    ```

    Results are recorded as `cleave.shardings` on each op and
    `cleave.sharding` on every argument and function result. A result that
    is the new value of an argument (`cleave.output` naming a
    `cleave.param` or `cleave.state`) keeps the argument's sharding, so a
    training step can run again on its own outputs.
  }];
}

def CleavePartitionPass : Pass<"cleave-partition", "::mlir::ModuleOp"> {
  let summary = "Rewrites a sharded global program into its per-device program.";
  let description = [{
    Runs after `cleave-propagate-sharding`. Every tensor takes the local
    shape of one device's block and every op becomes its per-device form
    (`ShardingRuleOpInterface::buildLocalOp`: the same op on smaller tensors,
    except for the few whose meaning depends on global sizes or positions).
    Where a consumer needs a different sharding than its producer gives, the
    pass inserts the per-device ops that reshard (`lib/Sharding/Reshard.h`):
    reduce-scatter or all-reduce for pending sums, all-to-all to move an axis
    between dimensions, local slices (`cleave.shard`), all-gathers; slices
    first and scatters instead of reductions, so no step moves more bytes
    than the target needs.

    ```mlir
    cleave.mesh @m(tp = 2 : nvlink)
    func.func @f(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>},
                 %w: tensor<16x4xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>})
        -> tensor<8x4xf32> {
      %y = cleave.matmul %x, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
      return %y : tensor<8x4xf32>
    }
    // becomes
    func.func @f(%x: tensor<8x8xf32> {cleave.layout = #cleave.sharding<@m, [_, tp]>},
                 %w: tensor<8x4xf32> {cleave.layout = #cleave.sharding<@m, [tp, _]>})
        -> (tensor<8x4xf32> {cleave.layout = #cleave.sharding<@m, [_, _]>}) {
      %0 = cleave.matmul %x, %w : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
      %1 = cleave.all_reduce %0 on @m axes = [tp] : tensor<8x4xf32>
      return %1 : tensor<8x4xf32>
    }
    ```

    Arguments and results then carry `cleave.layout`: the sharding of the
    global tensor whose block they hold (the runtime slices and gathers
    parameters and batches with it). Ops without a sharding rule, and values
    without a sharding, are errors.

    Where the order of the steps leaves a choice (which dimension gathers
    first, one gather over several axes or one per axis, reduce-scatter or
    all-reduce a pending sum), each choice is a candidate sequence, and the
    pass keeps the one of least time on the cluster: every collective is
    priced by the cost model's collective model on the links of its mesh
    axes (as `cleave-estimate` prices them), so a sequence that sends more
    bytes over a fast axis can beat one that sends fewer over a slow axis.
    On a tie the greedier sequence stays. `reshard-cost=bytes` ranks by the
    bytes each device sends instead.

    ```mlir
    cleave.mesh @m(a = 2 : ib, b = 4 : nvlink)
    func.func @f(%x: tensor<1024x1024xf32> {cleave.sharding = #cleave.sharding<@m, [a, b]>})
        -> (tensor<1024x1024xf32> {cleave.sharding = #cleave.sharding<@m, [_, (a, b)]>}) {
      return %x : tensor<1024x1024xf32>
    }
    // Fewest bytes (2.5 MiB): all_gather [b] dim 1 (NVLink), all_to_all [a]
    // (InfiniBand, 1 MiB). Least time, and the pass's choice (3.5 MiB):
    %0 = cleave.all_gather %x on @m axes = [a] dim = 0 : tensor<512x256xf32> -> tensor<1024x256xf32>
    %1 = cleave.all_gather %0 on @m axes = [b] dim = 1 : tensor<1024x256xf32> -> tensor<1024x1024xf32>
    %2 = cleave.shard %1 on @m axes = [a, b] dim = 1 : tensor<1024x1024xf32> -> tensor<1024x128xf32>
    ```
  }];
  let options = [
    Option<"cluster", "cluster", "std::string",
           /*default=*/"CLEAVE_DEFAULT_CLUSTER",
           "Cluster preset whose links price the collectives (dgx-a100-40gb, "
           "dgx-a100-80gb, dgx-h100, dgx-h200, or local-cpu: one process "
           "of this machine per device, as cleave-run runs them) (default: "
           "dgx-a100-80gb)">,
    Option<"clusterFile", "cluster-file", "std::string", /*default=*/"\"\"",
           "JSON cluster file (docs/cost-model.md); overrides the preset">,
    Option<"nodes", "nodes", "int", /*default=*/"0",
           "Nodes of the preset cluster (0: enough for the mesh)">,
    Option<"reshardCost", "reshard-cost", "std::string", /*default=*/"\"time\"",
           "How resharding sequences are ranked: 'time' (the collective "
           "model on the cluster) or 'bytes' (bytes each device sends)">
  ];
}

def CleaveApplyPlanPass : Pass<"cleave-apply-plan", "::mlir::ModuleOp"> {
  let summary = "Writes a named parallel plan as sharding annotations.";
  let description = [{
    The manual plans of Megatron-LM and ZeRO, as annotations in the form of
    docs/plans.md on a training step (`cleave-autodiff`'s output), for
    `cleave-propagate-sharding` and `cleave-partition` to carry out. Adds the
    mesh `@mesh(dp = D : ib, ep = X : ib, cp = C : ib, tp = T : nvlink)` (axes of size 1
    left out) and:

    * `dp > 1` (data parallel): every data input splits its first (batch)
      dimension over `dp`.
    * `tp > 1` (Megatron tensor parallel): walking the program in order, the
      first contraction that uses a 2-d parameter makes it *column-parallel*
      (its output features split over `tp`) when the activations arrive
      whole, and *row-parallel* (its input features split) when propagation
      shows they arrive split over `tp`: attention (q, k, v then the output
      projection) and the MLP (up then down) come out as column then row;
      their all-reduces appear where the row-parallel products meet the
      residual stream. The tied output head is column parallel over the
      vocabulary when it divides. A contraction is read off the op's
      sharding rule: one dimension of the parameter is a reduction factor
      that another operand shares (the input features), the other a
      pass-through factor (the output features); `cleave.matmul` is one, an
      embedding's table is not. Propagation is incremental: one walk in
      program order visits the ops before each contraction once, and each
      decision revisits only the ops its annotation reaches, so the pass is
      linear in the size of the program.
    * `sp` (Megatron sequence parallel, with `tp`): the first operand of
      every op with the `SequenceParallel` trait (normalizations and
      dropouts) is pinned to split its sequence dimension over `tp`, so the
      residual stream between tensor-parallel regions is split by sequence
      and the all-reduces become a reduce-scatter before and an all-gather
      after each norm.
    * `cp > 1` (context parallel): every data input of rank 2 or more also
      splits its second (sequence) dimension over `cp`, so every token-wise
      op runs on a block of the sequence. Attention keeps its block of
      queries and all-gathers the keys and values over `cp` (its sharding
      rule: the key sequence needs replication), and its gradient
      reduce-scatters `dk` and `dv` back; causal masks and rotary
      embeddings of a block use its global positions (the ops'
      `query_block` and `block` operands, written by the partitioner).
      With `sp`, the norms' sequence is split over `[cp, tp]`. A sequence
      that `cp` does not divide is an error naming `cp` and the input.
    * `ep > 1` (expert parallel, GShard / DeepSpeed-MoE): the batch splits
      over `[dp, ep]` and the expert weights over `ep` on their dimension 0
      (the experts); everything else is replicated over `ep` as over `dp`,
      so its gradients are all-reduced over both. An expert weight is read
      off the sharding rules: a parameter of rank 3 or more whose dimension
      0 is a pass-through factor it shares with an activation (the batch
      factor of a batched GEMM) and that is contracted with an activation
      along another dimension. The values that expert factor reaches
      (propagation of the expert weights' split alone) form the expert side;
      an op whose rule moves between the two sides (a tensor of the expert
      side whose dimension 1 carries the factor that leads another,
      token-side tensor: `cleave.moe_dispatch`'s result, `cleave.moe_combine`
      and `cleave.moe_weights_grad`'s expert operand) gets its expert-side
      tensor pinned: split by expert as it leaves the token side, by group as
      it returns. The partitioner's generic resharding inserts one
      `all_to_all` over `ep` at each pin, forward and backward. An `ep` that
      does not divide an expert weight's dimension 0 (the experts) is an
      error naming the weight, as is an `ep > 1` on a program without expert
      weights. With ZeRO, the expert weights' state (and with 3 the weights)
      are split over `dp` as well, after `ep` on the first dimension that
      divides. With micro-batches the batch splits over `[dp, mb, ep]`:
      the all-to-all moves the batch's minor axis, so `ep` stays minor and
      the expert buffers stay split over `[dp, mb]`, each micro-batch's
      exchange inside the micro-batch.
    * `zero = 1, 2, 3` (with `dp`): optimizer state (1), also gradients (2,
      a reduce-scatter instead of an all-reduce), also parameters (3, an
      all-gather before every use, FSDP) are split over `dp` on their first
      divisible dimension.

    * `pp > 1` or `micro > 1` (pipelining, micro-batching): the mesh gets
      a leading `pp` axis and an axis `mb` of size `micro` that stands for
      the micro-batches, not for devices. Data inputs split their batch
      over `[dp, mb]` (`[dp, mb, ep]` with `ep`), so partitioning yields the
      program of one micro-batch on one device, with the gradients pending
      sums over `mb`; `cleave-pipeline` then runs the micro-batches one
      after another, turns those sums into accumulation and removes `mb`
      from the mesh (docs/pipeline.md). The schedule, micro-batch count and virtual stages
      are recorded in `cleave.plan`; the stages themselves are `cleave.stage`
      annotations (`cleave-pipeline-stages`).
    * `recompute = selective | full`: recorded in `cleave.plan` for
      `cleave-remat`, which runs before propagation and carries it out. One
      kind per pipeline rank (`full/none` with `pp = 2`) records the
      heaviest as `recompute` and the list as `recompute_per_stage`, as the
      planner writes a per-stage choice.

    Combinations compose (`dp=2 tp=2 sp zero=1` runs on 4 devices, `pp=2
    dp=2 tp=2 micro=4` on 8). The pass only writes annotations. A global
    batch that `dp` times `micro` does not divide is an error naming the
    input; a weight whose dimension `tp` does not divide stays whole (a
    vocabulary of 65 under `tp = 2`), and a `tp` that divides no weight at
    all is an error naming the first one. An existing `cleave.plan` keeps
    its other entries.
  }];
  let options = [
    Option<"dp", "dp", "int64_t", /*default=*/"1", "Data-parallel degree">,
    Option<"tp", "tp", "int64_t", /*default=*/"1", "Tensor-parallel degree">,
    Option<"ep", "ep", "int64_t", /*default=*/"1",
           "Expert-parallel degree (splits the batch and the experts)">,
    Option<"cp", "cp", "int64_t", /*default=*/"1",
           "Context-parallel degree (splits the sequence)">,
    Option<"cpLayout", "cp-layout", "std::string", /*default=*/"\"auto\"",
           "Sequence blocks under cp: balanced (rank r holds chunks r and "
           "2cp-1-r of 2cp), contiguous, or auto (balanced when the program "
           "has a causal attention)">,
    Option<"sp", "sp", "bool", /*default=*/"false",
           "Megatron sequence parallelism (needs tp > 1)">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "ZeRO stage 0-3 (needs dp > 1)">,
    Option<"pp", "pp", "int64_t", /*default=*/"1",
           "Pipeline stages (ranks along pp)">,
    Option<"micro", "micro", "int64_t", /*default=*/"1",
           "Micro-batches per step">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "Pipeline schedule: gpipe, 1f1b, interleaved or zb-h1">,
    Option<"virtualStages", "virtual-stages", "int64_t", /*default=*/"1",
           "Model chunks per pipeline rank (interleaved)">,
    Option<"recompute", "recompute", "std::string", /*default=*/"\"none\"",
           "Activation recomputation: none, selective or full, or one "
           "per pipeline rank (full/none) (cleave-remat carries it out)">
  ];
}

def CleaveRematPass : Pass<"cleave-remat", "::mlir::ModuleOp"> {
  let summary = "Recomputes layers (or their attention core) in the backward "
                "pass instead of keeping their activations.";
  let description = [{
    Activation recomputation (Chen et al. 2016; Korthikanti et al. 2022) on
    the training step `entry` (`cleave-autodiff`'s output, before
    `cleave-propagate-sharding`), as the plan's `recompute` says
    (docs/plans.md): the forward values that the backward pass reads are
    computed a second time, right before the first backward op that reads
    them, and the forward pass drops them as soon as the forward pass is
    done with them.

    * `full`: only each layer's inputs stay alive between the forward and
      the backward pass (the residual stream entering it, and what earlier
      layers computed that it reads); the backward pass of the layer begins
      by running the layer's forward ops again.
    * `selective`: the attention core: every `cleave.attention` and the
      view ops that only reshape its output. Its inputs (q, k, v) stay; its
      output, which the output projection's weight gradient reads, is
      recomputed. (The attention op never keeps its S x S probabilities:
      `cleave.attention_grad` recomputes them, as flash attention does.)
    * `none`: nothing changes.

    A layer is found from the parameter names, as `cleave-pipeline-stages`
    does (`h.3.`, `layers.3.`): the forward ops (those the loss depends on)
    computed from that layer's parameters and from the layer's own results
    and inputs. Ops computed from parameters alone (casts, ZeRO-3 gathers)
    are not recomputed, except broadcasts (a bias over the tokens): kept,
    each would be as large as an activation; recomputed, from a barrier on
    what they broadcast, the lowering fuses them into their user. The
    recomputed ops read their inputs through
    `cleave.optimization_barrier`, so that no CSE merges them with the
    forward ops; they keep their attributes (`cleave.stage`, sharding
    constraints), so the partitioner and the pipeline pass treat them like
    the rest of the layer's backward pass.

    ```mlir
    // full, one layer:
    %h = cleave.layer_norm %x, %g, %b ...          // forward
    %y = cleave.matmul %h, %w ...
    ...
    %x1 = cleave.optimization_barrier %x : tensor<2x32x64xf32>
    %h1 = cleave.layer_norm %x1, %g, %b ...        // recomputed
    %dw = cleave.matmul %dy, %h1 ...               // backward reads %h1
    ```

    With a pipeline, `recompute_per_stage = ["full", "none"]` in
    `cleave.plan` (one entry per pipeline rank, as the planner chooses them)
    gives each layer the kind of the rank its `cleave.stage` runs on
    (stage `k` runs on rank `k mod pp`). A kind other than `none` on a
    program whose parameters name no layers, or `selective` on a program
    without `cleave.attention`, is an error naming the option; so is a
    per-stage list on ops without stages.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"train_step\"",
           "The training step">,
    Option<"mode", "mode", "std::string", /*default=*/"\"\"",
           "none, selective or full (default: the module's cleave.plan)">
  ];
}

def CleaveVerifyCollectivesPass
    : Pass<"cleave-verify-collectives", "::mlir::ModuleOp"> {
  let summary = "Proves that every rank's communication matches and no rank "
                "can deadlock.";
  let description = [{
    Replays, for every device of the mesh, the program it runs and proves
    that the devices' communication calls match and all complete:

    * every member of every group (the devices that share their coordinates
      on the axes an op does not name) issues the same collectives in the
      same order, with the same kind, operand and result types (shapes and
      element types), reduction, dimensions, permutation pairs and axes;
    * every `cleave.send` meets a `cleave.recv` of the same type on the
      same axes at the peer it names, which receives from the sender;
    * no device waits forever: neither for a device that has finished, nor
      in a cycle of waits.

    The programs of a module are its public functions, each run by every
    device (SPMD), and, with `cleave.pipeline = {axis = "pp", stages =
    [@f_s0, @f_s1, ...]}`, the stage functions: a device runs the stage of
    its `pp` coordinate (docs/plans.md). Replay follows calls, unrolls
    `scf.for` loops whose bounds are compile-time values, and takes the
    branch of `scf.if` / `scf.index_switch` that compile-time values select
    (a branch decided at run time is fine if its alternatives communicate
    alike). A device's `cleave.axis_index` is known: when it decides control
    flow, one program per combination of the coordinates it reads is
    replayed. Anything else around communication is an error.

    Blocking follows the runtime (`lib/Runtime`): a collective completes
    when every member of the group has reached it; `send` completes only
    when the peer has posted the matching `recv` (a rendezvous) and `recv`
    when the data has arrived. So two stages that both send first deadlock:

    ```mlir
    module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
      cleave.mesh @world(pp = 2 : ib)
      func.func @s0(%a: tensor<4xf32>) -> tensor<4xf32> {
        cleave.send %a on @world axes = [pp] to 1 : tensor<4xf32>
        %g = cleave.recv on @world axes = [pp] from 1 : tensor<4xf32>
        return %g : tensor<4xf32>
      }
      func.func @s1(%b: tensor<4xf32>) -> tensor<4xf32> {
        cleave.send %b on @world axes = [pp] to 0 : tensor<4xf32>
        %a = cleave.recv on @world axes = [pp] from 0 : tensor<4xf32>
        return %a : tensor<4xf32>
      }
    }
    // error: deadlock: these calls wait for each other in a cycle: rank 0
    //   (pp=0) waits in send of tensor<4xf32> to rank 1 (pp=1) along [pp]
    //   -> rank 1 (pp=1) waits in send of tensor<4xf32> to rank 0 (pp=0)
    //   along [pp] -> back to rank 0 (pp=0) ...
    // note: rank 1 (pp=1) waits here in send of tensor<4xf32> to rank 0 ...
    ```

    Every failure is one error at an operation of one rank, naming the
    ranks with their mesh coordinates and both operations, with a note at
    the other operation. Devices that differ only on axes that neither a
    send or recv names nor selects a program run identical programs in
    lockstep, so the check simulates one device per class: a pipeline on an
    8 x 64 x 8 mesh simulates 8 devices.
    The pass runs at the start of the CPU lowering pipeline; programs
    without communication pass at the cost of one walk over their ops.
  }];
  let options = [
    Option<"exhaustive", "exhaustive", "bool", /*default=*/"false",
           "Simulate every device of the mesh instead of one per class of "
           "interchangeable devices (for testing and benchmarking)">
  ];
}

def CleavePipelineStagesPass
    : Pass<"cleave-pipeline-stages", "::mlir::ModuleOp"> {
  let summary = "Assigns the ops of a forward function to pipeline stages by "
                "layer.";
  let description = [{
    A manual stage split for `cleave-pipeline`: writes `cleave.stage = k` on
    every op of the forward function `entry` (docs/plans.md). Layers are
    found in parameter names, as their first numbered component (`h.3.`,
    `layers.3.`, `transformer.h.3.`), and split evenly over `stages`
    (virtual) stages in order; when they do not divide, the first stages get
    one more, as the cost model assumes (`layersInChunk`). Each op runs on
    the latest stage among its layer parameters and operands, so the
    embedding lands on the first stage and the final norm, head and loss on
    the last:

    ```mlir
    %x = cleave.embedding %wte, %tokens ... {cleave.stage = 0 : i64}
    %a = cleave.layer_norm %x, %ln0 ...     {cleave.stage = 0 : i64}  // h.0.
    %b = cleave.layer_norm %y, %ln1 ...     {cleave.stage = 1 : i64}  // h.1.
    %l = cleave.cross_entropy %logits, ...  {cleave.stage = 1 : i64}
    ```

    `layers-per-stage` gives the split instead, one count per stage in
    model order, as the planner chooses it (`layers_per_chunk`): the first
    and the last stage may hold no layer, and then hold only the embedding
    (the first) or only what follows the last layer's last use of its
    parameters: the final norm, the head and the loss (the last), as in
    Llama 3's pipeline:

    ```mlir
    // --cleave-pipeline-stages="stages=3 layers-per-stage=0,2,0"
    %x = cleave.embedding %wte, %tokens ... {cleave.stage = 0 : i64}
    %a = cleave.layer_norm %x, %ln0 ...     {cleave.stage = 1 : i64}  // h.0.
    %l = cleave.cross_entropy %logits, ...  {cleave.stage = 2 : i64}
    ```

    Run it before `cleave-autodiff`, which gives each gradient and update
    the stage of its forward op. A function that already has stage
    annotations, fewer layers than stages, or a `layers-per-stage` that
    does not have one count per stage, leaves a middle stage empty or does
    not sum to the layers is an error.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The forward function">,
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "Pipeline stages (pp times the virtual stages per rank)">,
    ListOption<"layersPerStage", "layers-per-stage", "int64_t",
               "Layers of each stage in model order (default: an even "
               "split)">
  ];
}

def CleavePipelinePass : Pass<"cleave-pipeline", "::mlir::ModuleOp"> {
  let summary = "Runs a partitioned training step as a pipeline schedule.";
  let description = [{
    Takes the per-device training step `entry` (after `cleave-partition`)
    whose mesh has the pipeline axis `axis` and, for micro-batching, the
    axis `micro-batch-axis` that `cleave-apply-plan` adds: partitioning over
    it made the step the program of one micro-batch, with the gradients and
    the loss pending sums over micro-batches. Ops carry `cleave.stage`
    (virtual stage `k` runs on pipeline rank `k mod pp`): the forward ops
    from the user, a planner or `cleave-pipeline-stages`, their gradients
    and updates from `cleave-autodiff`, the collectives from
    `cleave-partition`; an op without one runs where its first user runs.

    Every op falls in one region: per micro-batch (forward: what the loss
    depends on; backward: the rest), per step after the micro-batches (what
    reads a sum over micro-batches: the data-parallel reduction of the
    accumulated gradients, the optimizer), per step before them (what reads
    only parameters: casts, ZeRO-3 gathers) or constant. The pass then
    builds one private function per stage and pass kind
    (`@train_step_f1`, `@train_step_b1`, and with `schedule = "zb-h1"`
    `@train_step_w1` for the weight gradients, which only feed the
    accumulated parameter gradients) and one public function per pipeline
    rank (`@train_step_s0`, ...), named in `cleave.pipeline`. Further
    entries (`entry=train_step,eval_step`), which must be partitioned on the
    same mesh, are pipelined alike; their rank functions are listed under
    their names in the attribute's `entries` (a forward-only step has only
    forward passes, so its schedule is the forwards in order):

    ```mlir
    func.func @train_step_s0(...) -> (...) {
      // prologue: invariants, parameters other stages read
      %t0 = cleave.slice %tokens offsets = [0, 0] ...     // micro-batch 0
      %a0 = call @train_step_f0(%t0, ...) loc("F mb=0 stage=0")
      cleave.send %a0 on @mesh axes = [pp] to 1 : tensor<2x32x64xf32>
      ...
      %g0 = cleave.recv on @mesh axes = [pp] from 1 : tensor<2x32x64xf32>
      %w0 = call @train_step_b0(%g0, ...) loc("B mb=0 stage=0")
      %sum = cleave.add %w0, %w1 : tensor<...>   // gradients, summed
      // epilogue: all_reduce over [dp] once, AdamW, loss summed over pp
    }
    ```

    Each rank runs its passes in exactly the order `pipelineOrders` of the
    cost model gives for the schedule in `cleave.plan` (`gpipe`, `1f1b`,
    `interleaved` with `virtual_stages`, `zb-h1`), so the simulator and the
    program agree. Sends are blocking rendezvous: transfers are ordered by
    the time their value is produced in a unit-cost timing of the schedule,
    one global order that every rank follows, so no cycle of waits can form
    (`cleave-verify-collectives` proves it again before lowering). Values
    cross directly from the rank producing them to every rank reading them;
    parameters live on the stage that updates them (a tied embedding is
    sent to the head's stage at the start of the step and its gradient
    back at the end). Every rank returns the loss (summed over `pp` with
    zeros from the other ranks). The micro-batch axis leaves the mesh;
    inputs split over it become one block of all micro-batches, sliced per
    micro-batch, and a `cleave.axis_index` naming it (the block numbers of
    dropout) becomes an operand of the passes, the micro-batch's position.
    Axes after the micro-batch axis in an input's first dimension (`ep` in
    `[dp, mb, ep]`) leave the block too: each device reads every block of
    them and keeps its own from each micro-batch's slice with
    `cleave.shard`, so a micro-batch holds the rows it holds in one
    process's batch.

    Errors name the op and the reason: communication across micro-batches
    other than sums, values that flow backwards between stages, stage
    annotations beyond the plan, results computed per micro-batch.
  }];
  let options = [
    ListOption<"entries", "entry", "std::string",
               "The partitioned steps to pipeline, the training step first "
               "(default: train_step); each further one (e.g. an evaluation "
               "step) is scheduled alike">,
    Option<"axis", "axis", "std::string", /*default=*/"\"pp\"",
           "The mesh axis of pipeline ranks">,
    Option<"microBatchAxis", "micro-batch-axis", "std::string",
           /*default=*/"\"mb\"",
           "The mesh axis standing for micro-batches (cleave-apply-plan)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def CleaveAutoShardPass : Pass<"cleave-auto-shard", "::mlir::ModuleOp"> {
  let summary = "Finds the fastest parallel plan and writes it into the module.";
  let description = [{
    Runs the planner (`lib/Planner`, docs/planner.md) on the training step
    (`@train_step`, else `@forward`, or `function`) for a cluster and writes
    the chosen plan as docs/plans.md specifies: a `cleave.mesh @cluster`
    with axes pp, dp, cp and tp, a `cleave.sharding` on every argument and
    result (optimizer state follows its parameter, the loss is replicated),
    a `cleave.sharding_constraint` wherever a value must change layout
    between its producer and a consumer, a `cleave.stage` on every op and the
    `cleave.plan` module attribute.

    When the module is a model-zoo transformer (its `cleave.model` names a
    preset, or `model` does), the plan is searched over the calibrated cost
    model (mesh, micro-batching, schedule, stage partition, ZeRO,
    recomputation) and each pipeline stage's op shardings are chosen by an
    integer program over the ops' sharding rules (CBC), the repeated layer
    solved once. Any other program is planned in graph mode: every
    data x tensor parallel mesh and ZeRO stage priced by its integer program.

    ```mlir
    // cleave-opt --cleave-auto-shard="cluster=dgx-a100-80gb gpus=8 tp=8"
    func.func @forward(%x: tensor<8x1024xbf16> {cleave.input = "x"},
                       %w: tensor<4096x1024xbf16> {cleave.param = "w"}, ...)
    // becomes
    cleave.mesh @cluster(pp = 1 : nvlink, dp = 1 : nvlink, cp = 1 : nvlink,
                         tp = 8 : nvlink)
    func.func @forward(%x: ... {cleave.sharding = #cleave.sharding<@cluster, [_, _]>},
                       %w: ... {cleave.sharding = #cleave.sharding<@cluster, [tp, _]>}, ...)
      %h = cleave.matmul %x, %w {cleave.stage = 0 : i64, transpose_rhs} ...
      %c = cleave.sharding_constraint %y <@cluster, [_, _]> ...
    ```

    The pass fails, naming the constraint and by how much, when no plan
    fits (for example the smallest memory any plan needs against the
    device memory), and on a module that already carries a plan.
  }];
  let options = [
    Option<"cluster", "cluster", "std::string",
           /*default=*/"CLEAVE_DEFAULT_CLUSTER",
           "Cluster preset (dgx-a100-40gb, dgx-a100-80gb, dgx-h100, "
           "dgx-h200), local-cpu, or a JSON cluster file (default: "
           "dgx-a100-80gb)">,
    Option<"gpus", "gpus", "int", /*default=*/"0",
           "Devices (default: one node of a preset, 4 local CPU processes, "
           "the file's size)">,
    Option<"globalBatch", "global-batch", "int64_t", /*default=*/"0",
           "Sequences per step (default: the module's batch, which must "
           "equal it when given; the report prints it)">,
    Option<"tp", "tp", "int", /*default=*/"0",
           "Fix the tensor-parallel size (default: search)">,
    Option<"zero", "zero", "int", /*default=*/"-1",
           "Fix the ZeRO stage 0-3 (default: search)">,
    Option<"maxPp", "max-pp", "int", /*default=*/"-1",
           "Largest pipeline size (default: the layer count)">,
    Option<"headroom", "headroom", "double",
           /*default=*/"CLEAVE_DEFAULT_MEMORY_HEADROOM",
           "Fraction of device memory kept free (default: 0)">,
    Option<"maxMicroBatches", "max-micro-batches", "int64_t",
           /*default=*/"0", "Largest micro-batch count (default: any)">,
    Option<"model", "model", "std::string", /*default=*/"\"\"",
           "The model-zoo preset the module is (default: its cleave.model)">,
    Option<"function", "function", "std::string", /*default=*/"\"\"",
           "Function to plan (default: train_step, else forward)">,
    Option<"report", "report", "std::string", /*default=*/"\"\"",
           "Write the readable report to this file ('-': stderr)">,
    Option<"json", "json", "std::string", /*default=*/"\"\"",
           "Write the report as JSON to this file">
  ];
}

def CleaveAsyncCollectivesPass
    : Pass<"cleave-async-collectives", "::mlir::ModuleOp"> {
  let summary = "Splits blocking collectives and send/recv into start/wait "
                "pairs and schedules them to overlap compute.";
  let description = [{
    Runs on per-device programs (after `cleave-partition`, after
    `cleave-bucket-collectives` or `cleave-pipeline`). In every block, each
    `cleave.all_reduce`, `cleave.all_gather`, `cleave.reduce_scatter`,
    `cleave.all_to_all`, `cleave.collective_permute`, `cleave.send` and
    `cleave.recv` becomes a `cleave.*_start` and a `cleave.wait`:

    * the start moves up to where its operand is ready, but never above an
      earlier communication op of the block (a blocking collective, a start,
      or an op whose regions communicate), so every device still starts its
      communication in the program's order, which the runtime keeps
      (docs/runtime.md); nor above the wait of the collective of the same
      kind started `prefetch` requests before it, which bounds the memory
      that prefetching holds: with `prefetch = 1`, ZeRO-3 gathers the next
      layer's parameters while the current layer computes;
    * the pure ops that compute only the collective's operand (the reorder
      copies of a gradient before its reduce-scatter) rise first, to just
      after their own operands, but not above the previous communication
      op nor when they read only values from outside the block: the second
      of two gradients a backward op makes then starts while the first
      one's consumers compute;
    * the wait moves down to just before the first op of the block that uses
      the result, after the pure one-operand ops that read it (a bucket's
      slices and reshapes) have been moved down to their own first use; a
      send's wait, and the wait of a result that nothing in the block uses,
      goes before the block's terminator.

    ```mlir
    %g = cleave.all_reduce %dw on @m axes = [dp] : tensor<64xf32>
    %y = cleave.matmul %a, %b : ...           // does not use %g
    %u = cleave.sub %w, %g : tensor<64xf32>
    // becomes
    %r = cleave.all_reduce_start %dw on @m axes = [dp] : tensor<64xf32> -> !cleave.request<tensor<64xf32>>
    %y = cleave.matmul %a, %b : ...
    %g = cleave.wait %r : !cleave.request<tensor<64xf32>> -> tensor<64xf32>
    %u = cleave.sub %w, %g : tensor<64xf32>
    ```

    Since starts keep their order, a program that `cleave-verify-collectives`
    proved deadlock-free stays so. A start never moves below the blocking
    op's place. A collective whose start would sit right before its wait
    gains nothing and stays blocking. Collectives in nested regions are
    split within their block.
  }];
  let options = [
    Option<"prefetch", "prefetch", "int64_t", /*default=*/"1",
           "A start moves no higher than the wait of the collective of the "
           "same kind started this many before it (0: no limit)">
  ];
}

def CleaveBucketCollectivesPass
    : Pass<"cleave-bucket-collectives", "::mlir::ModuleOp"> {
  let summary = "Coalesces gradient all-reduces and ZeRO all-gathers and "
                "reduce-scatters into buckets: one collective per bucket.";
  let description = [{
    Runs on per-device programs (after `cleave-partition`, or after
    `cleave-pipeline` for a pipelined program: there the epilogue of every
    pipeline rank's function reduces its accumulated gradients over the
    data-parallel axes, and collectives over the module's pipeline axis,
    `cleave.pipeline`'s `axis`, are never bucketed, since the ranks of their
    group run different functions). In every function
    body, the `cleave.all_reduce` ops with the same mesh, axes, reduction and
    element type, and the `cleave.reduce_scatter` and `cleave.all_gather` ops
    along dimension 0 with the same mesh, axes (and reduction), are grouped
    into buckets of at most `bucket-bytes` bytes (of the full-size tensor:
    the all-reduce's, the reduce-scatter's input, the all-gather's result),
    as PyTorch DDP and FSDP bucket gradients. Tensors join in the order in
    which their operands become ready (the backward pass computes the last
    layer's gradients first), and each bucket is placed right after its last
    operand is computed, so it moves earlier than its members were; a tensor
    joins a bucket only while the bucket can still be placed before every
    member's first use. A bucket flattens its members, concatenates them,
    runs one collective and slices the result back:

    ```mlir
    %a = cleave.all_reduce %ga on @mesh axes = [dp] : tensor<64x64xf32>
    %b = cleave.all_reduce %gb on @mesh axes = [dp] : tensor<64xf32>
    // becomes
    %0 = cleave.reshape %ga : tensor<64x64xf32> to tensor<4096xf32>
    %1 = cleave.concat %0, %gb dim = 0 : (tensor<4096xf32>, tensor<64xf32>) -> tensor<4160xf32>
    %2 = cleave.all_reduce %1 on @mesh axes = [dp] : tensor<4160xf32>
    %3 = cleave.slice %2 offsets = [0] sizes = [4096] strides = [1] : tensor<4160xf32> -> tensor<4096xf32>
    %a = cleave.reshape %3 : tensor<4096xf32> to tensor<64x64xf32>
    %b = cleave.slice %2 offsets = [4096] sizes = [64] strides = [1] : tensor<4160xf32> -> tensor<64xf32>
    ```

    A reduce-scatter's members are laid out as `[group size, elements per
    device]` before the concatenation (dimension 1), and an all-gather's
    result is cut the same way, so every device still gets its own block of
    every member. Collectives whose operand is itself the result of a
    collective, and collectives in nested regions, stay as they are; the
    same operand gathered twice in one bucket is gathered once.
    `bucket-bytes = 0` leaves the program unchanged. The order of the
    collectives changes identically on every device; run
    `cleave-verify-collectives` after it as usual.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t",
           /*default=*/"25 * 1024 * 1024",
           "Largest bucket in bytes (0: no buckets)">
  ];
}

#endif // CLEAVE_TRANSFORMS_PASSES_TD
