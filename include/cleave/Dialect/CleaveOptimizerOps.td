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

#endif // CLEAVE_DIALECT_CLEAVEOPTIMIZEROPS_TD
