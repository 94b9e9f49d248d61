//===- CleaveShapeOps.td - Data movement ops ---------------*- tablegen -*-===//

#ifndef CLEAVE_DIALECT_CLEAVESHAPEOPS_TD
#define CLEAVE_DIALECT_CLEAVESHAPEOPS_TD

def Cleave_ReshapeOp : Cleave_ModelOp<"reshape", [Pure, Cleave_Differentiable],
                                     ["getWork"]> {
  let summary = "Reinterprets a tensor with another shape of the same size.";
  let description = [{
    Row-major reshape: element order is preserved. The sharding rule pairs
    dimensions that are split or merged through shared factors, so splitting
    `hidden` into `heads x head_dim` keeps a split of `hidden` as a split of
    `heads`.

    ```mlir
    %h = cleave.reshape %x : tensor<8x128x768xf32> to tensor<8x128x12x64xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cleave_TransposeOp : Cleave_ModelOp<"transpose",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable], ["getWork"]> {
  let summary = "Permutes dimensions.";
  let description = [{
    Result dimension `i` is operand dimension `permutation[i]`.

    ```mlir
    %t = cleave.transpose %x permutation = [0, 2, 1, 3] : tensor<8x128x12x64xf32> -> tensor<8x12x128x64xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input,
                       DenseI64ArrayAttr:$permutation);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = [{
    $input `permutation` `=` $permutation attr-dict `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
}

def Cleave_BroadcastOp : Cleave_ModelOp<"broadcast",
    [Pure, Cleave_Differentiable], ["getWork"]> {
  let summary = "Replicates a tensor along new dimensions.";
  let description = [{
    Operand dimension `i` becomes result dimension `dims[i]` (same size);
    the other result dimensions are new. `dims` is strictly increasing.

    ```mlir
    // a bias over the last dimension of an activation
    %b = cleave.broadcast %bias dims = [2] : tensor<768xf32> -> tensor<8x128x768xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = [{
    $input `dims` `=` $dims attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Cleave_SliceOp : Cleave_ModelOp<"slice",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable], ["getWork"],
    ["buildLocalOp"]> {
  let summary = "Extracts a strided window of a tensor.";
  let description = [{
    For every dimension `d`, takes indices `offsets[d] + k * strides[d]`
    for `k` in `[0, sizes[d])`; every index must lie inside the operand.

    ```mlir
    // the query third of a fused QKV projection
    %q = cleave.slice %qkv offsets = [0, 0, 0] sizes = [8, 128, 768] strides = [1, 1, 1] : tensor<8x128x2304xf32> -> tensor<8x128x768xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input,
                       DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes,
                       DenseI64ArrayAttr:$strides);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = [{
    $input `offsets` `=` $offsets `sizes` `=` $sizes `strides` `=` $strides
    attr-dict `:` type($input) `->` type($result)
  }];
}

def Cleave_ConcatOp : Cleave_ModelOp<"concat",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable], ["getWork"]> {
  let summary = "Joins tensors along one dimension.";
  let description = [{
    All operands have the same element type and rank, and the same sizes in
    every dimension except `dim`.

    ```mlir
    %c = cleave.concat %a, %b dim = 1 : (tensor<8x32xf32>, tensor<8x16xf32>) -> tensor<8x48xf32>
    ```
  }];
  let arguments = (ins Variadic<Cleave_AnyTensor>:$inputs, I64Attr:$dim);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = [{
    $inputs `dim` `=` $dim attr-dict `:` functional-type($inputs, $result)
  }];
}

def Cleave_PadOp : Cleave_ModelOp<"pad",
    [Pure, InferTypeOpAdaptor, Cleave_Differentiable], ["getWork"]> {
  let summary = "Surrounds and interleaves a tensor with a constant.";
  let description = [{
    Dimension `d` of the result holds `low[d]` copies of `value`, then the
    operand's elements separated by `interior[d]` copies of `value`, then
    `high[d]` copies: its size is
    `low + high + size + (size - 1) * interior`. All amounts are >= 0. It is
    the gradient of `cleave.slice`.

    ```mlir
    %p = cleave.pad %x low = [0, 2] high = [0, 1] interior = [0, 0] : tensor<4x5xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high, DenseI64ArrayAttr:$interior,
                       DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $input `low` `=` $low `high` `=` $high `interior` `=` $interior
    attr-dict `:` type($input) `->` type($result)
  }];
}

def Cleave_OptimizationBarrierOp : Cleave_ModelOp<"optimization_barrier",
    [Pure, SameOperandsAndResultType], ["getWork"]> {
  let summary = "The identity, which no pass looks through.";
  let description = [{
    Returns its operand. No pass folds it away or sees that its result is
    the operand, so ops computed from the result are never merged by CSE
    with the same ops computed from the operand. `cleave-remat` builds the
    recomputed forward ops of a layer from barriers on the layer's inputs:
    without them CSE would merge the recomputation with the original
    forward ops, and the forward values would stay alive until the backward
    pass after all (XLA's and StableHLO's `optimization_barrier` serve the
    same purpose for JAX's `remat`). `cleave-pipeline` puts one on each
    partial sum of the gradients over micro-batches, so that
    `cleave-fuse-elementwise` does not merge the chain of sums into one op
    after the last micro-batch, which would keep every micro-batch's
    gradients alive until then. Its sharding rule passes every
    dimension through; it costs nothing. The tensor-level lowering keeps it
    until `cleave-prepare-bufferization` replaces it by its operand, after
    the last CSE.

    ```mlir
    %x1 = cleave.optimization_barrier %x : tensor<8x128x768xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

#endif // CLEAVE_DIALECT_CLEAVESHAPEOPS_TD
