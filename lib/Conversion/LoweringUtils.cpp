//===- LoweringUtils.cpp - Helpers for lowering cleave ops ----------------===//

#include "LoweringUtils.h"
#include "mlir/IR/AffineMap.h"
#include <limits>

using namespace mlir;
using namespace mlir::cleave;

FloatType mlir::cleave::computeTypeFor(Type elementType) {
  if (elementType.isF64())
    return Float64Type::get(elementType.getContext());
  return Float32Type::get(elementType.getContext());
}

Value mlir::cleave::convertFloat(OpBuilder &b, Location loc, Value v,
                                 Type type) {
  auto from = dyn_cast<FloatType>(v.getType());
  auto to = dyn_cast<FloatType>(type);
  if (!from || !to || from == to)
    return v;
  if (from.getWidth() < to.getWidth())
    return b.create<arith::ExtFOp>(loc, to, v);
  return b.create<arith::TruncFOp>(loc, to, v);
}

Value mlir::cleave::blockIndex(OpBuilder &b, Location loc, Value block) {
  if (!block)
    return {};
  return b.create<arith::IndexCastOp>(
      loc, b.getIndexType(),
      b.create<tensor::ExtractOp>(loc, block, ValueRange{}));
}

Value mlir::cleave::sequencePosition(OpBuilder &b, Location loc, Value row,
                                     Value block, int64_t rows,
                                     std::optional<int64_t> balanced) {
  if (!block)
    return row;
  auto idx = [&](int64_t v) {
    return b.create<arith::ConstantIndexOp>(loc, v).getResult();
  };
  if (!balanced)
    return b.create<arith::AddIOp>(
        loc, row, b.create<arith::MulIOp>(loc, block, idx(rows)));
  int64_t chunk = rows / 2;
  // First chunk: block * chunk + row; second: (2n-1-block) * chunk + row -
  // chunk = (2n-2-block) * chunk + row.
  Value first = b.create<arith::AddIOp>(
      loc, row, b.create<arith::MulIOp>(loc, block, idx(chunk)));
  Value mirror = b.create<arith::SubIOp>(loc, idx(2 * *balanced - 2), block);
  Value second = b.create<arith::AddIOp>(
      loc, row, b.create<arith::MulIOp>(loc, mirror, idx(chunk)));
  Value inFirst =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, row, idx(chunk));
  return b.create<arith::SelectOp>(loc, inFirst, first, second);
}

Value mlir::cleave::floatConst(OpBuilder &b, Location loc, Type type,
                               double value) {
  return b.create<arith::ConstantOp>(loc, type, b.getFloatAttr(type, value));
}

Value mlir::cleave::emptyTensor(OpBuilder &b, Location loc,
                                RankedTensorType type) {
  return b.create<tensor::EmptyOp>(loc, type.getShape(), type.getElementType());
}

Value mlir::cleave::filledTensor(OpBuilder &b, Location loc,
                                 RankedTensorType type, double value) {
  Value init = emptyTensor(b, loc, type);
  Value scalar = floatConst(b, loc, type.getElementType(), value);
  return b.create<linalg::FillOp>(loc, scalar, init).getResult(0);
}

Type mlir::cleave::elementTypeOf(Value v) {
  return cast<ShapedType>(v.getType()).getElementType();
}

RankedTensorType mlir::cleave::tensorTypeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

Value mlir::cleave::buildGeneric(OpBuilder &b, Location loc,
                                 RankedTensorType outType, ValueRange inputs,
                                 ArrayRef<AffineMap> inputMaps, ScalarFn body) {
  MLIRContext *ctx = b.getContext();
  int64_t rank = outType.getRank();
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  Value init = emptyTensor(b, loc, outType);
  Type outElement = outType.getElementType();
  auto op = b.create<linalg::GenericOp>(
      loc, TypeRange{outType}, inputs, ValueRange{init}, maps, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        SmallVector<Value> scalars;
        for (Value a : args.drop_back())
          scalars.push_back(
              isa<FloatType>(a.getType())
                  ? convertFloat(nb, nl, a, computeTypeFor(a.getType()))
                  : a);
        Value r = body(nb, nl, scalars);
        nb.create<linalg::YieldOp>(nl, convertFloat(nb, nl, r, outElement));
      });
  return op.getResult(0);
}

Value mlir::cleave::buildElementwise(OpBuilder &b, Location loc,
                                     RankedTensorType outType,
                                     ValueRange inputs, ScalarFn body) {
  MLIRContext *ctx = b.getContext();
  int64_t rank = outType.getRank();
  SmallVector<AffineMap> maps;
  for (Value in : inputs)
    maps.push_back(tensorTypeOf(in).getRank() == 0 && rank != 0
                       ? AffineMap::get(rank, 0, ctx)
                       : AffineMap::getMultiDimIdentityMap(rank, ctx));
  return buildGeneric(b, loc, outType, inputs, maps, body);
}

AffineMap mlir::cleave::dropDimsMap(MLIRContext *ctx, int64_t rank,
                                    ArrayRef<int64_t> dims) {
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(dims, d))
      exprs.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(rank, 0, exprs, ctx);
}

Value mlir::cleave::buildReduction(OpBuilder &b, Location loc,
                                   ValueRange inputs,
                                   ArrayRef<AffineMap> inputMaps,
                                   ArrayRef<int64_t> iterShape,
                                   ArrayRef<int64_t> dims, ReduceKind kind,
                                   ScalarFn map) {
  MLIRContext *ctx = b.getContext();
  FloatType ct = computeTypeFor(elementTypeOf(inputs[0]));
  int64_t rank = iterShape.size();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(dims, d))
      shape.push_back(iterShape[d]);
  auto outType = RankedTensorType::get(shape, ct);
  double initValue =
      kind == ReduceKind::Sum ? 0.0 : -std::numeric_limits<double>::infinity();
  Value init = filledTensor(b, loc, outType, initValue);
  SmallVector<AffineMap> maps(inputMaps);
  if (maps.empty())
    maps.assign(inputs.size(), AffineMap::getMultiDimIdentityMap(rank, ctx));
  maps.push_back(dropDimsMap(ctx, rank, dims));
  SmallVector<utils::IteratorType> iterators;
  for (int64_t d = 0; d < rank; ++d)
    iterators.push_back(llvm::is_contained(dims, d)
                            ? utils::IteratorType::reduction
                            : utils::IteratorType::parallel);
  auto reassoc =
      arith::FastMathFlagsAttr::get(ctx, arith::FastMathFlags::reassoc);
  auto op = b.create<linalg::GenericOp>(
      loc, TypeRange{outType}, inputs, ValueRange{init}, maps, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        SmallVector<Value> scalars;
        for (Value a : args.drop_back())
          scalars.push_back(
              isa<FloatType>(a.getType())
                  ? convertFloat(nb, nl, a, computeTypeFor(a.getType()))
                  : a);
        Value x = map ? map(nb, nl, scalars) : scalars[0];
        x = convertFloat(nb, nl, x, ct);
        Value acc = args.back();
        Value r =
            kind == ReduceKind::Sum
                ? nb.create<arith::AddFOp>(nl, acc, x, reassoc).getResult()
                : nb.create<arith::MaximumFOp>(nl, acc, x).getResult();
        nb.create<linalg::YieldOp>(nl, r);
      });
  return op.getResult(0);
}

Value mlir::cleave::buildReduction(OpBuilder &b, Location loc, Value input,
                                   ArrayRef<int64_t> dims, ReduceKind kind,
                                   ScalarFn map) {
  return buildReduction(b, loc, ValueRange{input}, {},
                        tensorTypeOf(input).getShape(), dims, kind, map);
}

Value mlir::cleave::reshapeTensor(OpBuilder &b, Location loc, Value v,
                                  ArrayRef<int64_t> shape) {
  RankedTensorType type = tensorTypeOf(v);
  if (type.getShape() == shape)
    return v;
  auto target = RankedTensorType::get(shape, type.getElementType());
  auto allDims = [](int64_t rank) {
    ReassociationIndices group;
    for (int64_t d = 0; d < rank; ++d)
      group.push_back(d);
    return SmallVector<ReassociationIndices>{group};
  };
  if (type.getRank() == 0 || target.getRank() == 0) {
    // Size-1 tensors: rank 0 <-> rank n through the empty reassociation.
    if (type.getRank() == 0)
      return b.create<tensor::ExpandShapeOp>(
          loc, target, v, SmallVector<ReassociationIndices>{});
    return b.create<tensor::CollapseShapeOp>(
        loc, target, v, SmallVector<ReassociationIndices>{});
  }
  Value flat = v;
  if (type.getRank() != 1)
    flat = b.create<tensor::CollapseShapeOp>(loc, v, allDims(type.getRank()));
  if (target.getRank() == 1)
    return flat;
  return b.create<tensor::ExpandShapeOp>(loc, target, flat,
                                         allDims(target.getRank()));
}

Value mlir::cleave::transposeTensor(OpBuilder &b, Location loc, Value v,
                                    ArrayRef<int64_t> perm) {
  RankedTensorType type = tensorTypeOf(v);
  bool identity = true;
  SmallVector<int64_t> shape;
  for (auto [i, p] : llvm::enumerate(perm)) {
    identity &= static_cast<int64_t>(i) == p;
    shape.push_back(type.getDimSize(p));
  }
  if (identity)
    return v;
  Value init =
      emptyTensor(b, loc, RankedTensorType::get(shape, type.getElementType()));
  return b.create<linalg::TransposeOp>(loc, v, init, perm)->getResult(0);
}

Value mlir::cleave::buildMatmul(OpBuilder &b, Location loc, Value lhs,
                                Value rhs, bool ta, bool tb,
                                Type resultElement) {
  RankedTensorType lt = tensorTypeOf(lhs), rt = tensorTypeOf(rhs);
  int64_t rank = lt.getRank();
  if (ta && tb) {
    // (A^T)(B^T): transpose A explicitly; no named op has both.
    SmallVector<int64_t> perm =
        rank == 3 ? SmallVector<int64_t>{0, 2, 1} : SmallVector<int64_t>{1, 0};
    lhs = transposeTensor(b, loc, lhs, perm);
    lt = tensorTypeOf(lhs);
    ta = false;
  }
  int64_t m = lt.getDimSize(ta ? rank - 1 : rank - 2);
  int64_t n = rt.getDimSize(tb ? rank - 2 : rank - 1);
  SmallVector<int64_t> shape;
  if (rank == 3)
    shape.push_back(lt.getDimSize(0));
  shape.append({m, n});
  Value init =
      filledTensor(b, loc, RankedTensorType::get(shape, resultElement), 0.0);
  return buildMatmulInto(b, loc, lhs, rhs, ta, tb, init);
}

Value mlir::cleave::buildMatmulInto(OpBuilder &b, Location loc, Value lhs,
                                    Value rhs, bool ta, bool tb, Value init) {
  assert(!(ta && tb) && "no named op transposes both operands");
  int64_t rank = tensorTypeOf(lhs).getRank();
  SmallVector<Value> ins = {lhs, rhs};
  Operation *op;
  if (rank == 2)
    op =
        ta ? b.create<linalg::MatmulTransposeAOp>(loc, ins, init).getOperation()
        : tb ? b.create<linalg::MatmulTransposeBOp>(loc, ins, init)
                   .getOperation()
             : b.create<linalg::MatmulOp>(loc, ins, init).getOperation();
  else
    op = ta ? b.create<linalg::BatchMatmulTransposeAOp>(loc, ins, init)
                  .getOperation()
         : tb ? b.create<linalg::BatchMatmulTransposeBOp>(loc, ins, init)
                    .getOperation()
              : b.create<linalg::BatchMatmulOp>(loc, ins, init).getOperation();
  return op->getResult(0);
}
