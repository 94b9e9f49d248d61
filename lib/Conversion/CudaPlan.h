//===- CudaPlan.h - How a linalg op maps onto the GPU -----------*- C++ -*-===//
//
// Private to lib/Conversion (the CUDA target). A Plan says which loop dims
// of a bufferized linalg.generic go to threads or blocks, which one
// consecutive threads walk (coalesced, vectorized) and how reductions are
// folded. docs/cuda.md describes the two kernel shapes.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_CONVERSION_CUDAPLAN_H
#define CLEAVE_LIB_CONVERSION_CUDAPLAN_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include <optional>

namespace mlir::cleave {

/// How a generic maps onto the GPU.
struct Plan {
  /// One block per output element (reductions over the contiguous
  /// dimension) rather than one thread per output element.
  bool perBlock = false;
  SmallVector<int64_t> ranges;
  /// Loop dims distributed over threads (or blocks), slowest first.
  SmallVector<unsigned> outer;
  /// Loop dims iterated inside each thread (or block), slowest first; in a
  /// per-block plan the last one is split over the block's threads.
  SmallVector<unsigned> inner;
  /// The dim consecutive threads (or lanes) walk; vectorized by `vector`.
  std::optional<unsigned> fast;
  int64_t vector = 1;
  /// Per-block plans: the combiner of each output and its all_reduce kind.
  SmallVector<Operation *> combiners;
  SmallVector<gpu::AllReduceOperation> kinds;
  /// Per output of a reduction: the host scalar a fill wrote into it just
  /// before (the fill is folded into the kernel), or null.
  SmallVector<Value> inits;
  int64_t threads = 1, blocks = 1, blockSize = 32;
};

/// The loop dim that indexes the innermost dimension of `operand`, if any.
std::optional<unsigned> contiguousDim(linalg::GenericOp op, OpOperand &operand);

/// Whether `operand` can be accessed `v` lanes at a time along `fast`: its
/// innermost dimension is indexed by `fast` alone, has stride 1, and every
/// other stride and the offset are multiples of `v`.
bool isVectorizable(linalg::GenericOp op, OpOperand &operand, unsigned fast,
                    int64_t v);

/// How each output of a reduction folds: `out = combiner(out, f(inputs))`
/// with a commutative, associative combiner that gpu.all_reduce knows.
struct Folds {
  SmallVector<Operation *> combiners;
  SmallVector<gpu::AllReduceOperation> kinds;
};
/// The folds of every output, or nullopt if one output is not a plain fold.
std::optional<Folds> matchFolds(linalg::GenericOp op);

/// The plan of `op`: one block per output element when it reduces over the
/// contiguous dimension of its largest input with plain folds, else one
/// thread per output element.
Plan makePlan(linalg::GenericOp op, int64_t blockSize, int64_t vectorBits);

/// Splits a reduction that one thread per output would run on few threads
/// (the column sums of a bias gradient: 768 outputs, 8192 rows) into two
/// generics: partial folds over `chunks` slices of its longest reduction
/// dim into a new buffer, then the fold of the partials into the outputs.
/// Both are deterministic. Returns the two generics, or failure (nothing
/// changed) when the op does not qualify; `minThreads` is the parallelism
/// below which splitting pays.
FailureOr<std::pair<linalg::GenericOp, linalg::GenericOp>>
splitReduction(linalg::GenericOp op, int64_t minThreads);

} // namespace mlir::cleave

#endif // CLEAVE_LIB_CONVERSION_CUDAPLAN_H
