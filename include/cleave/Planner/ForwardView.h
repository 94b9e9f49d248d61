//===- ForwardView.h - The forward computation of a function ----*- C++ -*-===//
//
// What the intra-op planner reads from a function: the ops the loss depends
// on (the forward pass, whether the function is a forward function or a
// training step), which tensor dimensions carry the batch (propagated from
// the data inputs through the ops' sharding rules, both ways), and the
// repeated block: the longest run of structurally identical op sequences
// (a transformer's layers), found by comparing ops by their types, sharding
// rules and FLOPs, never by name. Repeated layers are then planned once.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_FORWARDVIEW_H
#define CLEAVE_PLANNER_FORWARDVIEW_H

#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <string>
#include <vector>

namespace cleave::planner {

/// Where an operand of an op in the repeated block comes from.
struct OperandSource {
  enum Kind {
    /// An op of the same instance, at `slot`.
    Same,
    /// An op of the previous instance, at `slot`.
    Previous,
    /// A value from before the block (or a data input), `value`.
    External,
    /// A parameter of this instance.
    Param,
    /// An op further back: not a regular repetition.
    Irregular
  } kind;
  int slot = -1;
  mlir::Value value;
  bool operator==(const OperandSource &o) const {
    return kind == o.kind && slot == o.slot &&
           (kind != External || value == o.value);
  }
};

struct ForwardView {
  mlir::func::FuncOp func;
  /// The scalar loss (a result of the function).
  mlir::Value loss;
  /// The ops the loss depends on, in program order.
  std::vector<mlir::Operation *> ops;
  llvm::DenseMap<mlir::Operation *, int> position;
  /// Per op: its sharding rule (every forward op has one).
  std::vector<mlir::cleave::ShardingRule> rules;
  /// Per op: the factor that carries the batch, or -1.
  std::vector<int> batchFactor;
  /// Per op: the factor that carries the sequence of the [batch, sequence]
  /// token inputs and that the op may split (context parallelism: not a
  /// factor it needs whole, such as an attention's key sequence), or -1.
  std::vector<int> seqFactor;
  /// The global batch: dimension 0 of the data inputs (0: no input). A
  /// batch factor's size is a multiple of it where batch and sequence are
  /// flattened into one dimension.
  int64_t batch = 0;

  /// The repeated block: `count` instances of `length` ops from `start`
  /// (count 0: none found).
  int start = 0, length = 0, count = 0;

  /// Which instance op `i` belongs to (-1 outside the block) and its
  /// position in the instance.
  int instanceOf(int i) const {
    return count && i >= start && i < start + length * count
               ? (i - start) / length
               : -1;
  }
  int slotOf(int i) const { return (i - start) % length; }
  /// The op at slot `slot` of instance `instance`.
  mlir::Operation *at(int instance, int slot) const {
    return ops[size_t(start + instance * length + slot)];
  }
  /// Where operand `k` of the op at `slot` of `instance` comes from.
  OperandSource sourceOf(int instance, int slot, unsigned k) const;
  bool isParam(mlir::BlockArgument a) const;
  bool isInput(mlir::BlockArgument a) const;
  /// A [batch, sequence] integer data input (token ids, labels): its
  /// dimension 1 is the sequence that context parallelism splits.
  bool isTokenInput(mlir::BlockArgument a) const;
};

/// "op 'cleave.x' at loc(...)": how the planner's errors name an op.
std::string describeOp(mlir::Operation *op);

/// Analyzes `func`: finds the loss (the result named "loss" by
/// `cleave.output`, else the only scalar float result), the forward ops,
/// batch dimensions and the repeated block. Sets `error` and returns
/// failure if there is no loss or a forward op has no sharding rule.
mlir::FailureOr<ForwardView> analyzeForward(mlir::func::FuncOp func,
                                            std::string &error);

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_FORWARDVIEW_H
