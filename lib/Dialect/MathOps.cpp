//===- MathOps.cpp - Constants, casts, reductions -------------------------===//

#include "OpUtils.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::cleave;

static constexpr int64_t kNoDim = ShardingRule::kNoDim;

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

ShardingRule ConstantOp::getShardingRule() {
  ShardingRule rule(*this);
  auto type = cast<RankedTensorType>(getType());
  for (int64_t d = 0, e = type.getRank(); d < e; ++d)
    rule.addFactor({}, {d}, type.getDimSize(d));
  return rule;
}

OpWork ConstantOp::getWork(const OpShapes &) { return noWork(); }

//===----------------------------------------------------------------------===//
// CastOp
//===----------------------------------------------------------------------===//

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

template <typename Adaptor>
static LogicalResult inferReduce(StringRef name, std::optional<Location> loc,
                                 Adaptor adaptor,
                                 SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> dims = adaptor.getDims();
  if (failed(verifyDimList(loc, name, "dims", dims, input.getRank())))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t d = 0, e = input.getRank(); d < e; ++d)
    if (!llvm::is_contained(dims, d))
      shape.push_back(input.getDimSize(d));
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

/// Kept dimensions pass through; reduced ones are `reducedKind`.
static ShardingRule getReduceRule(Operation *op, ArrayRef<int64_t> dims,
                                  FactorKind reducedKind) {
  ShardingRule rule(op);
  auto input = cast<RankedTensorType>(op->getOperand(0).getType());
  int64_t resultDim = 0;
  for (int64_t d = 0, e = input.getRank(); d < e; ++d) {
    if (llvm::is_contained(dims, d))
      rule.addFactor({d}, {kNoDim}, input.getDimSize(d), reducedKind);
    else
      rule.addFactor({d}, {resultDim++}, input.getDimSize(d));
  }
  return rule;
}

#define CLEAVE_DEFINE_REDUCE(OpClass, mnemonic, kind)                          \
  LogicalResult OpClass::inferReturnTypes(                                     \
      MLIRContext *, std::optional<Location> loc, Adaptor adaptor,             \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferReduce(mnemonic, loc, adaptor, inferred);                      \
  }                                                                            \
  ShardingRule OpClass::getShardingRule() {                                    \
    return getReduceRule(*this, getDims(), kind);                              \
  }                                                                            \
  OpWork OpClass::getWork(const OpShapes &s) {                                 \
    return streamingWork(s, s.operands[0].elements(), /*fusable=*/false);      \
  }

// A split reduced dimension leaves partial sums for sum and mean (the mean
// divides by the global size, so local terms still add up); a max cannot be
// summed, so its reduced dimensions need replication.
CLEAVE_DEFINE_REDUCE(ReduceSumOp, "reduce_sum", FactorKind::Reduction)
CLEAVE_DEFINE_REDUCE(ReduceMeanOp, "reduce_mean", FactorKind::Reduction)
CLEAVE_DEFINE_REDUCE(ReduceMaxOp, "reduce_max", FactorKind::NeedReplication)
#undef CLEAVE_DEFINE_REDUCE
