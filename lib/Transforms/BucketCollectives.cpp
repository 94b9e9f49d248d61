//===- BucketCollectives.cpp - One collective per bucket of tensors -------===//
//
// Implements -cleave-bucket-collectives (Passes.td has the contract). Per
// function body: find the collectives that can share a call (same kind,
// mesh, axes, reduction, element type; dimension 0), order them by the
// position where their operand is ready, cut that order greedily into
// buckets that fit `bucket-bytes` and can be placed before every member's
// first use, then rewrite each bucket of two or more as flatten, concat, one
// collective, slice, reshape.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Debug.h"

#include <algorithm>
#include <limits>

#define DEBUG_TYPE "cleave-bucket-collectives"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEBUCKETCOLLECTIVESPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

enum class Kind { AllReduce, ReduceScatter, AllGather };

/// A collective that may join a bucket.
struct Candidate {
  Operation *op;
  Kind kind;
  /// Position in the block after which the operand exists (-1: the block's
  /// start) and of the first use of the result (max: none).
  int64_t ready, deadline;
  /// Bytes of the full-size tensor.
  int64_t bytes;
  /// Group size (reduce-scatter, all-gather), else 1.
  int64_t groupSize;
};

Kind kindOf(Operation *op) {
  if (isa<AllReduceOp>(op))
    return Kind::AllReduce;
  if (isa<ReduceScatterOp>(op))
    return Kind::ReduceScatter;
  return Kind::AllGather;
}

/// Whether `op` is a collective the pass can bucket.
bool isBucketable(Operation *op) {
  auto in = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  auto out = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!in || !out || !in.hasStaticShape() || !out.hasStaticShape() ||
      !in.getElementType().isIntOrFloat())
    return false;
  if (auto rs = dyn_cast<ReduceScatterOp>(op))
    return rs.getDim() == 0 && in.getRank() > 0;
  if (auto ag = dyn_cast<AllGatherOp>(op))
    return ag.getDim() == 0 && in.getRank() > 0;
  return isa<AllReduceOp>(op);
}

/// The attributes that must agree for two collectives to share a call.
std::string keyOf(Operation *op) {
  std::string key;
  llvm::raw_string_ostream os(key);
  os << op->getName() << "|"
     << cast<ShapedType>(op->getOperand(0).getType()).getElementType();
  for (NamedAttribute attr : op->getAttrDictionary())
    if (attr.getName() != "dim")
      os << "|" << attr.getName() << "=" << attr.getValue();
  return key;
}

int64_t byteSize(RankedTensorType type) {
  unsigned bits = type.getElementType().getIntOrFloatBitWidth();
  return type.getNumElements() * int64_t((bits + 7) / 8);
}

Value reshape(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(x.getType());
  if (type.getShape() == shape)
    return x;
  return b.create<ReshapeOp>(loc, type.clone(shape), x);
}

/// Rewrites `bucket` (two or more members, one key) as one collective
/// placed after `anchor` (null: at the start of `block`).
void emitBucket(ArrayRef<Candidate> bucket, Operation *anchor, Block &block) {
  Operation *first = bucket.front().op;
  Kind kind = bucket.front().kind;
  int64_t n = bucket.front().groupSize;
  OpBuilder b(first->getContext());
  if (anchor)
    b.setInsertionPointAfter(anchor);
  else
    b.setInsertionPointToStart(&block);
  Location loc = first->getLoc();
  // Distinct operands (an all-gather of one parameter twice runs once).
  SmallVector<Value> inputs;
  SmallVector<int64_t> lengths; // elements per device of each input
  for (const Candidate &c : bucket) {
    Value in = c.op->getOperand(0);
    if (llvm::is_contained(inputs, in))
      continue;
    inputs.push_back(in);
    int64_t elems = cast<RankedTensorType>(in.getType()).getNumElements();
    lengths.push_back(kind == Kind::ReduceScatter ? elems / n : elems);
  }
  int64_t total = 0;
  for (int64_t l : lengths)
    total += l;
  SmallVector<Value> flat;
  for (auto [in, len] : llvm::zip(inputs, lengths))
    flat.push_back(kind == Kind::ReduceScatter ? reshape(b, loc, in, {n, len})
                                               : reshape(b, loc, in, {len}));
  int64_t concatDim = kind == Kind::ReduceScatter ? 1 : 0;
  Value packed = b.create<ConcatOp>(loc, flat, concatDim);
  if (kind == Kind::ReduceScatter)
    packed = reshape(b, loc, packed, {n * total});
  auto elemType = cast<RankedTensorType>(packed.getType()).getElementType();
  int64_t outElems = kind == Kind::AllGather ? n * total : total;
  if (kind == Kind::AllReduce)
    outElems = total;
  Operation *call = b.clone(*first);
  call->setOperand(0, packed);
  call->getResult(0).setType(RankedTensorType::get({outElems}, elemType));
  Value result = call->getResult(0);
  if (kind == Kind::AllGather)
    result = reshape(b, loc, result, {n, total});
  // Slice every member back out, in the shape its result had.
  int64_t offset = 0;
  llvm::DenseMap<Value, Value> done;
  for (auto [in, len] : llvm::zip(inputs, lengths)) {
    Value part;
    if (kind == Kind::AllGather)
      part =
          b.create<SliceOp>(loc, result, ArrayRef<int64_t>{0, offset},
                            ArrayRef<int64_t>{n, len}, ArrayRef<int64_t>{1, 1});
    else
      part = b.create<SliceOp>(loc, result, ArrayRef<int64_t>{offset},
                               ArrayRef<int64_t>{len}, ArrayRef<int64_t>{1});
    done[in] = part;
    offset += len;
  }
  // Build every replacement before erasing anything: the insertion point
  // may be a member (a bucket at the start of the block).
  SmallVector<Value> replacements;
  for (const Candidate &c : bucket) {
    auto type = cast<RankedTensorType>(c.op->getResult(0).getType());
    Value part = done.lookup(c.op->getOperand(0));
    replacements.push_back(reshape(b, loc, part, type.getShape()));
  }
  for (auto [c, value] : llvm::zip(bucket, replacements)) {
    c.op->getResult(0).replaceAllUsesWith(value);
    c.op->erase();
  }
}

/// Whether `op` communicates over `axis` (a pipeline's stage axis).
bool spansAxis(Operation *op, StringRef axis) {
  auto axes = op->getAttrOfType<ArrayAttr>("axes");
  return axes && llvm::any_of(axes, [&](Attribute a) {
           return cast<StringAttr>(a).getValue() == axis;
         });
}

/// Buckets the collectives of one block. Collectives over `pipelineAxis`
/// (non-empty after cleave-pipeline) stay: their group spans pipeline ranks
/// that run different functions, whose buckets could differ.
void bucketBlock(Block &block, int64_t capBytes, StringRef pipelineAxis) {
  llvm::DenseMap<Operation *, int64_t> position;
  SmallVector<Operation *> ops;
  for (Operation &op : block) {
    position[&op] = int64_t(ops.size());
    ops.push_back(&op);
  }
  auto positionOf = [&](Operation *user) {
    Operation *top = block.findAncestorOpInBlock(*user);
    return top ? position.lookup(top) : std::numeric_limits<int64_t>::max();
  };
  std::map<std::string, SmallVector<Candidate>> byKey;
  for (Operation *op : ops) {
    if (!isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op) ||
        !isBucketable(op) ||
        (!pipelineAxis.empty() && spansAxis(op, pipelineAxis)))
      continue;
    Value in = op->getOperand(0);
    Operation *def = in.getDefiningOp();
    if (def && isa<AllReduceOp, ReduceScatterOp, AllGatherOp, AllToAllOp,
                   CollectivePermuteOp, RecvOp>(def))
      continue;
    Candidate c{op, kindOf(op), -1, std::numeric_limits<int64_t>::max(), 0, 1};
    if (def && def->getBlock() == &block)
      c.ready = position.lookup(def);
    for (Operation *user : op->getResult(0).getUsers())
      c.deadline = std::min(c.deadline, positionOf(user));
    auto inType = cast<RankedTensorType>(in.getType());
    auto outType = cast<RankedTensorType>(op->getResult(0).getType());
    c.bytes = std::max(byteSize(inType), byteSize(outType));
    if (c.kind == Kind::ReduceScatter)
      c.groupSize =
          inType.getDimSize(0) / std::max<int64_t>(outType.getDimSize(0), 1);
    if (c.kind == Kind::AllGather)
      c.groupSize =
          outType.getDimSize(0) / std::max<int64_t>(inType.getDimSize(0), 1);
    byKey[keyOf(op) + "|n=" + std::to_string(c.groupSize)].push_back(c);
  }
  for (auto &[key, candidates] : byKey) {
    // Ready order; ties keep program order.
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate &a, const Candidate &b) {
                       return a.ready < b.ready;
                     });
    SmallVector<SmallVector<Candidate>> buckets;
    int64_t ready = -1, deadline = 0, bytes = 0;
    for (const Candidate &c : candidates) {
      bool fits = !buckets.empty() && bytes + c.bytes <= capBytes &&
                  std::max(ready, c.ready) < std::min(deadline, c.deadline);
      if (!fits) {
        buckets.emplace_back();
        ready = c.ready, deadline = c.deadline, bytes = 0;
      }
      buckets.back().push_back(c);
      ready = std::max(ready, c.ready);
      deadline = std::min(deadline, c.deadline);
      bytes += c.bytes;
    }
    for (auto &bucket : buckets) {
      if (bucket.size() < 2)
        continue;
      int64_t at = -1, firstUse = std::numeric_limits<int64_t>::max();
      for (const Candidate &c : bucket) {
        at = std::max(at, c.ready);
        firstUse = std::min(firstUse, c.deadline);
      }
      // Gradients are reduced as soon as the bucket is complete; gathers
      // (ZeRO-3's parameters, ready at the start of the step) run just
      // before their first use, so that at most one bucket of gathered
      // parameters is alive ahead of time, as FSDP prefetches, rather than
      // every parameter from the start of the step.
      if (bucket.front().kind == Kind::AllGather &&
          firstUse != std::numeric_limits<int64_t>::max())
        at = firstUse - 1;
      LLVM_DEBUG(llvm::dbgs()
                 << "bucket of " << bucket.size() << " "
                 << bucket.front().op->getName() << " after #" << at << "\n");
      emitBucket(bucket, at < 0 ? nullptr : ops[size_t(at)], block);
    }
  }
}

struct BucketCollectivesPass
    : cleave::impl::CleaveBucketCollectivesPassBase<BucketCollectivesPass> {
  using CleaveBucketCollectivesPassBase::CleaveBucketCollectivesPassBase;

  void runOnOperation() override {
    if (bucketBytes < 0) {
      getOperation().emitError()
          << "cleave-bucket-collectives: bucket-bytes must be >= 0, got "
          << int64_t(bucketBytes);
      return signalPassFailure();
    }
    if (bucketBytes == 0)
      return;
    // A pipelined program (cleave-pipeline ran): each pipeline rank runs
    // its own functions, so only collectives inside one stage's ranks
    // (dp, tp, cp) may be bucketed.
    StringRef pipelineAxis;
    if (auto pipeline = getOperation()->getAttrOfType<DictionaryAttr>(
            CleaveDialect::kPipelineAttrName))
      if (auto axis = pipeline.getAs<StringAttr>("axis"))
        pipelineAxis = axis.getValue();
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        bucketBlock(func.getBody().front(), int64_t(bucketBytes), pipelineAxis);
  }
};

} // namespace
