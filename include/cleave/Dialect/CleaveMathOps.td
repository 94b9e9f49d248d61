//===- CleaveMathOps.td - Constants, elementwise, reductions -*- tablegen -*-===//

#ifndef CLEAVE_DIALECT_CLEAVEMATHOPS_TD
#define CLEAVE_DIALECT_CLEAVEMATHOPS_TD

//===----------------------------------------------------------------------===//
// Constants and casts
//===----------------------------------------------------------------------===//

def Cleave_ConstantOp : Cleave_ModelOp<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>], ["getWork"],
    ["buildLocalOp"]> {
  let summary = "A constant tensor.";
  let description = [{
    A tensor whose value is known at compile time. Splat constants are the
    usual form (scales, zeros); dense constants are allowed for small tables.

    ```mlir
    %half = cleave.constant dense<0.5> : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

def Cleave_CastOp : Cleave_ElementwiseOp<"cast",
    [SameOperandsAndResultShape, Cleave_Differentiable]> {
  let summary = "Converts between floating-point element types.";
  let description = [{
    Rounds each element to the result's element type (round to nearest even)
    or widens it. Used for mixed precision: fp32 master weights are cast to
    bf16 or f16 for compute, and gradients back.

    ```mlir
    %w16 = cleave.cast %w : tensor<64x64xf32> to tensor<64x64xbf16>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise arithmetic
//===----------------------------------------------------------------------===//

def Cleave_AddOp : Cleave_ArithOp<"add", [Commutative]> {
  let summary = "Elementwise sum.";
  let description = [{
    Both operands and the result have the same type; use `cleave.broadcast`
    first to add a bias.

    ```mlir
    %2 = cleave.add %0, %1 : tensor<8x64xf32>
    ```
  }];
}

def Cleave_SubOp : Cleave_ArithOp<"sub"> {
  let summary = "Elementwise difference.";
  let description = [{
    ```mlir
    %2 = cleave.sub %0, %1 : tensor<8x64xf32>
    ```
  }];
}

def Cleave_MulOp : Cleave_ArithOp<"mul", [Commutative]> {
  let summary = "Elementwise product.";
  let description = [{
    ```mlir
    %2 = cleave.mul %0, %1 : tensor<8x64xf32>
    ```
  }];
}

def Cleave_DivOp : Cleave_ArithOp<"div"> {
  let summary = "Elementwise quotient.";
  let description = [{
    ```mlir
    %2 = cleave.div %0, %1 : tensor<8x64xf32>
    ```
  }];
}

def Cleave_MaxOp : Cleave_ArithOp<"max", [Commutative]> {
  let summary = "Elementwise maximum.";
  let description = [{
    ```mlir
    %2 = cleave.max %0, %1 : tensor<8x64xf32>
    ```
  }];
}

def Cleave_MinOp : Cleave_ArithOp<"min", [Commutative]> {
  let summary = "Elementwise minimum.";
  let description = [{
    ```mlir
    %2 = cleave.min %0, %1 : tensor<8x64xf32>
    ```
  }];
}

def Cleave_PowOp : Cleave_ArithOp<"pow"> {
  let summary = "Elementwise power `lhs ^ rhs`.";
  let description = [{
    ```mlir
    %2 = cleave.pow %0, %1 : tensor<8x64xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Unary math and activations
//===----------------------------------------------------------------------===//

def Cleave_NegOp : Cleave_UnaryOp<"neg"> {
  let summary = "Elementwise negation.";
  let description = [{
    ```mlir
    %1 = cleave.neg %0 : tensor<8x64xf32>
    ```
  }];
}

def Cleave_ExpOp : Cleave_UnaryOp<"exp"> {
  let summary = "Elementwise exponential.";
  let description = [{
    ```mlir
    %1 = cleave.exp %0 : tensor<8x64xf32>
    ```
  }];
}

def Cleave_LogOp : Cleave_UnaryOp<"log"> {
  let summary = "Elementwise natural logarithm.";
  let description = [{
    ```mlir
    %1 = cleave.log %0 : tensor<8x64xf32>
    ```
  }];
}

def Cleave_SqrtOp : Cleave_UnaryOp<"sqrt"> {
  let summary = "Elementwise square root.";
  let description = [{
    ```mlir
    %1 = cleave.sqrt %0 : tensor<8x64xf32>
    ```
  }];
}

def Cleave_RsqrtOp : Cleave_UnaryOp<"rsqrt"> {
  let summary = "Elementwise reciprocal square root.";
  let description = [{
    ```mlir
    %1 = cleave.rsqrt %0 : tensor<8x64xf32>
    ```
  }];
}

def Cleave_TanhOp : Cleave_UnaryOp<"tanh"> {
  let summary = "Elementwise hyperbolic tangent.";
  let description = [{
    ```mlir
    %1 = cleave.tanh %0 : tensor<8x64xf32>
    ```
  }];
}

def Cleave_SigmoidOp : Cleave_UnaryOp<"sigmoid"> {
  let summary = "Elementwise logistic function `1 / (1 + exp(-x))`.";
  let description = [{
    ```mlir
    %1 = cleave.sigmoid %0 : tensor<8x64xf32>
    ```
  }];
}

def Cleave_ReluOp : Cleave_UnaryOp<"relu"> {
  let summary = "Elementwise `max(x, 0)`.";
  let description = [{
    ```mlir
    %1 = cleave.relu %0 : tensor<8x64xf32>
    ```
  }];
}

def Cleave_SiluOp : Cleave_UnaryOp<"silu"> {
  let summary = "Elementwise `x * sigmoid(x)` (SiLU, swish).";
  let description = [{
    The gate activation of SwiGLU feed-forward blocks.

    ```mlir
    %1 = cleave.silu %0 : tensor<8x256xf32>
    ```
  }];
}

def Cleave_GeluOp : Cleave_UnaryOp<"gelu"> {
  let summary = "Elementwise Gaussian error linear unit.";
  let description = [{
    `approximate = none` computes `x * 0.5 * (1 + erf(x / sqrt(2)))`
    (PyTorch's `nn.GELU()`); `approximate = tanh` computes
    `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))` (GPT-2's
    `gelu_new`, PyTorch's `approximate='tanh'`). The default is `tanh`.

    ```mlir
    %1 = cleave.gelu %0 : tensor<8x256xf32>
    %2 = cleave.gelu %0 {approximate = #cleave.gelu_approx<none>} : tensor<8x256xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input,
                       DefaultValuedAttr<Cleave_GeluApproximationAttr,
                         "::mlir::cleave::GeluApproximation::Tanh">:$approximate);
}

def Cleave_GeluGradOp : Cleave_BinaryOp<"gelu_grad"> {
  let summary = "Gradient of `cleave.gelu`: `dy * gelu'(x)`.";
  let description = [{
    Operands are the GELU input `x` and the gradient `dy` of its result;
    `approximate` must match the forward op.

    ```mlir
    %dx = cleave.gelu_grad %x, %dy : tensor<8x256xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$lhs, Cleave_FloatTensor:$rhs,
                       DefaultValuedAttr<Cleave_GeluApproximationAttr,
                         "::mlir::cleave::GeluApproximation::Tanh">:$approximate);
}

def Cleave_SiluGradOp : Cleave_BinaryOp<"silu_grad"> {
  let summary = "Gradient of `cleave.silu`: `dy * silu'(x)`.";
  let description = [{
    Operands are the SiLU input `x` and the gradient `dy` of its result.

    ```mlir
    %dx = cleave.silu_grad %x, %dy : tensor<8x256xf32>
    ```
  }];
}

def Cleave_ReluGradOp : Cleave_BinaryOp<"relu_grad"> {
  let summary = "Gradient of `cleave.relu`: `dy` where `x > 0`, else 0.";
  let description = [{
    ```mlir
    %dx = cleave.relu_grad %x, %dy : tensor<8x256xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Cleave_ReduceOp<string mnemonic, list<Trait> traits = [],
                      list<string> costMethods = [],
                      list<string> shardingMethods = []>
    : Cleave_ModelOp<mnemonic, traits # [Pure, InferTypeOpAdaptor],
                     costMethods, shardingMethods> {
  let arguments = (ins Cleave_FloatTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $input `dims` `=` $dims attr-dict `:` type($input) `->` type($result)
  }];
}

def Cleave_ReduceSumOp : Cleave_ReduceOp<"reduce_sum", [Cleave_Differentiable],
                                          ["getWork"]> {
  let summary = "Sums over the given dimensions.";
  let description = [{
    The result drops the reduced dimensions. `dims` is a strictly increasing
    list of dimensions of the operand.

    ```mlir
    %s = cleave.reduce_sum %x dims = [0, 1] : tensor<8x128x64xf32> -> tensor<64xf32>
    ```
  }];
}

def Cleave_ReduceMeanOp : Cleave_ReduceOp<"reduce_mean", [Cleave_Differentiable],
                                            ["getWork"], ["buildLocalOp"]> {
  let summary = "Averages over the given dimensions.";
  let description = [{
    ```mlir
    %m = cleave.reduce_mean %x dims = [1] : tensor<8x64xf32> -> tensor<8xf32>
    ```
  }];
}

def Cleave_ReduceMaxOp : Cleave_ReduceOp<"reduce_max", [], ["getWork"]> {
  let summary = "Maximum over the given dimensions.";
  let description = [{
    Not differentiable (it has no gradient rule): use it for statistics, or
    `cleave.softmax` and `cleave.cross_entropy`, which are stable and
    differentiable.

    ```mlir
    %m = cleave.reduce_max %x dims = [1] : tensor<8x64xf32> -> tensor<8xf32>
    ```
  }];
}

#endif // CLEAVE_DIALECT_CLEAVEMATHOPS_TD
