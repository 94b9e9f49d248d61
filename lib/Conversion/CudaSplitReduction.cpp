//===- CudaSplitReduction.cpp - Two-phase reductions for the GPU ----------===//
//
// See splitReduction in CudaPlan.h. A reduction
//
//   out[p] = fold_r f(in[.., r, .., p])
//
// becomes, with the reduced dim r split into `chunks` slices of `chunk`,
//
//   part[s, p] = fold_{rr} f(in'[.., s, rr, .., p])   (in' = expand_shape in)
//   out[p]     = fold_s part[s, p]
//
// where each fold is the original combiner. The partials start from the
// combiner's neutral element; the outputs keep their initial values.
//
//===----------------------------------------------------------------------===//

#include "CudaPlan.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// The input as a view whose dimension `pos` is split into
/// [chunks, size / chunks].
Value expandDim(OpBuilder &b, Location loc, Value input, unsigned pos,
                int64_t chunks) {
  auto type = cast<MemRefType>(input.getType());
  SmallVector<int64_t> shape;
  SmallVector<ReassociationIndices> groups;
  for (int64_t i = 0, e = type.getRank(); i < e; ++i) {
    if (i == int64_t(pos)) {
      groups.push_back({int64_t(shape.size()), int64_t(shape.size()) + 1});
      shape.push_back(chunks);
      shape.push_back(type.getDimSize(i) / chunks);
    } else {
      groups.push_back({int64_t(shape.size())});
      shape.push_back(type.getDimSize(i));
    }
  }
  return b.create<memref::ExpandShapeOp>(loc, shape, input, groups);
}

/// The partial fold: its operands and maps over dims (s, old dims...).
struct Partial {
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
};

/// Inputs of the partial fold: those that read the split dim `d` are
/// expanded views indexed by (s, rr); the others keep their map (shifted).
FailureOr<Partial> partialInputs(OpBuilder &b, linalg::GenericOp op, unsigned d,
                                 int64_t chunks) {
  unsigned n = op.getNumLoops();
  Partial partial;
  for (OpOperand *operand : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(operand).shiftDims(1);
    std::optional<unsigned> pos =
        map.getResultPosition(b.getAffineDimExpr(d + 1));
    bool uses = map.isFunctionOfDim(d + 1);
    if (!uses) {
      partial.inputs.push_back(operand->get());
      partial.maps.push_back(map);
      continue;
    }
    if (!pos || !isa<MemRefType>(operand->get().getType()))
      return failure();
    SmallVector<AffineExpr> results(map.getResults());
    results.insert(results.begin() + *pos, b.getAffineDimExpr(0));
    partial.inputs.push_back(
        expandDim(b, op.getLoc(), operand->get(), *pos, chunks));
    partial.maps.push_back(AffineMap::get(n + 1, 0, results, b.getContext()));
  }
  return partial;
}

} // namespace

FailureOr<std::pair<linalg::GenericOp, linalg::GenericOp>>
mlir::cleave::splitReduction(linalg::GenericOp op, int64_t minThreads) {
  Block &body = op.getRegion().front();
  if (op.getNumReductionLoops() == 0 || !op.hasPureBufferSemantics() ||
      !body.getOps<linalg::IndexOp>().empty())
    return failure();
  std::optional<Folds> folds = matchFolds(op);
  if (!folds)
    return failure();
  // Every output has the same map (one shape of partials).
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  for (OpOperand &init : op.getDpsInitsMutable())
    if (op.getMatchingIndexingMap(&init) != outMap ||
        !outMap.isProjectedPermutation())
      return failure();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  int64_t outputs = 1;
  std::optional<unsigned> d;
  for (auto [i, type] : llvm::enumerate(op.getIteratorTypesArray())) {
    if (type == utils::IteratorType::parallel)
      outputs *= ranges[i];
    else if (!d || ranges[i] > ranges[*d])
      d = i;
  }
  if (outputs >= minThreads)
    return failure();
  // As many slices as make minThreads threads, each at least 8 long.
  int64_t want = (minThreads + outputs - 1) / outputs, chunks = 1;
  for (int64_t c = std::min(want, ranges[*d] / 8); c >= 2; --c)
    if (ranges[*d] % c == 0) {
      chunks = c;
      break;
    }
  if (chunks < 2)
    return failure();

  OpBuilder b(op);
  Location loc = op.getLoc();
  FailureOr<Partial> partial = partialInputs(b, op, *d, chunks);
  if (failed(partial))
    return failure();
  AffineMap partOut =
      outMap.shiftDims(1).insertResult(b.getAffineDimExpr(0), 0);
  SmallVector<Value> parts;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    auto type = cast<MemRefType>(init.get().getType());
    SmallVector<int64_t> shape{chunks};
    llvm::append_range(shape, type.getShape());
    parts.push_back(b.create<memref::AllocOp>(
        loc, MemRefType::get(shape, type.getElementType()),
        b.getI64IntegerAttr(64)));
    partial->maps.push_back(partOut);
  }
  SmallVector<utils::IteratorType> iterators{utils::IteratorType::parallel};
  llvm::append_range(iterators, op.getIteratorTypesArray());
  auto first = b.create<linalg::GenericOp>(loc, TypeRange(), partial->inputs,
                                           parts, partial->maps, iterators);
  IRMapping same;
  op.getRegion().cloneInto(&first.getRegion(), same);

  // out[p] = fold_s part[s, p] with the same combiners.
  unsigned r = outMap.getNumResults();
  AffineMap all = b.getMultiDimIdentityMap(r + 1);
  AffineMap outs =
      AffineMap::get(r + 1, 0, all.getResults().drop_front(), b.getContext());
  SmallVector<AffineMap> maps(parts.size(), all);
  maps.append(parts.size(), outs);
  SmallVector<utils::IteratorType> total{utils::IteratorType::reduction};
  total.append(r, utils::IteratorType::parallel);
  unsigned numInputs = op.getNumDpsInputs();
  auto second = b.create<linalg::GenericOp>(
      loc, TypeRange(), parts, op.getDpsInits(), maps, total,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        SmallVector<Value> results;
        for (auto [k, combiner] : llvm::enumerate(folds->combiners)) {
          IRMapping m;
          Value outArg = body.getArgument(numInputs + k);
          for (Value operand : combiner->getOperands())
            m.map(operand,
                  operand == outArg ? args[parts.size() + k] : args[k]);
          results.push_back(nb.clone(*combiner, m)->getResult(0));
        }
        nb.create<linalg::YieldOp>(l, results);
      });
  b.setInsertionPointAfter(second);
  for (Value part : parts)
    b.create<memref::DeallocOp>(loc, part);
  op.erase();
  return std::make_pair(first, second);
}
