//===- EarlyDealloc.cpp - Free buffers after their last use ---------------===//
//
// Implements -cleave-early-dealloc. See Passes.td for the contract. A use of
// a buffer is any op that reads a value computed from it, transitively
// (views, extracted pointers, casts), so a pointer handed to a runtime call
// keeps the buffer alive until that call.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#define DEBUG_TYPE "cleave-early-dealloc"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEEARLYDEALLOCPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// The last op of `block` that uses `buffer` or a value computed from it,
/// other than `dealloc`; null if some use lies outside `block`.
Operation *lastUse(Value buffer, Block *block, Operation *dealloc) {
  Operation *last = buffer.getDefiningOp();
  SmallVector<Value> work = {buffer};
  DenseSet<Value> seen = {buffer};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (user == dealloc)
        continue;
      Operation *inBlock = block->findAncestorOpInBlock(*user);
      if (!inBlock)
        return nullptr;
      if (last->isBeforeInBlock(inBlock))
        last = inBlock;
      for (Value r : user->getResults())
        if (seen.insert(r).second)
          work.push_back(r);
    }
  }
  return last;
}

struct CleaveEarlyDeallocPass final
    : cleave::impl::CleaveEarlyDeallocPassBase<CleaveEarlyDeallocPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<memref::DeallocOp> deallocs;
    getOperation().walk([&](memref::DeallocOp d) { deallocs.push_back(d); });
    // Every destination first, then the moves: a move invalidates the
    // block's op order, which the next isBeforeInBlock would recompute over
    // the whole block (quadratic in a step of many layers). Moving a
    // dealloc changes no other buffer's uses, so the destinations are
    // those of moving one at a time.
    SmallVector<std::pair<memref::DeallocOp, Operation *>> moves;
    for (memref::DeallocOp dealloc : deallocs) {
      auto alloc = dealloc.getMemref().getDefiningOp<memref::AllocOp>();
      Block *block = dealloc->getBlock();
      if (!alloc || alloc->getBlock() != block)
        continue;
      Operation *last = lastUse(alloc.getResult(), block, dealloc);
      if (last && last->isBeforeInBlock(dealloc))
        moves.emplace_back(dealloc, last);
    }
    for (auto [dealloc, last] : moves)
      dealloc->moveAfter(last);
  }
};

} // namespace
