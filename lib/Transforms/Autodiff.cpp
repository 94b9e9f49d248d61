//===- Autodiff.cpp - Forward + loss -> training step ---------------------===//
//
// Implements -cleave-autodiff. See Passes.td for the contract. Reverse mode
// over one block: the forward body is cloned into the new function, then
// ops are visited in reverse and each op's VJPOpInterface builds its operand
// gradients after the forward ops. The pass knows no op by name.
//
// Pipeline stages: when forward ops carry `cleave.stage`, every op built for
// the gradient of an op gets that op's stage, a sum of two gradients the
// earlier of their stages, and a parameter's update the stage of its first
// use, so cleave-pipeline can cut the training step (docs/pipeline.md).
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include <cmath>

#define DEBUG_TYPE "cleave-autodiff"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEAUTODIFFPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// One parameter of the training step.
struct Param {
  std::string name;
  BlockArgument value;
  Value grad;
  /// AdamW moments (arguments of the training step).
  Value expAvg, expAvgSq;
};

/// Reverse-mode differentiation of the cloned forward body.
class Differentiator {
public:
  Differentiator(OpBuilder &builder) : builder(builder) {}

  /// Builds d(loss)/d(v) for every active value; fails with a diagnostic on
  /// an op without a gradient rule.
  LogicalResult run(Block &body, Value loss, ArrayRef<BlockArgument> params);
  Value gradOf(Value v) const { return grads.lookup(v); }

private:
  void accumulate(Value v, Value g);
  /// Tags the ops built since `marker` (the op before the insertion point
  /// then, or null for the block's start), up to the terminator, with
  /// `stage`.
  void tagSince(Operation *marker, std::optional<int64_t> stage);

  OpBuilder &builder;
  DenseMap<Value, Value> grads;
  DenseSet<Value> active;
};

/// The `cleave.stage` of the op defining `v`, if any.
std::optional<int64_t> stageOf(Value v) {
  Operation *def = v.getDefiningOp();
  auto stage =
      def ? def->getAttrOfType<IntegerAttr>(CleaveDialect::kStageAttrName)
          : IntegerAttr();
  if (!stage)
    return std::nullopt;
  return stage.getInt();
}

void setStage(Operation *op, std::optional<int64_t> stage) {
  if (stage)
    op->setAttr(
        CleaveDialect::kStageAttrName,
        IntegerAttr::get(IntegerType::get(op->getContext(), 64), *stage));
}

} // namespace

void Differentiator::tagSince(Operation *marker, std::optional<int64_t> stage) {
  if (!stage)
    return;
  Block *block = builder.getInsertionBlock();
  auto it = marker ? std::next(Block::iterator(marker)) : block->begin();
  for (auto end = Block::iterator(block->getTerminator()); it != end; ++it)
    if (!it->hasAttr(CleaveDialect::kStageAttrName))
      setStage(&*it, stage);
}

void Differentiator::accumulate(Value v, Value g) {
  assert(g.getType() == v.getType() && "a VJP changed a value's type");
  Value &slot = grads[v];
  if (!slot) {
    slot = g;
    return;
  }
  std::optional<int64_t> a = stageOf(slot), b = stageOf(g);
  auto sum = builder.create<AddOp>(g.getLoc(), slot, g);
  if (a && b)
    setStage(sum, std::min(*a, *b));
  slot = sum;
}

LogicalResult Differentiator::run(Block &body, Value loss,
                                  ArrayRef<BlockArgument> params) {
  // Forward activity: values that depend on a parameter.
  for (BlockArgument p : params)
    active.insert(p);
  for (Operation &op : body.without_terminator())
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return active.contains(v); }))
      for (Value r : op.getResults())
        if (isa<FloatType>(getElementTypeOrSelf(r.getType())))
          active.insert(r);
  if (!active.contains(loss))
    return success(); // nothing to differentiate

  builder.setInsertionPoint(body.getTerminator());
  auto lossType = cast<RankedTensorType>(loss.getType());
  auto seed = builder.create<ConstantOp>(
      loss.getLoc(),
      DenseElementsAttr::get(
          lossType,
          builder.getFloatAttr(lossType.getElementType(), 1.0).getValue()));
  setStage(seed, stageOf(loss));
  grads[loss] = seed;

  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  for (Operation *op : llvm::reverse(forward)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      resultGrads.push_back(grads.lookup(r));
      any |= static_cast<bool>(resultGrads.back());
    }
    bool needs = llvm::any_of(op->getOperands(),
                              [&](Value v) { return active.contains(v); });
    if (!any || !needs)
      continue;
    auto vjp = dyn_cast<VJPOpInterface>(op);
    if (!vjp)
      return op->emitOpError()
             << "has no gradient rule (VJPOpInterface), but the loss depends "
                "on parameters through it";
    auto stageAttr =
        op->getAttrOfType<IntegerAttr>(CleaveDialect::kStageAttrName);
    std::optional<int64_t> stage;
    if (stageAttr)
      stage = stageAttr.getInt();
    Operation *marker = builder.getInsertionPoint() == body.begin()
                            ? nullptr
                            : &*std::prev(builder.getInsertionPoint());
    for (auto [i, g] : llvm::enumerate(resultGrads))
      if (!g) // a result nothing depends on: its gradient is zero
        resultGrads[i] = builder.create<ConstantOp>(
            op->getLoc(), cast<ElementsAttr>(
                              builder.getZeroAttr(op->getResult(i).getType())));
    SmallVector<Value> operandGrads;
    OpBuilder::InsertionGuard guard(builder);
    if (failed(vjp.buildVJP(builder, resultGrads, operandGrads)))
      return op->emitOpError() << "failed to build its gradient";
    tagSince(marker, stage);
    for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
      if (g && active.contains(operand))
        accumulate(operand, g);
  }
  return success();
}

namespace {

struct CleaveAutodiffPass final
    : cleave::impl::CleaveAutodiffPassBase<CleaveAutodiffPass> {
  using Base::Base;

  void runOnOperation() override;

private:
  /// Appends an argument with one named-string attribute.
  BlockArgument addArg(func::FuncOp func, Type type, StringRef attr,
                       StringRef name);
  /// Emits the optimizer update of `p`; returns (name, value) outputs.
  void update(OpBuilder &b, Param &p, Value lr, Value step,
              SmallVectorImpl<std::pair<std::string, Value>> &outputs);
  /// Whether the options ask for a learning-rate schedule; fails with a
  /// diagnostic at `func` on options that make no sense.
  FailureOr<bool> checkSchedule(func::FuncOp func);
  /// The scheduled rate for the update about to be built on `stage`: one
  /// cleave.lr_schedule per stage, so a pipeline stage needs no other's.
  Value scheduledLr(OpBuilder &b, Location loc, Value lr, Value step,
                    std::optional<int64_t> stage);

  /// Scales every gradient by min(1, grad-clip / (||g|| + 1e-6)), the norm
  /// over all of `params` (torch.nn.utils.clip_grad_norm_). `homes` are the
  /// parameters' stages: each partial sum of squares and each scaled
  /// gradient runs on its parameter's stage.
  void clipGradients(OpBuilder &b, Location loc, MutableArrayRef<Param> params,
                     ArrayRef<std::optional<int64_t>> homes, Value total);
  /// The squared norm of the whole model's gradient: one partial sum of
  /// squares per parameter (on its stage), summed in f32; null without
  /// gradients.
  Value squaredNorm(OpBuilder &b, Location loc, ArrayRef<Param> params,
                    ArrayRef<std::optional<int64_t>> homes);
  /// Multiplies every gradient by the f32 scalar `factor` (on its stage).
  void scaleGradients(OpBuilder &b, Location loc, MutableArrayRef<Param> params,
                      ArrayRef<std::optional<int64_t>> homes, Value factor);

  /// The schedule ops built, by stage (-1: none).
  DenseMap<int64_t, Value> schedules;

  /// Attributes of the arguments addArg appended, in order.
  SmallVector<DictionaryAttr> addedArgAttrs;
};

} // namespace

BlockArgument CleaveAutodiffPass::addArg(func::FuncOp func, Type type,
                                         StringRef attr, StringRef name) {
  // The function's type and argument attributes are set once at the end:
  // inserting arguments one at a time would build a new function type and
  // attribute array per argument (quadratic, and attributes are never
  // freed).
  MLIRContext *ctx = func.getContext();
  addedArgAttrs.push_back(
      DictionaryAttr::get(ctx, {NamedAttribute(StringAttr::get(ctx, attr),
                                               StringAttr::get(ctx, name))}));
  return func.getBody().front().addArgument(type, func.getLoc());
}

FailureOr<bool> CleaveAutodiffPass::checkSchedule(func::FuncOp func) {
  if (lrSchedule != "constant" && lrSchedule != "cosine" &&
      lrSchedule != "linear")
    return func.emitError()
           << "cleave-autodiff: unknown lr-schedule '" << lrSchedule
           << "' (expected constant, cosine or linear)";
  if (warmupSteps < 0)
    return func.emitError() << "cleave-autodiff: warmup-steps must be >= 0, "
                               "got "
                            << warmupSteps.getValue();
  if (!(std::isfinite(lrMin) && lrMin >= 0.0))
    return func.emitError() << "cleave-autodiff: lr-min must be a finite "
                               "number >= 0, got "
                            << lrMin.getValue();
  bool decays = lrSchedule != "constant";
  if (decays && decaySteps < warmupSteps)
    return func.emitError()
           << "cleave-autodiff: decay-steps (" << decaySteps.getValue()
           << ") must be >= warmup-steps (" << warmupSteps.getValue() << ")";
  return decays || warmupSteps > 0;
}

Value CleaveAutodiffPass::scheduledLr(OpBuilder &b, Location loc, Value lr,
                                      Value step,
                                      std::optional<int64_t> stage) {
  Value &slot = schedules[stage.value_or(-1)];
  if (!slot) {
    LRDecay decay = *symbolizeLRDecay(lrSchedule);
    slot = b.create<LRScheduleOp>(
        loc, lr.getType(), lr, step, LRDecayAttr::get(b.getContext(), decay),
        b.getI64IntegerAttr(warmupSteps), b.getI64IntegerAttr(decaySteps),
        b.getF64FloatAttr(lrMin));
  }
  return slot;
}

/// An f32 scalar constant.
static Value f32Constant(OpBuilder &b, Location loc, double v) {
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  return b.create<ConstantOp>(
      loc, DenseElementsAttr::get(scalar, b.getF32FloatAttr(v).getValue()));
}

Value CleaveAutodiffPass::squaredNorm(OpBuilder &b, Location loc,
                                      ArrayRef<Param> params,
                                      ArrayRef<std::optional<int64_t>> homes) {
  // Sharded gradients give sums the partitioner completes over their mesh
  // axes.
  Value total;
  for (auto [p, home] : llvm::zip(params, homes)) {
    if (!p.grad)
      continue;
    auto type = cast<RankedTensorType>(p.grad.getType());
    Value g = p.grad;
    if (!type.getElementType().isF32())
      g = b.create<CastOp>(loc, type.clone(b.getF32Type()), g);
    auto all = llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
    auto square = b.create<MulOp>(loc, g, g);
    auto sum = b.create<ReduceSumOp>(loc, square, b.getDenseI64ArrayAttr(all));
    setStage(square, home);
    setStage(sum, home);
    if (g != p.grad)
      setStage(g.getDefiningOp(), home);
    total =
        total ? b.create<AddOp>(loc, total, sum).getResult() : sum.getResult();
  }
  return total;
}

void CleaveAutodiffPass::scaleGradients(OpBuilder &b, Location loc,
                                        MutableArrayRef<Param> params,
                                        ArrayRef<std::optional<int64_t>> homes,
                                        Value factor) {
  for (auto [p, home] : llvm::zip(params, homes)) {
    if (!p.grad)
      continue;
    auto type = cast<RankedTensorType>(p.grad.getType());
    Value c = factor;
    if (!type.getElementType().isF32())
      c = b.create<CastOp>(
          loc,
          cast<RankedTensorType>(factor.getType()).clone(type.getElementType()),
          c);
    SmallVector<int64_t> none;
    auto spread =
        b.create<BroadcastOp>(loc, type, c, b.getDenseI64ArrayAttr(none));
    auto scaled = b.create<MulOp>(loc, p.grad, spread);
    setStage(spread, home);
    setStage(scaled, home);
    p.grad = scaled;
  }
}

void CleaveAutodiffPass::clipGradients(OpBuilder &b, Location loc,
                                       MutableArrayRef<Param> params,
                                       ArrayRef<std::optional<int64_t>> homes,
                                       Value total) {
  if (!total)
    return;
  Value norm = b.create<SqrtOp>(loc, total);
  Value coeff = b.create<MinOp>(
      loc, f32Constant(b, loc, 1.0),
      b.create<DivOp>(loc, f32Constant(b, loc, gradClip),
                      b.create<AddOp>(loc, norm, f32Constant(b, loc, 1e-6))));
  scaleGradients(b, loc, params, homes, coeff);
}

void CleaveAutodiffPass::update(
    OpBuilder &b, Param &p, Value lr, Value step,
    SmallVectorImpl<std::pair<std::string, Value>> &outputs) {
  Location loc = p.value.getLoc();
  auto type = p.value.getType();
  double decay = noDecayVectors && cast<RankedTensorType>(type).getRank() < 2
                     ? 0.0
                     : weightDecay.getValue();
  if (optimizer == "none") {
    Value g =
        p.grad
            ? p.grad
            : b.create<ConstantOp>(loc, cast<ElementsAttr>(b.getZeroAttr(type)))
                  .getResult();
    outputs.emplace_back("grad:" + p.name, g);
    return;
  }
  if (optimizer == "sgd") {
    Value next = p.value;
    if (p.grad)
      next = b.create<SGDOp>(loc, type, p.value, p.grad, lr,
                             b.getF64FloatAttr(decay));
    outputs.emplace_back(p.name, next);
    return;
  }
  SmallVector<Value> next = {p.value, p.expAvg, p.expAvgSq};
  if (p.grad) {
    auto op = b.create<AdamWOp>(
        loc, TypeRange{type, type, type}, p.value, p.grad, p.expAvg, p.expAvgSq,
        lr, step, b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
        b.getF64FloatAttr(epsilon), b.getF64FloatAttr(decay));
    next.assign(op->result_begin(), op->result_end());
  }
  outputs.emplace_back(p.name, next[0]);
  outputs.emplace_back(p.name + ".exp_avg", next[1]);
  outputs.emplace_back(p.name + ".exp_avg_sq", next[2]);
}

void CleaveAutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto forward = module.lookupSymbol<func::FuncOp>(entry);
  if (!forward || forward.isExternal()) {
    module.emitError() << "cleave-autodiff: no function @" << entry
                       << " with a body to differentiate";
    return signalPassFailure();
  }
  if (optimizer != "adamw" && optimizer != "sgd" && optimizer != "none") {
    forward.emitError() << "cleave-autodiff: unknown optimizer '" << optimizer
                        << "' (expected adamw, sgd or none)";
    return signalPassFailure();
  }
  auto resultTypes = forward.getFunctionType().getResults();
  auto lossType = resultTypes.size() == 1
                      ? dyn_cast<RankedTensorType>(resultTypes[0])
                      : RankedTensorType();
  if (!lossType || lossType.getRank() != 0 ||
      !isa<FloatType>(lossType.getElementType())) {
    forward.emitError() << "cleave-autodiff: @" << entry
                        << " must return one scalar float loss, got "
                        << forward.getFunctionType();
    return signalPassFailure();
  }
  if (!(std::isfinite(gradClip) && gradClip >= 0.0)) {
    forward.emitError() << "cleave-autodiff: grad-clip must be a finite "
                           "number > 0 (0: no clipping), got "
                        << gradClip.getValue();
    return signalPassFailure();
  }
  if (lossScaling && optimizer == "none") {
    forward.emitError() << "cleave-autodiff: loss-scaling needs an optimizer "
                           "(it skips updates on overflow)";
    return signalPassFailure();
  }
  FailureOr<bool> schedule = checkSchedule(forward);
  if (failed(schedule))
    return signalPassFailure();
  bool scheduled = *schedule && optimizer != "none";
  schedules.clear();
  if (module.lookupSymbol(output)) {
    module.emitError() << "cleave-autodiff: the module already has @" << output;
    return signalPassFailure();
  }

  // The new function starts as a copy of the forward function.
  OpBuilder b(module.getContext());
  b.setInsertionPointAfter(forward);
  auto step = cast<func::FuncOp>(b.clone(*forward));
  step.setSymName(output);
  Block &body = step.getBody().front();
  Value loss = body.getTerminator()->getOperand(0);

  SmallVector<Param> params;
  for (BlockArgument arg : body.getArguments())
    if (auto name = step.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), CleaveDialect::kParamAttrName))
      params.push_back({name.str(), arg, Value(), Value(), Value()});

  // Dynamic loss scaling: the gradients are those of loss * loss_scale (an
  // f32 input), so that small f16 gradients do not flush to zero; they are
  // unscaled in f32 before anything reads them.
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  Value differentiated = loss, lossScale;
  if (lossScaling) {
    b.setInsertionPoint(body.getTerminator());
    lossScale =
        addArg(step, scalar, CleaveDialect::kInputAttrName, "loss_scale");
    Value wide = loss;
    if (!lossType.getElementType().isF32())
      wide = b.create<CastOp>(loss.getLoc(), scalar, loss);
    differentiated = b.create<MulOp>(loss.getLoc(), wide, lossScale);
    if (auto stage = loss.getDefiningOp()
                         ? loss.getDefiningOp()->getAttrOfType<IntegerAttr>(
                               CleaveDialect::kStageAttrName)
                         : IntegerAttr())
      for (Value v : {wide, differentiated})
        if (Operation *op = v.getDefiningOp(); op && op != loss.getDefiningOp())
          setStage(op, stage.getInt());
  }

  Differentiator diff(b);
  SmallVector<BlockArgument> paramValues;
  for (Param &p : params)
    paramValues.push_back(p.value);
  if (failed(diff.run(body, differentiated, paramValues)))
    return signalPassFailure();
  for (Param &p : params)
    p.grad = diff.gradOf(p.value);

  // Optimizer state, then the scalar inputs, then the updates.
  b.setInsertionPoint(body.getTerminator());
  if (optimizer == "adamw")
    for (Param &p : params) {
      Type type = p.value.getType();
      p.expAvg = addArg(step, type, CleaveDialect::kStateAttrName,
                        p.name + ".exp_avg");
      p.expAvgSq = addArg(step, type, CleaveDialect::kStateAttrName,
                          p.name + ".exp_avg_sq");
    }
  Value lr, stepValue, updateValue;
  if (optimizer != "none") {
    lr = addArg(step, scalar, CleaveDialect::kInputAttrName, "lr");
    if (optimizer == "adamw" || scheduled)
      stepValue = addArg(step, scalar, CleaveDialect::kInputAttrName, "step");
    // Skipped steps do not count as updates for AdamW's bias correction
    // (GradScaler skips optimizer.step()); the schedule counts every step.
    updateValue = stepValue;
    if (lossScaling && optimizer == "adamw")
      updateValue =
          addArg(step, scalar, CleaveDialect::kInputAttrName, "update");
  }
  // The update runs on the stage of the parameter's first use.
  SmallVector<std::optional<int64_t>> homes;
  for (Param &p : params) {
    std::optional<int64_t> home;
    for (Operation *user : p.value.getUsers())
      if (auto stage =
              user->getAttrOfType<IntegerAttr>(CleaveDialect::kStageAttrName))
        home = std::min(home.value_or(stage.getInt()), stage.getInt());
    homes.push_back(home);
  }
  Value squared;
  if (lossScaling) {
    Value inverse = b.create<DivOp>(
        step.getLoc(), f32Constant(b, step.getLoc(), 1.0), lossScale);
    scaleGradients(b, step.getLoc(), params, homes, inverse);
  }
  // One sum of squares serves clipping and the overflow check: it is
  // infinite or NaN if any gradient element is.
  if ((gradClip > 0.0 && optimizer != "none") || lossScaling)
    squared = squaredNorm(b, step.getLoc(), params, homes);
  if (gradClip > 0.0 && optimizer != "none")
    clipGradients(b, step.getLoc(), params, homes, squared);
  SmallVector<std::pair<std::string, Value>> outputs;
  for (auto [p, home] : llvm::zip(params, homes)) {
    Operation *ret = body.getTerminator();
    Operation *marker = ret->getPrevNode();
    Value rate = scheduled && p.grad
                     ? scheduledLr(b, p.value.getLoc(), lr, stepValue, home)
                     : lr;
    update(b, p, rate, updateValue, outputs);
    for (Operation *op = marker ? marker->getNextNode() : &body.front();
         home && op != ret; op = op->getNextNode())
      if (!op->hasAttr(CleaveDialect::kStageAttrName))
        setStage(op, home);
  }
  outputs.emplace_back("loss", loss);
  if (lossScaling)
    outputs.emplace_back("grad_norm_sq",
                         squared ? squared : f32Constant(b, step.getLoc(), 0));

  Operation *ret = body.getTerminator();
  SmallVector<Value> values;
  for (auto &[name, value] : outputs)
    values.push_back(value);
  b.setInsertionPoint(ret);
  b.create<func::ReturnOp>(ret->getLoc(), values);
  ret->erase();
  SmallVector<DictionaryAttr> argAttrs;
  step.getAllArgAttrs(argAttrs);
  llvm::append_range(argAttrs, addedArgAttrs);
  addedArgAttrs.clear();
  step.setFunctionType(b.getFunctionType(body.getArgumentTypes(),
                                         ValueRange(values).getTypes()));
  step.setAllArgAttrs(argAttrs);
  SmallVector<Attribute> resultAttrs;
  for (auto &[name, value] : outputs)
    resultAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(CleaveDialect::kOutputAttrName, b.getStringAttr(name))));
  step.setAllResultAttrs(resultAttrs);
}
