//===- CleaveCollectiveOps.td - Per-device communication ---*- tablegen -*-===//
//
// These ops have per-device semantics: each device runs the op on its local
// tensor, and the devices that share a coordinate on every mesh axis *not*
// named in `axes` form one group that communicates.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_CLEAVECOLLECTIVEOPS_TD
#define CLEAVE_DIALECT_CLEAVECOLLECTIVEOPS_TD

class Cleave_CommOp<string mnemonic, list<Trait> traits = []>
    : Cleave_Op<mnemonic, traits # [
        DeclareOpInterfaceMethods<SymbolUserOpInterface>,
        MemoryEffects<[MemRead<Cleave_CommResource>,
                       MemWrite<Cleave_CommResource>]>]> {
  code commonExtraClassDeclaration = [{
    /// Axis names as strings.
    ::llvm::SmallVector<::llvm::StringRef> getAxisNames();
  }];
  let extraClassDeclaration = commonExtraClassDeclaration;
}

def Cleave_AllReduceOp : Cleave_CommOp<"all_reduce",
    [SameOperandsAndResultType]> {
  let summary = "Reduces a tensor across each device group.";
  let description = [{
    Every device of a group ends with the elementwise reduction (`sum` by
    default, or `max`, `min`, `avg`) of the group's tensors.

    ```mlir
    %g = cleave.all_reduce %dw on @world axes = [dp] : tensor<768x768xf32>
    %m = cleave.all_reduce %x on @world axes = [tp] reduction = max : tensor<8x128xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes,
                       DefaultValuedAttr<Cleave_ReductionKindAttr,
                         "::mlir::cleave::ReductionKind::Sum">:$reduction);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<AxisList>($axes)
    custom<Reduction>($reduction) attr-dict `:` type($result)
  }];
}

def Cleave_AllGatherOp : Cleave_CommOp<"all_gather"> {
  let summary = "Concatenates the group's tensors along one dimension.";
  let description = [{
    The result's `dim` is the operand's times the group size; the blocks are
    ordered by the devices' linear index within the group (the first named
    axis is the major one).

    ```mlir
    %w = cleave.all_gather %shard on @world axes = [dp] dim = 0 : tensor<96x768xf32> -> tensor<768x768xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<AxisList>($axes) `dim` `=` $dim
    attr-dict `:` type($input) `->` type($result)
  }];
}

def Cleave_ReduceScatterOp : Cleave_CommOp<"reduce_scatter"> {
  let summary = "Reduces across the group and keeps one block per device.";
  let description = [{
    Reduces the group's tensors elementwise, splits the reduction into
    group-size blocks along `dim`, and gives block `i` to the device with
    linear index `i` in the group.

    ```mlir
    %g = cleave.reduce_scatter %dw on @world axes = [dp] dim = 0 : tensor<768x768xf32> -> tensor<96x768xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim,
                       DefaultValuedAttr<Cleave_ReductionKindAttr,
                         "::mlir::cleave::ReductionKind::Sum">:$reduction);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<AxisList>($axes) `dim` `=` $dim
    custom<Reduction>($reduction) attr-dict `:` type($input) `->` type($result)
  }];
}

def Cleave_AllToAllOp : Cleave_CommOp<"all_to_all"> {
  let summary = "Splits along one dimension, exchanges, concatenates along another.";
  let description = [{
    Each device splits its tensor into group-size blocks along `split_dim`,
    sends block `j` to the device with linear index `j`, and concatenates the
    blocks it receives along `concat_dim` in order of sender. Moves a split
    from one dimension to another (sequence to heads in Ulysses-style
    context parallelism).

    ```mlir
    %y = cleave.all_to_all %x on @world axes = [sp] split_dim = 2 concat_dim = 1 : tensor<8x32x16x64xf32> -> tensor<8x128x4x64xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$split_dim,
                       I64Attr:$concat_dim);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<AxisList>($axes)
    `split_dim` `=` $split_dim `concat_dim` `=` $concat_dim
    attr-dict `:` type($input) `->` type($result)
  }];
}

def Cleave_CollectivePermuteOp : Cleave_CommOp<"collective_permute",
    [SameOperandsAndResultType]> {
  let summary = "Sends each device's tensor to another device of its group.";
  let description = [{
    `pairs` lists `source -> target` linear indices within the group. Each
    source sends its tensor to its target; a device that is no pair's target
    gets zeros. Sources are unique and so are targets.

    ```mlir
    // a ring shift along the pipeline axis
    %y = cleave.collective_permute %x on @world axes = [pp] pairs = [0 -> 1, 1 -> 2, 2 -> 3, 3 -> 0] : tensor<8x128x768xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, DenseI64ArrayAttr:$pairs);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<AxisList>($axes)
    `pairs` `=` custom<PermutePairs>($pairs) attr-dict `:` type($result)
  }];
  let extraClassDeclaration = commonExtraClassDeclaration # [{
    /// (source, target) pairs.
    ::llvm::SmallVector<std::pair<int64_t, int64_t>> getSourceTargetPairs();
  }];
}

def Cleave_SendOp : Cleave_CommOp<"send"> {
  let summary = "Sends a tensor to one device of the group.";
  let description = [{
    Point to point: the device sends its tensor to the device with linear
    index `peer` in its group along `axes`, which must execute a matching
    `cleave.recv` with the same shape and element type. Used between
    pipeline stages, where each stage has its own program.

    ```mlir
    cleave.send %act on @world axes = [pp] to 1 : tensor<8x128x768xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$peer);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<AxisList>($axes) `to` $peer
    attr-dict `:` type($input)
  }];
}

def Cleave_RecvOp : Cleave_CommOp<"recv"> {
  let summary = "Receives a tensor from one device of the group.";
  let description = [{
    Point to point: receives the tensor that the device with linear index
    `peer` in the group along `axes` sends with `cleave.send`.

    ```mlir
    %act = cleave.recv on @world axes = [pp] from 0 : tensor<8x128x768xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       I64Attr:$peer);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = [{
    `on` $mesh `axes` `=` custom<AxisList>($axes) `from` $peer
    attr-dict `:` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Asynchronous communication: start / wait pairs
//===----------------------------------------------------------------------===//

/// The start of an asynchronous communication: same operands and semantics
/// as the blocking op `blocking`, but it returns a `!cleave.request` at once;
/// the result is available at the request's one `cleave.wait`.
class Cleave_StartOp<string mnemonic, string blocking>
    : Cleave_CommOp<mnemonic> {
  let results = (outs Cleave_RequestType:$request);
  let hasVerifier = 1;
  code startExtraClassDeclaration = commonExtraClassDeclaration # [{
    /// The tensor the request's wait produces (null for a send).
    ::mlir::Type getValueType() {
      return ::llvm::cast<RequestType>(getRequest().getType()).getValueType();
    }
    /// The one `cleave.wait` of the request (null if the IR is invalid).
    WaitOp getWait();
  }];
  let extraClassDeclaration = startExtraClassDeclaration;
  string blockingOp = blocking;
}

def Cleave_AllReduceStartOp : Cleave_StartOp<"all_reduce_start", "all_reduce"> {
  let summary = "Starts an all_reduce; `cleave.wait` gives its result.";
  let description = [{
    `cleave.all_reduce` split in two: the start hands the operand to the
    communication runtime and returns a request at once; the request's
    `cleave.wait` returns the reduced tensor. Between the two, the program
    computes while the runtime communicates (docs/runtime.md,
    "Asynchronous communication"). The operand is read, and must not change,
    until the wait.

    ```mlir
    %r = cleave.all_reduce_start %dw on @world axes = [dp] : tensor<768x768xf32> -> !cleave.request<tensor<768x768xf32>>
    // ... compute that does not need the sum ...
    %g = cleave.wait %r : !cleave.request<tensor<768x768xf32>> -> tensor<768x768xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes,
                       DefaultValuedAttr<Cleave_ReductionKindAttr,
                         "::mlir::cleave::ReductionKind::Sum">:$reduction);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<AxisList>($axes)
    custom<Reduction>($reduction) attr-dict `:` type($input) `->`
    qualified(type($request))
  }];
}

def Cleave_AllGatherStartOp : Cleave_StartOp<"all_gather_start", "all_gather"> {
  let summary = "Starts an all_gather; `cleave.wait` gives its result.";
  let description = [{
    `cleave.all_gather` split in start and wait (see
    `cleave.all_reduce_start`). ZeRO-3 prefetches parameters with it.

    ```mlir
    %r = cleave.all_gather_start %shard on @world axes = [dp] dim = 0 : tensor<96x768xf32> -> !cleave.request<tensor<768x768xf32>>
    %w = cleave.wait %r : !cleave.request<tensor<768x768xf32>> -> tensor<768x768xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<AxisList>($axes) `dim` `=` $dim
    attr-dict `:` type($input) `->` qualified(type($request))
  }];
}

def Cleave_ReduceScatterStartOp
    : Cleave_StartOp<"reduce_scatter_start", "reduce_scatter"> {
  let summary = "Starts a reduce_scatter; `cleave.wait` gives its result.";
  let description = [{
    `cleave.reduce_scatter` split in start and wait (see
    `cleave.all_reduce_start`).

    ```mlir
    %r = cleave.reduce_scatter_start %dw on @world axes = [dp] dim = 0 : tensor<768x768xf32> -> !cleave.request<tensor<96x768xf32>>
    %g = cleave.wait %r : !cleave.request<tensor<96x768xf32>> -> tensor<96x768xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim,
                       DefaultValuedAttr<Cleave_ReductionKindAttr,
                         "::mlir::cleave::ReductionKind::Sum">:$reduction);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<AxisList>($axes) `dim` `=` $dim
    custom<Reduction>($reduction) attr-dict `:` type($input) `->`
    qualified(type($request))
  }];
}

def Cleave_AllToAllStartOp : Cleave_StartOp<"all_to_all_start", "all_to_all"> {
  let summary = "Starts an all_to_all; `cleave.wait` gives its result.";
  let description = [{
    `cleave.all_to_all` split in start and wait (see
    `cleave.all_reduce_start`): the exchange of expert-parallel dispatch and
    combine, or of Ulysses-style sequence parallelism, overlaps the compute
    placed between the two.

    ```mlir
    %r = cleave.all_to_all_start %x on @world axes = [sp] split_dim = 2 concat_dim = 1 : tensor<8x32x16x64xf32> -> !cleave.request<tensor<8x128x4x64xf32>>
    %y = cleave.wait %r : !cleave.request<tensor<8x128x4x64xf32>> -> tensor<8x128x4x64xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$split_dim,
                       I64Attr:$concat_dim);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<AxisList>($axes)
    `split_dim` `=` $split_dim `concat_dim` `=` $concat_dim
    attr-dict `:` type($input) `->` qualified(type($request))
  }];
}

def Cleave_CollectivePermuteStartOp
    : Cleave_StartOp<"collective_permute_start", "collective_permute"> {
  let summary = "Starts a collective_permute; `cleave.wait` gives its result.";
  let description = [{
    `cleave.collective_permute` split in start and wait (see
    `cleave.all_reduce_start`): a ring shift (ring attention's K/V blocks,
    a pipeline's stage-to-stage transfer) overlaps the compute placed
    between the two. The request's tensor has the operand's type.

    ```mlir
    %r = cleave.collective_permute_start %kv on @world axes = [cp] pairs = [0 -> 1, 1 -> 0] : tensor<2x64x64xf32> -> !cleave.request<tensor<2x64x64xf32>>
    %next = cleave.wait %r : !cleave.request<tensor<2x64x64xf32>> -> tensor<2x64x64xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, DenseI64ArrayAttr:$pairs);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<AxisList>($axes)
    `pairs` `=` custom<PermutePairs>($pairs) attr-dict `:` type($input) `->`
    qualified(type($request))
  }];
  let extraClassDeclaration = startExtraClassDeclaration # [{
    /// (source, target) pairs.
    ::llvm::SmallVector<std::pair<int64_t, int64_t>> getSourceTargetPairs();
  }];
}

def Cleave_SendStartOp : Cleave_StartOp<"send_start", "send"> {
  let summary = "Starts a send; its `cleave.wait` returns nothing.";
  let description = [{
    `cleave.send` split in start and wait (see `cleave.all_reduce_start`):
    the operand must not change until the wait. It matches a `cleave.recv`
    or `cleave.recv_start` of the peer.

    ```mlir
    %r = cleave.send_start %act on @world axes = [pp] to 1 : tensor<8x128x768xf32> -> !cleave.request
    cleave.wait %r : !cleave.request
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$peer);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<AxisList>($axes) `to` $peer
    attr-dict `:` type($input) `->` qualified(type($request))
  }];
}

def Cleave_RecvStartOp : Cleave_StartOp<"recv_start", "recv"> {
  let summary = "Starts a recv; `cleave.wait` gives the received tensor.";
  let description = [{
    `cleave.recv` split in start and wait (see `cleave.all_reduce_start`).

    ```mlir
    %r = cleave.recv_start on @world axes = [pp] from 0 : !cleave.request<tensor<8x128x768xf32>>
    %act = cleave.wait %r : !cleave.request<tensor<8x128x768xf32>> -> tensor<8x128x768xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       I64Attr:$peer);
  let assemblyFormat = [{
    `on` $mesh `axes` `=` custom<AxisList>($axes) `from` $peer
    attr-dict `:` qualified(type($request))
  }];
}

def Cleave_WaitOp : Cleave_Op<"wait", [
    MemoryEffects<[MemRead<Cleave_CommResource>,
                   MemWrite<Cleave_CommResource>]>]> {
  let summary = "Waits for a started communication and returns its result.";
  let description = [{
    Blocks until the request's communication has completed on this device
    and returns the tensor it produced (nothing for a send). Every request
    is waited exactly once, in the block of its start.

    The runtime executes requests in the order they were started, the same
    on every device, so a program whose starts, read as the blocking ops,
    cannot deadlock, cannot deadlock with its waits anywhere after the
    starts either (docs/verify-collectives.md).

    ```mlir
    %g = cleave.wait %r : !cleave.request<tensor<768x768xf32>> -> tensor<768x768xf32>
    cleave.wait %s : !cleave.request
    ```
  }];
  let arguments = (ins Cleave_RequestType:$request);
  let results = (outs Optional<Cleave_AnyTensor>:$result);
  let assemblyFormat = [{
    $request attr-dict `:` qualified(type($request)) (`->` type($result)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The start op of the request (null if the IR is invalid).
    ::mlir::Operation *getStart();
  }];
}

//===----------------------------------------------------------------------===//
// Per-device views that need no communication
//===----------------------------------------------------------------------===//

def Cleave_AxisIndexOp : Cleave_Op<"axis_index", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "This device's linear index in its group along mesh axes.";
  let description = [{
    Per-device semantics: the index of the executing device within its group
    along `axes` (row-major over the axes in the order given, the first named
    axis major), as an i64 scalar. The partitioner uses it for the offsets of
    a device's block (vocabulary-parallel embeddings, dropout counters).

    ```mlir
    %i = cleave.axis_index on @world axes = [tp] : tensor<i64>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let results = (outs Cleave_I64Scalar:$result);
  let assemblyFormat = [{
    `on` $mesh `axes` `=` custom<AxisList>($axes) attr-dict `:` type($result)
  }];
  let extraClassDeclaration = [{
    /// Axis names as strings.
    ::llvm::SmallVector<::llvm::StringRef> getAxisNames();
  }];
}

def Cleave_ShardOp : Cleave_Op<"shard", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Keeps this device's block of a tensor along one dimension.";
  let description = [{
    Per-device semantics: splits the tensor into group-size blocks along
    `dim` and keeps block `i`, where `i` is the device's linear index in its
    group along `axes` (as `cleave.axis_index`). No data moves between
    devices: this is how a replicated value becomes a split one.

    ```mlir
    %w = cleave.shard %x on @world axes = [tp] dim = 1 : tensor<768x3072xf32> -> tensor<768x768xf32>
    ```
  }];
  let arguments = (ins Cleave_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs Cleave_AnyTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<AxisList>($axes) `dim` `=` $dim
    attr-dict `:` type($input) `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// Axis names as strings.
    ::llvm::SmallVector<::llvm::StringRef> getAxisNames();
  }];
  // The block of a broadcast along one of its new dimensions is the
  // broadcast at the block's shape (cleave-partition applies it: a
  // replicated bias added to batch-split activations is broadcast at the
  // local shape, and no device-dependent slice is left). The block of an
  // all-reduce over the same group, used by nothing else, is a
  // reduce-scatter (ZeRO-1's gradients).
  let hasCanonicalizer = 1;
}

#endif // CLEAVE_DIALECT_CLEAVECOLLECTIVEOPS_TD
