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
    `tensor.extract_slice` at that rank's offset.

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
    into GEMM calls after bufferization. Collectives are left in place.

    ```mlir
    %y = cleave.gelu %x : tensor<8x16xf32>
    // becomes
    %e = tensor.empty() : tensor<8x16xf32>
    %y = linalg.generic {... iterator_types = ["parallel", "parallel"]}
           ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {...}
    ```

    An op with no lowering is an error at the op.
  }];
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
    stream would be recomputed from the embedding in every layer). Named
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
    to its own out-parameter. Finally it gives every user of a shared
    `linalg.fill` (CSE merges the zero fills that GEMMs accumulate into) its
    own fill: bufferization would otherwise fill once and copy the buffer
    for every user.

    ```mlir
    return %g, %g : tensor<4xf32>, tensor<4xf32>
    // becomes
    %e = tensor.empty() : tensor<4xf32>
    %c = linalg.copy ins(%g : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    return %g, %c : tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let dependentDialects = [
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect"
  ];
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
  let dependentDialects = ["::mlir::func::FuncDialect"];
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

#endif // CLEAVE_CONVERSION_PASSES_TD
