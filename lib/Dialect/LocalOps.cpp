//===- LocalOps.cpp - Per-device forms of ops (buildLocalOp) --------------===//
//
// The default per-device form is the op cloned onto local types. The ops
// here override it because their meaning depends on the whole tensor: a mean
// divides by a global count, a vocabulary block or a dropout counter needs
// the block's global position, a slice or constant spells out sizes.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/LocalOp.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::cleave;

//===----------------------------------------------------------------------===//
// LocalOpContext
//===----------------------------------------------------------------------===//

int64_t LocalOpContext::getNumBlocks(int64_t f) const {
  int64_t n = 1;
  for (StringRef axis : factorAxes[f])
    n *= mesh.getAxisSize(axis);
  return n;
}

int64_t LocalOpContext::getNumBlocks(ArrayRef<int64_t> factors) const {
  int64_t n = 1;
  for (int64_t f : factors)
    n *= getNumBlocks(f);
  return n;
}

SmallVector<StringRef> LocalOpContext::getDimAxes(const TensorFactors &tensor,
                                                  unsigned dim) const {
  SmallVector<StringRef> axes;
  for (int64_t f : tensor[dim])
    llvm::append_range(axes, factorAxes[f]);
  return axes;
}

/// An i64 scalar constant.
static Value i64Scalar(OpBuilder &b, Location loc, int64_t value) {
  auto type = RankedTensorType::get({}, b.getI64Type());
  return b.create<ConstantOp>(
      loc, DenseElementsAttr::get(type, b.getI64IntegerAttr(value)));
}

static ArrayAttr axesAttr(OpBuilder &b, ArrayRef<StringRef> axes) {
  return b.getStrArrayAttr(SmallVector<StringRef>(axes));
}

Value LocalOpContext::buildBlockIndex(OpBuilder &b, Location loc,
                                      const TensorFactors &tensor,
                                      unsigned dim) const {
  SmallVector<StringRef> axes = getDimAxes(tensor, dim);
  if (axes.empty())
    return i64Scalar(b, loc, 0);
  return b.create<AxisIndexOp>(loc, RankedTensorType::get({}, b.getI64Type()),
                               FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
                               axesAttr(b, axes));
}

std::optional<int64_t> LocalOpContext::getBalanced(const TensorFactors &tensor,
                                                   unsigned dim) const {
  SmallVector<StringRef> axes = getDimAxes(tensor, dim);
  if (axes.empty() || !mesh.isBalancedAxis(axes.front()))
    return std::nullopt;
  return mesh.getAxisSize(axes.front());
}

Value mlir::cleave::buildBalancedPermutation(OpBuilder &b, Location loc,
                                             Value value, int64_t dim,
                                             int64_t n, bool inverse) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t chunk = type.getDimSize(dim) / (2 * n);
  // Balanced position k = 2r + h holds natural chunk r (h = 0) or 2n-1-r.
  auto naturalChunk = [&](int64_t k) {
    return k % 2 == 0 ? k / 2 : 2 * n - 1 - k / 2;
  };
  SmallVector<int64_t> source(2 * n);
  for (int64_t k = 0; k < 2 * n; ++k) {
    if (inverse)
      source[naturalChunk(k)] = k;
    else
      source[k] = naturalChunk(k);
  }
  SmallVector<int64_t> sizes(type.getShape()), strides(type.getRank(), 1);
  sizes[dim] = chunk;
  SmallVector<Value> pieces;
  for (int64_t c : source) {
    SmallVector<int64_t> offsets(type.getRank(), 0);
    offsets[dim] = c * chunk;
    pieces.push_back(
        b.create<SliceOp>(loc, value, offsets, sizes, strides).getResult());
  }
  return b.create<ConcatOp>(loc, pieces, dim);
}

Value LocalOpContext::buildScaled(OpBuilder &b, Location loc, Value value,
                                  double factor) const {
  auto type = cast<RankedTensorType>(value.getType());
  auto elem = cast<FloatType>(type.getElementType());
  Value scale = b.create<ConstantOp>(
      loc, SplatElementsAttr::get(type, b.getFloatAttr(elem, factor)));
  return b.create<MulOp>(loc, value, scale);
}

LogicalResult mlir::cleave::buildLocalClone(Operation *op, OpBuilder &builder,
                                            const LocalOpContext &context,
                                            SmallVectorImpl<Value> &results) {
  if (op->getNumRegions() != 0)
    return op->emitOpError() << "has regions, so its per-device form must be "
                                "built by the op (buildLocalOp)";
  Operation *local = builder.clone(*op);
  local->setOperands(context.getOperands());
  for (auto [result, type] :
       llvm::zip_equal(local->getResults(), context.getResultTypes()))
    result.setType(type);
  local->removeAttr(CleaveDialect::kShardingsAttrName);
  results.append(local->result_begin(), local->result_end());
  return success();
}

//===----------------------------------------------------------------------===//
// Means: divide by the global count
//===----------------------------------------------------------------------===//

/// Clones `op` and scales its only result by 1 / (number of blocks of
/// `factors`): a local mean over a split dimension becomes the device's
/// addend of the global mean.
static LogicalResult buildLocalMean(Operation *op, OpBuilder &b,
                                    const LocalOpContext &context,
                                    ArrayRef<int64_t> factors,
                                    SmallVectorImpl<Value> &results) {
  SmallVector<Value> clone;
  if (failed(buildLocalClone(op, b, context, clone)))
    return failure();
  int64_t blocks = context.getNumBlocks(factors);
  results.push_back(blocks == 1 ? clone[0]
                                : context.buildScaled(b, op->getLoc(), clone[0],
                                                      1.0 / blocks));
  return success();
}

/// Factors of `rule` that no result contains.
static SmallVector<int64_t> factorsAbsentFromResults(const ShardingRule &rule) {
  SmallVector<int64_t> absent;
  for (int64_t f = 0; f < rule.getNumFactors(); ++f) {
    bool present = false;
    for (const TensorFactors &result : rule.getResultFactors())
      for (const auto &dim : result)
        present = present || llvm::is_contained(dim, f);
    if (!present)
      absent.push_back(f);
  }
  return absent;
}

LogicalResult ReduceMeanOp::buildLocalOp(OpBuilder &b,
                                         const LocalOpContext &context,
                                         SmallVectorImpl<Value> &results) {
  return buildLocalMean(*this, b, context,
                        factorsAbsentFromResults(context.getRule()), results);
}

/// Axes splitting the rows of a cross-entropy (the factors of its labels),
/// in mesh order.
static SmallVector<StringRef> rowAxes(const LocalOpContext &context) {
  SmallVector<StringRef> axes;
  for (const auto &dim : context.getRule().getOperand(1))
    for (int64_t f : dim)
      llvm::append_range(axes, context.getAxes(f));
  MeshOp mesh = context.getMesh();
  llvm::sort(axes, [&](StringRef a, StringRef b) {
    return *mesh.getAxisIndex(a) < *mesh.getAxisIndex(b);
  });
  return axes;
}

/// With `ignore_index` and split rows, the denominator is the global number
/// of labels that are not ignored: the local count all-reduced over the
/// axes splitting the rows. Builds the local op with it as the `count`
/// operand; each device's result is then its share of the global mean.
template <typename OpT>
static LogicalResult buildLocalIgnoring(OpT op, OpBuilder &b,
                                        const LocalOpContext &context,
                                        SmallVectorImpl<Value> &results) {
  SmallVector<StringRef> axes = rowAxes(context);
  if (axes.empty() || op.getCount())
    return buildLocalClone(op, b, context, results);
  Location loc = op.getLoc();
  ValueRange operands = context.getOperands();
  auto countType = RankedTensorType::get({}, b.getF32Type());
  Value count = b.create<LabelCountOp>(loc, countType, operands[1],
                                       op.getIgnoreIndexAttr());
  count = b.create<AllReduceOp>(loc, count, context.getMesh().getSymName(),
                                b.getStrArrayAttr(axes));
  SmallVector<Value> localOperands(operands);
  localOperands.push_back(count);
  Operation *local = b.create<OpT>(loc, context.getResultTypes(), localOperands,
                                   op->getAttrs());
  local->removeAttr(CleaveDialect::kShardingsAttrName);
  results.append(local->result_begin(), local->result_end());
  return success();
}

LogicalResult CrossEntropyOp::buildLocalOp(OpBuilder &b,
                                           const LocalOpContext &context,
                                           SmallVectorImpl<Value> &results) {
  if (getIgnoreIndex())
    return buildLocalIgnoring(*this, b, context, results);
  // The row factors are the reductions; the class factor is never split.
  return buildLocalMean(*this, b, context,
                        factorsAbsentFromResults(context.getRule()), results);
}

LogicalResult
CrossEntropyGradOp::buildLocalOp(OpBuilder &b, const LocalOpContext &context,
                                 SmallVectorImpl<Value> &results) {
  if (getIgnoreIndex())
    return buildLocalIgnoring(*this, b, context, results);
  // Every row's gradient is divided by the number of rows: the global one.
  const TensorFactors &labels = context.getRule().getOperand(1);
  SmallVector<int64_t> rows;
  for (const auto &dim : labels)
    llvm::append_range(rows, dim);
  return buildLocalMean(*this, b, context, rows, results);
}

//===----------------------------------------------------------------------===//
// Positions: vocabulary blocks and dropout counters
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::buildLocalOp(OpBuilder &b,
                                        const LocalOpContext &context,
                                        SmallVectorImpl<Value> &results) {
  const TensorFactors &table = context.getRule().getOperand(0);
  if (context.getDimAxes(table, 0).empty())
    return buildLocalClone(*this, b, context, results);
  ValueRange operands = context.getOperands();
  Value block = context.buildBlockIndex(b, getLoc(), table, 0);
  results.push_back(b.create<EmbeddingOp>(getLoc(), context.getResultTypes()[0],
                                          operands[0], operands[1], block,
                                          getPaddingIdxAttr()));
  return success();
}

LogicalResult EmbeddingGradOp::buildLocalOp(OpBuilder &b,
                                            const LocalOpContext &context,
                                            SmallVectorImpl<Value> &results) {
  const TensorFactors &result = context.getRule().getResult(0);
  if (context.getDimAxes(result, 0).empty())
    return buildLocalClone(*this, b, context, results);
  ValueRange operands = context.getOperands();
  Value block = context.buildBlockIndex(b, getLoc(), result, 0);
  results.push_back(b.create<EmbeddingGradOp>(
      getLoc(), context.getResultTypes()[0], operands[0], operands[1], block,
      getPaddingIdxAttr()));
  return success();
}

LogicalResult DropoutOp::buildLocalOp(OpBuilder &b,
                                      const LocalOpContext &context,
                                      SmallVectorImpl<Value> &results) {
  auto global = getType();
  if (context.getResultTypes()[0] == global)
    return buildLocalClone(*this, b, context, results);
  if (!getBlocks().empty())
    return emitOpError() << "is already a per-device block";
  const TensorFactors &result = context.getRule().getResult(0);
  for (unsigned d = 0, e = global.getRank(); d < e; ++d)
    if (context.getBalanced(result, d))
      return emitOpError()
             << "splits dimension " << d
             << " in the load-balanced context-parallel layout, which its "
                "counters do not follow yet; use cp-layout=contiguous";
  SmallVector<Value> blocks;
  for (unsigned d = 0, e = global.getRank(); d < e; ++d)
    blocks.push_back(context.buildBlockIndex(b, getLoc(), result, d));
  ValueRange operands = context.getOperands();
  auto local =
      b.create<DropoutOp>(getLoc(), context.getResultTypes()[0], operands[0],
                          operands[1], blocks, getRateAttr(), getStreamAttr(),
                          b.getDenseI64ArrayAttr(global.getShape()));
  results.push_back(local);
  return success();
}

//===----------------------------------------------------------------------===//
// Sizes spelled out in attributes
//===----------------------------------------------------------------------===//

LogicalResult SliceOp::buildLocalOp(OpBuilder &b, const LocalOpContext &context,
                                    SmallVectorImpl<Value> &results) {
  // Only whole dimensions can be split (the rule says so); their size is the
  // local one.
  auto local = cast<RankedTensorType>(context.getResultTypes()[0]);
  SmallVector<int64_t> sizes(getSizes());
  for (auto [d, size] : llvm::enumerate(sizes))
    size = local.getDimSize(d);
  results.push_back(b.create<SliceOp>(getLoc(), context.getOperands()[0],
                                      getOffsets(), sizes, getStrides()));
  return success();
}

LogicalResult ConstantOp::buildLocalOp(OpBuilder &b,
                                       const LocalOpContext &context,
                                       SmallVectorImpl<Value> &results) {
  auto local = cast<RankedTensorType>(context.getResultTypes()[0]);
  auto value = cast<ElementsAttr>(getValue());
  if (local == getType())
    return buildLocalClone(*this, b, context, results);
  if (auto splat = dyn_cast<SplatElementsAttr>(value)) {
    results.push_back(b.create<ConstantOp>(
        getLoc(),
        SplatElementsAttr::get(local, splat.getSplatValue<Attribute>())));
    return success();
  }
  // A dense table: every device holds it whole and keeps its block.
  Value whole = b.create<ConstantOp>(getLoc(), value);
  const TensorFactors &result = context.getRule().getResult(0);
  SmallVector<int64_t> shape(getType().getShape());
  for (unsigned d = 0, e = shape.size(); d < e; ++d) {
    SmallVector<StringRef> axes = context.getDimAxes(result, d);
    if (axes.empty())
      continue;
    shape[d] = local.getDimSize(d);
    if (std::optional<int64_t> n = context.getBalanced(result, d))
      whole = buildBalancedPermutation(b, getLoc(), whole, d, *n,
                                       /*inverse=*/false);
    whole = b.create<ShardOp>(
        getLoc(), RankedTensorType::get(shape, local.getElementType()), whole,
        FlatSymbolRefAttr::get(context.getMesh().getSymNameAttr()),
        axesAttr(b, axes), b.getI64IntegerAttr(d));
  }
  results.push_back(whole);
  return success();
}

//===----------------------------------------------------------------------===//
// Sequence positions: causal attention and rotary embeddings
//===----------------------------------------------------------------------===//

/// The block index of the query sequence (dimension 1 of operand 0) when it
/// is split, else null: the per-device op then needs no position. Sets
/// `balanced` to the layout's `n` when the blocks are load-balanced.
static FailureOr<Value> sequenceBlock(Operation *op, OpBuilder &b,
                                      const LocalOpContext &context,
                                      IntegerAttr &balanced) {
  const TensorFactors &query = context.getRule().getOperand(0);
  SmallVector<StringRef> axes = context.getDimAxes(query, 1);
  if (axes.empty())
    return Value();
  if (std::optional<int64_t> n = context.getBalanced(query, 1)) {
    if (axes.size() > 1)
      return op->emitOpError()
             << "has its sequence split over " << axes.size()
             << " axes with the load-balanced layout of '" << axes.front()
             << "'; only that axis alone is supported";
    balanced = b.getI64IntegerAttr(*n);
  }
  return context.buildBlockIndex(b, op->getLoc(), query, 1);
}

LogicalResult AttentionOp::buildLocalOp(OpBuilder &b,
                                        const LocalOpContext &context,
                                        SmallVectorImpl<Value> &results) {
  IntegerAttr balanced;
  FailureOr<Value> block = getCausal()
                               ? sequenceBlock(*this, b, context, balanced)
                               : FailureOr<Value>(Value());
  if (failed(block))
    return failure();
  if (!*block)
    return buildLocalClone(*this, b, context, results);
  if (getQueryBlock())
    return emitOpError() << "is already a per-device query block";
  ValueRange operands = context.getOperands();
  results.push_back(b.create<AttentionOp>(getLoc(), operands[0], operands[1],
                                          operands[2], *block, getCausalAttr(),
                                          getScaleAttr(), balanced));
  return success();
}

LogicalResult AttentionGradOp::buildLocalOp(OpBuilder &b,
                                            const LocalOpContext &context,
                                            SmallVectorImpl<Value> &results) {
  IntegerAttr balanced;
  FailureOr<Value> block = getCausal()
                               ? sequenceBlock(*this, b, context, balanced)
                               : FailureOr<Value>(Value());
  if (failed(block))
    return failure();
  if (!*block)
    return buildLocalClone(*this, b, context, results);
  if (getQueryBlock())
    return emitOpError() << "is already a per-device query block";
  ValueRange operands = context.getOperands();
  auto local = b.create<AttentionGradOp>(
      getLoc(), context.getResultTypes(), operands[0], operands[1], operands[2],
      operands[3], *block, getCausalAttr(), getScaleAttr(), balanced);
  results.append(local->result_begin(), local->result_end());
  return success();
}

LogicalResult RotaryOp::buildLocalOp(OpBuilder &b,
                                     const LocalOpContext &context,
                                     SmallVectorImpl<Value> &results) {
  IntegerAttr balanced;
  FailureOr<Value> block = sequenceBlock(*this, b, context, balanced);
  if (failed(block))
    return failure();
  if (!*block)
    return buildLocalClone(*this, b, context, results);
  if (getBlock())
    return emitOpError() << "is already a per-device sequence block";
  results.push_back(b.create<RotaryOp>(
      getLoc(), context.getResultTypes()[0], context.getOperands()[0], *block,
      getThetaAttr(), getInterleavedAttr(), getInverseAttr(), balanced));
  return success();
}
