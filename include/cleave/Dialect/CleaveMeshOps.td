//===- CleaveMeshOps.td - Meshes and sharding constraints --*- tablegen -*-===//

#ifndef CLEAVE_DIALECT_CLEAVEMESHOPS_TD
#define CLEAVE_DIALECT_CLEAVEMESHOPS_TD

def Cleave_MeshOp : Cleave_Op<"mesh", [Symbol]> {
  let summary = "A named N-d grid of devices.";
  let description = [{
    Declares a device mesh at module level. Each axis has a name, a size and
    the link kind its device groups communicate over: `nvlink`, `pcie`
    (inside a node), `ib`, `roce`, `ethernet` (between nodes) or `host`
    (processes of one machine, as on the CPU backend). Devices are numbered
    row-major over the axes: the last axis varies fastest, so it should be the
    one on the fastest link.

    ```mlir
    // 16 nodes of 8 GPUs: data parallel across nodes, tensor parallel inside.
    cleave.mesh @cluster(dp = 16 : ib, tp = 8 : nvlink)
    ```

    Axis names are identifiers, unique within the mesh; sizes are positive.

    `balanced_axes` names axes whose splits use the load-balanced layout of
    context parallelism (Megatron CP, Llama 3): a dimension whose first
    (major) axis is such an axis `a` of size `n` is cut into `2n` chunks and
    device `r` of `a` holds chunks `r` and `2n-1-r`, in that order. Blocks
    are contiguous in that permuted order, so a causal attention's work is
    the same on every device. The partitioner permutes a whole dimension
    before splitting it over such an axis and restores the natural order
    after gathering it; the position-dependent ops get `balanced = n`.

    ```mlir
    cleave.mesh @mesh(dp = 2 : ib, cp = 2 : ib) {balanced_axes = ["cp"]}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$shape,
                       TypedArrayAttrBase<Cleave_LinkKindAttr,
                                          "link kinds">:$links,
                       OptionalAttr<StrArrayAttr>:$balanced_axes);
  let assemblyFormat = [{
    $sym_name `(` custom<MeshAxes>($axis_names, $shape, $links) `)` attr-dict
  }];
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::llvm::StringRef":$name,
                   "::llvm::ArrayRef<::llvm::StringRef>":$axisNames,
                   "::llvm::ArrayRef<int64_t>":$shape,
                   "::llvm::ArrayRef<::mlir::cleave::LinkKind>":$links)>
  ];
  let extraClassDeclaration = [{
    /// Number of axes.
    unsigned getRank() { return getShape().size(); }
    /// Whether splits over axis `name` use the load-balanced layout.
    bool isBalancedAxis(::llvm::StringRef name);
    /// Product of all axis sizes.
    int64_t getNumDevices();
    /// Index of axis `name`, or std::nullopt if the mesh has no such axis.
    std::optional<unsigned> getAxisIndex(::llvm::StringRef name);
    /// Size of axis `name`; the axis must exist.
    int64_t getAxisSize(::llvm::StringRef name);
    /// Link kind of axis `name`; the axis must exist.
    ::mlir::cleave::LinkKind getAxisLink(::llvm::StringRef name);
    /// Product of the sizes of `axes` (all must exist).
    int64_t getGroupSize(::llvm::ArrayRef<::llvm::StringRef> axes);
  }];
}

def Cleave_ShardingConstraintOp : Cleave_Op<"sharding_constraint", [
    Pure, SameOperandsAndResultType, Cleave_Differentiable,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<Cleave_ShardingRuleOpInterface, ["getShardingRule"]>,
    DeclareOpInterfaceMethods<Cleave_CostOpInterface, ["getWork"]>]> {
  let summary = "Requires a value to have a given sharding at this point.";
  let description = [{
    Returns its operand unchanged (global semantics) and pins the sharding of
    the result. Sharding propagation treats it as a user annotation;
    partitioning turns it into the collectives that reshard the operand.

    ```mlir
    %1 = cleave.sharding_constraint %0 <@world, [dp, tp]> : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, Cleave_ShardingAttr:$sharding);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = "$input $sharding attr-dict `:` type($result)";
}

#endif // CLEAVE_DIALECT_CLEAVEMESHOPS_TD
