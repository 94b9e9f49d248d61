//===- CudaKernelBuilder.h - Building one GPU kernel ------------*- C++ -*-===//
//
// Private to lib/Conversion (the CUDA target). A KernelBuilder creates one
// `gpu.func` in the module's `gpu.module @cleave_kernels` and rebuilds inside
// it the host values the kernel body uses: constants, view ops and scalar
// computations are cloned, buffers become kernel arguments. It then creates
// the `gpu.launch_func` that replaces the host operation.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_CONVERSION_CUDAKERNELBUILDER_H
#define CLEAVE_LIB_CONVERSION_CUDAKERNELBUILDER_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include <functional>

namespace mlir::cleave {

/// The buffer behind a chain of views of `v` (`v` itself if it is not a
/// view).
Value viewRoot(Value v);

/// Clones the body of `op` for one point `ivs` of its iteration space at
/// `b`'s insertion point (`linalg.index` becomes the matching iv); `m` maps
/// the block arguments. Returns the yielded values.
SmallVector<Value> cloneGenericBody(OpBuilder &b, linalg::GenericOp op,
                                    ArrayRef<Value> ivs, IRMapping &m);

/// The `gpu.module` holding every kernel of `module` (created on first use,
/// which also marks `module` as a GPU container module).
gpu::GPUModuleOp getOrCreateKernelModule(ModuleOp module);

class KernelBuilder {
public:
  /// Starts kernel `name` for the host operation `anchor` (the launch is
  /// inserted before it) with a one-dimensional block of `blockSize`.
  KernelBuilder(gpu::GPUModuleOp kernels, Operation *anchor, StringRef name,
                int64_t blockSize);

  /// The builder of the kernel body (inside the guard of `guardThreads`, if
  /// called).
  OpBuilder &body() { return builder; }
  Location loc() const { return location; }

  /// The kernel-side value of host value `v`: cloned when it is a constant,
  /// a view of a buffer or a side-effect-free scalar computation (loads
  /// included); otherwise a new kernel argument. Fails (with a diagnostic at
  /// the anchor) for values that are neither buffers nor scalars.
  FailureOr<Value> lookup(Value v);
  /// Maps host value `from` to kernel value `to` (block arguments of cloned
  /// regions, induction variables).
  void map(Value from, Value to) { mapping.map(from, to); }
  IRMapping &getMapping() { return mapping; }
  /// Host `memref.load`s are cloned into the kernel only if `filter` says
  /// the buffer they read is not written before the launch (default: no
  /// load is cloned).
  void setLoadFilter(std::function<bool(memref::LoadOp)> filter) {
    loadFilter = std::move(filter);
  }

  /// blockIdx.x * blockSize + threadIdx.x, as an index.
  Value globalThreadId();
  Value threadId();
  Value blockId();
  /// Moves the insertion point into `if (id < count)`.
  void guardThreads(Value id, int64_t count);

  /// Finishes the kernel (its signature, `gpu.return`) and replaces nothing:
  /// inserts the `gpu.launch_func` with `gridSize` blocks before the anchor.
  gpu::LaunchFuncOp launch(int64_t gridSize);

private:
  Value cloneIntoKernel(Operation *op, Value result);
  gpu::GPUFuncOp func;
  Operation *anchor;
  Operation *bodyStart;
  int64_t blockSize;
  OpBuilder builder;
  Location location;
  IRMapping mapping;
  std::function<bool(memref::LoadOp)> loadFilter;
  /// Host values passed as kernel arguments, in order.
  SmallVector<Value> arguments;
};

/// Runs the sequential host loop `loop` inside one kernel `name` (in the
/// module that `kernels` returns) when its body is elementwise generics over
/// one iteration space whose threads touch disjoint elements of what the
/// loop writes (CudaSerialLoops.cpp): a thread per point, each running the
/// whole loop in order. The launch replaces the loop. Returns false (nothing
/// changed) when the loop does not qualify; `isReadOnly` says whether a
/// buffer is not written before a later kernel (the loop's loads must read
/// such buffers).
FailureOr<bool> mapSerialLoop(scf::ForOp loop,
                              function_ref<gpu::GPUModuleOp()> kernels,
                              StringRef name, int64_t blockSize,
                              function_ref<bool(Value)> isReadOnly);

} // namespace mlir::cleave

#endif // CLEAVE_LIB_CONVERSION_CUDAKERNELBUILDER_H
