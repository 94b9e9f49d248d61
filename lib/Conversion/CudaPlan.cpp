//===- CudaPlan.cpp - How a linalg op maps onto the GPU -------------------===//

#include "CudaPlan.h"
#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }

int64_t product(const Plan &plan, ArrayRef<unsigned> dims) {
  int64_t n = 1;
  for (unsigned d : dims)
    n *= plan.ranges[d];
  return n;
}

} // namespace

std::optional<unsigned> mlir::cleave::contiguousDim(linalg::GenericOp op,
                                                    OpOperand &operand) {
  auto type = dyn_cast<MemRefType>(operand.get().getType());
  if (!type || type.getRank() == 0)
    return std::nullopt;
  auto dim = dyn_cast<AffineDimExpr>(
      op.getMatchingIndexingMap(&operand).getResults().back());
  if (!dim)
    return std::nullopt;
  return dim.getPosition();
}

bool mlir::cleave::isVectorizable(linalg::GenericOp op, OpOperand &operand,
                                  unsigned fast, int64_t v) {
  auto type = dyn_cast<MemRefType>(operand.get().getType());
  if (!type || contiguousDim(op, operand) != fast)
    return false;
  AffineMap map = op.getMatchingIndexingMap(&operand);
  for (AffineExpr e : map.getResults().drop_back())
    if (e.isFunctionOfDim(fast))
      return false;
  Type element = type.getElementType();
  if (!element.isIntOrFloat())
    return false;
  unsigned bits = element.getIntOrFloatBitWidth();
  if (bits != 16 && bits != 32 && bits != 64)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(getStridesAndOffset(type, strides, offset)) ||
      strides.back() != 1 || offset % v != 0 || type.getShape().back() % v)
    return false;
  return llvm::all_of(ArrayRef(strides).drop_back(),
                      [&](int64_t s) { return s % v == 0; });
}

namespace {

/// The widest lane count along `fast` that the shapes allow (1 when no
/// operand can be accessed as a vector).
int64_t chooseVector(linalg::GenericOp op, const Plan &plan, unsigned fast,
                     int64_t vectorBits) {
  unsigned bits = 0;
  for (OpOperand &operand : op->getOpOperands()) {
    Type element = getElementTypeOrSelf(operand.get().getType());
    if (contiguousDim(op, operand) == fast && element.isIntOrFloat())
      bits = std::max(bits, element.getIntOrFloatBitWidth());
  }
  if (bits == 0 || vectorBits <= 0)
    return 1;
  int64_t v = std::max<int64_t>(1, vectorBits / bits);
  while (v > 1 && plan.ranges[fast] % v != 0)
    v /= 2;
  for (; v > 1; v /= 2)
    for (OpOperand &operand : op->getOpOperands())
      if (isVectorizable(op, operand, fast, v))
        return v;
  return 1;
}

std::optional<gpu::AllReduceOperation> allReduceKind(Operation *combiner) {
  using K = gpu::AllReduceOperation;
  return llvm::TypeSwitch<Operation *, std::optional<K>>(combiner)
      .Case<arith::AddFOp, arith::AddIOp>([](auto) { return K::ADD; })
      .Case<arith::MulFOp, arith::MulIOp>([](auto) { return K::MUL; })
      .Case([](arith::MaximumFOp) { return K::MAXIMUMF; })
      .Case([](arith::MinimumFOp) { return K::MINIMUMF; })
      .Case([](arith::MaxNumFOp) { return K::MAXNUMF; })
      .Case([](arith::MinNumFOp) { return K::MINNUMF; })
      .Case([](arith::MaxSIOp) { return K::MAXSI; })
      .Case([](arith::MinSIOp) { return K::MINSI; })
      .Case([](arith::MaxUIOp) { return K::MAXUI; })
      .Case([](arith::MinUIOp) { return K::MINUI; })
      .Case([](arith::AndIOp) { return K::AND; })
      .Case([](arith::OrIOp) { return K::OR; })
      .Case([](arith::XOrIOp) { return K::XOR; })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace

std::optional<Folds> mlir::cleave::matchFolds(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  SmallVector<BlockArgument> outs(
      body.getArguments().take_back(op.getNumDpsInits()));
  Folds folds;
  for (unsigned k = 0, e = outs.size(); k < e; ++k) {
    SmallVector<Operation *> combinerOps;
    if (!matchReduction(outs, k, combinerOps) || combinerOps.size() != 1)
      return std::nullopt;
    std::optional<gpu::AllReduceOperation> kind = allReduceKind(combinerOps[0]);
    if (!kind || !arith::getNeutralElement(combinerOps[0]))
      return std::nullopt;
    folds.combiners.push_back(combinerOps[0]);
    folds.kinds.push_back(*kind);
  }
  return folds;
}

namespace {

/// One block per output element when the reduction walks the contiguous
/// dimension of the largest input and every output is a plain fold.
bool planPerBlock(linalg::GenericOp op, Plan &plan, int64_t blockSize,
                  int64_t vectorBits) {
  SmallVector<unsigned> parallel, reduction;
  for (auto [d, type] : llvm::enumerate(op.getIteratorTypesArray()))
    (type == utils::IteratorType::parallel ? parallel : reduction).push_back(d);
  OpOperand *largest = nullptr;
  int64_t largestSize = -1;
  for (OpOperand *operand : op.getDpsInputOperands())
    if (auto type = dyn_cast<MemRefType>(operand->get().getType()))
      if (type.getNumElements() > largestSize)
        largest = operand, largestSize = type.getNumElements();
  if (reduction.empty() || !largest)
    return false;
  std::optional<unsigned> c = contiguousDim(op, *largest);
  std::optional<Folds> folds =
      c && llvm::is_contained(reduction, *c) && plan.ranges[*c] >= 64
          ? matchFolds(op)
          : std::nullopt;
  if (!folds)
    return false;
  plan.combiners = folds->combiners;
  plan.kinds = folds->kinds;
  plan.perBlock = true;
  plan.outer = parallel;
  for (unsigned d : reduction)
    if (d != *c)
      plan.inner.push_back(d);
  plan.inner.push_back(*c);
  plan.fast = *c;
  plan.vector = chooseVector(op, plan, *c, vectorBits);
  int64_t lanes = plan.ranges[*c] / plan.vector;
  plan.blockSize = std::min<int64_t>(
      blockSize, std::max<int64_t>(32, llvm::PowerOf2Ceil(lanes)));
  plan.blocks = product(plan, parallel);
  plan.threads = plan.blocks * plan.blockSize;
  return plan.blocks < (int64_t(1) << 31);
}

/// One thread per output element (V consecutive ones with vectors).
void planPerThread(linalg::GenericOp op, Plan &plan, int64_t blockSize,
                   int64_t vectorBits) {
  SmallVector<unsigned> parallel;
  for (auto [d, type] : llvm::enumerate(op.getIteratorTypesArray()))
    (type == utils::IteratorType::parallel ? parallel : plan.inner)
        .push_back(d);
  std::optional<unsigned> fast;
  if (op.getNumDpsInits() > 0)
    fast = contiguousDim(op, *op.getDpsInitOperand(0));
  if (fast && !llvm::is_contained(parallel, *fast))
    fast = std::nullopt;
  if (!fast && !parallel.empty())
    fast = parallel.back();
  for (unsigned d : parallel)
    if (d != fast)
      plan.outer.push_back(d);
  if (fast) {
    plan.outer.push_back(*fast);
    plan.fast = fast;
    plan.vector = chooseVector(op, plan, *fast, vectorBits);
  }
  plan.threads = product(plan, parallel) / plan.vector;
  plan.blockSize = std::min(blockSize, roundUp(plan.threads, 32));
  plan.blocks = ceilDiv(plan.threads, plan.blockSize);
}

} // namespace

Plan mlir::cleave::makePlan(linalg::GenericOp op, int64_t blockSize,
                            int64_t vectorBits) {
  Plan plan;
  plan.ranges = op.getStaticLoopRanges();
  Plan perBlock = plan;
  if (planPerBlock(op, perBlock, blockSize, vectorBits))
    return perBlock;
  planPerThread(op, plan, blockSize, vectorBits);
  return plan;
}
