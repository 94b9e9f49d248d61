//===- PipelineBuild.cpp - The functions of a pipelined program -----------===//
//
// One private function per (pass kind, stage) holds the ops of one
// micro-batch's pass; one public function per pipeline rank runs, in order:
//
//   prologue  the step-invariant ops of its stages (program order), sending
//             parameters and invariants other ranks read;
//   main      its passes in schedule order (calls), with the sends and
//             receives of per-micro-batch values between them
//             (orderEvents), summing what the step reads over micro-batches;
//   epilogue  the per-step ops of its stages (program order): reductions of
//             the sums, optimizer updates; then the loss, summed over the
//             pipeline so that every rank returns it.
//
// Prologue and epilogue transfers follow program order on every rank, so
// with the main part they form one global order of transfers.
//
//===----------------------------------------------------------------------===//

#include "Pipeline.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

#include <map>

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::pipeline;

namespace {

using GroupKey = std::pair<Phase, int64_t>;

struct ValueLess {
  bool operator()(const std::pair<Value, int64_t> &x,
                  const std::pair<Value, int64_t> &y) const {
    if (x.first != y.first)
      return x.first.getAsOpaquePointer() < y.first.getAsOpaquePointer();
    return x.second < y.second;
  }
};

/// The function of one pipeline rank while it is being built.
struct RankFunction {
  func::FuncOp func;
  OpBuilder builder;
  /// Step-level values (arguments, invariants, per-step values, and the
  /// sums over micro-batches, keyed by the per-micro-batch value).
  IRMapping step;
  /// Per-micro-batch values.
  std::map<std::pair<Value, int64_t>, Value, ValueLess> perMb;
  DenseMap<Value, Value> mbArgs;
  /// Positions of micro-batches, by axes of the axis_index and micro-batch.
  DenseMap<std::pair<Attribute, int64_t>, Value> microBatchIndices;

  explicit RankFunction(MLIRContext *ctx) : builder(ctx) {}
};

class PipelineBuilder {
public:
  PipelineBuilder(const Analysis &a, const PassGroups &groups,
                  const std::vector<std::vector<Event>> &events)
      : a(a), plan(a.plan), groups(groups), events(events), func(a.func),
        module(func->getParentOfType<ModuleOp>()), ctx(func.getContext()) {}
  /// Builds the rank functions and erases the step; returns the rank
  /// functions' names, by pipeline rank.
  FailureOr<SmallVector<Attribute>> run();

private:
  int64_t rankOfStage(int64_t s) const { return plan.rankOf(s); }
  StringRef kindLetter(Phase r) const {
    return r == Phase::Forward ? "f" : r == Phase::Backward ? "b" : "w";
  }
  /// Clones a constant or an invariant rebuilt in passes (and the constants
  /// and rebuilt invariants it reads) where `b` builds.
  Value materialize(OpBuilder &b, IRMapping &map, Value v);
  void createPassFunctions();
  void createRankFunctions();
  /// Ranks other than `home` whose ops read the step-level value `v`.
  SmallVector<int64_t> readersOf(Value v, int64_t home);
  void transfer(Value v, int64_t from, ArrayRef<int64_t> to,
                function_ref<Value(RankFunction &)> source,
                function_ref<void(RankFunction &, Value)> sink);
  void emitPrologue();
  LogicalResult emitMain(int64_t rank);
  void emitStepOp(Operation *op);
  void emitEpilogue();
  void emitReturns();
  Value sliceMicroBatch(RankFunction &rf, Value arg, int64_t mb);
  /// How many blocks the axes after `mb` split a micro-batch of argument
  /// `i` into.
  int64_t minorBlocks(unsigned i) const {
    int64_t blocks = 1;
    for (StringRef axis : a.argMinorAxes[i])
      blocks *= a.mesh.getAxisSize(axis);
    return blocks;
  }
  /// Emits a sum over micro-batches of their data alone
  /// (Analysis::dataReductions) into `rf`'s prologue.
  void emitDataReduction(RankFunction &rf, AllReduceOp reduce);
  /// The value of `index` (an axis_index naming the micro-batch axis) for
  /// micro-batch `mb` on this device.
  Value microBatchIndex(RankFunction &rf, AxisIndexOp index, int64_t mb);

  const Analysis &a;
  const Plan &plan;
  const PassGroups &groups;
  const std::vector<std::vector<Event>> &events;
  func::FuncOp func;
  ModuleOp module;
  MLIRContext *ctx;
  std::map<GroupKey, func::FuncOp> passFunctions;
  std::vector<std::unique_ptr<RankFunction>> ranks;
};

Value PipelineBuilder::materialize(OpBuilder &b, IRMapping &map, Value v) {
  if (Value known = map.lookupOrNull(v))
    return known;
  Operation *def = v.getDefiningOp();
  assert(def &&
         (a.region.lookup(def) == Phase::Const ||
          a.rebuiltInPasses.contains(def)) &&
         "neither a constant nor rebuilt in passes");
  for (Value operand : def->getOperands())
    materialize(b, map, operand);
  Operation *clone = b.clone(*def, map);
  clone->removeAttr(CleaveDialect::kStageAttrName);
  return map.lookup(v);
}

void PipelineBuilder::createPassFunctions() {
  OpBuilder b(ctx);
  b.setInsertionPoint(func);
  for (auto &[key, g] : groups) {
    // A pass without ops (the backward passes of a forward-only step, a
    // stage without layers) is neither built nor called.
    if (g.ops.empty())
      continue;
    SmallVector<Type> inputs, outputs;
    for (Value v : g.inputs)
      inputs.push_back(v.getType());
    for (Value v : g.outputs)
      outputs.push_back(v.getType());
    std::string name = (func.getName() + "_" + kindLetter(key.first) +
                        std::to_string(key.second))
                           .str();
    auto fn = b.create<func::FuncOp>(func.getLoc(), name,
                                     b.getFunctionType(inputs, outputs));
    fn.setPrivate();
    Block *body = fn.addEntryBlock();
    OpBuilder inner = OpBuilder::atBlockEnd(body);
    IRMapping map;
    for (auto [v, arg] : llvm::zip(g.inputs, body->getArguments()))
      map.map(v, arg);
    for (Operation *op : g.ops) {
      for (Value operand : op->getOperands())
        if (!map.contains(operand))
          materialize(inner, map, operand);
      inner.clone(*op, map)->removeAttr(CleaveDialect::kStageAttrName);
    }
    SmallVector<Value> results;
    for (Value v : g.outputs)
      results.push_back(map.lookup(v));
    inner.create<func::ReturnOp>(func.getLoc(), results);
    passFunctions[key] = fn;
  }
}

/// The layout of a per-micro-batch argument without the micro-batch axis
/// and the axes after it in the first dimension (`minor`): the block of all
/// micro-batches of one data-parallel replica. [dp, mb] and [dp, mb, ep]
/// both give [dp]; under ep each device reads its replica's micro-batches
/// whole and keeps its ep block of each (sliceMicroBatch).
static ShardingAttr withoutMicroBatches(ShardingAttr layout, StringRef axis,
                                        ArrayRef<StringRef> minor) {
  SmallVector<SmallVector<StringRef>> dims;
  for (unsigned d = 0, e = layout.getRank(); d < e; ++d) {
    dims.push_back(layout.getDimAxes(d));
    llvm::erase(dims.back(), axis);
    if (d == 0)
      for (StringRef m : minor)
        llvm::erase(dims.back(), m);
  }
  return ShardingAttr::get(layout.getContext(), layout.getMesh().getValue(),
                           dims);
}

void PipelineBuilder::createRankFunctions() {
  Operation *ret = func.getBody().front().getTerminator();
  OpBuilder b(ctx);
  b.setInsertionPoint(func);
  // The data a sum over micro-batches' data reads is needed where the sum
  // runs (emitDataReduction).
  DenseSet<std::pair<Value, int64_t>> readByDataReduction;
  for (auto &[reduce, slice] : a.dataReductions)
    for (Operation *op : slice)
      for (Value v : op->getOperands())
        if (isa<BlockArgument>(v))
          readByDataReduction.insert({v, rankOfStage(a.stage.lookup(reduce))});
  for (int64_t r = 0; r < plan.pp; ++r) {
    auto rf = std::make_unique<RankFunction>(ctx);
    SmallVector<Type> argTypes, resultTypes;
    SmallVector<DictionaryAttr> argAttrs, resultAttrs;
    SmallVector<BlockArgument> kept;
    for (BlockArgument arg : func.getArguments()) {
      unsigned i = arg.getArgNumber();
      bool here;
      if (a.argStage[i] >= 0) {
        here = rankOfStage(a.argStage[i]) == r;
      } else {
        here = llvm::any_of(arg.getUses(), [&](OpOperand &use) {
          Operation *user = use.getOwner();
          if (user == ret)
            return rankOfStage(a.resultStage[use.getOperandNumber()]) == r;
          return a.stage.count(user) && rankOfStage(a.stage.lookup(user)) == r;
        });
        here |= readByDataReduction.contains({Value(arg), r});
      }
      if (!here)
        continue;
      kept.push_back(arg);
      auto type = cast<RankedTensorType>(arg.getType());
      NamedAttrList attrs(func.getArgAttrDict(i));
      if (a.argPerMicroBatch[i]) {
        SmallVector<int64_t> shape(type.getShape());
        shape[0] *= plan.numMicroBatches * minorBlocks(i);
        type = RankedTensorType::get(shape, type.getElementType());
        attrs.set(CleaveDialect::kLayoutAttrName,
                  withoutMicroBatches(func.getArgAttrOfType<ShardingAttr>(
                                          i, CleaveDialect::kLayoutAttrName),
                                      plan.mbAxis, a.argMinorAxes[i]));
      }
      argTypes.push_back(type);
      argAttrs.push_back(attrs.getDictionary(ctx));
    }
    for (unsigned j = 0, e = func.getNumResults(); j < e; ++j)
      if (j == a.lossResult || rankOfStage(a.resultStage[j]) == r) {
        resultTypes.push_back(func.getResultTypes()[j]);
        resultAttrs.push_back(func.getResultAttrDict(j));
      }
    std::string name = (func.getName() + "_s" + std::to_string(r)).str();
    rf->func = b.create<func::FuncOp>(func.getLoc(), name,
                                      b.getFunctionType(argTypes, resultTypes));
    rf->func.setAllArgAttrs(argAttrs);
    rf->func.setAllResultAttrs(resultAttrs);
    Block *body = rf->func.addEntryBlock();
    rf->builder.setInsertionPointToEnd(body);
    for (auto [arg, local] : llvm::zip(kept, body->getArguments())) {
      if (a.argPerMicroBatch[arg.getArgNumber()])
        rf->mbArgs[arg] = local;
      else
        rf->step.map(Value(arg), Value(local));
    }
    ranks.push_back(std::move(rf));
  }
}

SmallVector<int64_t> PipelineBuilder::readersOf(Value v, int64_t home) {
  Operation *ret = func.getBody().front().getTerminator();
  SmallVector<int64_t> readers;
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    int64_t r;
    if (a.rebuiltInPasses.contains(user)) {
      // The passes that read the rebuilt op read `v` in its place.
      for (int64_t other : readersOf(user->getResult(0), home))
        if (!llvm::is_contained(readers, other))
          readers.push_back(other);
      r = rankOfStage(a.stage.lookup(user));
    } else if (user == ret)
      r = rankOfStage(a.resultStage[use.getOperandNumber()]);
    else if (a.stage.count(user))
      r = rankOfStage(a.stage.lookup(user));
    else
      continue; // a constant never reads a non-constant
    if (r != home && !llvm::is_contained(readers, r))
      readers.push_back(r);
  }
  llvm::sort(readers);
  return readers;
}

void PipelineBuilder::transfer(Value v, int64_t from, ArrayRef<int64_t> to,
                               function_ref<Value(RankFunction &)> source,
                               function_ref<void(RankFunction &, Value)> sink) {
  StringRef mesh = a.mesh.getSymName();
  ArrayAttr axes = OpBuilder(ctx).getStrArrayAttr({plan.ppAxis});
  for (int64_t d : to) {
    RankFunction &src = *ranks[from], &dst = *ranks[d];
    Value local = source(src);
    src.builder.create<SendOp>(v.getLoc(), local, mesh, axes, d);
    Value received = dst.builder.create<RecvOp>(v.getLoc(), local.getType(),
                                                mesh, axes, from);
    sink(dst, received);
  }
}

void PipelineBuilder::emitPrologue() {
  auto sendStep = [&](Value v, int64_t home) {
    transfer(
        v, home, readersOf(v, home),
        [&](RankFunction &rf) { return rf.step.lookup(v); },
        [&](RankFunction &rf, Value got) { rf.step.map(v, got); });
  };
  for (BlockArgument arg : func.getArguments())
    if (a.argStage[arg.getArgNumber()] >= 0)
      sendStep(arg, rankOfStage(a.argStage[arg.getArgNumber()]));
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (a.region.lookup(&op) != Phase::Invariant)
      continue;
    // Read by passes only: each pass rebuilds it.
    if (a.rebuiltInPasses.contains(&op) &&
        llvm::all_of(op.getUsers(), [&](Operation *user) {
          return a.rebuiltInPasses.contains(user) ||
                 isPerMicroBatch(a.region.lookup(user));
        }))
      continue;
    int64_t home = rankOfStage(a.stage.lookup(&op));
    RankFunction &rf = *ranks[home];
    if (a.dataReductions.count(&op)) {
      emitDataReduction(rf, cast<AllReduceOp>(op));
      sendStep(op.getResult(0), home);
      continue;
    }
    for (Value v : op.getOperands())
      if (!rf.step.contains(v))
        materialize(rf.builder, rf.step, v);
    rf.builder.clone(op, rf.step)->removeAttr(CleaveDialect::kStageAttrName);
    for (Value v : op.getResults())
      sendStep(v, home);
  }
}

void PipelineBuilder::emitDataReduction(RankFunction &rf, AllReduceOp reduce) {
  // The sum over micro-batches, here: its ops on each micro-batch's data in
  // turn (micro-batch order, as the accumulation), then the rest of the
  // reduction's axes.
  Value total;
  for (int64_t mb = 0; mb < plan.numMicroBatches; ++mb) {
    IRMapping map;
    for (Operation *op : a.dataReductions.lookup(reduce)) {
      for (Value v : op->getOperands())
        if (auto arg = dyn_cast<BlockArgument>(v))
          map.map(v, sliceMicroBatch(rf, v, mb));
      rf.builder.clone(*op, map)->removeAttr(CleaveDialect::kStageAttrName);
    }
    Value part = map.lookup(reduce.getInput());
    total =
        total
            ? rf.builder.create<AddOp>(reduce.getLoc(), total, part).getResult()
            : part;
  }
  SmallVector<StringRef> rest = reduce.getAxisNames();
  llvm::erase(rest, plan.mbAxis);
  if (!rest.empty())
    total = rf.builder.create<AllReduceOp>(
        reduce.getLoc(), total, reduce.getMesh(),
        rf.builder.getStrArrayAttr(rest), reduce.getReduction());
  rf.step.map(reduce.getResult(), total);
}

Value PipelineBuilder::sliceMicroBatch(RankFunction &rf, Value arg,
                                       int64_t mb) {
  Value &slot = rf.perMb[{arg, mb}];
  if (slot)
    return slot;
  // The micro-batch of the replica's block, then (axes after `mb`) this
  // device's block of it.
  auto type = cast<RankedTensorType>(arg.getType());
  unsigned i = cast<BlockArgument>(arg).getArgNumber();
  SmallVector<int64_t> offsets(type.getRank(), 0), strides(type.getRank(), 1),
      shape(type.getShape());
  shape[0] *= minorBlocks(i);
  offsets[0] = mb * shape[0];
  Value slice = rf.builder.create<SliceOp>(arg.getLoc(), rf.mbArgs.lookup(arg),
                                           offsets, shape, strides);
  if (!a.argMinorAxes[i].empty())
    slice = rf.builder.create<ShardOp>(
        arg.getLoc(), type, slice, a.mesh.getSymName(),
        rf.builder.getStrArrayAttr(a.argMinorAxes[i]), 0);
  // A buffer of its own: bufferized, the slice is a view at an offset, which
  // a call (identity layouts at function boundaries) cannot take.
  slot = rf.builder.create<bufferization::AllocTensorOp>(arg.getLoc(), type,
                                                         ValueRange(), slice);
  return slot;
}

Value PipelineBuilder::microBatchIndex(RankFunction &rf, AxisIndexOp index,
                                       int64_t mb) {
  Value &slot = rf.microBatchIndices[{index.getAxes(), mb}];
  if (slot)
    return slot;
  // The linear index over `axes` (major first) with the micro-batch axis at
  // coordinate mb: before * (M * after) + mb * after + the axes after it.
  OpBuilder &b = rf.builder;
  Location loc = index.getLoc();
  SmallVector<StringRef> axes = index.getAxisNames(), before, after;
  auto at = llvm::find(axes, plan.mbAxis);
  before.assign(axes.begin(), at);
  after.assign(std::next(at), axes.end());
  int64_t afterSize = 1;
  for (StringRef axis : after)
    afterSize *= a.mesh.getAxisSize(axis);
  auto scalarType = RankedTensorType::get({}, b.getI64Type());
  auto indexOf = [&](ArrayRef<StringRef> names) -> Value {
    Value i = b.create<AxisIndexOp>(loc, scalarType, index.getMeshAttr(),
                                    b.getStrArrayAttr(names));
    return b.create<tensor::ExtractOp>(loc, i, ValueRange());
  };
  Value linear =
      b.create<arith::ConstantIntOp>(loc, mb * afterSize, b.getI64Type());
  if (!before.empty()) {
    Value stride = b.create<arith::ConstantIntOp>(
        loc, plan.numMicroBatches * afterSize, b.getI64Type());
    linear = b.create<arith::AddIOp>(
        loc, linear, b.create<arith::MulIOp>(loc, indexOf(before), stride));
  }
  if (!after.empty())
    linear = b.create<arith::AddIOp>(loc, linear, indexOf(after));
  slot = b.create<tensor::FromElementsOp>(loc, scalarType, linear);
  return slot;
}

LogicalResult PipelineBuilder::emitMain(int64_t rank) {
  RankFunction &rf = *ranks[rank];
  StringRef mesh = a.mesh.getSymName();
  ArrayAttr axes = rf.builder.getStrArrayAttr({plan.ppAxis});
  for (const Event &e : events[rank]) {
    int64_t mb = e.pass.microBatch;
    if (e.kind == Event::Kind::Send) {
      rf.builder.create<SendOp>(e.value.getLoc(), rf.perMb.at({e.value, mb}),
                                mesh, axes, e.peer);
      continue;
    }
    if (e.kind == Event::Kind::Recv) {
      rf.perMb[{e.value, mb}] = rf.builder.create<RecvOp>(
          e.value.getLoc(), e.value.getType(), mesh, axes, e.peer);
      continue;
    }
    GroupKey key{phaseOf(e.pass.kind), e.pass.chunk * plan.pp + rank};
    const PassGroup &g = groups.find(key)->second;
    if (g.ops.empty())
      continue;
    SmallVector<Value> operands;
    for (Value v : g.inputs) {
      if (auto arg = dyn_cast<BlockArgument>(v);
          arg && a.argPerMicroBatch[arg.getArgNumber()])
        operands.push_back(sliceMicroBatch(rf, v, mb));
      else if (Operation *def = v.getDefiningOp();
               def && a.microBatchIndices.contains(def))
        operands.push_back(microBatchIndex(rf, cast<AxisIndexOp>(def), mb));
      else if (a.isPerMicroBatchValue(v))
        operands.push_back(rf.perMb.at({v, mb}));
      else
        operands.push_back(rf.step.lookup(v));
    }
    std::string what =
        (kindLetter(key.first).upper() + " mb=" + std::to_string(mb) +
         " stage=" + std::to_string(key.second));
    Location loc = NameLoc::get(StringAttr::get(ctx, what), func.getLoc());
    auto call =
        rf.builder.create<func::CallOp>(loc, passFunctions[key], operands);
    for (auto [v, result] : llvm::zip(g.outputs, call.getResults())) {
      rf.perMb[{v, mb}] = result;
      if (!a.accumulated.contains(v))
        continue;
      // Sums over micro-batches, in micro-batch order, each right after its
      // micro-batch: the barrier keeps cleave-fuse-elementwise from making
      // the chain of adds one op after the last micro-batch, which would
      // keep every micro-batch's gradients alive until then (memory growing
      // with the micro-batch count instead of one accumulator).
      if (Value sum = rf.step.lookupOrNull(v)) {
        Value added = rf.builder.create<AddOp>(v.getLoc(), sum, result);
        rf.step.map(
            v, rf.builder.create<OptimizationBarrierOp>(v.getLoc(), added));
      } else
        rf.step.map(v, result);
    }
  }
  return success();
}

void PipelineBuilder::emitStepOp(Operation *op) {
  int64_t home = rankOfStage(a.stage.lookup(op));
  RankFunction &rf = *ranks[home];
  for (Value v : op->getOperands())
    if (!rf.step.contains(v))
      materialize(rf.builder, rf.step, v);
  auto reduce = dyn_cast<AllReduceOp>(op);
  if (reduce && plan.hasMbAxis &&
      llvm::is_contained(reduce.getAxisNames(), plan.mbAxis)) {
    // The sum over micro-batches is the accumulation; reduce the rest.
    SmallVector<StringRef> rest = reduce.getAxisNames();
    llvm::erase(rest, plan.mbAxis);
    Value input = rf.step.lookup(reduce.getInput());
    Value result = input;
    if (!rest.empty())
      result = rf.builder.create<AllReduceOp>(
          op->getLoc(), input, reduce.getMesh(),
          rf.builder.getStrArrayAttr(rest), reduce.getReduction());
    rf.step.map(reduce.getResult(), result);
  } else {
    rf.builder.clone(*op, rf.step)->removeAttr(CleaveDialect::kStageAttrName);
  }
}

void PipelineBuilder::emitEpilogue() {
  for (Operation &op : func.getBody().front().without_terminator()) {
    Phase r = a.region.lookup(&op);
    if (isPerMicroBatch(r)) {
      // Sums that per-step ops of other ranks read.
      for (Value v : op.getResults()) {
        if (!a.accumulated.contains(v))
          continue;
        int64_t home = rankOfStage(a.stage.lookup(&op));
        SmallVector<int64_t> readers;
        for (Operation *user : v.getUsers())
          if (a.region.lookup(user) == Phase::Step)
            if (int64_t d = rankOfStage(a.stage.lookup(user));
                d != home && !llvm::is_contained(readers, d))
              readers.push_back(d);
        llvm::sort(readers);
        transfer(
            v, home, readers,
            [&](RankFunction &rf) { return rf.step.lookup(v); },
            [&](RankFunction &rf, Value got) { rf.step.map(v, got); });
      }
      continue;
    }
    if (r != Phase::Step)
      continue;
    emitStepOp(&op);
    int64_t home = rankOfStage(a.stage.lookup(&op));
    for (Value v : op.getResults())
      transfer(
          v, home, readersOf(v, home),
          [&](RankFunction &rf) { return rf.step.lookup(v); },
          [&](RankFunction &rf, Value got) { rf.step.map(v, got); });
  }
}

void PipelineBuilder::emitReturns() {
  Operation *ret = func.getBody().front().getTerminator();
  Value lossValue = ret->getOperand(a.lossResult);
  int64_t lossRank = rankOfStage(a.resultStage[a.lossResult]);
  auto lossType = cast<RankedTensorType>(lossValue.getType());
  for (int64_t r = 0; r < plan.pp; ++r) {
    RankFunction &rf = *ranks[r];
    OpBuilder &b = rf.builder;
    Value loss;
    if (r == lossRank) {
      if (!rf.step.contains(lossValue))
        materialize(b, rf.step, lossValue);
      loss = rf.step.lookup(lossValue);
    } else {
      loss = b.create<ConstantOp>(func.getLoc(),
                                  cast<ElementsAttr>(b.getZeroAttr(lossType)));
    }
    // Every rank reports the loss: the others add zeros.
    if (plan.pp > 1)
      loss = b.create<AllReduceOp>(func.getLoc(), loss, a.mesh.getSymName(),
                                   b.getStrArrayAttr({plan.ppAxis}),
                                   ReductionKind::Sum);
    SmallVector<Value> results;
    for (unsigned j = 0, e = func.getNumResults(); j < e; ++j) {
      if (j == a.lossResult) {
        results.push_back(loss);
        continue;
      }
      if (rankOfStage(a.resultStage[j]) != r)
        continue;
      Value v = ret->getOperand(j);
      if (!rf.step.contains(v))
        materialize(b, rf.step, v);
      results.push_back(rf.step.lookup(v));
    }
    b.create<func::ReturnOp>(func.getLoc(), results);
  }
}

FailureOr<SmallVector<Attribute>> PipelineBuilder::run() {
  createPassFunctions();
  createRankFunctions();
  emitPrologue();
  for (int64_t r = 0; r < plan.pp; ++r)
    if (failed(emitMain(r)))
      return failure();
  emitEpilogue();
  emitReturns();
  SmallVector<Attribute> stages;
  for (auto &rf : ranks)
    stages.push_back(FlatSymbolRefAttr::get(rf->func.getSymNameAttr()));
  func.erase();
  return stages;
}

} // namespace

FailureOr<SmallVector<Attribute>>
pipeline::buildPipeline(const Analysis &analysis, const PassGroups &groups,
                        const std::vector<std::vector<Event>> &events) {
  return PipelineBuilder(analysis, groups, events).run();
}

LogicalResult pipeline::finishPipeline(
    ModuleOp module, MeshOp mesh, const Plan &plan,
    ArrayRef<std::pair<StringRef, SmallVector<Attribute>>> entries) {
  // The micro-batch axis is gone: the mesh is the devices' again.
  if (plan.hasMbAxis) {
    SmallVector<StringRef> axes;
    SmallVector<int64_t> shape;
    SmallVector<LinkKind> links;
    for (unsigned i = 0, e = mesh.getRank(); i < e; ++i) {
      StringRef axis = cast<StringAttr>(mesh.getAxisNames()[i]).getValue();
      if (axis == plan.mbAxis)
        continue;
      axes.push_back(axis);
      shape.push_back(mesh.getShape()[i]);
      links.push_back(mesh.getAxisLink(axis));
    }
    OpBuilder b(mesh);
    auto rebuilt =
        b.create<MeshOp>(mesh.getLoc(), mesh.getSymName(), axes, shape, links);
    rebuilt.setBalancedAxesAttr(mesh.getBalancedAxesAttr());
    mesh.erase();
  }
  // The first entry's rank functions are `stages`; further entries' are
  // under their names in `entries`.
  Builder b(module.getContext());
  SmallVector<NamedAttribute> fields = {
      b.getNamedAttr("axis", b.getStringAttr(plan.ppAxis)),
      b.getNamedAttr("stages", b.getArrayAttr(entries.front().second))};
  if (entries.size() > 1) {
    SmallVector<NamedAttribute> more;
    for (const auto &[name, stages] : entries.drop_front())
      more.push_back(b.getNamedAttr(name, b.getArrayAttr(stages)));
    fields.push_back(b.getNamedAttr("entries", b.getDictionaryAttr(more)));
  }
  module->setAttr(CleaveDialect::kPipelineAttrName,
                  b.getDictionaryAttr(fields));
  // Nothing may still name the micro-batch axis.
  WalkResult walk = module.walk([&](Operation *op) {
    auto axes = op->getAttrOfType<ArrayAttr>("axes");
    if (plan.hasMbAxis && axes && llvm::any_of(axes, [&](Attribute x) {
          return cast<StringAttr>(x).getValue() == plan.mbAxis;
        })) {
      op->emitError() << "cleave-pipeline: still communicates along the "
                         "micro-batch axis '"
                      << plan.mbAxis << "' (outside the pipelined functions?)";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}
