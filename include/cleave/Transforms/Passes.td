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
           "decay, as nanoGPT does">
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
    Option<"cluster", "cluster", "std::string", /*default=*/"\"dgx-h100\"",
           "Cluster preset (dgx-a100-40gb, dgx-a100-80gb, dgx-h100, "
           "dgx-h200)">,
    Option<"clusterFile", "cluster-file", "std::string", /*default=*/"\"\"",
           "JSON cluster spec; overrides `cluster`">,
    Option<"nodes", "nodes", "int", /*default=*/"0",
           "Nodes of the preset cluster (0: enough for the largest mesh)">
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
    Option<"cluster", "cluster", "std::string", /*default=*/"\"dgx-a100-80gb\"",
           "Cluster preset (dgx-a100-40gb, dgx-a100-80gb, dgx-h100, "
           "dgx-h200), local-cpu, or a JSON cluster file">,
    Option<"gpus", "gpus", "int", /*default=*/"0",
           "Devices (0: one node of a preset, 4 local CPU processes, the "
           "file's size)">,
    Option<"globalBatch", "global-batch", "int64_t", /*default=*/"0",
           "Sequences per step; must equal the module's batch (0: take it)">,
    Option<"tp", "tp", "int", /*default=*/"0",
           "Fix the tensor-parallel size (0: search)">,
    Option<"maxPp", "max-pp", "int", /*default=*/"-1",
           "Largest pipeline size (-1: the layer count; 1 on local-cpu)">,
    Option<"headroom", "headroom", "double", /*default=*/"0.0",
           "Fraction of device memory kept free">,
    Option<"maxMicroBatches", "max-micro-batches", "int64_t",
           /*default=*/"0", "Largest micro-batch count (0: any)">,
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

#endif // CLEAVE_TRANSFORMS_PASSES_TD
