//===- AsyncCollectives.cpp - Start/wait scheduling of communication ------===//
//
// Implements -cleave-async-collectives. See Passes.td for the contract and
// docs/runtime.md for the runtime's side. Each block is scheduled on its
// own: blocking collectives become a start placed as early as the operand,
// the previous communication and the lookahead allow, and a wait placed
// right before the first use.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Transforms/CollectiveTrace.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "cleave-async-collectives"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEASYNCCOLLECTIVESPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

bool isSplittable(Operation *op) {
  return isa<AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp,
             CollectivePermuteOp, SendOp, RecvOp>(op);
}

/// Whether `op` communicates, holds an op that does, or calls a function
/// (which might). Waits do not: they only block on a request started
/// earlier.
bool communicates(Operation *op) {
  return op
      ->walk([](Operation *nested) {
        return isCommunicationOp(nested) || isa<CallOpInterface>(nested)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// The later of two ops of one block (null counts as the block's start).
Operation *later(Operation *a, Operation *b) {
  if (!a || !b)
    return a ? a : b;
  return a->isBeforeInBlock(b) ? b : a;
}

/// The first op of `block` that uses a result of `op`, or null.
Operation *firstUse(Operation *op, Block &block) {
  Operation *first = nullptr;
  for (Value result : op->getResults())
    for (Operation *user : result.getUsers()) {
      Operation *inBlock = block.findAncestorOpInBlock(*user);
      if (inBlock && (!first || inBlock->isBeforeInBlock(first)))
        first = inBlock;
    }
  return first;
}

/// Moves the pure one-operand ops of `block` that read `value` (slices and
/// reshapes of a bucket's result), transitively, down to just before their
/// first use, so that the first use of a collective's result is where its
/// data is needed.
void sinkViews(Value value, Block &block) {
  SmallVector<Operation *> users;
  for (Operation *user : value.getUsers())
    if (user->getBlock() == &block && user->getNumOperands() == 1 &&
        user->getNumRegions() == 0 && isMemoryEffectFree(user) &&
        !user->hasTrait<OpTrait::IsTerminator>() &&
        !llvm::is_contained(users, user))
      users.push_back(user);
  for (Operation *user : users) {
    for (Value result : user->getResults())
      sinkViews(result, block);
    if (Operation *first = firstUse(user, block))
      if (first != user->getNextNode())
        user->moveBefore(first);
  }
}

/// The last op of `block` that defines an operand of `op` (null: none, or
/// only values from outside the block).
Operation *lastOperandDef(Operation *op, Block &block) {
  Operation *last = nullptr;
  for (Value x : op->getOperands())
    if (Operation *def = x.getDefiningOp())
      last = later(last, block.findAncestorOpInBlock(*def));
  return last;
}

/// Moves the pure ops that compute `op`'s operands and nothing else (the
/// balanced layout's reorder copies of a gradient before its
/// reduce-scatter), transitively, up to just after their own operands but
/// never above `floor` (the previous communication op), so that the start
/// of a collective can rise with its data: the second of two gradients a
/// backward op makes is then in flight while the first one's consumers
/// compute. Ops that read only values from outside the block stay.
void hoistProducers(Operation *op, Block &block, Operation *floor) {
  for (Value operand : op->getOperands()) {
    Operation *def = operand.getDefiningOp();
    if (!def || def->getBlock() != &block || def->getNumRegions() != 0 ||
        !isMemoryEffectFree(def) || communicates(def) ||
        !llvm::all_of(def->getUsers(),
                      [&](Operation *user) { return user == op; }))
      continue;
    hoistProducers(def, block, floor);
    Operation *after = lastOperandDef(def, block);
    if (!after)
      continue;
    after = later(after, floor);
    if (after->isBeforeInBlock(def) && after->getNextNode() != def)
      def->moveAfter(after);
  }
}

/// The start op equivalent to blocking `op`, built by `b`.
Operation *buildStart(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  MLIRContext *ctx = op->getContext();
  auto request = [&](Type t) { return RequestType::get(ctx, t); };
  if (auto ar = dyn_cast<AllReduceOp>(op))
    return b.create<AllReduceStartOp>(loc, request(ar.getType()), ar.getInput(),
                                      ar.getMeshAttr(), ar.getAxesAttr(),
                                      ar.getReductionAttr());
  if (auto ag = dyn_cast<AllGatherOp>(op))
    return b.create<AllGatherStartOp>(loc, request(ag.getType()), ag.getInput(),
                                      ag.getMeshAttr(), ag.getAxesAttr(),
                                      ag.getDimAttr());
  if (auto rs = dyn_cast<ReduceScatterOp>(op))
    return b.create<ReduceScatterStartOp>(
        loc, request(rs.getType()), rs.getInput(), rs.getMeshAttr(),
        rs.getAxesAttr(), rs.getDimAttr(), rs.getReductionAttr());
  if (auto a2a = dyn_cast<AllToAllOp>(op))
    return b.create<AllToAllStartOp>(
        loc, request(a2a.getType()), a2a.getInput(), a2a.getMeshAttr(),
        a2a.getAxesAttr(), a2a.getSplitDimAttr(), a2a.getConcatDimAttr());
  if (auto perm = dyn_cast<CollectivePermuteOp>(op))
    return b.create<CollectivePermuteStartOp>(
        loc, request(perm.getType()), perm.getInput(), perm.getMeshAttr(),
        perm.getAxesAttr(), perm.getPairsAttr());
  if (auto send = dyn_cast<SendOp>(op))
    return b.create<SendStartOp>(loc, RequestType::get(ctx), send.getInput(),
                                 send.getMeshAttr(), send.getAxesAttr(),
                                 send.getPeerAttr());
  auto recv = cast<RecvOp>(op);
  return b.create<RecvStartOp>(loc, request(recv.getType()), recv.getMeshAttr(),
                               recv.getAxesAttr(), recv.getPeerAttr());
}

/// Splits and schedules the collectives directly in `block`; returns how
/// many became start/wait pairs.
int64_t scheduleBlock(Block &block, int64_t prefetch) {
  SmallVector<Operation *> work;
  for (Operation &op : block)
    if (isSplittable(&op))
      work.push_back(&op);
  if (work.empty() || !block.mightHaveTerminator())
    return 0;
  Operation *terminator = block.getTerminator();
  // The waits of each kind of collective, in start order.
  llvm::DenseMap<OperationName, SmallVector<Operation *>> waitsOf;
  int64_t split = 0;
  for (Operation *op : work) {
    // Lower bound of the start: operand ready, previous communication,
    // the wait of the request of this kind `prefetch` requests back.
    Operation *previous = nullptr;
    for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode())
      if (communicates(prev)) {
        previous = prev;
        break;
      }
    hoistProducers(op, block, previous);
    Operation *bound = later(previous, lastOperandDef(op, block));
    SmallVector<Operation *> &waits = waitsOf[op->getName()];
    if (prefetch > 0 && int64_t(waits.size()) >= prefetch)
      bound = later(bound, waits[waits.size() - prefetch]);
    // Never below the blocking op's place.
    Operation *startAt = bound && !bound->isBeforeInBlock(op)
                             ? op
                             : (bound ? bound->getNextNode() : &block.front());
    for (Value result : op->getResults())
      sinkViews(result, block);
    Operation *waitAt = firstUse(op, block);
    if (!waitAt)
      waitAt = terminator;
    if (startAt == op && op->getNextNode() == waitAt)
      continue; // Nothing to overlap with.
    OpBuilder b(startAt);
    Operation *start = buildStart(b, op);
    b.setInsertionPoint(waitAt);
    Type resultType = op->getNumResults() ? op->getResult(0).getType() : Type();
    auto wait = b.create<WaitOp>(op->getLoc(), resultType, start->getResult(0));
    if (op->getNumResults())
      op->getResult(0).replaceAllUsesWith(wait.getResult());
    op->erase();
    waits.push_back(wait);
    ++split;
  }
  return split;
}

struct CleaveAsyncCollectivesPass final
    : cleave::impl::CleaveAsyncCollectivesPassBase<CleaveAsyncCollectivesPass> {
  using Base::Base;

  void runOnOperation() override {
    if (prefetch < 0) {
      getOperation().emitError()
          << "cleave-async-collectives: prefetch must be >= 0, got "
          << prefetch;
      return signalPassFailure();
    }
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *block) { blocks.push_back(block); });
    int64_t split = 0;
    for (Block *block : blocks)
      split += scheduleBlock(*block, prefetch);
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << split
                            << " collectives split into start/wait\n");
  }
};

} // namespace
