//===- MoEOps.cpp - Router, dispatch, combine and balance loss ------------===//
//
// Shape inference, sharding rules and work of the mixture-of-experts ops
// (CleaveMoEOps.td). Their gradient rules are in Gradients.cpp.
//
//===----------------------------------------------------------------------===//

#include "OpUtils.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/IR/Builders.h"
#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

static constexpr int64_t kNoDim = ShardingRule::kNoDim;
static constexpr FactorKind kPass = FactorKind::PassThrough;
static constexpr FactorKind kSum = FactorKind::Reduction;
static constexpr FactorKind kWhole = FactorKind::NeedReplication;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Checks `[G, S, E]` logits and `top_k` in [1, E].
static LogicalResult verifyLogits(std::optional<Location> loc, StringRef op,
                                  RankedTensorType logits, int64_t topK) {
  if (logits.getRank() != 3)
    return inferError(loc, "'cleave." + op +
                               "' op logits must be [groups, tokens, "
                               "experts], got rank " +
                               Twine(logits.getRank()));
  int64_t experts = logits.getDimSize(2);
  if (topK < 1 || topK > experts)
    return inferError(loc, "'cleave." + op + "' op top_k = " + Twine(topK) +
                               " must be in [1, " + Twine(experts) +
                               "] (the number of experts)");
  return success();
}

/// Checks that `t` has `shape` and the element type `elem`; `what` names it.
static LogicalResult expectShape(std::optional<Location> loc, StringRef op,
                                 StringRef what, RankedTensorType t,
                                 ArrayRef<int64_t> shape, Type elem) {
  if (t.getShape() != shape)
    return inferError(loc, "'cleave." + op + "' op " + what + " must be " +
                               formatShape(shape) + ", got " +
                               formatShape(t.getShape()));
  if (t.getElementType() != elem)
    return inferError(loc, "'cleave." + op + "' op " + what +
                               " has another element type than the first "
                               "operand; insert a cleave.cast");
  return success();
}

/// Checks a `[G, S, E, C]` weights tensor: rank 4, `G` and `S` given.
static LogicalResult verifyWeights(std::optional<Location> loc, StringRef op,
                                   RankedTensorType w, int64_t groups,
                                   int64_t tokens) {
  if (w.getRank() != 4 || w.getDimSize(0) != groups ||
      w.getDimSize(1) != tokens)
    return inferError(loc, "'cleave." + op + "' op weights must be [groups = " +
                               Twine(groups) + ", tokens = " + Twine(tokens) +
                               ", experts, capacity], got " +
                               formatShape(w.getShape()));
  return success();
}

/// Adds one factor per entry: {operand dims..., result dims..., kind}.
namespace {
struct Factor {
  SmallVector<int64_t> operands, results;
  int64_t size;
  FactorKind kind;
};
} // namespace

static ShardingRule ruleOf(Operation *op, ArrayRef<Factor> factors) {
  ShardingRule rule(op);
  for (const Factor &f : factors)
    rule.addFactor(f.operands, f.results, f.size, f.kind);
  return rule;
}

static FloatType lossElementType(MLIRContext *ctx, Type elem) {
  return elem.isF64() ? FloatType(Float64Type::get(ctx))
                      : FloatType(Float32Type::get(ctx));
}

//===----------------------------------------------------------------------===//
// MoERouterOp
//===----------------------------------------------------------------------===//

static int64_t capacityFor(int64_t tokens, int64_t experts, int64_t topK,
                           std::optional<double> factor) {
  if (!factor)
    return tokens;
  double slots = std::ceil(*factor * double(tokens * topK) / double(experts));
  return std::clamp<int64_t>(int64_t(slots), 1, tokens);
}

int64_t MoERouterOp::getCapacity(int64_t tokens, int64_t experts) {
  std::optional<double> factor;
  if (auto attr = getCapacityFactorAttr())
    factor = attr.getValueAsDouble();
  return capacityFor(tokens, experts, int64_t(getTopK()), factor);
}

LogicalResult MoERouterOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto logits = tensorType(adaptor.getLogits());
  int64_t topK = int64_t(adaptor.getTopK());
  if (failed(verifyLogits(loc, "moe_router", logits, topK)))
    return failure();
  std::optional<double> factor;
  if (auto attr = adaptor.getCapacityFactorAttr()) {
    factor = attr.getValueAsDouble();
    if (!(*factor > 0))
      return inferError(loc, "'cleave.moe_router' op capacity_factor must be "
                             "positive, got " +
                                 Twine(std::to_string(*factor)));
  }
  ArrayRef<int64_t> s = logits.getShape();
  auto out = RankedTensorType::get(
      {s[0], s[1], s[2], capacityFor(s[1], s[2], topK, factor)},
      logits.getElementType());
  inferred.append({out, out});
  return success();
}

ShardingRule MoERouterOp::getShardingRule() {
  ArrayRef<int64_t> s = getCombine().getType().getShape();
  return ruleOf(*this, {{{0}, {0, 0}, s[0], kPass},
                        {{1}, {1, 1}, s[1], kWhole},
                        {{2}, {2, 2}, s[2], kWhole},
                        {{kNoDim}, {3, 3}, s[3], kWhole}});
}

/// Per token: a softmax (or sigmoid) over E, an E x E rank count for the
/// top-k, and a slot count over the group's tokens per selection.
OpWork MoERouterOp::getWork(const OpShapes &s) {
  const TensorShape &l = s.operands[0];
  double experts = l.dim(2), tokens = l.dim(1);
  return streamingWork(
      s, l.elements() * (5 + experts + tokens * double(getTopK()) / experts),
      /*fusable=*/false);
}

LogicalResult
MoERouterGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  auto logits = tensorType(adaptor.getLogits());
  if (failed(verifyLogits(loc, "moe_router_grad", logits,
                          int64_t(adaptor.getTopK()))))
    return failure();
  auto dispatch = tensorType(adaptor.getDispatch());
  ArrayRef<int64_t> s = logits.getShape();
  if (failed(verifyWeights(loc, "moe_router_grad", dispatch, s[0], s[1])))
    return failure();
  SmallVector<int64_t> shape{s[0], s[1], s[2], dispatch.getDimSize(3)};
  Type elem = logits.getElementType();
  if (failed(expectShape(loc, "moe_router_grad", "dispatch", dispatch, shape,
                         elem)) ||
      failed(expectShape(loc, "moe_router_grad", "grad",
                         tensorType(adaptor.getGrad()), shape, elem)))
    return failure();
  inferred.push_back(logits);
  return success();
}

ShardingRule MoERouterGradOp::getShardingRule() {
  ArrayRef<int64_t> s = getDispatch().getType().getShape();
  return ruleOf(*this, {{{0, 0, 0}, {0}, s[0], kPass},
                        {{1, 1, 1}, {1}, s[1], kWhole},
                        {{2, 2, 2}, {2}, s[2], kWhole},
                        {{kNoDim, 3, 3}, {kNoDim}, s[3], kWhole}});
}

OpWork MoERouterGradOp::getWork(const OpShapes &s) {
  const TensorShape &l = s.operands[0];
  return streamingWork(s,
                       l.elements() * (8 + l.dim(2)) + s.operands[2].elements(),
                       /*fusable=*/false);
}

//===----------------------------------------------------------------------===//
// MoEDispatchOp, MoECombineOp, MoEWeightsGradOp
//===----------------------------------------------------------------------===//

LogicalResult MoEDispatchOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  auto input = tensorType(adaptor.getInput());
  if (input.getRank() != 3)
    return inferError(loc, "'cleave.moe_dispatch' op input must be [groups, "
                           "tokens, hidden], got " +
                               formatShape(input.getShape()));
  auto w = tensorType(adaptor.getWeights());
  ArrayRef<int64_t> x = input.getShape();
  if (failed(verifyWeights(loc, "moe_dispatch", w, x[0], x[1])) ||
      failed(expectShape(loc, "moe_dispatch", "weights", w, w.getShape(),
                         input.getElementType())))
    return failure();
  inferred.push_back(RankedTensorType::get(
      {w.getDimSize(2), x[0], w.getDimSize(3), x[2]}, input.getElementType()));
  return success();
}

ShardingRule MoEDispatchOp::getShardingRule() {
  ArrayRef<int64_t> w = getWeights().getType().getShape();
  int64_t hidden = getInput().getType().getDimSize(2);
  return ruleOf(*this, {{{0, 0}, {1}, w[0], kPass},
                        {{1, 1}, {kNoDim}, w[1], kSum},
                        {{kNoDim, 2}, {0}, w[2], kPass},
                        {{kNoDim, 3}, {2}, w[3], kPass},
                        {{2, kNoDim}, {3}, hidden, kPass}});
}

/// The dense one-hot contraction the lowering runs: 2 * G * S * E * C * H.
static OpWork einsumWork(const OpShapes &s, double weights, double hidden) {
  return streamingWork(s, 2 * weights * hidden, /*fusable=*/false);
}

OpWork MoEDispatchOp::getWork(const OpShapes &s) {
  return einsumWork(s, s.operands[1].elements(), s.operands[0].dim(2));
}

LogicalResult MoECombineOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  auto w = tensorType(adaptor.getWeights());
  auto experts = tensorType(adaptor.getExperts());
  if (w.getRank() != 4)
    return inferError(loc, "'cleave.moe_combine' op weights must be [groups, "
                           "tokens, experts, capacity], got " +
                               formatShape(w.getShape()));
  ArrayRef<int64_t> s = w.getShape();
  int64_t hidden = experts.getRank() == 4 ? experts.getDimSize(3) : 0;
  if (failed(expectShape(loc, "moe_combine", "experts", experts,
                         {s[2], s[0], s[3], hidden}, w.getElementType())))
    return failure();
  inferred.push_back(
      RankedTensorType::get({s[0], s[1], hidden}, w.getElementType()));
  return success();
}

ShardingRule MoECombineOp::getShardingRule() {
  ArrayRef<int64_t> w = getWeights().getType().getShape();
  int64_t hidden = getExperts().getType().getDimSize(3);
  return ruleOf(*this, {{{0, 1}, {0}, w[0], kPass},
                        {{1, kNoDim}, {1}, w[1], kPass},
                        {{2, 0}, {kNoDim}, w[2], kSum},
                        {{3, 2}, {kNoDim}, w[3], kSum},
                        {{kNoDim, 3}, {2}, hidden, kPass}});
}

OpWork MoECombineOp::getWork(const OpShapes &s) {
  return einsumWork(s, s.operands[0].elements(), s.operands[1].dim(3));
}

LogicalResult
MoEWeightsGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                   Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferred) {
  auto grad = tensorType(adaptor.getGrad());
  auto experts = tensorType(adaptor.getExperts());
  if (grad.getRank() != 3 || experts.getRank() != 4)
    return inferError(loc, "'cleave.moe_weights_grad' op needs grad [groups, "
                           "tokens, hidden] and experts [experts, groups, "
                           "capacity, hidden], got " +
                               formatShape(grad.getShape()) + " and " +
                               formatShape(experts.getShape()));
  ArrayRef<int64_t> g = grad.getShape(), e = experts.getShape();
  if (failed(expectShape(loc, "moe_weights_grad", "experts", experts,
                         {e[0], g[0], e[2], g[2]}, grad.getElementType())))
    return failure();
  inferred.push_back(
      RankedTensorType::get({g[0], g[1], e[0], e[2]}, grad.getElementType()));
  return success();
}

ShardingRule MoEWeightsGradOp::getShardingRule() {
  ArrayRef<int64_t> r = getType().getShape();
  int64_t hidden = getGrad().getType().getDimSize(2);
  return ruleOf(*this, {{{0, 1}, {0}, r[0], kPass},
                        {{1, kNoDim}, {1}, r[1], kPass},
                        {{kNoDim, 0}, {2}, r[2], kPass},
                        {{kNoDim, 2}, {3}, r[3], kPass},
                        {{2, 3}, {kNoDim}, hidden, kSum}});
}

OpWork MoEWeightsGradOp::getWork(const OpShapes &s) {
  return einsumWork(s, s.results[0].elements(), s.operands[0].dim(2));
}

//===----------------------------------------------------------------------===//
// MoEAuxLossOp
//===----------------------------------------------------------------------===//

LogicalResult MoEAuxLossOp::inferReturnTypes(MLIRContext *ctx,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  auto logits = tensorType(adaptor.getLogits());
  if (failed(verifyLogits(loc, "moe_aux_loss", logits,
                          int64_t(adaptor.getTopK()))))
    return failure();
  inferred.push_back(
      RankedTensorType::get({}, lossElementType(ctx, logits.getElementType())));
  return success();
}

ShardingRule MoEAuxLossOp::getShardingRule() {
  ArrayRef<int64_t> s = getLogits().getType().getShape();
  return ruleOf(*this, {{{0}, {kNoDim}, s[0], kSum},
                        {{1}, {kNoDim}, s[1], kWhole},
                        {{2}, {kNoDim}, s[2], kWhole}});
}

OpWork MoEAuxLossOp::getWork(const OpShapes &s) {
  const TensorShape &l = s.operands[0];
  return streamingWork(s, l.elements() * (8 + l.dim(2)), /*fusable=*/false);
}

LogicalResult
MoEAuxLossGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                   Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferred) {
  auto logits = tensorType(adaptor.getLogits());
  if (failed(verifyLogits(loc, "moe_aux_loss_grad", logits,
                          int64_t(adaptor.getTopK()))))
    return failure();
  inferred.push_back(logits);
  return success();
}

ShardingRule MoEAuxLossGradOp::getShardingRule() {
  ArrayRef<int64_t> s = getLogits().getType().getShape();
  return ruleOf(*this, {{{0, kNoDim}, {0}, s[0], kPass},
                        {{1, kNoDim}, {1}, s[1], kWhole},
                        {{2, kNoDim}, {2}, s[2], kWhole}});
}

OpWork MoEAuxLossGradOp::getWork(const OpShapes &s) {
  const TensorShape &l = s.operands[0];
  return streamingWork(s, l.elements() * (12 + l.dim(2)), /*fusable=*/false);
}
