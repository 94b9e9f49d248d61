//===- CudaMapToGpu.cpp - Bufferized linalg ops to GPU kernels ------------===//
//
// Implements -cleave-cuda-map-to-gpu. See Passes.td for the contract and
// docs/cuda.md for the kernel shapes.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelBuilder.h"
#include "CudaPlan.h"
#include "cleave/Conversion/Passes.h"
#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"

#define DEBUG_TYPE "cleave-cuda-map-to-gpu"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVECUDAMAPTOGPUPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// How one operand is read or written along the vectorized dimension.
enum class Access {
  Scalar,  ///< Not a buffer (the value of a fill).
  Uniform, ///< The same element for every lane.
  Vector,  ///< Consecutive, aligned elements: one vector access.
  Gather,  ///< One scalar access per lane.
};

} // namespace

//===----------------------------------------------------------------------===//
// Emitting one kernel
//===----------------------------------------------------------------------===//

namespace {

/// Emits the body of the kernel of one generic under a plan.
class GenericEmitter {
public:
  GenericEmitter(linalg::GenericOp op, const Plan &plan, KernelBuilder &kb)
      : op(op), plan(plan), kb(kb), b(kb.body()), loc(kb.loc()) {
    for (OpOperand &operand : op->getOpOperands())
      access.push_back(classify(operand));
  }

  LogicalResult emit() {
    if (failed(captureBodyValues()))
      return failure();
    return plan.perBlock ? emitPerBlock() : emitPerThread();
  }

private:
  Access classify(OpOperand &operand) {
    if (!isa<MemRefType>(operand.get().getType()))
      return Access::Scalar;
    if (!plan.fast ||
        !op.getMatchingIndexingMap(&operand).isFunctionOfDim(*plan.fast))
      return Access::Uniform;
    if (plan.vector > 1 && isVectorizable(op, operand, *plan.fast, plan.vector))
      return Access::Vector;
    return plan.vector > 1 ? Access::Gather : Access::Uniform;
  }

  Value index(int64_t v) {
    return b.create<arith::ConstantIndexOp>(loc, v).getResult();
  }

  /// The loop indices of lane `lane`: `ivs` with lane added to the fast dim.
  SmallVector<Value> laneIvs(ArrayRef<Value> ivs, int64_t lane) {
    SmallVector<Value> out(ivs);
    if (lane > 0)
      out[*plan.fast] =
          b.create<arith::AddIOp>(loc, ivs[*plan.fast], index(lane));
    return out;
  }

  SmallVector<Value> indices(OpOperand &operand, ArrayRef<Value> ivs) {
    AffineMap map = op.getMatchingIndexingMap(&operand);
    SmallVector<Value> result;
    for (AffineExpr e : map.getResults()) {
      if (auto d = dyn_cast<AffineDimExpr>(e))
        result.push_back(ivs[d.getPosition()]);
      else if (auto c = dyn_cast<AffineConstantExpr>(e))
        result.push_back(index(c.getValue()));
      else
        result.push_back(b.create<affine::AffineApplyOp>(
            loc, AffineMap::get(map.getNumDims(), 0, e), ivs));
    }
    return result;
  }

  /// The value of `operand` for each lane at `ivs`.
  FailureOr<SmallVector<Value>> read(OpOperand &operand, ArrayRef<Value> ivs) {
    FailureOr<Value> source = kb.lookup(operand.get());
    if (failed(source))
      return failure();
    Access a = access[operand.getOperandNumber()];
    if (a == Access::Scalar)
      return SmallVector<Value>(plan.vector, *source);
    if (a == Access::Uniform) {
      Value v = b.create<memref::LoadOp>(loc, *source, indices(operand, ivs));
      return SmallVector<Value>(plan.vector, v);
    }
    SmallVector<Value> lanes;
    if (a == Access::Vector) {
      auto type = VectorType::get({plan.vector},
                                  getElementTypeOrSelf(source->getType()));
      Value v =
          b.create<vector::LoadOp>(loc, type, *source, indices(operand, ivs));
      for (int64_t l = 0; l < plan.vector; ++l)
        lanes.push_back(b.create<vector::ExtractOp>(loc, v, l));
      return lanes;
    }
    for (int64_t l = 0; l < plan.vector; ++l)
      lanes.push_back(b.create<memref::LoadOp>(
          loc, *source, indices(operand, laneIvs(ivs, l))));
    return lanes;
  }

  LogicalResult write(OpOperand &operand, ArrayRef<Value> ivs,
                      ArrayRef<Value> lanes) {
    FailureOr<Value> target = kb.lookup(operand.get());
    if (failed(target))
      return failure();
    if (access[operand.getOperandNumber()] == Access::Vector) {
      auto type = VectorType::get({plan.vector}, lanes[0].getType());
      Value v = b.create<vector::FromElementsOp>(loc, type, lanes);
      b.create<vector::StoreOp>(loc, v, *target, indices(operand, ivs));
      return success();
    }
    for (int64_t l = 0; l < int64_t(lanes.size()); ++l)
      b.create<memref::StoreOp>(loc, lanes[l], *target,
                                indices(operand, laneIvs(ivs, l)));
    return success();
  }

  /// Host values the body uses (scalars, tables read by gathers).
  LogicalResult captureBodyValues() {
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(op.getRegion(), captured);
    for (Value v : captured)
      if (failed(kb.lookup(v)))
        return failure();
    return success();
  }

  /// Clones the body for one element: `args` are the block arguments.
  SmallVector<Value> applyBody(ArrayRef<Value> ivs, ArrayRef<Value> args) {
    Block &body = op.getRegion().front();
    IRMapping &m = kb.getMapping();
    for (auto [arg, value] : llvm::zip(body.getArguments(), args))
      if (value)
        m.map(arg, value);
    return cloneGenericBody(b, op, ivs, m);
  }

  /// Reads every input (and the outputs whose current value the body uses
  /// when `withOutputs`); result[lane][operand].
  FailureOr<SmallVector<SmallVector<Value>>> readAll(ArrayRef<Value> ivs,
                                                     bool withOutputs) {
    SmallVector<SmallVector<Value>> perLane(plan.vector);
    Block &body = op.getRegion().front();
    for (OpOperand &operand : op->getOpOperands()) {
      bool isInput = op.isDpsInput(&operand);
      BlockArgument arg = body.getArgument(operand.getOperandNumber());
      if (!isInput && (!withOutputs || arg.use_empty())) {
        for (auto &lane : perLane)
          lane.push_back(Value());
        continue;
      }
      FailureOr<SmallVector<Value>> lanes = read(operand, ivs);
      if (failed(lanes))
        return failure();
      for (int64_t l = 0; l < plan.vector; ++l)
        perLane[l].push_back((*lanes)[l]);
    }
    return perLane;
  }

  /// Splits `linear` over `dims` (slowest first) into `ivs`; the fast dim
  /// counts groups of `plan.vector` elements.
  void decompose(Value linear, ArrayRef<unsigned> dims,
                 SmallVector<Value> &ivs) {
    for (unsigned d : llvm::reverse(dims)) {
      int64_t size = plan.ranges[d];
      bool fast = plan.fast && d == *plan.fast && !plan.perBlock;
      if (fast)
        size /= plan.vector;
      Value i = linear;
      if (d != dims.front())
        i = b.create<arith::RemUIOp>(loc, linear, index(size));
      if (fast && plan.vector > 1)
        i = b.create<arith::MulIOp>(loc, i, index(plan.vector));
      ivs[d] = i;
      if (d != dims.front())
        linear = b.create<arith::DivUIOp>(loc, linear, index(size));
    }
  }

  /// The reduction loops of a thread; `step` updates the accumulators at
  /// the given loop indices.
  using StepFn = function_ref<FailureOr<SmallVector<Value>>(
      ArrayRef<Value> ivs, ArrayRef<Value> accs)>;
  FailureOr<SmallVector<Value>>
  loopNest(ArrayRef<unsigned> dims, ArrayRef<Value> lbs, ArrayRef<Value> ubs,
           ArrayRef<Value> steps, SmallVector<Value> ivs, ValueRange accs,
           StepFn step) {
    bool failedStep = false;
    scf::LoopNest nest = scf::buildLoopNest(
        b, loc, lbs, ubs, steps, accs,
        [&](OpBuilder &nb, Location, ValueRange loopIvs, ValueRange iter) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          for (auto [d, iv] : llvm::zip(dims, loopIvs))
            ivs[d] = iv;
          SmallVector<Value> current(iter.begin(), iter.end());
          FailureOr<SmallVector<Value>> next = step(ivs, current);
          if (failed(next)) {
            failedStep = true;
            return scf::ValueVector(iter.begin(), iter.end());
          }
          return scf::ValueVector(next->begin(), next->end());
        });
    if (failedStep)
      return failure();
    return SmallVector<Value>(nest.results);
  }

  LogicalResult emitPerThread();
  LogicalResult emitPerBlock();

  linalg::GenericOp op;
  const Plan &plan;
  KernelBuilder &kb;
  OpBuilder &b;
  Location loc;
  SmallVector<Access> access;
};

LogicalResult GenericEmitter::emitPerThread() {
  Value gid = kb.globalThreadId();
  if (plan.blocks * plan.blockSize != plan.threads)
    kb.guardThreads(gid, plan.threads);
  SmallVector<Value> ivs(plan.ranges.size(), index(0));
  if (!plan.outer.empty())
    decompose(gid, plan.outer, ivs);
  unsigned numOutputs = op.getNumDpsInits();
  auto outputs = op.getDpsInitsMutable();
  if (plan.inner.empty()) {
    auto values = readAll(ivs, /*withOutputs=*/true);
    if (failed(values))
      return failure();
    SmallVector<SmallVector<Value>> results(numOutputs);
    for (int64_t l = 0; l < plan.vector; ++l) {
      SmallVector<Value> y = applyBody(laneIvs(ivs, l), (*values)[l]);
      for (unsigned k = 0; k < numOutputs; ++k)
        results[k].push_back(y[k]);
    }
    for (unsigned k = 0; k < numOutputs; ++k)
      if (failed(write(outputs[k], ivs, results[k])))
        return failure();
    return success();
  }
  // Reductions inside the thread, in loop order: accs[lane * K + k] starts
  // from the output's current value.
  SmallVector<Value> accs;
  SmallVector<SmallVector<Value>> init(numOutputs);
  for (unsigned k = 0; k < numOutputs; ++k) {
    if (Value filled = plan.inits[k]) {
      FailureOr<Value> value = kb.lookup(filled);
      if (failed(value))
        return failure();
      init[k].assign(plan.vector, *value);
      continue;
    }
    auto lanes = read(outputs[k], ivs);
    if (failed(lanes))
      return failure();
    init[k] = *lanes;
  }
  for (int64_t l = 0; l < plan.vector; ++l)
    for (unsigned k = 0; k < numOutputs; ++k)
      accs.push_back(init[k][l]);
  SmallVector<Value> lbs, ubs, steps;
  for (unsigned d : plan.inner) {
    lbs.push_back(index(0));
    ubs.push_back(index(plan.ranges[d]));
    steps.push_back(index(1));
  }
  auto step = [&](ArrayRef<Value> at,
                  ArrayRef<Value> acc) -> FailureOr<SmallVector<Value>> {
    auto values = readAll(at, /*withOutputs=*/false);
    if (failed(values))
      return failure();
    SmallVector<Value> next;
    for (int64_t l = 0; l < plan.vector; ++l) {
      SmallVector<Value> args = (*values)[l];
      for (unsigned k = 0; k < numOutputs; ++k)
        args[op.getNumDpsInputs() + k] = acc[l * numOutputs + k];
      llvm::append_range(next, applyBody(laneIvs(at, l), args));
    }
    return next;
  };
  auto final = loopNest(plan.inner, lbs, ubs, steps, ivs, accs, step);
  if (failed(final))
    return failure();
  for (unsigned k = 0; k < numOutputs; ++k) {
    SmallVector<Value> lanes;
    for (int64_t l = 0; l < plan.vector; ++l)
      lanes.push_back((*final)[l * numOutputs + k]);
    if (failed(write(outputs[k], ivs, lanes)))
      return failure();
  }
  return success();
}

LogicalResult GenericEmitter::emitPerBlock() {
  Value bid = kb.blockId();
  Value tid = kb.threadId();
  SmallVector<Value> ivs(plan.ranges.size(), index(0));
  if (!plan.outer.empty())
    decompose(bid, plan.outer, ivs);
  unsigned numOutputs = op.getNumDpsInits();
  SmallVector<Value> accs;
  for (auto [k, combiner] : llvm::enumerate(plan.combiners)) {
    Type type =
        op.getRegion().front().getArgument(op.getNumDpsInputs() + k).getType();
    TypedAttr neutral = *arith::getNeutralElement(combiner);
    accs.push_back(
        b.create<arith::ConstantOp>(loc, type, cast<TypedAttr>(neutral)));
  }
  // Outer reduction dims sequentially; the fast dim split over the threads,
  // `vector` elements at a time.
  SmallVector<Value> lbs, ubs, steps;
  for (unsigned d : plan.inner) {
    bool fast = d == *plan.fast;
    lbs.push_back(
        fast ? b.create<arith::MulIOp>(loc, tid, index(plan.vector)).getResult()
             : index(0));
    ubs.push_back(index(plan.ranges[d]));
    steps.push_back(index(fast ? plan.blockSize * plan.vector : 1));
  }
  auto step = [&](ArrayRef<Value> at,
                  ArrayRef<Value> acc) -> FailureOr<SmallVector<Value>> {
    auto values = readAll(at, /*withOutputs=*/false);
    if (failed(values))
      return failure();
    SmallVector<Value> current(acc);
    for (int64_t l = 0; l < plan.vector; ++l) {
      SmallVector<Value> args = (*values)[l];
      for (unsigned k = 0; k < numOutputs; ++k)
        args[op.getNumDpsInputs() + k] = current[k];
      current = applyBody(laneIvs(at, l), args);
    }
    return current;
  };
  auto partial = loopNest(plan.inner, lbs, ubs, steps, ivs, accs, step);
  if (failed(partial))
    return failure();
  SmallVector<Value> reduced;
  for (auto [k, value] : llvm::enumerate(*partial))
    reduced.push_back(b.create<gpu::AllReduceOp>(
        loc, value,
        gpu::AllReduceOperationAttr::get(b.getContext(), plan.kinds[k]),
        /*uniform=*/true));
  // Thread 0 folds in the output's initial value and stores.
  Value first =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, tid, index(0));
  auto ifFirst = b.create<scf::IfOp>(loc, first, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifFirst.thenBlock()->getTerminator());
  Block &body = op.getRegion().front();
  for (unsigned k = 0; k < numOutputs; ++k) {
    OpOperand &out = op.getDpsInitsMutable()[k];
    FailureOr<Value> target = kb.lookup(out.get());
    if (failed(target))
      return failure();
    SmallVector<Value> at = indices(out, ivs);
    Value init;
    if (Value filled = plan.inits[k]) {
      FailureOr<Value> value = kb.lookup(filled);
      if (failed(value))
        return failure();
      init = *value;
    } else {
      init = b.create<memref::LoadOp>(loc, *target, at);
    }
    Operation *combiner = plan.combiners[k];
    IRMapping m;
    BlockArgument outArg = body.getArgument(op.getNumDpsInputs() + k);
    for (Value operand : combiner->getOperands())
      m.map(operand, operand == outArg ? init : reduced[k]);
    Value result = b.clone(*combiner, m)->getResult(0);
    b.create<memref::StoreOp>(loc, result, *target, at);
  }
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

/// Whether every use of `buffer` (through views) only reads it.
bool isOnlyRead(Value buffer) {
  for (OpOperand &use : buffer.getUses()) {
    Operation *user = use.getOwner();
    if (isa<memref::LoadOp>(user))
      continue;
    if (auto view = dyn_cast<ViewLikeOpInterface>(user)) {
      if (!isOnlyRead(view->getResult(0)))
        return false;
      continue;
    }
    if (auto copy = dyn_cast<memref::CopyOp>(user)) {
      if (use.get() == copy.getTarget())
        return false;
      continue;
    }
    auto linalgOp = dyn_cast<linalg::LinalgOp>(user);
    if (!linalgOp || !linalgOp.isDpsInput(&use))
      return false;
  }
  return true;
}

/// The ops that use `buffer` (through views), split into writers and
/// readers.
void collectAccesses(Value buffer, SmallVectorImpl<Operation *> &writers,
                     SmallVectorImpl<Operation *> &readers) {
  for (OpOperand &use : buffer.getUses()) {
    Operation *user = use.getOwner();
    if (auto view = dyn_cast<ViewLikeOpInterface>(user)) {
      collectAccesses(view->getResult(0), writers, readers);
      continue;
    }
    if (isa<memref::DeallocOp>(user))
      continue; // the end of the buffer's life, not an access
    bool read = isa<memref::LoadOp>(user);
    if (auto copy = dyn_cast<memref::CopyOp>(user))
      read = use.get() != copy.getTarget();
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(user))
      read = linalgOp.isDpsInput(&use);
    (read ? readers : writers).push_back(user);
  }
}

/// Whether `alloc` is written only by ops at the top of `func`'s body that
/// all come before every read of it. A kernel may then load its elements
/// itself at any later point (kernels run in program order on one stream):
/// the index buffer of a scatter that a copy kernel filled first, such as
/// the sequence-parallel slice of the tokens that the embedding's gradient
/// scatters by.
bool isFrozenBeforeReads(Value alloc, func::FuncOp func) {
  SmallVector<Operation *> writers, readers;
  collectAccesses(alloc, writers, readers);
  Block &body = func.getBody().front();
  Operation *lastWrite = nullptr;
  for (Operation *w : writers) {
    if (w->getBlock() != &body)
      return false;
    if (!lastWrite || lastWrite->isBeforeInBlock(w))
      lastWrite = w;
  }
  for (Operation *r : readers) {
    Operation *top = body.findAncestorOpInBlock(*r);
    if (!top || (lastWrite && !lastWrite->isBeforeInBlock(top)))
      return false;
  }
  return true;
}

/// A copy generic replacing `memref.copy` (so that it becomes a kernel).
void replaceCopy(memref::CopyOp copy) {
  OpBuilder b(copy);
  auto type = cast<MemRefType>(copy.getTarget().getType());
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  b.create<linalg::GenericOp>(copy.getLoc(), copy.getSource(), copy.getTarget(),
                              ArrayRef<AffineMap>{id, id}, iterators,
                              [](OpBuilder &nb, Location loc, ValueRange args) {
                                nb.create<linalg::YieldOp>(loc, args[0]);
                              });
  copy.erase();
}

/// The scalar a fill generic writes into every element of its output.
Value fillValue(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() != 0 ||
      !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity())
    return nullptr;
  Value in = op.getDpsInputOperand(0)->get();
  Block &body = op.getRegion().front();
  if (isa<ShapedType>(in.getType()) || body.getOperations().size() != 1 ||
      body.getTerminator()->getOperand(0) != body.getArgument(0))
    return nullptr;
  return in;
}

/// Folds the fills that initialize the outputs of a reduction into it: the
/// kernel starts from the value instead of reading it (one kernel, one pass
/// over the output less). A fill counts when only side-effect-free ops lie
/// between it and the reduction. Returns the value per output (or null).
SmallVector<Value> foldInitFills(linalg::GenericOp op) {
  SmallVector<Value> inits(op.getNumDpsInits());
  if (op.getNumReductionLoops() == 0)
    return inits;
  for (Operation *prev = op->getPrevNode(); prev;) {
    Operation *before = prev->getPrevNode();
    auto fill = dyn_cast<linalg::GenericOp>(prev);
    Value value = fill ? fillValue(fill) : Value();
    if (!value) {
      if (!isPure(prev))
        break;
      prev = before;
      continue;
    }
    // A fill of anything but one of the outputs ends the search.
    Value target = fill.getDpsInitOperand(0)->get();
    auto outputs = op.getDpsInitsMutable();
    auto it = llvm::find_if(outputs, [&](OpOperand &init) {
      return init.get() == target &&
             !inits[init.getOperandNumber() - op.getNumDpsInputs()];
    });
    if (it == outputs.end())
      break;
    inits[it->getOperandNumber() - op.getNumDpsInputs()] = value;
    fill.erase();
    prev = before;
  }
  return inits;
}

const char *kindName(const Plan &plan) {
  if (plan.perBlock)
    return "block_reduce";
  return plan.inner.empty() ? "ew" : "thread_reduce";
}

struct CleaveCudaMapToGpuPass final
    : cleave::impl::CleaveCudaMapToGpuPassBase<CleaveCudaMapToGpuPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (blockSize < 32 || blockSize > 1024 || blockSize % 32 != 0) {
      module.emitError() << "block-size " << int64_t(blockSize)
                         << " is not a multiple of 32 in [32, 1024]";
      return signalPassFailure();
    }
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (!func.isExternal() && failed(mapFunction(func)))
        return signalPassFailure();
  }

  LogicalResult mapFunction(func::FuncOp func) {
    if (failed(generalize(func)))
      return failure();
    DenseSet<Value> readOnly;
    for (BlockArgument arg : func.getArguments())
      if (isa<MemRefType>(arg.getType()) && isOnlyRead(arg))
        readOnly.insert(arg);
    func.walk([&](memref::AllocOp alloc) {
      if (isFrozenBeforeReads(alloc, func))
        readOnly.insert(alloc);
    });
    // Sequential loops over elementwise kernels (the embedding's gradient
    // scatter) become one kernel each.
    gpu::GPUModuleOp kernels;
    auto kernelModule = [&]() {
      if (!kernels)
        kernels = getOrCreateKernelModule(func->getParentOfType<ModuleOp>());
      return kernels;
    };
    SmallVector<scf::ForOp> loops;
    func.walk([&](scf::ForOp loop) { loops.push_back(loop); });
    for (scf::ForOp loop : loops) {
      std::string name =
          (func.getName() + "_k" + Twine(counter) + "_loop").str();
      FailureOr<bool> mapped =
          mapSerialLoop(loop, kernelModule, name, blockSize, [&](Value buffer) {
            return readOnly.contains(buffer);
          });
      if (failed(mapped))
        return failure();
      counter += *mapped;
    }
    // Fills that initialize reductions go into the reductions' kernels.
    SmallVector<linalg::GenericOp> reductions;
    func.walk([&](linalg::GenericOp op) {
      if (op.getNumReductionLoops() > 0)
        reductions.push_back(op);
    });
    DenseMap<Operation *, SmallVector<Value>> inits;
    for (linalg::GenericOp op : reductions)
      inits[op] = foldInitFills(op);
    for (linalg::GenericOp op : reductions)
      splitIfNarrow(op, inits);
    SmallVector<linalg::GenericOp> generics;
    func.walk([&](linalg::GenericOp op) { generics.push_back(op); });
    for (linalg::GenericOp op : generics) {
      SmallVector<Value> init = inits.lookup(op);
      init.resize(op.getNumDpsInits());
      if (failed(mapGeneric(op, kernelModule(), readOnly, init)))
        return failure();
    }
    eraseDeadHostOps(func);
    return checkHost(func);
  }

  /// Named linalg ops become generics and copies become copy generics.
  LogicalResult generalize(func::FuncOp func) {
    SmallVector<linalg::LinalgOp> named;
    func.walk([&](linalg::LinalgOp op) {
      if (!isa<linalg::GenericOp>(op))
        named.push_back(op);
    });
    IRRewriter rewriter(func.getContext());
    for (linalg::LinalgOp op : named) {
      rewriter.setInsertionPoint(op);
      if (failed(linalg::generalizeNamedOp(rewriter, op)))
        return op.emitError("cannot turn this op into a GPU kernel");
    }
    SmallVector<memref::CopyOp> copies;
    func.walk([&](memref::CopyOp op) { copies.push_back(op); });
    for (memref::CopyOp copy : copies)
      replaceCopy(copy);
    return success();
  }

  LogicalResult mapGeneric(linalg::GenericOp op, gpu::GPUModuleOp kernels,
                           const DenseSet<Value> &readOnly,
                           ArrayRef<Value> inits) {
    if (!op.hasPureBufferSemantics())
      return op.emitError("expected a bufferized linalg op");
    if (llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic))
      return op.emitError("GPU kernels need static loop ranges");
    Plan plan = makePlan(op, blockSize, vectorBits);
    plan.inits.assign(inits.begin(), inits.end());
    auto func = op->getParentOfType<func::FuncOp>();
    std::string name =
        (func.getName() + "_k" + Twine(counter++) + "_" + kindName(plan)).str();
    KernelBuilder kb(kernels, op, name, plan.blockSize);
    kb.setLoadFilter([&](memref::LoadOp load) {
      return readOnly.contains(viewRoot(load.getMemRef()));
    });
    GenericEmitter emitter(op, plan, kb);
    if (failed(emitter.emit()))
      return failure();
    kb.launch(plan.blocks);
    op.erase();
    return success();
  }

  /// A reduction that one thread per output would run on fewer than
  /// kMinThreads threads becomes two (partial folds, then their fold).
  void splitIfNarrow(linalg::GenericOp op,
                     DenseMap<Operation *, SmallVector<Value>> &inits) {
    constexpr int64_t kMinThreads = 16384;
    Plan plan = makePlan(op, blockSize, vectorBits);
    if (plan.perBlock || plan.threads >= kMinThreads)
      return;
    SmallVector<Value> init = inits.lookup(op);
    Operation *original = op;
    auto split = splitReduction(op, kMinThreads * plan.vector);
    if (failed(split))
      return;
    inits.erase(original);
    inits[split->second] = init;
    // The partials start from the combiners' neutral elements.
    OpBuilder b(split->first);
    SmallVector<Value> neutral;
    // Keep the folds alive: a range over a member of a temporary dangles.
    std::optional<Folds> folds = matchFolds(split->first);
    for (Operation *combiner : folds->combiners)
      neutral.push_back(b.create<arith::ConstantOp>(
          split->first.getLoc(), *arith::getNeutralElement(combiner)));
    inits[split->first] = neutral;
  }

  /// Host computations whose only users were kernel bodies are dead now.
  static void eraseDeadHostOps(func::FuncOp func) {
    bool changed = true;
    while (changed) {
      changed = false;
      func.walk<WalkOrder::PostOrder>([&](Operation *op) {
        if (op->use_empty() && op->getNumRegions() == 0 &&
            !op->hasTrait<OpTrait::IsTerminator>() &&
            (isPure(op) || isa<memref::LoadOp>(op))) {
          op->erase();
          changed = true;
        }
      });
    }
  }

  /// Host code must not touch device memory any more.
  static LogicalResult checkHost(func::FuncOp func) {
    WalkResult result = func.walk([](Operation *op) {
      if (isa<memref::LoadOp, memref::StoreOp, memref::CopyOp,
              linalg::LinalgOp>(op)) {
        op->emitError("host code would access device memory here: this op "
                      "could not be moved into a GPU kernel");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }

  int64_t counter = 0;
};

} // namespace
