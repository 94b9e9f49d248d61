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

#endif // CLEAVE_TRANSFORMS_PASSES_TD
