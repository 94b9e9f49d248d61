//===- CudaKernelBuilder.cpp - Building one GPU kernel --------------------===//

#include "CudaKernelBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;
using namespace mlir::cleave;

static constexpr StringLiteral kKernelModule = "cleave_kernels";

Value mlir::cleave::viewRoot(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

SmallVector<Value> mlir::cleave::cloneGenericBody(OpBuilder &b,
                                                  linalg::GenericOp op,
                                                  ArrayRef<Value> ivs,
                                                  IRMapping &m) {
  Block &body = op.getRegion().front();
  for (Operation &inner : body.without_terminator()) {
    if (auto idx = dyn_cast<linalg::IndexOp>(inner))
      m.map(idx.getResult(), ivs[idx.getDim()]);
    else
      b.clone(inner, m);
  }
  SmallVector<Value> yields;
  for (Value v : body.getTerminator()->getOperands())
    yields.push_back(m.lookupOrDefault(v));
  return yields;
}

gpu::GPUModuleOp mlir::cleave::getOrCreateKernelModule(ModuleOp module) {
  if (auto existing = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModule))
    return existing;
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(module.getContext()));
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToEnd(module.getBody());
  return b.create<gpu::GPUModuleOp>(module.getLoc(), kKernelModule);
}

KernelBuilder::KernelBuilder(gpu::GPUModuleOp kernels, Operation *anchor,
                             StringRef name, int64_t blockSize)
    : anchor(anchor), blockSize(blockSize), builder(kernels.getContext()),
      location(anchor->getLoc()) {
  OpBuilder b(kernels.getBodyRegion());
  Block *body = kernels.getBody();
  if (!body->empty() && body->back().hasTrait<OpTrait::IsTerminator>())
    b.setInsertionPoint(body->getTerminator());
  else
    b.setInsertionPointToEnd(body);
  func = b.create<gpu::GPUFuncOp>(location, name,
                                  b.getFunctionType(TypeRange(), TypeRange()));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({int32_t(blockSize), 1, 1}));
  Block &entry = func.front();
  b.setInsertionPointToEnd(&entry);
  b.create<gpu::ReturnOp>(location);
  builder.setInsertionPoint(entry.getTerminator());
  // The first op of the body proper: clones of host values go before it.
  bodyStart = builder.create<arith::ConstantIndexOp>(location, blockSize);
}

Value KernelBuilder::threadId() {
  return builder.create<gpu::ThreadIdOp>(location, gpu::Dimension::x);
}

Value KernelBuilder::blockId() {
  return builder.create<gpu::BlockIdOp>(location, gpu::Dimension::x);
}

Value KernelBuilder::globalThreadId() {
  Value size = bodyStart->getResult(0);
  Value base = builder.create<arith::MulIOp>(location, blockId(), size);
  return builder.create<arith::AddIOp>(location, base, threadId());
}

void KernelBuilder::guardThreads(Value id, int64_t count) {
  Value bound = builder.create<arith::ConstantIndexOp>(location, count);
  Value inside = builder.create<arith::CmpIOp>(
      location, arith::CmpIPredicate::ult, id, bound);
  auto guard = builder.create<scf::IfOp>(location, inside,
                                         /*withElseRegion=*/false);
  builder.setInsertionPoint(guard.thenBlock()->getTerminator());
}

/// Whether a buffer can be a kernel argument under the bare-pointer calling
/// convention: static shape, strides and offset.
static bool isBarePointerCompatible(MemRefType type) {
  if (!type.hasStaticShape())
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(getStridesAndOffset(type, strides, offset)))
    return false;
  return !ShapedType::isDynamic(offset) &&
         llvm::none_of(strides, ShapedType::isDynamic);
}

Value KernelBuilder::cloneIntoKernel(Operation *op, Value result) {
  // Clones go to the start of the kernel (in the order they are asked for,
  // operands first) so that they dominate every use, whatever loop or guard
  // asked for them first.
  OpBuilder prologue(bodyStart);
  Operation *clone = prologue.clone(*op, mapping);
  for (auto [from, to] : llvm::zip(op->getResults(), clone->getResults()))
    mapping.map(from, to);
  return mapping.lookup(result);
}

FailureOr<Value> KernelBuilder::lookup(Value v) {
  if (Value mapped = mapping.lookupOrNull(v))
    return mapped;
  Operation *def = v.getDefiningOp();
  Type type = v.getType();
  auto cloneWithOperands = [&]() -> FailureOr<Value> {
    for (Value operand : def->getOperands())
      if (failed(lookup(operand)))
        return failure();
    return cloneIntoKernel(def, v);
  };
  if (def && def->hasTrait<OpTrait::ConstantLike>())
    return cloneIntoKernel(def, v);
  bool regionFree = def && def->getNumRegions() == 0;
  if (auto memref = dyn_cast<MemRefType>(type)) {
    if (regionFree && isa<ViewLikeOpInterface>(def) && isPure(def))
      return cloneWithOperands();
    if (!isBarePointerCompatible(memref))
      return anchor->emitError()
             << "cannot pass buffer of type " << memref
             << " to a GPU kernel: its shape, strides and offset must be "
                "static";
  } else if (type.isIntOrIndexOrFloat()) {
    auto load = dyn_cast_or_null<memref::LoadOp>(def);
    if (regionFree && (isPure(def) || (load && loadFilter && loadFilter(load))))
      return cloneWithOperands();
  } else {
    return anchor->emitError()
           << "cannot pass a value of type " << type << " to a GPU kernel";
  }
  BlockArgument arg = func.front().addArgument(type, v.getLoc());
  arguments.push_back(v);
  mapping.map(v, arg);
  return Value(arg);
}

gpu::LaunchFuncOp KernelBuilder::launch(int64_t gridSize) {
  SmallVector<Type> types;
  for (Value v : arguments)
    types.push_back(v.getType());
  func.setFunctionTypeAttr(
      TypeAttr::get(builder.getFunctionType(types, TypeRange())));
  OpBuilder host(anchor);
  auto constant = [&](int64_t v) {
    return host.create<arith::ConstantIndexOp>(location, v).getResult();
  };
  Value one = constant(1);
  return host.create<gpu::LaunchFuncOp>(
      location, func, gpu::KernelDim3{constant(gridSize), one, one},
      gpu::KernelDim3{constant(blockSize), one, one},
      /*dynamicSharedMemorySize=*/Value(), arguments);
}
