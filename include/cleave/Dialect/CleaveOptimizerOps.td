//===- CleaveOptimizerOps.td - Optimizer updates -----------*- tablegen -*-===//

#ifndef CLEAVE_DIALECT_CLEAVEOPTIMIZEROPS_TD
#define CLEAVE_DIALECT_CLEAVEOPTIMIZEROPS_TD

def Cleave_SGDOp : Cleave_ModelOp<"sgd",
    [Pure, AllTypesMatch<["param", "result"]>], ["getWork"]> {
  let summary = "Stochastic gradient descent update of one parameter.";
  let description = [{
    `param - lr * (grad + weight_decay * param)`. `grad` has the parameter's
    shape (any float type; it is converted to the parameter's), `lr` is an
    f32 scalar so that schedules can change it per step.

    ```mlir
    %w2 = cleave.sgd %w, %dw, %lr {weight_decay = 0.0 : f64} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<f32>) -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$param, Cleave_FloatTensor:$grad,
                       Cleave_F32Scalar:$lr,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_AdamWOp : Cleave_ModelOp<"adamw", [Pure,
    AllTypesMatch<["param", "new_param"]>,
    AllTypesMatch<["exp_avg", "new_exp_avg"]>,
    AllTypesMatch<["exp_avg_sq", "new_exp_avg_sq"]>], ["getWork"]> {
  let summary = "AdamW update of one parameter and its two moments.";
  let description = [{
    With `t = step` (1 for the first step, an f32 scalar):
    ```
    m' = beta1 m + (1 - beta1) g
    v' = beta2 v + (1 - beta2) g^2
    p' = p - lr (weight_decay p + (m' / (1 - beta1^t)) / (sqrt(v' / (1 - beta2^t)) + epsilon))
    ```
    as `torch.optim.AdamW` computes it. The moments have the parameter's
    shape and are f32 or f64; with bf16 compute the parameter is the f32
    master copy and `grad` is converted to it.

    ```mlir
    %w2, %m2, %v2 = cleave.adamw %w, %dw, %m, %v, %lr, %t {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<f32>, tensor<f32>) -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>)
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$param, Cleave_FloatTensor:$grad,
                       Cleave_FloatTensor:$exp_avg,
                       Cleave_FloatTensor:$exp_avg_sq,
                       Cleave_F32Scalar:$lr, Cleave_F32Scalar:$step,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1.0e-8">:$epsilon,
                       DefaultValuedAttr<F64Attr, "0.01">:$weight_decay);
  let results = (outs Cleave_FloatTensor:$new_param,
                      Cleave_FloatTensor:$new_exp_avg,
                      Cleave_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_LRScheduleOp : Cleave_ModelOp<"lr_schedule",
    [Pure, AllTypesMatch<["lr", "step", "result"]>], ["getWork"]> {
  let summary = "The learning rate of one step: linear warmup, then decay.";
  let description = [{
    The learning rate of step `t` (1 for the first step, an f32 scalar) for
    the peak rate `lr`, as nanoGPT's `get_lr` and Megatron-LM schedule it.
    With `W = warmup_steps`, `D = decay_steps` and `m = min_lr`:
    ```
    t <= W:       lr * t / W                              (linear warmup)
    t >  W:       p = clamp((t - W) / (D - W), 0, 1)      (1 when D == W)
      constant:   lr
      cosine:     m + (lr - m) * 0.5 * (1 + cos(pi * p))
      linear:     m + (lr - m) * (1 - p)
    ```
    so the rate reaches `lr` at step `W`, `m` at step `D` and stays there.
    The step counter is the training step's `step` input (the trainer's
    count of optimizer updates, which a resumed run continues), so the
    schedule is part of the compiled step and an AOT build carries it.
    Arithmetic is in f64, as Python computes it; the result is rounded to
    f32 once.

    ```mlir
    %lr_t = cleave.lr_schedule %lr, %step {decay = #cleave.lr_decay<cosine>, warmup_steps = 10 : i64, decay_steps = 30 : i64, min_lr = 6.0e-05 : f64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Cleave_F32Scalar:$lr, Cleave_F32Scalar:$step,
                       Cleave_LRDecayAttr:$decay,
                       DefaultValuedAttr<I64Attr, "0">:$warmup_steps,
                       DefaultValuedAttr<I64Attr, "0">:$decay_steps,
                       DefaultValuedAttr<F64Attr, "0.0">:$min_lr);
  let results = (outs Cleave_F32Scalar:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // CLEAVE_DIALECT_CLEAVEOPTIMIZEROPS_TD
