//===- LowerCollectives.cpp - Per-device ops to runtime calls -------------===//
//
// Implements -cleave-lower-collectives. See Passes.td for the contract.
//
// Two steps. First, at the cleave level, gathers, scatters and all-to-alls
// along a non-leading dimension become transposes and reshapes around the
// same op on the leading dimension (the runtime moves contiguous blocks).
// Then every per-device op becomes a call of the runtime's C ABI on buffers:
// the input through bufferization.to_memref, the result in a fresh buffer
// that bufferization.to_tensor hands back to the tensor program.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "cleave/Conversion/RuntimeDType.h"
#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Runtime/Runtime.h"

#define DEBUG_TYPE "cleave-lower-collectives"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVELOWERCOLLECTIVESPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

//===----------------------------------------------------------------------===//
// Step 1: collectives on the leading dimension
//===----------------------------------------------------------------------===//

/// `dim` is leading if every dimension before it has size 1.
bool isLeading(RankedTensorType type, int64_t dim) {
  return llvm::all_of(type.getShape().take_front(dim),
                      [](int64_t s) { return s == 1; });
}

/// The permutation moving `dim` to the front, and its inverse.
std::pair<SmallVector<int64_t>, SmallVector<int64_t>> frontPerm(int64_t rank,
                                                                int64_t dim) {
  SmallVector<int64_t> perm = {dim};
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim)
      perm.push_back(d);
  SmallVector<int64_t> inverse(rank);
  for (int64_t r = 0; r < rank; ++r)
    inverse[perm[r]] = r;
  return {perm, inverse};
}

Value transpose(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> perm) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(type.getDimSize(p));
  return b.create<TransposeOp>(
      loc, RankedTensorType::get(shape, type.getElementType()), v,
      b.getDenseI64ArrayAttr(perm));
}

Value reshape(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  return b.create<ReshapeOp>(
      loc, RankedTensorType::get(shape, type.getElementType()), v);
}

/// Rebuilds a gather or scatter along `dim` as the same op on the leading
/// dimension between two transposes; `make` creates the op on the moved
/// tensor, given the moved result type.
template <typename OpT>
void moveToFront(OpT op, function_ref<Value(OpBuilder &, Value, Type)> make) {
  auto in = cast<RankedTensorType>(op.getInput().getType());
  auto out = cast<RankedTensorType>(op.getType());
  int64_t dim = op.getDim();
  auto [perm, inverse] = frontPerm(in.getRank(), dim);
  OpBuilder b(op);
  Value moved = transpose(b, op.getLoc(), op.getInput(), perm);
  SmallVector<int64_t> outShape;
  for (int64_t p : perm)
    outShape.push_back(out.getDimSize(p));
  Value result =
      make(b, moved, RankedTensorType::get(outShape, out.getElementType()));
  op.replaceAllUsesWith(transpose(b, op.getLoc(), result, inverse));
  op.erase();
}

/// The start/wait form of moveToFront: the start's operand is transposed
/// before it, the wait's result back after it.
template <typename OpT>
void moveStartToFront(
    OpT op, function_ref<Operation *(OpBuilder &, Value, Type)> make) {
  auto in = cast<RankedTensorType>(op.getInput().getType());
  auto out = cast<RankedTensorType>(op.getValueType());
  WaitOp wait = op.getWait();
  auto [perm, inverse] = frontPerm(in.getRank(), op.getDim());
  OpBuilder b(op);
  Value moved = transpose(b, op.getLoc(), op.getInput(), perm);
  SmallVector<int64_t> outShape;
  for (int64_t p : perm)
    outShape.push_back(out.getDimSize(p));
  auto movedType = RankedTensorType::get(outShape, out.getElementType());
  Operation *start =
      make(b, moved, RequestType::get(b.getContext(), movedType));
  b.setInsertionPoint(wait);
  auto movedWait =
      b.create<WaitOp>(wait.getLoc(), movedType, start->getResult(0));
  wait.getResult().replaceAllUsesWith(
      transpose(b, wait.getLoc(), movedWait.getResult(), inverse));
  wait.erase();
  op.erase();
}

/// all_to_all(split j, concat i) as a leading-dimension exchange: split
/// dimension first, exchange blocks, then put the senders' blocks next to
/// dimension i and merge them into it. `exchange(b, moved)` builds the
/// exchange of the moved operand and returns its result, with `b` set where
/// the result is available (after the wait of a start).
template <typename OpT>
void normalizeAllToAll(OpT op, RankedTensorType outType, int64_t groupSize,
                       function_ref<Value(OpBuilder &, Value, Type)> exchange) {
  auto in = cast<RankedTensorType>(op.getInput().getType());
  int64_t rank = in.getRank(), split = op.getSplitDim(),
          concat = op.getConcatDim();
  Location loc = op.getLoc();
  OpBuilder b(op);
  auto [perm, inverse] = frontPerm(rank, split);
  Value moved = transpose(b, loc, op.getInput(), perm);
  Value exchanged = exchange(b, moved, moved.getType());
  // [g, S_split / g, other dims in order] -> original order with the group
  // dimension right before `concat`.
  SmallVector<int64_t> blocked = {groupSize, in.getDimSize(split) / groupSize};
  SmallVector<int64_t> others; // original dims other than split
  for (int64_t d = 0; d < rank; ++d)
    if (d != split) {
      others.push_back(d);
      blocked.push_back(in.getDimSize(d));
    }
  Value grouped = reshape(b, loc, exchanged, blocked);
  SmallVector<int64_t> order; // positions in `blocked`
  for (int64_t d = 0; d < rank; ++d) {
    if (d == concat)
      order.push_back(0);
    if (d == split)
      order.push_back(1);
    else
      order.push_back(2 + (llvm::find(others, d) - others.begin()));
  }
  Value placed = transpose(b, loc, grouped, order);
  Value result = reshape(b, loc, placed, outType.getShape());
  if constexpr (std::is_same_v<OpT, AllToAllStartOp>) {
    WaitOp wait = op.getWait();
    wait.getResult().replaceAllUsesWith(result);
    wait.erase();
  } else {
    op.replaceAllUsesWith(result);
  }
  op.erase();
}

/// Rewrites all_to_all (blocking or start) to exchange leading blocks.
template <typename OpT>
LogicalResult normalizeAllToAllOp(OpT a, SymbolTableCollection &symbols) {
  if (a.getSplitDim() == 0 && a.getConcatDim() == 0)
    return success();
  MeshOp mesh = lookupMesh(a, a.getMeshAttr(), &symbols);
  if (!mesh)
    return a.emitError() << "refers to an unknown mesh";
  int64_t g = mesh.getGroupSize(a.getAxisNames());
  Location loc = a.getLoc();
  auto zero = [&](OpBuilder &b) { return b.getI64IntegerAttr(0); };
  if constexpr (std::is_same_v<OpT, AllToAllStartOp>) {
    auto out = cast<RankedTensorType>(a.getValueType());
    WaitOp wait = a.getWait();
    normalizeAllToAll(a, out, g, [&](OpBuilder &b, Value v, Type t) -> Value {
      auto start = b.create<AllToAllStartOp>(
          loc, RequestType::get(b.getContext(), t), v, a.getMeshAttr(),
          a.getAxesAttr(), zero(b), zero(b));
      b.setInsertionPoint(wait);
      return b.create<WaitOp>(wait.getLoc(), t, start.getRequest()).getResult();
    });
  } else {
    normalizeAllToAll(a, cast<RankedTensorType>(a.getType()), g,
                      [&](OpBuilder &b, Value v, Type t) -> Value {
                        return b.create<AllToAllOp>(loc, t, v, a.getMeshAttr(),
                                                    a.getAxesAttr(), zero(b),
                                                    zero(b));
                      });
  }
  return success();
}

/// One `cleave.axis_index` per function and list of axes, at the top of the
/// function: the index is the same wherever it is asked for, but the runtime
/// call it becomes is opaque to CSE, so without this two ops that mask by
/// the same index (an attention and its gradient under context
/// parallelism) could never share their work.
void shareAxisIndices(ModuleOp module) {
  module.walk([](func::FuncOp fn) {
    if (fn.isExternal())
      return;
    llvm::DenseMap<std::pair<Attribute, Attribute>, AxisIndexOp> first;
    SmallVector<AxisIndexOp> all;
    fn.walk([&](AxisIndexOp op) { all.push_back(op); });
    Block &entry = fn.front();
    Operation *last = nullptr; // the last one moved up, to keep their order
    for (AxisIndexOp op : all) {
      auto [it, inserted] = first.try_emplace(
          std::make_pair(op.getMeshAttr(), op.getAxesAttr()), op);
      if (inserted) {
        if (last)
          op->moveAfter(last);
        else
          op->moveBefore(&entry, entry.begin());
        last = op;
        continue;
      }
      op.getResult().replaceAllUsesWith(it->second.getResult());
      op->erase();
    }
  });
}

LogicalResult normalize(ModuleOp module, SymbolTableCollection &symbols) {
  SmallVector<Operation *> work;
  module.walk([&](Operation *op) {
    if (isa<AllGatherOp, ReduceScatterOp, AllToAllOp, AllGatherStartOp,
            ReduceScatterStartOp, AllToAllStartOp>(op))
      work.push_back(op);
  });
  for (Operation *op : work) {
    if (auto g = dyn_cast<AllGatherStartOp>(op)) {
      if (!isLeading(g.getInput().getType(), g.getDim()))
        moveStartToFront(g, [&](OpBuilder &b, Value v, Type t) -> Operation * {
          return b.create<AllGatherStartOp>(g.getLoc(), t, v, g.getMeshAttr(),
                                            g.getAxesAttr(),
                                            b.getI64IntegerAttr(0));
        });
      continue;
    }
    if (auto s = dyn_cast<ReduceScatterStartOp>(op)) {
      if (!isLeading(s.getInput().getType(), s.getDim()))
        moveStartToFront(s, [&](OpBuilder &b, Value v, Type t) -> Operation * {
          return b.create<ReduceScatterStartOp>(
              s.getLoc(), t, v, s.getMeshAttr(), s.getAxesAttr(),
              b.getI64IntegerAttr(0), s.getReductionAttr());
        });
      continue;
    }
    if (auto g = dyn_cast<AllGatherOp>(op)) {
      if (isLeading(g.getInput().getType(), g.getDim()))
        continue;
      moveToFront(g, [&](OpBuilder &b, Value v, Type t) -> Value {
        return b.create<AllGatherOp>(g.getLoc(), t, v, g.getMeshAttr(),
                                     g.getAxesAttr(), b.getI64IntegerAttr(0));
      });
    } else if (auto s = dyn_cast<ReduceScatterOp>(op)) {
      if (isLeading(s.getInput().getType(), s.getDim()))
        continue;
      moveToFront(s, [&](OpBuilder &b, Value v, Type t) -> Value {
        return b.create<ReduceScatterOp>(
            s.getLoc(), t, v, s.getMeshAttr(), s.getAxesAttr(),
            b.getI64IntegerAttr(0), s.getReductionAttr());
      });
    } else if (auto a = dyn_cast<AllToAllOp>(op)) {
      if (failed(normalizeAllToAllOp(a, symbols)))
        return failure();
    } else if (auto a = dyn_cast<AllToAllStartOp>(op)) {
      if (failed(normalizeAllToAllOp(a, symbols)))
        return failure();
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Step 2: runtime calls
//===----------------------------------------------------------------------===//

int32_t reductionCode(ReductionKind kind) {
  switch (kind) {
  case ReductionKind::Sum:
    return CLEAVE_SUM;
  case ReductionKind::Max:
    return CLEAVE_MAX;
  case ReductionKind::Min:
    return CLEAVE_MIN;
  case ReductionKind::Avg:
    return CLEAVE_AVG;
  }
  return CLEAVE_SUM;
}

/// Builds runtime calls for the per-device ops of one module.
class CallBuilder {
public:
  CallBuilder(ModuleOp module) : module(module), ctx(module.getContext()) {}

  LogicalResult lower(Operation *op);
  ArrayAttr groupsAttr() const {
    SmallVector<Attribute> groups;
    for (const auto &axes : groupAxes)
      groups.push_back(Builder(ctx).getStrArrayAttr(axes));
    return ArrayAttr::get(ctx, groups);
  }

private:
  int64_t groupId(ArrayAttr axes);
  func::FuncOp declare(StringRef name, ArrayRef<Type> args,
                       ArrayRef<Type> results = {});
  Value i64(OpBuilder &b, Location loc, int64_t v) {
    return b.create<arith::ConstantIntOp>(loc, v, 64);
  }
  Value i32(OpBuilder &b, Location loc, int64_t v) {
    return b.create<arith::ConstantIntOp>(loc, v, 32);
  }
  Value pointer(OpBuilder &b, Location loc, Value memref);
  Value input(OpBuilder &b, Location loc, Value tensor);
  Value buffer(OpBuilder &b, Location loc, Type tensorType);
  Value result(OpBuilder &b, Location loc, Value memref);
  Value groupRank(OpBuilder &b, Location loc, ArrayAttr axes);
  Value pairsPointer(OpBuilder &b, Location loc, ArrayRef<int64_t> flat);
  /// The elements each device sends to each other of an all_to_all (or its
  /// start) of `data`, as an i64 constant.
  template <typename OpT>
  Value allToAllBlock(OpT op, Value data) {
    OpBuilder b(op);
    MeshOp mesh = lookupMesh(op, op.getMeshAttr());
    int64_t g = mesh.getGroupSize(op.getAxisNames());
    return i64(b, op.getLoc(),
               cast<RankedTensorType>(data.getType()).getNumElements() / g);
  }
  LogicalResult lowerShard(ShardOp op);
  LogicalResult lowerStart(Operation *start);

  ModuleOp module;
  MLIRContext *ctx;
  SmallVector<SmallVector<StringRef>> groupAxes;
  llvm::StringMap<func::FuncOp> declared;
  int64_t numInputs = 0;
};

int64_t CallBuilder::groupId(ArrayAttr axes) {
  SmallVector<StringRef> names;
  for (Attribute a : axes)
    names.push_back(cast<StringAttr>(a).getValue());
  for (auto [id, known] : llvm::enumerate(groupAxes))
    if (known == names)
      return id;
  groupAxes.push_back(names);
  return groupAxes.size() - 1;
}

func::FuncOp CallBuilder::declare(StringRef name, ArrayRef<Type> args,
                                  ArrayRef<Type> results) {
  if (auto it = declared.find(name); it != declared.end())
    return it->second;
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return declared[name] = existing;
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto func = b.create<func::FuncOp>(module.getLoc(), name,
                                     b.getFunctionType(args, results));
  func.setPrivate();
  return declared[name] = func;
}

Value CallBuilder::pointer(OpBuilder &b, Location loc, Value memref) {
  Value index = b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, memref);
  Value address = b.create<arith::IndexCastOp>(loc, b.getI64Type(), index);
  return b.create<LLVM::IntToPtrOp>(loc, LLVM::LLVMPointerType::get(ctx),
                                    address);
}

Value CallBuilder::input(OpBuilder &b, Location loc, Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  auto memref = MemRefType::get(type.getShape(), type.getElementType());
  auto op = b.create<bufferization::ToMemrefOp>(loc, memref, tensor,
                                                /*read_only=*/true);
  // The call reads the buffer through a raw pointer, which bufferization does
  // not see: each call keeps its own to_memref (a unique attribute stops CSE
  // from merging two collectives' inputs), so that the tensor stays alive,
  // and is not overwritten in place, until the last call that reads it.
  op->setAttr("collective_input", b.getI64IntegerAttr(numInputs++));
  return op;
}

Value CallBuilder::buffer(OpBuilder &b, Location loc, Type tensorType) {
  auto type = cast<RankedTensorType>(tensorType);
  return b.create<memref::AllocOp>(
      loc, MemRefType::get(type.getShape(), type.getElementType()),
      b.getI64IntegerAttr(64));
}

Value CallBuilder::result(OpBuilder &b, Location loc, Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  return b.create<bufferization::ToTensorOp>(
      loc, RankedTensorType::get(type.getShape(), type.getElementType()),
      memref, /*restrict=*/true, /*writable=*/true);
}

/// The (source, target) pairs of a permute in a stack array of i64, as a
/// pointer (the runtime copies them at the call).
Value CallBuilder::pairsPointer(OpBuilder &b, Location loc,
                                ArrayRef<int64_t> flat) {
  auto pairsType = MemRefType::get({int64_t(flat.size())}, b.getI64Type());
  Value pairs = b.create<memref::AllocaOp>(loc, pairsType);
  for (auto [i, v] : llvm::enumerate(flat))
    b.create<memref::StoreOp>(
        loc, i64(b, loc, v), pairs,
        ValueRange{b.create<arith::ConstantIndexOp>(loc, int64_t(i))});
  return pointer(b, loc, pairs);
}

Value CallBuilder::groupRank(OpBuilder &b, Location loc, ArrayAttr axes) {
  func::FuncOp fn =
      declare("cleave_rt_group_rank", {b.getI64Type()}, {b.getI64Type()});
  return b.create<func::CallOp>(loc, fn, ValueRange{i64(b, loc, groupId(axes))})
      .getResult(0);
}

LogicalResult CallBuilder::lowerShard(ShardOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto in = op.getInput().getType();
  auto out = cast<RankedTensorType>(op.getType());
  int64_t dim = op.getDim();
  Value rank = b.create<arith::IndexCastOp>(loc, b.getIndexType(),
                                            groupRank(b, loc, op.getAxes()));
  Value offset = b.create<arith::MulIOp>(
      loc, rank, b.create<arith::ConstantIndexOp>(loc, out.getDimSize(dim)));
  SmallVector<OpFoldResult> offsets(in.getRank(), b.getIndexAttr(0)), sizes,
      strides(in.getRank(), b.getIndexAttr(1));
  offsets[dim] = offset;
  for (int64_t s : out.getShape())
    sizes.push_back(b.getIndexAttr(s));
  Value slice = b.create<tensor::ExtractSliceOp>(loc, out, op.getInput(),
                                                 offsets, sizes, strides);
  op.replaceAllUsesWith(slice);
  op.erase();
  return success();
}

/// A start and its wait: the start calls cleave_rt_*_start on the operand's
/// buffer and a fresh result buffer; the wait calls cleave_rt_wait with both
/// (a second to_memref of the operand, so bufferization keeps the operand
/// alive and unwritten until the wait, and the result buffer is in use until
/// there) and hands the result buffer to the tensor program.
LogicalResult CallBuilder::lowerStart(Operation *start) {
  auto wait = cast<WaitOp>(*start->getResult(0).user_begin());
  OpBuilder b(start);
  Location loc = start->getLoc();
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  Type i64T = b.getI64Type(), i32T = b.getI32Type();
  Value data = start->getNumOperands() ? start->getOperand(0) : Value();
  Type value = cast<RequestType>(start->getResult(0).getType()).getValueType();
  Type elemType =
      cast<RankedTensorType>(data ? data.getType() : value).getElementType();
  std::optional<int32_t> dtype = runtimeDTypeCode(elemType);
  if (!dtype)
    return start->emitError()
           << "element type " << elemType << " has no runtime code";
  Value group = i64(b, loc, groupId(start->getAttrOfType<ArrayAttr>("axes")));
  Value dt = i32(b, loc, *dtype);
  auto count = [&](Type t) {
    return i64(b, loc, cast<RankedTensorType>(t).getNumElements());
  };
  Value out = value ? buffer(b, loc, value) : Value();
  Value in = data ? input(b, loc, data) : Value();
  Value inPtr = data ? pointer(b, loc, in) : Value();
  Value outPtr = out ? pointer(b, loc, out) : Value();
  auto reduce = [&](ReductionKind kind) {
    return i32(b, loc, reductionCode(kind));
  };
  StringRef name;
  SmallVector<Value> args;
  SmallVector<Type> types;
  if (auto ar = dyn_cast<AllReduceStartOp>(start)) {
    name = "cleave_rt_all_reduce_start";
    args = {group, dt, reduce(ar.getReduction()), inPtr, outPtr, count(value)};
    types = {i64T, i32T, i32T, ptr, ptr, i64T};
  } else if (isa<AllGatherStartOp>(start)) {
    name = "cleave_rt_all_gather_start";
    args = {group, dt, inPtr, outPtr, count(data.getType())};
    types = {i64T, i32T, ptr, ptr, i64T};
  } else if (auto rs = dyn_cast<ReduceScatterStartOp>(start)) {
    name = "cleave_rt_reduce_scatter_start";
    args = {group, dt, reduce(rs.getReduction()), inPtr, outPtr, count(value)};
    types = {i64T, i32T, i32T, ptr, ptr, i64T};
  } else if (auto a2a = dyn_cast<AllToAllStartOp>(start)) {
    name = "cleave_rt_all_to_all_start";
    args = {group, dt, inPtr, outPtr, allToAllBlock(a2a, data)};
    types = {i64T, i32T, ptr, ptr, i64T};
  } else if (auto perm = dyn_cast<CollectivePermuteStartOp>(start)) {
    name = "cleave_rt_collective_permute_start";
    ArrayRef<int64_t> flat = perm.getPairs();
    args = {group,
            dt,
            inPtr,
            outPtr,
            count(value),
            i64(b, loc, int64_t(flat.size() / 2)),
            pairsPointer(b, loc, flat)};
    types = {i64T, i32T, ptr, ptr, i64T, i64T, ptr};
  } else if (auto send = dyn_cast<SendStartOp>(start)) {
    name = "cleave_rt_send_start";
    args = {group, i64(b, loc, send.getPeer()), dt, inPtr,
            count(data.getType())};
    types = {i64T, i64T, i32T, ptr, i64T};
  } else {
    auto recv = cast<RecvStartOp>(start);
    name = "cleave_rt_recv_start";
    args = {group, i64(b, loc, recv.getPeer()), dt, outPtr, count(value)};
    types = {i64T, i64T, i32T, ptr, i64T};
  }
  Value handle = b.create<func::CallOp>(loc, declare(name, types, {i64T}), args)
                     .getResult(0);
  b.setInsertionPoint(wait);
  // The start's buffers again (the same values: a copy that bufferization
  // makes of a strided operand stays alive until here), and the operand
  // read once more at the wait, so that no op writes it in place before.
  Value null = b.create<LLVM::ZeroOp>(loc, ptr);
  Value keepIn = data ? pointer(b, loc, in) : null;
  Value keepOut = out ? pointer(b, loc, out) : null;
  Value operand = data ? pointer(b, loc, input(b, loc, data)) : null;
  b.create<func::CallOp>(
      loc, declare("cleave_rt_wait", {i64T, ptr, ptr, ptr}, {i32T}),
      ValueRange{handle, keepIn, keepOut, operand});
  if (out)
    wait.getResult().replaceAllUsesWith(result(b, loc, out));
  wait.erase();
  start->erase();
  return success();
}

LogicalResult CallBuilder::lower(Operation *op) {
  if (auto shard = dyn_cast<ShardOp>(op))
    return lowerShard(shard);
  if (isa<AllReduceStartOp, AllGatherStartOp, ReduceScatterStartOp,
          AllToAllStartOp, CollectivePermuteStartOp, SendStartOp, RecvStartOp>(
          op))
    return lowerStart(op);
  OpBuilder b(op);
  Location loc = op->getLoc();
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  Type i64T = b.getI64Type(), i32T = b.getI32Type();
  if (auto index = dyn_cast<AxisIndexOp>(op)) {
    Value rank = groupRank(b, loc, index.getAxes());
    op->getResult(0).replaceAllUsesWith(b.create<tensor::FromElementsOp>(
        loc, index.getType(), ValueRange{rank}));
    op->erase();
    return success();
  }
  // Communication: element type, counts, group.
  Value data = op->getNumOperands() ? op->getOperand(0) : Value();
  Type elemType =
      cast<RankedTensorType>(data ? data.getType() : op->getResult(0).getType())
          .getElementType();
  std::optional<int32_t> dtype = runtimeDTypeCode(elemType);
  if (!dtype)
    return op->emitError() << "element type " << elemType
                           << " has no runtime code";
  auto group = i64(b, loc, groupId(op->getAttrOfType<ArrayAttr>("axes")));
  Value dt = i32(b, loc, *dtype);
  auto count = [&](Value v) {
    return i64(b, loc, cast<RankedTensorType>(v.getType()).getNumElements());
  };
  if (auto send = dyn_cast<SendOp>(op)) {
    func::FuncOp fn = declare("cleave_rt_send", {i64T, i64T, i32T, ptr, i64T});
    b.create<func::CallOp>(loc, fn,
                           ValueRange{group, i64(b, loc, send.getPeer()), dt,
                                      pointer(b, loc, input(b, loc, data)),
                                      count(data)});
    op->erase();
    return success();
  }
  Value out = buffer(b, loc, op->getResult(0).getType());
  Value outPtr = pointer(b, loc, out);
  Value outCount = count(op->getResult(0));
  if (auto recv = dyn_cast<RecvOp>(op)) {
    func::FuncOp fn = declare("cleave_rt_recv", {i64T, i64T, i32T, ptr, i64T});
    b.create<func::CallOp>(
        loc, fn,
        ValueRange{group, i64(b, loc, recv.getPeer()), dt, outPtr, outCount});
  } else {
    Value inPtr = pointer(b, loc, input(b, loc, data));
    if (auto ar = dyn_cast<AllReduceOp>(op)) {
      func::FuncOp fn =
          declare("cleave_rt_all_reduce", {i64T, i32T, i32T, ptr, ptr, i64T});
      b.create<func::CallOp>(
          loc, fn,
          ValueRange{group, dt, i32(b, loc, reductionCode(ar.getReduction())),
                     inPtr, outPtr, outCount});
    } else if (isa<AllGatherOp>(op)) {
      func::FuncOp fn =
          declare("cleave_rt_all_gather", {i64T, i32T, ptr, ptr, i64T});
      b.create<func::CallOp>(loc, fn,
                             ValueRange{group, dt, inPtr, outPtr, count(data)});
    } else if (auto rs = dyn_cast<ReduceScatterOp>(op)) {
      func::FuncOp fn = declare("cleave_rt_reduce_scatter",
                                {i64T, i32T, i32T, ptr, ptr, i64T});
      b.create<func::CallOp>(
          loc, fn,
          ValueRange{group, dt, i32(b, loc, reductionCode(rs.getReduction())),
                     inPtr, outPtr, outCount});
    } else if (auto a2a = dyn_cast<AllToAllOp>(op)) {
      func::FuncOp fn =
          declare("cleave_rt_all_to_all", {i64T, i32T, ptr, ptr, i64T});
      b.create<func::CallOp>(
          loc, fn,
          ValueRange{group, dt, inPtr, outPtr, allToAllBlock(a2a, data)});
    } else if (auto perm = dyn_cast<CollectivePermuteOp>(op)) {
      ArrayRef<int64_t> flat = perm.getPairs();
      func::FuncOp fn = declare("cleave_rt_collective_permute",
                                {i64T, i32T, ptr, ptr, i64T, i64T, ptr});
      b.create<func::CallOp>(loc, fn,
                             ValueRange{group, dt, inPtr, outPtr, outCount,
                                        i64(b, loc, int64_t(flat.size() / 2)),
                                        pairsPointer(b, loc, flat)});
    } else {
      return op->emitError() << "has no runtime lowering";
    }
  }
  op->getResult(0).replaceAllUsesWith(result(b, loc, out));
  op->erase();
  return success();
}

struct CleaveLowerCollectivesPass final
    : mlir::cleave::impl::CleaveLowerCollectivesPassBase<
          CleaveLowerCollectivesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection symbols;
    if (failed(normalize(module, symbols)))
      return signalPassFailure();
    shareAxisIndices(module);
    CallBuilder calls(module);
    SmallVector<Operation *> work;
    module.walk([&](Operation *op) {
      if (isa<AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp,
              CollectivePermuteOp, SendOp, RecvOp, AxisIndexOp, ShardOp,
              AllReduceStartOp, AllGatherStartOp, ReduceScatterStartOp,
              AllToAllStartOp, CollectivePermuteStartOp, SendStartOp,
              RecvStartOp>(op))
        work.push_back(op);
    });
    for (Operation *op : work)
      if (failed(calls.lower(op)))
        return signalPassFailure();
    if (!work.empty())
      module->setAttr(CleaveDialect::kGroupsAttrName, calls.groupsAttr());
  }
};

} // namespace
