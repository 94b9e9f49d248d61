//===- ShapeOps.cpp - reshape, transpose, broadcast, slice, concat --------===//

#include "OpUtils.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::cleave;

static constexpr int64_t kNoDim = ShardingRule::kNoDim;

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "changes the element type from "
                         << in.getElementType() << " to "
                         << out.getElementType() << "; use cleave.cast";
  if (in.getNumElements() != out.getNumElements())
    return emitOpError() << "operand shape " << formatShape(in.getShape())
                         << " has " << in.getNumElements()
                         << " elements but result shape "
                         << formatShape(out.getShape()) << " has "
                         << out.getNumElements();
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    setOperand(producer.getInput());
    return getResult();
  }
  return {};
}

/// Splits one group of operand dims [a0, a1) and result dims [b0, b1) of
/// equal size into shared factors, major to minor, when each step divides
/// evenly; otherwise makes every dimension of the group need replication.
static void addReshapeGroup(ShardingRule &rule, ArrayRef<int64_t> in,
                            ArrayRef<int64_t> out, int64_t a0, int64_t a1,
                            int64_t b0, int64_t b1) {
  ShardingRule trial = rule;
  int64_t p = a0, q = b0;
  int64_t remA = p < a1 ? in[p] : 1, remB = q < b1 ? out[q] : 1;
  bool ok = true;
  while (p < a1 && q < b1) {
    if (remA == 1) {
      remA = ++p < a1 ? in[p] : 1;
      continue;
    }
    if (remB == 1) {
      remB = ++q < b1 ? out[q] : 1;
      continue;
    }
    int64_t factor;
    if (remA % remB == 0)
      factor = remB;
    else if (remB % remA == 0)
      factor = remA;
    else {
      ok = false;
      break;
    }
    trial.addFactor({p}, {q}, factor);
    remA /= factor;
    remB /= factor;
  }
  if (ok) {
    rule = std::move(trial);
    return;
  }
  for (int64_t d = a0; d < a1; ++d)
    if (in[d] != 1)
      rule.addFactor({d}, {kNoDim}, in[d], FactorKind::NeedReplication);
  for (int64_t d = b0; d < b1; ++d)
    if (out[d] != 1)
      rule.addFactor({kNoDim}, {d}, out[d], FactorKind::NeedReplication);
}

ShardingRule ReshapeOp::getShardingRule() {
  ShardingRule rule(*this);
  ArrayRef<int64_t> in = getInput().getType().getShape();
  ArrayRef<int64_t> out = getType().getShape();
  // Cut both shapes into the smallest groups with equal element counts.
  int64_t a = 0, b = 0, na = in.size(), nb = out.size();
  while (a < na || b < nb) {
    int64_t a1 = a, b1 = b, prodA = 1, prodB = 1;
    if (a1 < na)
      prodA *= in[a1++];
    if (b1 < nb)
      prodB *= out[b1++];
    while (prodA != prodB) {
      if (prodA < prodB && a1 < na)
        prodA *= in[a1++];
      else if (prodB < prodA && b1 < nb)
        prodB *= out[b1++];
      else
        break; // only on element-count mismatch, which the verifier rejects
    }
    // Trailing size-1 dimensions join the last group.
    while (a1 < na && in[a1] == 1 && (b1 == nb || out[b1] != 1))
      ++a1;
    while (b1 < nb && out[b1] == 1 && (a1 == na || in[a1] != 1))
      ++b1;
    addReshapeGroup(rule, in, out, a, a1, b, b1);
    a = a1;
    b = b1;
  }
  return rule;
}

// A view: no kernel, nothing moved.
OpWork ReshapeOp::getWork(const OpShapes &) { return noWork(); }

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto in = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (static_cast<int64_t>(perm.size()) != in.getRank())
    return inferError(
        loc, "'cleave.transpose' op permutation has " + Twine(perm.size()) +
                 " entries but the operand has rank " + Twine(in.getRank()));
  SmallVector<bool> used(in.getRank(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || used[p])
      return inferError(
          loc, "'cleave.transpose' op permutation " + formatShape(perm) +
                   " is not a permutation of [0, " + Twine(in.getRank()) + ")");
    used[p] = true;
    shape.push_back(in.getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  for (auto [i, p] : llvm::enumerate(getPermutation()))
    if (static_cast<int64_t>(i) != p)
      return {};
  return getInput();
}

ShardingRule TransposeOp::getShardingRule() {
  ShardingRule rule(*this);
  for (auto [r, p] : llvm::enumerate(getPermutation()))
    rule.addFactor({p}, {static_cast<int64_t>(r)}, getType().getDimSize(r));
  return rule;
}

// A copy into the new layout.
OpWork TransposeOp::getWork(const OpShapes &s) {
  return streamingWork(s, 0, /*fusable=*/false);
}

//===----------------------------------------------------------------------===//
// BroadcastOp
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  ArrayRef<int64_t> dims = getDims();
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "result element type " << out.getElementType()
                         << " differs from operand element type "
                         << in.getElementType();
  if (static_cast<int64_t>(dims.size()) != in.getRank())
    return emitOpError() << "dims has " << dims.size()
                         << " entries but the operand has rank "
                         << in.getRank();
  if (failed(verifyDimList(getLoc(), "broadcast", "dims", dims, out.getRank())))
    return failure();
  for (auto [i, d] : llvm::enumerate(dims))
    if (in.getDimSize(i) != out.getDimSize(d))
      return emitOpError() << "operand dimension " << i << " has size "
                           << in.getDimSize(i) << " but result dimension " << d
                           << " has size " << out.getDimSize(d);
  return success();
}

ShardingRule BroadcastOp::getShardingRule() {
  ShardingRule rule(*this);
  ArrayRef<int64_t> dims = getDims();
  for (int64_t d = 0, e = getType().getRank(); d < e; ++d) {
    const auto *it = llvm::find(dims, d);
    int64_t operandDim = it == dims.end() ? kNoDim : it - dims.begin();
    rule.addFactor({operandDim}, {d}, getType().getDimSize(d));
  }
  return rule;
}

// Fuses into its elementwise consumer (then only the input is read).
OpWork BroadcastOp::getWork(const OpShapes &s) {
  return streamingWork(s, 0, /*fusable=*/true);
}

//===----------------------------------------------------------------------===//
// SliceOp
//===----------------------------------------------------------------------===//

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto in = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> offsets = adaptor.getOffsets(), sizes = adaptor.getSizes(),
                    strides = adaptor.getStrides();
  int64_t rank = in.getRank();
  if (static_cast<int64_t>(offsets.size()) != rank ||
      static_cast<int64_t>(sizes.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return inferError(
        loc, "'cleave.slice' op offsets, sizes and strides need " +
                 Twine(rank) + " entries each (the operand " + "rank), got " +
                 Twine(offsets.size()) + ", " + Twine(sizes.size()) + " and " +
                 Twine(strides.size()));
  for (int64_t d = 0; d < rank; ++d) {
    if (strides[d] < 1 || sizes[d] < 0 || offsets[d] < 0)
      return inferError(
          loc, "'cleave.slice' op dimension " + Twine(d) + " has offset " +
                   Twine(offsets[d]) + ", size " + Twine(sizes[d]) +
                   ", stride " + Twine(strides[d]) +
                   "; offsets and sizes must be >= 0 and " + "strides >= 1");
    int64_t last = offsets[d] + (sizes[d] - 1) * strides[d];
    if (sizes[d] > 0 && last >= in.getDimSize(d))
      return inferError(loc, "'cleave.slice' op dimension " + Twine(d) +
                                 " reads index " + Twine(last) +
                                 " but the operand has size " +
                                 Twine(in.getDimSize(d)));
  }
  inferred.push_back(RankedTensorType::get(sizes, in.getElementType()));
  return success();
}

ShardingRule SliceOp::getShardingRule() {
  ShardingRule rule(*this);
  auto in = getInput().getType();
  for (int64_t d = 0, e = in.getRank(); d < e; ++d) {
    bool whole = getOffsets()[d] == 0 && getStrides()[d] == 1 &&
                 getSizes()[d] == in.getDimSize(d);
    if (whole) {
      rule.addFactor({d}, {d}, in.getDimSize(d));
      continue;
    }
    rule.addFactor({d}, {kNoDim}, in.getDimSize(d),
                   FactorKind::NeedReplication);
    rule.addFactor({kNoDim}, {d}, getSizes()[d], FactorKind::NeedReplication);
  }
  return rule;
}

// A copy of the elements it keeps.
OpWork SliceOp::getWork(const OpShapes &s) {
  OpWork w = streamingWork(s, 0, /*fusable=*/false);
  w.bytesRead = s.results[0].bytes();
  return w;
}

//===----------------------------------------------------------------------===//
// ConcatOp
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return inferError(loc, "'cleave.concat' op needs at least one operand");
  auto first = cast<RankedTensorType>(inputs[0].getType());
  int64_t dim = adaptor.getDim();
  if (dim < 0 || dim >= first.getRank())
    return inferError(loc, "'cleave.concat' op dim " + Twine(dim) +
                               " is out of range for operands of rank " +
                               Twine(first.getRank()));
  SmallVector<int64_t> shape(first.getShape());
  for (auto [i, value] : llvm::enumerate(inputs.drop_front())) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getElementType() != first.getElementType() ||
        type.getRank() != first.getRank())
      return inferError(loc, "'cleave.concat' op operand #" + Twine(i + 1) +
                                 " must have the element type and rank of "
                                 "operand #0");
    for (int64_t d = 0, e = type.getRank(); d < e; ++d) {
      if (d == dim)
        continue;
      if (type.getDimSize(d) != first.getDimSize(d))
        return inferError(
            loc, "'cleave.concat' op operand #" + Twine(i + 1) + " has size " +
                     Twine(type.getDimSize(d)) + " in dimension " + Twine(d) +
                     " but operand #0 has " + Twine(first.getDimSize(d)));
    }
    shape[dim] += type.getDimSize(dim);
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

ShardingRule ConcatOp::getShardingRule() {
  ShardingRule rule(*this);
  int64_t n = getInputs().size(), dim = getDim();
  for (int64_t d = 0, e = getType().getRank(); d < e; ++d) {
    if (d == dim)
      continue;
    rule.addFactor(SmallVector<int64_t>(n, d), {d}, getType().getDimSize(d));
  }
  for (int64_t i = 0; i < n; ++i) {
    SmallVector<int64_t> operandDims(n, kNoDim);
    operandDims[i] = dim;
    rule.addFactor(
        operandDims, {kNoDim},
        cast<RankedTensorType>(getInputs()[i].getType()).getDimSize(dim),
        FactorKind::NeedReplication);
  }
  rule.addFactor(SmallVector<int64_t>(n, kNoDim), {dim},
                 getType().getDimSize(dim), FactorKind::NeedReplication);
  return rule;
}

OpWork ConcatOp::getWork(const OpShapes &s) {
  return streamingWork(s, 0, /*fusable=*/false);
}

//===----------------------------------------------------------------------===//
// PadOp
//===----------------------------------------------------------------------===//

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  auto in = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh(),
                    interior = adaptor.getInterior();
  int64_t rank = in.getRank();
  if (static_cast<int64_t>(low.size()) != rank ||
      static_cast<int64_t>(high.size()) != rank ||
      static_cast<int64_t>(interior.size()) != rank)
    return inferError(loc, "'cleave.pad' op low, high and interior need " +
                               Twine(rank) + " entries each (the operand " +
                               "rank), got " + Twine(low.size()) + ", " +
                               Twine(high.size()) + " and " +
                               Twine(interior.size()));
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (low[d] < 0 || high[d] < 0 || interior[d] < 0)
      return inferError(loc, "'cleave.pad' op dimension " + Twine(d) +
                                 " has negative padding (low " + Twine(low[d]) +
                                 ", high " + Twine(high[d]) + ", interior " +
                                 Twine(interior[d]) + ")");
    int64_t size = in.getDimSize(d);
    shape.push_back(low[d] + high[d] + size +
                    (size > 0 ? (size - 1) * interior[d] : 0));
  }
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

ShardingRule PadOp::getShardingRule() {
  ShardingRule rule(*this);
  auto in = getInput().getType();
  for (int64_t d = 0, e = in.getRank(); d < e; ++d) {
    if (getLow()[d] == 0 && getHigh()[d] == 0 && getInterior()[d] == 0) {
      rule.addFactor({d}, {d}, in.getDimSize(d));
      continue;
    }
    rule.addFactor({d}, {kNoDim}, in.getDimSize(d),
                   FactorKind::NeedReplication);
    rule.addFactor({kNoDim}, {d}, getType().getDimSize(d),
                   FactorKind::NeedReplication);
  }
  return rule;
}

OpWork PadOp::getWork(const OpShapes &s) {
  return streamingWork(s, 0, /*fusable=*/false);
}

//===----------------------------------------------------------------------===//
// OptimizationBarrierOp
//===----------------------------------------------------------------------===//

ShardingRule OptimizationBarrierOp::getShardingRule() {
  ShardingRule rule(*this);
  auto type = cast<RankedTensorType>(getType());
  for (int64_t d = 0; d < type.getRank(); ++d)
    rule.addFactor({d}, {d}, type.getDimSize(d));
  return rule;
}

OpWork OptimizationBarrierOp::getWork(const OpShapes &) { return noWork(); }
