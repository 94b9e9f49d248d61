//===- CudaSerialLoops.cpp - Sequential host loops as one kernel ----------===//
//
// See mapSerialLoop in CudaKernelBuilder.h. A host loop
//
//   scf.for %i = lb to ub step s {
//     (scalar ops, loads of read-only buffers, views indexed by %i)
//     linalg.generic ins(A_i ...) outs(B_i ...)      // elementwise over R
//     ...
//   }
//
// whose generics are all elementwise over the same iteration space R with
// identity maps becomes one kernel with a thread per point p of R:
//
//   for %i = lb to ub step s:           // inside every thread, in order
//     (the scalar ops and views, cloned)
//     B_i[p] = body(A_i[p], ...)        // for each generic, in order
//
// This is the loop interchanged with the generics' parallel loops. It keeps
// the host loop's result exactly when no two threads touch the same element
// of a buffer the loop writes: every view of such a buffer must put p into
// the same dims of the buffer at the same static offsets (the loop index
// may pick the other dims: the row of a scatter). Each thread then sees its
// own elements updated in the host loop's order, so a scatter-add (the
// embedding's weight gradient) stays deterministic, with no atomics and one
// launch instead of one or more per iteration.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// The elements of a buffer that the thread at point p of the iteration
/// space touches through one view: dims `dims` of `root` at `offsets + p`.
struct Footprint {
  Value root;
  SmallVector<int64_t> dims, offsets;
  bool operator==(const Footprint &o) const {
    return root == o.root && dims == o.dims && offsets == o.offsets;
  }
};

/// The footprint of operand `v` (a buffer shaped like `ranges`), or nullopt
/// when it is neither a whole buffer nor a unit-stride subview of one with
/// static offsets in the dims that the iteration space walks.
std::optional<Footprint> footprintOf(Value v, ArrayRef<int64_t> ranges) {
  auto subview = v.getDefiningOp<memref::SubViewOp>();
  if (!subview) {
    if (v.getDefiningOp<ViewLikeOpInterface>())
      return std::nullopt;
    Footprint f{v, {}, {}};
    for (int64_t d = 0, e = ranges.size(); d < e; ++d) {
      f.dims.push_back(d);
      f.offsets.push_back(0);
    }
    return f;
  }
  Value source = subview.getSource();
  if (source.getDefiningOp<ViewLikeOpInterface>() ||
      llvm::any_of(subview.getStaticStrides(),
                   [](int64_t s) { return s != 1; }))
    return std::nullopt;
  llvm::SmallBitVector dropped = subview.getDroppedDims();
  Footprint f{source, {}, {}};
  for (auto [d, size, offset] :
       llvm::enumerate(subview.getStaticSizes(), subview.getStaticOffsets())) {
    if (dropped.test(d))
      continue;
    if (ShapedType::isDynamic(offset) || f.dims.size() >= ranges.size() ||
        size != ranges[f.dims.size()])
      return std::nullopt;
    f.dims.push_back(d);
    f.offsets.push_back(offset);
  }
  if (f.dims.size() != ranges.size())
    return std::nullopt;
  return f;
}

/// Collects the generics of a loop body (recursing into `scf.if`s) and
/// checks that every other op is a side-effect-free scalar or view op or a
/// load of a read-only buffer.
bool collectGenerics(Block &block, function_ref<bool(Value)> isReadOnly,
                     SmallVectorImpl<linalg::GenericOp> &generics) {
  for (Operation &op : block) {
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      generics.push_back(generic);
      continue;
    }
    if (auto ifOp = dyn_cast<scf::IfOp>(op)) {
      if (ifOp.getNumResults() != 0)
        return false;
      for (Region &r : ifOp->getRegions())
        if (!r.empty() && !collectGenerics(r.front(), isReadOnly, generics))
          return false;
      continue;
    }
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      if (!isReadOnly(viewRoot(load.getMemRef())))
        return false;
      continue;
    }
    if (op.hasTrait<OpTrait::IsTerminator>() && op.getNumOperands() == 0)
      continue;
    if (op.getNumRegions() != 0 || !isPure(&op))
      return false;
  }
  return true;
}

/// The common iteration space of the loop's generics if the loop can run
/// inside one kernel (see the file comment), else nullopt.
std::optional<SmallVector<int64_t>>
interchangeableRanges(scf::ForOp loop, function_ref<bool(Value)> isReadOnly) {
  SmallVector<linalg::GenericOp> generics;
  if (loop.getNumResults() != 0 ||
      !collectGenerics(*loop.getBody(), isReadOnly, generics) ||
      generics.empty())
    return std::nullopt;
  SmallVector<int64_t> ranges = generics.front().getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return std::nullopt;
  DenseMap<Value, Footprint> written;
  SmallVector<std::pair<Value, Footprint>> accesses;
  for (linalg::GenericOp op : generics) {
    if (!op.hasPureBufferSemantics() || op.getNumReductionLoops() != 0 ||
        op.getStaticLoopRanges() != ranges)
      return std::nullopt;
    for (OpOperand &operand : op->getOpOperands()) {
      if (!isa<MemRefType>(operand.get().getType()))
        continue;
      if (!op.getMatchingIndexingMap(&operand).isIdentity())
        return std::nullopt;
      std::optional<Footprint> f = footprintOf(operand.get(), ranges);
      Value root = f ? f->root : viewRoot(operand.get());
      // Buffers of unknown origin might alias the written ones.
      if (!isa<BlockArgument>(root) && !root.getDefiningOp<memref::AllocOp>() &&
          !root.getDefiningOp<memref::AllocaOp>())
        return std::nullopt;
      if (!op.isDpsInput(&operand)) {
        if (!f)
          return std::nullopt;
        auto [it, inserted] = written.try_emplace(root, *f);
        if (!inserted && !(it->second == *f))
          return std::nullopt;
      }
      accesses.push_back({root, f.value_or(Footprint{})});
    }
  }
  // Reads of written buffers must stay within the thread's own elements.
  for (auto &[root, f] : accesses) {
    auto it = written.find(root);
    if (it != written.end() && !(it->second == f))
      return std::nullopt;
  }
  return ranges;
}

/// Emits the body of the host loop into the kernel's loop.
class LoopBodyEmitter {
public:
  LoopBodyEmitter(KernelBuilder &kb, ArrayRef<Value> ivs)
      : kb(kb), b(kb.body()), ivs(ivs) {}

  LogicalResult emitBlock(Block &block) {
    for (Operation &op : block.without_terminator()) {
      LogicalResult result = success();
      if (auto generic = dyn_cast<linalg::GenericOp>(op))
        result = emitGeneric(generic);
      else if (auto ifOp = dyn_cast<scf::IfOp>(op))
        result = emitIf(ifOp);
      else
        result = emitClone(op);
      if (failed(result))
        return failure();
    }
    return success();
  }

private:
  LogicalResult emitClone(Operation &op) {
    for (Value operand : op.getOperands())
      if (failed(kb.lookup(operand)))
        return failure();
    Operation *clone = b.clone(op, kb.getMapping());
    for (auto [from, to] : llvm::zip(op.getResults(), clone->getResults()))
      kb.map(from, to);
    return success();
  }

  LogicalResult emitIf(scf::IfOp op) {
    FailureOr<Value> cond = kb.lookup(op.getCondition());
    if (failed(cond))
      return failure();
    auto ifOp =
        b.create<scf::IfOp>(op.getLoc(), *cond,
                            /*withElseRegion=*/!op.getElseRegion().empty());
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    if (failed(emitBlock(*op.thenBlock())))
      return failure();
    if (op.getElseRegion().empty())
      return success();
    b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    return emitBlock(*op.elseBlock());
  }

  /// The generic at this thread's point: loads, the body, stores.
  LogicalResult emitGeneric(linalg::GenericOp op) {
    Block &body = op.getRegion().front();
    IRMapping &m = kb.getMapping();
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(op.getRegion(), captured);
    for (Value v : captured)
      if (failed(kb.lookup(v)))
        return failure();
    for (OpOperand &operand : op->getOpOperands()) {
      FailureOr<Value> source = kb.lookup(operand.get());
      if (failed(source))
        return failure();
      BlockArgument arg = body.getArgument(operand.getOperandNumber());
      if (!isa<MemRefType>(source->getType()))
        m.map(arg, *source);
      else if (op.isDpsInput(&operand) || !arg.use_empty())
        m.map(arg, b.create<memref::LoadOp>(op.getLoc(), *source, ivs));
    }
    SmallVector<Value> yields = cloneGenericBody(b, op, ivs, m);
    for (auto [value, out] : llvm::zip(yields, op.getDpsInitsMutable()))
      b.create<memref::StoreOp>(op.getLoc(), value, m.lookup(out.get()), ivs);
    return success();
  }

  KernelBuilder &kb;
  OpBuilder &b;
  ArrayRef<Value> ivs;
};

} // namespace

FailureOr<bool> mlir::cleave::mapSerialLoop(
    scf::ForOp loop, function_ref<gpu::GPUModuleOp()> kernels, StringRef name,
    int64_t blockSize, function_ref<bool(Value)> isReadOnly) {
  std::optional<SmallVector<int64_t>> ranges =
      interchangeableRanges(loop, isReadOnly);
  if (!ranges)
    return false;
  KernelBuilder kb(kernels(), loop, name, blockSize);
  kb.setLoadFilter([&](memref::LoadOp load) {
    return isReadOnly(viewRoot(load.getMemRef()));
  });
  OpBuilder &b = kb.body();
  Location loc = kb.loc();
  int64_t threads = 1;
  for (int64_t r : *ranges)
    threads *= r;
  int64_t blocks = (threads + blockSize - 1) / blockSize;
  Value gid = kb.globalThreadId();
  if (blocks * blockSize != threads)
    kb.guardThreads(gid, threads);
  // The point of the iteration space, row-major.
  SmallVector<Value> ivs(ranges->size());
  Value linear = gid;
  for (int64_t d = ranges->size() - 1; d >= 0; --d) {
    Value size = b.create<arith::ConstantIndexOp>(loc, (*ranges)[d]);
    ivs[d] = d == 0 ? linear : b.create<arith::RemUIOp>(loc, linear, size);
    if (d != 0)
      linear = b.create<arith::DivUIOp>(loc, linear, size);
  }
  FailureOr<Value> lb = kb.lookup(loop.getLowerBound());
  FailureOr<Value> ub = kb.lookup(loop.getUpperBound());
  FailureOr<Value> step = kb.lookup(loop.getStep());
  if (failed(lb) || failed(ub) || failed(step))
    return failure();
  auto inner = b.create<scf::ForOp>(loc, *lb, *ub, *step);
  kb.map(loop.getInductionVar(), inner.getInductionVar());
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(inner.getBody()->getTerminator());
    if (failed(LoopBodyEmitter(kb, ivs).emitBlock(*loop.getBody())))
      return failure();
  }
  kb.launch(blocks);
  loop.erase();
  return true;
}
