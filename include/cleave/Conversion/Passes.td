//===- Passes.td - Cleave lowering passes ------------------*- tablegen -*-===//

#ifndef CLEAVE_CONVERSION_PASSES_TD
#define CLEAVE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def CleaveLowerCollectivesPass
    : Pass<"cleave-lower-collectives", "::mlir::ModuleOp"> {
  let summary = "Lowers per-device communication ops to runtime calls.";
  let description = [{
    The first pass of a per-device (partitioned) program's lowering. Every
    `cleave.all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`,
    `collective_permute`, `send` and `recv` becomes a call of the runtime's
    C ABI (`include/cleave/Runtime/Runtime.h`) on buffers: the operand is read
    through `bufferization.to_memref`, the result is written into a fresh
    buffer that `bufferization.to_tensor` returns to the tensor program, so
    bufferization and the rest of the pipeline see ordinary tensor code.
    `cleave.axis_index` becomes `cleave_rt_group_rank`, `cleave.shard` a
    `tensor.extract_slice` at that rank's offset. A function asks for each
    list of axes once, at its top: the runtime call is opaque to CSE, and
    code that reads the same index (an attention and its gradient masking by
    one context-parallel block) can then be shared.

    The runtime moves contiguous blocks, so a gather, scatter or all-to-all
    along a non-leading dimension first becomes the same op on the leading
    dimension between `cleave.transpose`s (and, for all-to-all, reshapes that
    put the received blocks next to the concatenated dimension).

    Each distinct list of mesh axes gets a communicator group id, in order of
    first use; the module attribute `cleave.groups` lists the axes of each id
    so that the host defines the groups (`cleave_rt_define_group`) before the
    first step:

    ```mlir
    %1 = cleave.all_reduce %0 on @m axes = [tp] : tensor<8x4xf32>
    // becomes (module attributes {cleave.groups = [["tp"]]})
    %in = bufferization.to_memref %0 read_only : memref<8x4xf32>
    %out = memref.alloc() {alignment = 64 : i64} : memref<8x4xf32>
    call @cleave_rt_all_reduce(%c0_i64, %c0_i32, %c0_i32, %pin, %pout, %c32_i64)
        : (i64, i32, i32, !llvm.ptr, !llvm.ptr, i64) -> ()
    %1 = bufferization.to_tensor %out restrict writable : memref<8x4xf32>
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect", "::mlir::tensor::TensorDialect"
  ];
}

def CleaveLowerToLinalgPass
    : Pass<"cleave-lower-to-linalg", "::mlir::ModuleOp"> {
  let summary = "Lowers local cleave compute ops to linalg, tensor and math.";
  let description = [{
    Rewrites every model op with per-device (local) shapes into tensor-level
    upstream ops: elementwise ops, reductions, norms, softmax, losses and
    optimizer updates into `linalg.generic`s computing in f32 (f64 for f64
    tensors); data movement into `tensor` ops and `linalg.transpose`;
    matmuls (and attention's batched products) into `linalg.matmul` /
    `linalg.batch_matmul` named ops, which `cleave-linalg-to-runtime` turns
    into GEMM calls after bufferization. Collectives are left in place, and
    so is `cleave.optimization_barrier`: the CSE after this pass must not
    merge what `cleave-remat` recomputes with the forward ops
    (`cleave-prepare-bufferization` removes the barriers).

    ```mlir
    %y = cleave.gelu %x : tensor<8x16xf32>
    // becomes
    %e = tensor.empty() : tensor<8x16xf32>
    %y = linalg.generic {... iterator_types = ["parallel", "parallel"]}
           ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {...}
    ```

    `cleave.attention` and `cleave.attention_grad` become, with
    `attention-tile` > 0 (the default), flash-attention-2 loops: `scf.for`
    over query tiles and key tiles of that many rows, batched GEMMs on the
    tiles and an online softmax that keeps a running row max and sum, so no
    `S x Skv` tensor exists and memory grows linearly in the sequence.
    Causal key tiles above the diagonal are skipped (the `query_block`
    operand of context parallelism offsets the diagonal); a single key tile
    is always seen, so its loop has constant bounds and folds away. The
    gradient recomputes each query tile's output and log-sum-exp (with one
    query and one key tile, the forward op's own, after CSE), then the
    probabilities tile by tile (`D = rowsum(dO * O)`,
    `dS = P (dP - D) scale`). Sequences that are not a multiple of the tile
    are zero-padded and the padded keys masked. `attention-tile=0` keeps the
    materialised lowering (batched GEMMs over the full `[B*Hq, S, Skv]`
    probabilities). Both pipelines use the tiled lowering by default; on
    CUDA the tile loops stay in host code, the tile GEMMs become cuBLASLt
    calls and the softmax steps kernels (docs/cuda.md).

    ```mlir
    %o = cleave.attention %q, %k, %v {causal} : (tensor<1x256x2x16xf32>, ...) -> tensor<1x256x2x16xf32>
    // becomes (attention-tile=128)
    %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%acc = %e) -> (tensor<2x256x16xf32>) {
      %qi = tensor.extract_slice %q2[0, %off, 0] [2, 128, 16] [1, 1, 1]
      %ub = arith.minui %tiles, %c2 : index
      %s:3 = scf.for %j = %c0 to %ub step %c1 iter_args(%m = %minf, %l = %zero, %o = %zacc) {
        %sij = linalg.batch_matmul_transpose_b ins(%qi, %kj : ...) ...
        ... // row max, exp, row sum, rescale, linalg.batch_matmul with V_j
      }
      ...
    }
    ```

    An op with no lowering is an error at the op.
  }];
  let options = [
    Option<"attentionTile", "attention-tile", "int64_t", /*default=*/"128",
           "Rows of the query and key tiles of the flash attention lowering "
           "(0: materialise the full probabilities)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def CleaveFuseElementwisePass
    : Pass<"cleave-fuse-elementwise", "::mlir::ModuleOp"> {
  let summary = "Fuses chains of elementwise linalg.generics, sparing GEMMs.";
  let description = [{
    Upstream elementwise fusion, restricted to producer/consumer pairs that
    are both `linalg.generic` and to producers with a single user (a producer
    with several users would be recomputed in each: a transformer's residual
    stream would be recomputed from the embedding in every layer) that do
    not read their own output (an in-place update, such as the running row
    sums of the flash attention lowering, whose fused op would lose the
    value it reads). Named
    contractions (`linalg.matmul` and
    friends) stay named, so that `cleave-linalg-to-runtime` can hand them to
    the BLAS after bufferization, and the fills that initialize them stay
    separate.

    ```mlir
    %a = linalg.generic {...} ins(%x) ...   // exp
    %b = linalg.generic {...} ins(%a) ...   // mul
    // becomes one generic computing mul(exp(x))
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def CleavePrepareBufferizationPass
    : Pass<"cleave-prepare-bufferization", "::mlir::ModuleOp"> {
  let summary = "Sets up function boundaries for one-shot bufferization.";
  let description = [{
    Marks the arguments of every public function `bufferization.writable =
    false`, so that the compiled code never writes into a buffer its caller
    passed in (hosts may reuse inputs, and parameters are swapped with the
    outputs after each step), and copies results that a function returns
    more than once (for example the same gradient for two parameters of an
    addition) or that are its own arguments, so that every result bufferizes
    to its own out-parameter. It copies the slices that would bufferize to
    a view with an offset or strides (the members of a bucketed collective)
    where a call or a return, of any function, passes them: boundaries have
    identity layouts, and a `memref.cast` cannot drop a static offset.
    Finally it gives every user of a shared
    `linalg.fill` (CSE merges the zero fills that GEMMs accumulate into) its
    own fill, right before it: bufferization would otherwise fill once and
    copy the buffer for every user. Likewise every op that writes into a
    shared `tensor.empty` (CSE merges those of one shape all over the
    function) gets its own, right before it (the ops inside one loop share
    one): bufferization would otherwise give them one buffer, alive from
    the first user to the last, from a layer's forward pass to its backward
    pass (`unshare-empties`; the CUDA pipeline, which frees buffers at the
    end of the step, keeps the shared buffers: there they are reuse). It
    replaces every `cleave.optimization_barrier` by its
    operand: no CSE runs after it, and bufferization needs no copy for it.

    ```mlir
    return %g, %g : tensor<4xf32>, tensor<4xf32>
    // becomes
    %e = tensor.empty() : tensor<4xf32>
    %c = linalg.copy ins(%g : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    return %g, %c : tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let options = [
    Option<"unshareEmpties", "unshare-empties", "bool", /*default=*/"true",
           "Give every user of a shared tensor.empty its own">
  ];
  let dependentDialects = [
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect"
  ];
}

def CleaveEarlyDeallocPass
    : Pass<"cleave-early-dealloc", "::mlir::ModuleOp"> {
  let summary = "Moves each buffer's deallocation to right after its last "
                "use.";
  let description = [{
    MLIR's ownership-based buffer deallocation frees the buffers of a block
    at the block's end, so a training step would hold every intermediate
    buffer until it returns: its peak would be the sum of all of them, and
    recomputation (`cleave-remat`) could only add to it. This pass, run
    after the deallocation pipeline, moves every `memref.dealloc` of a
    `memref.alloc` of the same block up to right after the last op of the
    block that uses the buffer or anything computed from it (views, and the
    pointers and integers GEMM calls take), so a buffer lives from its
    allocation to its last use, as in PyTorch's caching allocator.

    ```mlir
    %a = memref.alloc() : memref<4xf32>
    linalg.generic ... outs(%a : memref<4xf32>)
    linalg.generic ... ins(%a : memref<4xf32>) outs(%b : memref<4xf32>)
    ... // ops not touching %a
    memref.dealloc %a : memref<4xf32>
    // becomes
    %a = memref.alloc() : memref<4xf32>
    linalg.generic ... outs(%a : memref<4xf32>)
    linalg.generic ... ins(%a : memref<4xf32>) outs(%b : memref<4xf32>)
    memref.dealloc %a : memref<4xf32>
    ... // ops not touching %a
    ```

    A buffer with a use outside the dealloc's block (other than inside ops
    of that block) keeps its deallocation where it is. The CPU pipeline
    runs it; the CUDA pipeline keeps block-end deallocation, whose frees
    happen after every kernel of the step is queued.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def CleaveApproximateMathPass
    : Pass<"cleave-approximate-math", "::mlir::ModuleOp"> {
  let summary = "Replaces f32 transcendental calls by inline polynomials.";
  let description = [{
    Rewrites f32 `math.exp`, `math.tanh`, `math.erf`, `math.log` (and the
    other functions MLIR approximates) into arithmetic polynomials with
    range reduction, accurate to a few ulp. Unlike calls to libm they inline
    into the loops of the lowered program, which LLVM then vectorizes: GELU's
    tanh and softmax's exp were a quarter of a small GPT's CPU step as libm
    calls. f64 keeps libm (gradient checks run in f64).

    ```mlir
    %y = math.tanh %x : f32
    // becomes about 20 arith ops (clamp, polynomial in x^2, division)
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def CleaveLinalgToRuntimePass
    : Pass<"cleave-linalg-to-runtime", "::mlir::ModuleOp"> {
  let summary = "Turns bufferized linalg matmuls into runtime GEMM calls.";
  let description = [{
    After bufferization, replaces `linalg.matmul`, `linalg.batch_matmul`
    and their `_transpose_a` / `_transpose_b` variants on memrefs with calls
    to `cleave_rt_gemm` (OpenBLAS on the CPU backend): pointers, leading
    dimensions and batch strides come from the memrefs' strided metadata.
    An operand whose innermost stride is not 1 is first copied into a
    contiguous buffer.

    ```mlir
    linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x4xf32>)
                  outs(%c : memref<8x4xf32>)
    // becomes
    func.call @cleave_rt_gemm(%f32, %false, %false, %one, %c8, %c4, %c16,
        %alpha, %pa, %c16, %c0, %pb, %c4, %c0, %beta, %pc, %c4, %c0) : (...)
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::memref::MemRefDialect"
  ];
}

def CleaveOutlineKernelsPass
    : Pass<"cleave-outline-kernels", "::mlir::ModuleOp"> {
  let summary = "Moves every loop nest of a function into its own function.";
  let description = [{
    After linalg ops became loops, a training step is one function with
    about a thousand loop nests. LLVM's loop passes (induction-variable
    simplification, vectorization, load elimination) are superlinear in
    function size: compiling a 4-layer GPT step took 25 s. This pass moves
    each top-level loop nest whose memrefs all have identity layouts into a
    private, never-inlined function taking the values it uses, so LLVM
    optimizes many small functions (and profiles name them). Loop nests on
    strided views stay in place (the bare-pointer calling convention needs
    identity layouts).

    ```mlir
    scf.for %i = %c0 to %c8 step %c1 { ... %a ... %b ... }
    // becomes
    call @step_kernel3(%a, %b) : (memref<8x16xf32>, memref<8x16xf32>) -> ()
    ```
  }];
  // LLVM for the kernels' linkage attribute.
  let dependentDialects = [
    "::mlir::func::FuncDialect", "::mlir::LLVM::LLVMDialect"
  ];
}

def CleaveEmitEntryPointsPass
    : Pass<"cleave-emit-entry-points", "::mlir::ModuleOp"> {
  let summary = "Adds a `void cleave_entry_<f>(void **buffers)` per function.";
  let description = [{
    Runs on the LLVM-dialect module, after functions were lowered with the
    bare-pointer calling convention (every argument is the pointer to a
    statically shaped buffer). For every public function `@f` it adds
    `llvm.func @cleave_entry_f(!llvm.ptr)` that loads the i-th pointer from
    the array and calls `@f`, so hosts call any compiled step through one
    C signature, whatever the number of buffers:

    ```c
    void *buffers[] = {param0, ..., input0, ..., output0, ...};
    cleave_entry_train_step(buffers);
    ```

    It also drops the `cleave.*` argument and result attributes of LLVM
    functions: they described the buffers for the manifest (read before
    lowering) and have no meaning in LLVM IR.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

//===----------------------------------------------------------------------===//
// The CUDA target (docs/cuda.md)
//===----------------------------------------------------------------------===//

def CleaveCudaMapToGpuPass
    : Pass<"cleave-cuda-map-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Turns bufferized linalg ops into GPU kernels and launches.";
  let description = [{
    Runs after bufferization and `cleave-linalg-to-runtime` (GEMMs are
    runtime calls by then). Every `linalg` op left in a host function (named
    ops are generalized first, `memref.copy` becomes a copy generic) becomes
    one `gpu.func` kernel in the module's `gpu.module @cleave_kernels` and a
    `gpu.launch_func` in its place, so the host code only launches kernels,
    calls the runtime and manages buffers. Two kernel shapes:

    - *one thread per output element* (elementwise generics, and reductions
      whose contiguous dimension is parallel, such as the column sums of a
      bias gradient): threads walk the output's contiguous dimension, so
      neighbouring threads touch neighbouring addresses; each thread handles
      `V` consecutive elements with 128-bit vector loads and stores when the
      contiguous dimension and every stride are multiples of `V` (4 for f32,
      8 for bf16/f16); reductions run sequentially inside the thread in the
      order of the loop;
    - *one block per output element* (reductions over the contiguous
      dimension: softmax, norms, cross-entropy): the block's threads stride
      over the reduced dimension with vector loads, fold their elements with
      the generic's combiner (add, max, min, mul, and, or, xor) and combine
      their partial results with `gpu.all_reduce`; thread 0 folds in the
      output's initial value and stores it.

    Values the kernel needs are rebuilt inside it where possible: constants,
    view ops (`memref.subview`, `expand_shape`, `collapse_shape`) and scalar
    computations on values loaded from memory (the bias correction of
    AdamW reads the step counter from its buffer) are cloned into the kernel,
    so kernel arguments are whole buffers with identity layouts and host
    code never dereferences device memory. A load moves into a kernel only
    from a buffer that nothing writes between the load and the kernel:
    function arguments that are only read, and allocations whose every
    write is at the top of the function before every read (the token slice
    that a sequence-parallel embedding gradient scatters by, filled by a
    copy kernel first). A host operation that still reads or writes memory
    afterwards is an error.

    A sequential host loop (`scf.for` without loop-carried values) whose
    body is elementwise generics over one iteration space with identity
    maps, plus scalar and view ops, loads of read-only buffers and
    `scf.if`s, becomes one kernel (`*_loop`) with a thread per point of
    that space, each running the whole loop in order, when no two threads
    touch the same element of a buffer the loop writes (every view of it
    places the iteration space at the same dims and static offsets). The
    embedding gradient's scatter-add over the tokens is such a loop: one
    deterministic launch instead of two per token. Other loops keep their
    launches inside the host loop.

    ```mlir
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x : memref<64x256xf32>) outs(%y : memref<64x256xf32>) {...}
    // becomes
    gpu.launch_func @cleave_kernels::@f_k0_ew blocks in (%c16, %c1, %c1)
        threads in (%c256, %c1, %c1) args(%x : memref<64x256xf32>, %y : memref<64x256xf32>)
    gpu.module @cleave_kernels {
      gpu.func @f_k0_ew(%x: memref<64x256xf32>, %y: memref<64x256xf32>) kernel
          attributes {known_block_size = array<i32: 256, 1, 1>} {
        ... %v = vector.load %x[%i, %j] : memref<64x256xf32>, vector<4xf32> ...
      }
    }
    ```
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block of elementwise kernels, and the most threads "
           "a reduction block uses">,
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"128",
           "Width of vector loads and stores (0 disables them)">,
  ];
  let dependentDialects = [
    "::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def CleaveCudaDedupKernelsPass
    : Pass<"cleave-cuda-dedup-kernels", "::mlir::ModuleOp"> {
  let summary = "Merges identical kernels, so device code stops growing with "
                "depth.";
  let description = [{
    Runs after `cleave-cuda-map-to-gpu` (and canonicalization). A model's
    layers are identical, so the kernels that `cleave-cuda-map-to-gpu`
    emits for layer 3 are those of layer 0 under other names: GPT-3 175B's
    shape partitioned tp 8 x dp 8 with sequence parallelism has 273 kernels
    at 2 layers and 481 at 4, but 100 distinct ones at both depths. Every
    kernel of a `gpu.module` whose text is that of an earlier kernel (same
    body, signature and attributes, whatever its name) is erased and its
    launches launch the earlier one, so device code lowering, PTX
    generation and ptxas see each distinct kernel once.

    ```mlir
    gpu.launch_func @cleave_kernels::@f_k0_ew ... args(%a : memref<64xf32>, ...)
    gpu.launch_func @cleave_kernels::@f_k1_ew ... args(%b : memref<64xf32>, ...)
    gpu.module @cleave_kernels {
      gpu.func @f_k0_ew(%x: memref<64xf32>, %y: memref<64xf32>) kernel {...}
      gpu.func @f_k1_ew(%x: memref<64xf32>, %y: memref<64xf32>) kernel {...}  // the same body
    }
    // becomes
    gpu.launch_func @cleave_kernels::@f_k0_ew ... args(%a : memref<64xf32>, ...)
    gpu.launch_func @cleave_kernels::@f_k0_ew ... args(%b : memref<64xf32>, ...)
    gpu.module @cleave_kernels {
      gpu.func @f_k0_ew(%x: memref<64xf32>, %y: memref<64xf32>) kernel {...}
    }
    ```

    Launches are the only uses of kernels at this point; a kernel used any
    other way is an error naming it.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def CleaveCudaGemmEpiloguesPass
    : Pass<"cleave-cuda-gemm-epilogues", "::mlir::ModuleOp"> {
  let summary = "Fuses bias additions into the GEMMs that produce them.";
  let description = [{
    Runs on bufferized code before `cleave-linalg-to-runtime`. A linear
    layer's `linalg.matmul` (or `_transpose_a` / `_transpose_b`, f32, bf16
    or f16) whose result is only read by an elementwise generic adding a
    bias along its last dimension, `y[.., j] = c[.., j] + bias[j]`, becomes
    one call of `cleave_rt_cuda_gemm_epilogue` with the cuBLASLt bias
    epilogue writing `y` directly: the GEMM's output buffer, the zero fill
    before it and the elementwise kernel go. Only side-effect-free ops and
    allocations may lie between the GEMM and the addition (the GEMM moves to
    the addition), and the operands need unit inner strides.

    ```mlir
    linalg.fill ins(%zero : f32) outs(%c : memref<128x64xf32>)
    linalg.matmul_transpose_b ins(%x, %w : memref<128x32xf32>, memref<64x32xf32>)
                              outs(%c : memref<128x64xf32>)
    %c3 = memref.expand_shape %c [[0, 1], [2]] output_shape [4, 32, 64] : ...
    linalg.generic {...} ins(%c3, %bias : memref<4x32x64xf32>, memref<64xf32>)
                         outs(%y : memref<4x32x64xf32>) { addf }
    // becomes
    call @cleave_rt_cuda_gemm_epilogue(%f32, %false, %true, %c128, %c64, %c32,
        %px, %c32, %pw, %c32, %py, %c64, %bias_epilogue, %pbias) : (...) -> ()
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::memref::MemRefDialect"
  ];
}

def CleaveCudaAlignVectorAccessPass
    : Pass<"cleave-cuda-align-vector-access", "::mlir::ModuleOp"> {
  let summary = "Gives the vector loads and stores of kernels their alignment.";
  let description = [{
    Runs on the kernels of `gpu.module`s after their lowering to the LLVM
    and NVVM dialects. MLIR 19 lowers `vector.load` and `vector.store` with
    the alignment of the element type, so NVPTX splits a `vector<4xf32>`
    access into four 32-bit ones. `cleave-cuda-map-to-gpu` emits a vector
    access only where it proved that the address is a multiple of the
    vector's size (buffers are at least 16-byte aligned), so this pass sets
    every vector `llvm.load` / `llvm.store` of a kernel to the alignment of
    its vector type, and PTX gets `ld.global.v4.f32`.

    ```mlir
    %v = llvm.load %p {alignment = 4 : i64} : !llvm.ptr -> vector<4xf32>
    // becomes
    %v = llvm.load %p {alignment = 16 : i64} : !llvm.ptr -> vector<4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def CleaveCudaCompilePtxPass
    : Pass<"cleave-cuda-compile-ptx", "::mlir::ModuleOp"> {
  let summary = "Assembles the PTX of every gpu.binary into a cubin with ptxas.";
  let description = [{
    Takes the `gpu.binary` ops that `gpu-module-to-binary{format=isa}`
    produced (PTX text), runs `ptxas` for the chip on each and replaces the
    PTX by the cubin, so the program needs no JIT compilation at load time.
    `ptxas` is the option's path, else `$CUDA_HOME/bin/ptxas`, else
    `$CUDA_PATH/bin/ptxas`, else `/usr/local/cuda/bin/ptxas`, else the one
    on `PATH`; a missing `ptxas` or a PTX error is a pass error that quotes
    ptxas' message.

    With `report=<file>` ptxas runs with `-v` and the pass writes, per
    kernel, the registers, spill stores and loads, stack frame and shared
    memory as JSON (`-` writes a table to stderr), which
    `bench/cuda/kernels.py` summarizes.

    ```mlir
    gpu.binary @cleave_kernels [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "//\0A// Generated by LLVM NVPTX...">]
    // becomes
    gpu.binary @cleave_kernels [#gpu.object<#nvvm.target<chip = "sm_90">, bin = "\7FELF...">]
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "GPU architecture ptxas compiles for">,
    Option<"ptxas", "ptxas", "std::string", /*default=*/"\"\"",
           "Path of ptxas (default: found under CUDA_HOME, CUDA_PATH, "
           "/usr/local/cuda or PATH)">,
    Option<"optLevel", "opt-level", "int64_t", /*default=*/"3",
           "ptxas optimization level">,
    Option<"report", "report", "std::string", /*default=*/"\"\"",
           "Write ptxas' resource usage per kernel to this JSON file "
           "('-': a table on stderr)">,
  ];
}

def CleaveCudaLowerLaunchesPass
    : Pass<"cleave-cuda-lower-launches", "::mlir::ModuleOp"> {
  let summary = "Lowers kernel launches and buffers to the CUDA runtime ABI.";
  let description = [{
    Runs on the host module once it is in the LLVM dialect and its kernels
    are cubins. Each `gpu.binary` becomes an internal constant holding the
    cubin plus a module handle slot; each `gpu.launch_func` becomes a call of

    ```c
    void cleave_rt_cuda_launch(void **function, void **module,
                               const void *image, const char *name,
                               int64_t gx, int64_t gy, int64_t gz,
                               int64_t bx, int64_t by, int64_t bz,
                               int32_t shared_bytes, void **args);
    ```

    with a function handle slot per kernel, so the runtime loads each
    cubin once and looks each kernel up once (LLVM 19's own lowering loads
    and unloads the module around every launch). Host allocations
    (`malloc` / `free` from `memref.alloc` / `memref.dealloc`) become
    `cleave_rt_cuda_alloc` / `cleave_rt_cuda_free` (the runtime's caching,
    stream-ordered device allocator), and every `cleave_entry_*` function
    calls `cleave_rt_cuda_step_begin()` first and
    `cleave_rt_cuda_synchronize()` before it returns, so that the step's
    work is enqueued without host waits and a host that reads the loss
    after a step reads the finished value. Any other call of
    the C library that touches memory is an error.

    ```mlir
    gpu.launch_func @cleave_kernels::@f_k0_ew blocks in (%16, %1, %1) threads in (%256, %1, %1) args(%p : !llvm.ptr)
    // becomes
    llvm.call @cleave_rt_cuda_launch(%fslot, %mslot, %image, %name, %16, %1, %1, %256, %1, %1, %zero, %args) : (...) -> ()
    ```
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // CLEAVE_CONVERSION_PASSES_TD
