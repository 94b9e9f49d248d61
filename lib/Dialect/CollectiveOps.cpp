//===- CollectiveOps.cpp - Per-device communication ops -------------------===//
//
// Every check that needs the mesh (axis names, group sizes, shapes that
// depend on them) runs in verifySymbolUses, after the module's symbols exist.
//
//===----------------------------------------------------------------------===//

#include "OpUtils.h"
#include "cleave/Dialect/CleaveOps.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::cleave;

/// Looks up the mesh and checks `axes`; returns the group size.
static FailureOr<int64_t> verifyGroup(Operation *op, FlatSymbolRefAttr meshRef,
                                      ArrayAttr axes,
                                      SymbolTableCollection &symbolTables) {
  MeshOp mesh = lookupMesh(op, meshRef, &symbolTables);
  if (!mesh)
    return op->emitOpError() << "refers to unknown mesh " << meshRef;
  if (axes.empty())
    return op->emitOpError() << "needs at least one mesh axis";
  llvm::StringSet<> seen;
  for (Attribute attr : axes) {
    StringRef axis = cast<StringAttr>(attr).getValue();
    if (!mesh.getAxisIndex(axis))
      return op->emitOpError()
             << "uses unknown axis '" << axis << "' of mesh " << meshRef;
    if (!seen.insert(axis).second)
      return op->emitOpError() << "names axis '" << axis << "' twice";
  }
  SmallVector<StringRef> names;
  for (Attribute attr : axes)
    names.push_back(cast<StringAttr>(attr).getValue());
  return mesh.getGroupSize(names);
}

static LogicalResult verifyDim(Operation *op, StringRef what, int64_t dim,
                               int64_t rank) {
  if (dim < 0 || dim >= rank)
    return op->emitOpError()
           << what << " " << dim << " is out of range for an operand of rank "
           << rank;
  return success();
}

/// Checks that `result` is `input` with dimension d scaled by mul[d]/div[d].
static LogicalResult
verifyScaledShape(Operation *op, RankedTensorType input,
                  RankedTensorType result,
                  ArrayRef<std::pair<int64_t, int64_t>>
                      scale /*(dim, factor>0 mul, <0 div)*/) {
  if (input.getElementType() != result.getElementType())
    return op->emitOpError()
           << "result element type " << result.getElementType()
           << " differs from operand element type " << input.getElementType();
  SmallVector<int64_t> expected(input.getShape());
  for (auto [dim, factor] : scale) {
    if (factor < 0) {
      if (expected[dim] % -factor != 0)
        return op->emitOpError()
               << "operand dimension " << dim << " has size " << expected[dim]
               << ", which is not divisible by the group size " << -factor;
      expected[dim] /= -factor;
    } else {
      expected[dim] *= factor;
    }
  }
  if (result.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError()
           << "result shape should be " << formatShape(expected) << " but is "
           << formatShape(result.getShape());
  return success();
}

static SmallVector<StringRef> axisNames(ArrayAttr axes) {
  SmallVector<StringRef> names;
  for (Attribute attr : axes)
    names.push_back(cast<StringAttr>(attr).getValue());
  return names;
}

#define CLEAVE_AXIS_NAMES(OpClass)                                             \
  SmallVector<StringRef> OpClass::getAxisNames() {                             \
    return axisNames(getAxes());                                               \
  }
CLEAVE_AXIS_NAMES(AllReduceOp)
CLEAVE_AXIS_NAMES(AllGatherOp)
CLEAVE_AXIS_NAMES(ReduceScatterOp)
CLEAVE_AXIS_NAMES(AllToAllOp)
CLEAVE_AXIS_NAMES(CollectivePermuteOp)
CLEAVE_AXIS_NAMES(SendOp)
CLEAVE_AXIS_NAMES(RecvOp)
CLEAVE_AXIS_NAMES(AxisIndexOp)
CLEAVE_AXIS_NAMES(ShardOp)
#undef CLEAVE_AXIS_NAMES

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyGroup(*this, getMeshAttr(), getAxes(), tables);
}

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  auto input = cast<RankedTensorType>(getInput().getType());
  if (failed(n) || failed(verifyDim(*this, "dim", getDim(), input.getRank())))
    return failure();
  return verifyScaledShape(*this, input, cast<RankedTensorType>(getType()),
                           {{getDim(), *n}});
}

LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  auto input = cast<RankedTensorType>(getInput().getType());
  if (failed(n) || failed(verifyDim(*this, "dim", getDim(), input.getRank())))
    return failure();
  return verifyScaledShape(*this, input, cast<RankedTensorType>(getType()),
                           {{getDim(), -*n}});
}

LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  auto input = cast<RankedTensorType>(getInput().getType());
  if (failed(n) ||
      failed(verifyDim(*this, "split_dim", getSplitDim(), input.getRank())) ||
      failed(verifyDim(*this, "concat_dim", getConcatDim(), input.getRank())))
    return failure();
  return verifyScaledShape(*this, input, cast<RankedTensorType>(getType()),
                           {{getSplitDim(), -*n}, {getConcatDim(), *n}});
}

SmallVector<std::pair<int64_t, int64_t>>
CollectivePermuteOp::getSourceTargetPairs() {
  SmallVector<std::pair<int64_t, int64_t>> pairs;
  ArrayRef<int64_t> flat = getPairs();
  for (size_t i = 0; i + 1 < flat.size(); i += 2)
    pairs.emplace_back(flat[i], flat[i + 1]);
  return pairs;
}

LogicalResult
CollectivePermuteOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  if (failed(n))
    return failure();
  if (getPairs().size() % 2 != 0)
    return emitOpError() << "pairs must hold (source, target) pairs";
  llvm::SmallSet<int64_t, 8> sources, targets;
  for (auto [src, dst] : getSourceTargetPairs()) {
    for (int64_t index : {src, dst})
      if (index < 0 || index >= *n)
        return emitOpError() << "pair " << src << " -> " << dst
                             << " is outside the group of " << *n << " devices";
    if (!sources.insert(src).second)
      return emitOpError() << "device " << src << " is a source twice";
    if (!targets.insert(dst).second)
      return emitOpError() << "device " << dst << " is a target twice";
  }
  return success();
}

static LogicalResult verifyPeer(Operation *op, int64_t peer, int64_t n) {
  if (peer < 0 || peer >= n)
    return op->emitOpError()
           << "peer " << peer << " is outside the group of " << n << " devices";
  return success();
}

LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  return failure(failed(n) || failed(verifyPeer(*this, getPeer(), *n)));
}

LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  return failure(failed(n) || failed(verifyPeer(*this, getPeer(), *n)));
}

LogicalResult AxisIndexOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyGroup(*this, getMeshAttr(), getAxes(), tables);
}

LogicalResult ShardOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n = verifyGroup(*this, getMeshAttr(), getAxes(), tables);
  auto input = cast<RankedTensorType>(getInput().getType());
  if (failed(n) || failed(verifyDim(*this, "dim", getDim(), input.getRank())))
    return failure();
  return verifyScaledShape(*this, input, cast<RankedTensorType>(getType()),
                           {{getDim(), -*n}});
}
