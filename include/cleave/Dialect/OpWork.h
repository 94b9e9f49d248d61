//===- OpWork.h - What one op computes and moves on one device --*- C++ -*-===//
//
// The vocabulary of CostOpInterface::getWork: the local shapes an op is
// asked about (`OpShapes`) and what it reports (`OpWork`). The planner asks
// each op of a program for its work on the local shapes of a plan and
// prices the answers with the cost model's kernel physics (GEMM efficiency
// curves, fused attention, memory bandwidth for the rest); nothing here
// knows about hardware.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_OPWORK_H
#define CLEAVE_DIALECT_OPWORK_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace mlir::cleave {

/// One tensor an op reads or writes, as one device holds it.
struct TensorShape {
  llvm::SmallVector<int64_t, 4> dims;
  /// Bytes per element (0 for an operand that is not a tensor).
  double elementBytes = 0;
  bool isFloat = false;

  double elements() const;
  double bytes() const { return elements() * elementBytes; }
  int64_t rank() const { return int64_t(dims.size()); }
  /// Dimension `d`, counted from the back when negative.
  int64_t dim(int64_t d) const { return dims[size_t(d < 0 ? rank() + d : d)]; }
};

/// The shapes of an op's operands and results on one device, one entry per
/// operand and per result, in order.
struct OpShapes {
  llvm::SmallVector<TensorShape, 4> operands, results;

  /// The op's own types (for a global op: the global shapes).
  static OpShapes of(Operation *op);
  /// Float tensors priced at `bytes` per element (a compute type other than
  /// the IR's, e.g. an f32 module planned for bf16).
  OpShapes &setFloatBytes(double bytes);
  double operandBytes() const;
  double resultBytes() const;
};

/// The kernel class an op runs as.
enum class WorkKind : uint8_t {
  /// No kernel: a view or a marker (reshape, constant, sharding constraint).
  None,
  /// Streams its operands and results (elementwise ops, norms, softmax,
  /// reductions, gathers, copies): priced by bytes.
  Vector,
  /// A (batched) matrix product: priced by its shape's GEMM efficiency.
  Gemm,
  /// Fused scaled dot-product attention (or its backward).
  Attention,
};

/// C[m, n] = A[m, k] B[k, n], `batch` times. A matmul whose rhs is one
/// matrix shared by every batch folds the batch into `m`.
struct GemmWork {
  double m = 0, n = 0, k = 0, batch = 1;
};

/// Attention of `batch` sequences with `heads` query heads.
struct AttentionWork {
  double batch = 0, heads = 0, seqQ = 0, seqKV = 0, headDim = 0, valueDim = 0;
  bool causal = false;
  /// The backward kernel (recomputes the scores, five score-sized GEMMs).
  bool backward = false;
};

/// What an op does on one device.
struct OpWork {
  WorkKind kind = WorkKind::None;
  /// FLOPs by kind. Attention counts the full score matrix even when causal
  /// (the convention of MFU); the cost model halves what a causal kernel
  /// executes.
  double gemmFlops = 0, attentionFlops = 0, vectorFlops = 0;
  double bytesRead = 0, bytesWritten = 0;
  /// Elementwise: a fusing code generator merges it with its elementwise
  /// neighbours, so only the fused group's inputs and outputs touch memory.
  bool fusable = false;
  /// Valid when `kind` is Gemm / Attention.
  GemmWork gemm;
  AttentionWork attention;

  double flops() const { return gemmFlops + attentionFlops + vectorFlops; }
  double bytes() const { return bytesRead + bytesWritten; }
};

/// A streaming op (WorkKind::Vector) of `flops` vector FLOPs that reads every
/// operand once and writes every result once.
OpWork streamingWork(const OpShapes &shapes, double flops, bool fusable);
/// The default of CostOpInterface::getWork: an elementwise op, one FLOP per
/// result element, fusable.
OpWork elementwiseWork(const OpShapes &shapes);
/// No kernel, nothing moved (views, markers).
OpWork noWork();

} // namespace mlir::cleave

#endif // CLEAVE_DIALECT_OPWORK_H
