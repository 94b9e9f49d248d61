//===- Reshard.h - Collectives that change a tensor's sharding --*- C++ -*-===//
//
// Between a producer and a consumer that want different shardings of the
// same global tensor, the partitioner inserts a short sequence of per-device
// ops. The plan is greedy in the order that keeps every step small:
//
//   1. pending sums: reduce-scatter a partial axis into the dimension the
//      target splits by it next, else all-reduce (all such axes at once);
//   2. repeat until the layout matches:
//      a. all-to-all an axis that leaves one dimension and is next to join
//         another (one exchange instead of a gather and a slice);
//      b. slice locally (cleave.shard, no communication) every axis a
//         dimension needs next and nobody holds;
//      c. all-gather the trailing axes a dimension must lose.
//
// Slicing before gathering and scattering instead of reducing mean no step
// moves more bytes than the target layout needs. Where the greedy order has
// a choice (which dimension gathers first, one gather over several axes or
// one per axis, scatter or reduce a pending sum), every choice gives a
// candidate sequence; the caller prices each step (seconds on the mesh
// axes' links, lib/Transforms/MeshCost.h, or bytes sent) and the cheapest
// sequence wins. Bytes alone cannot tell a slow axis from a fast one: the
// sequence that sends fewest bytes may send them over the slower link.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_RESHARD_H
#define CLEAVE_SHARDING_RESHARD_H

#include "cleave/Dialect/CleaveOps.h"

#include <string>

namespace mlir::cleave {

/// One step of a resharding, on the device-local tensor.
struct ReshardStep {
  enum class Kind { AllReduce, ReduceScatter, AllGather, AllToAll, Shard };
  Kind kind;
  llvm::SmallVector<llvm::StringRef, 2> axes;
  /// The dimension split (ReduceScatter, Shard, AllToAll's split dimension)
  /// or gathered (AllGather, AllToAll's concatenated dimension is
  /// `concatDim`).
  int64_t dim = -1;
  int64_t concatDim = -1;
  /// Bytes each device sends in this step (ring algorithms).
  int64_t bytesSent = 0;
  /// The buffer the collective works on, as collective cost models count it
  /// (nccl-tests): the all-gather's output, the reduce-scatter's input, the
  /// all-reduce's and all-to-all's local buffer; 0 for a local slice.
  int64_t bufferBytes = 0;

  /// e.g. "all_gather [tp] dim 1".
  std::string toString() const;
};

/// The additive price of one step: seconds, bytes, any unit.
using ReshardStepCost = llvm::function_ref<double(const ReshardStep &)>;

/// The price by volume: the bytes each device sends.
double reshardStepBytes(const ReshardStep &step);

/// Every sequence the greedy order allows (see the file comment), the
/// purely greedy one first, at most `limit` of them. Fails, with the reason
/// in `why`, only when `to` has partial axes that `from` lacks (a sum cannot
/// be created).
FailureOr<llvm::SmallVector<llvm::SmallVector<ReshardStep>>>
planReshardCandidates(RankedTensorType global, ShardingAttr from,
                      ShardingAttr to, MeshOp mesh, std::string &why,
                      unsigned limit = 64);

/// The total price of `steps` under `cost`.
double reshardCost(llvm::ArrayRef<ReshardStep> steps, ReshardStepCost cost);

/// Plans the steps that turn a tensor of global type `global` sharded as
/// `from` into `to` (same mesh): the candidate of least total `cost`, the
/// earlier one on a tie. Fails as planReshardCandidates does.
FailureOr<llvm::SmallVector<ReshardStep>>
planReshard(RankedTensorType global, ShardingAttr from, ShardingAttr to,
            MeshOp mesh, std::string &why,
            ReshardStepCost cost = reshardStepBytes);

/// Emits `steps` on `local` (the device's block of `global` under `from`).
Value emitReshard(OpBuilder &b, Location loc, Value local,
                  RankedTensorType global, ShardingAttr from,
                  llvm::ArrayRef<ReshardStep> steps, MeshOp mesh);

} // namespace mlir::cleave

#endif // CLEAVE_SHARDING_RESHARD_H
