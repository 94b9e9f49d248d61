//===- OptimizerOps.cpp - sgd, adamw, lr_schedule ------------------------===//

#include "OpUtils.h"
#include "cleave/Dialect/CleaveOps.h"
#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

static LogicalResult verifySameShape(Operation *op, Value param, Value other,
                                     StringRef what) {
  auto p = cast<RankedTensorType>(param.getType());
  auto o = cast<RankedTensorType>(other.getType());
  if (p.getShape() != o.getShape())
    return op->emitOpError()
           << what << " shape " << formatShape(o.getShape())
           << " differs from the parameter shape " << formatShape(p.getShape());
  return success();
}

LogicalResult SGDOp::verify() {
  return verifySameShape(*this, getParam(), getGrad(), "grad");
}

ShardingRule SGDOp::getShardingRule() {
  return ShardingRule::getElementwise(*this);
}

OpWork SGDOp::getWork(const OpShapes &s) {
  return streamingWork(s, 3 * s.results[0].elements(), /*fusable=*/false);
}

LogicalResult AdamWOp::verify() {
  if (failed(verifySameShape(*this, getParam(), getGrad(), "grad")) ||
      failed(verifySameShape(*this, getParam(), getExpAvg(), "exp_avg")) ||
      failed(verifySameShape(*this, getParam(), getExpAvgSq(), "exp_avg_sq")))
    return failure();
  for (Value moment : {getExpAvg(), getExpAvgSq()}) {
    Type elem = cast<RankedTensorType>(moment.getType()).getElementType();
    if (!elem.isF32() && !elem.isF64())
      return emitOpError() << "optimizer moments must be f32 or f64, got "
                           << elem;
  }
  for (auto [name, value] :
       {std::pair{"beta1", getBeta1()}, std::pair{"beta2", getBeta2()}}) {
    double beta = value.convertToDouble();
    if (!(beta >= 0.0 && beta < 1.0))
      return emitOpError() << name << " must be in [0, 1), got " << beta;
  }
  if (!(getEpsilon().convertToDouble() > 0.0))
    return emitOpError() << "epsilon must be positive";
  return success();
}

ShardingRule AdamWOp::getShardingRule() {
  return ShardingRule::getElementwise(*this);
}

OpWork AdamWOp::getWork(const OpShapes &s) {
  // 12 per parameter element.
  return streamingWork(s, 12 * s.results[0].elements(), /*fusable=*/false);
}

LogicalResult LRScheduleOp::verify() {
  int64_t warmup = getWarmupSteps(), decay = getDecaySteps();
  double minLr = getMinLr().convertToDouble();
  if (warmup < 0)
    return emitOpError() << "warmup_steps must be >= 0, got " << warmup;
  if (!(std::isfinite(minLr) && minLr >= 0.0))
    return emitOpError() << "min_lr must be a finite number >= 0, got "
                         << minLr;
  if (getDecay() != LRDecay::Constant && decay < warmup)
    return emitOpError() << "decay_steps (" << decay
                         << ") must be >= warmup_steps (" << warmup
                         << "): the decay ends at step decay_steps";
  return success();
}

ShardingRule LRScheduleOp::getShardingRule() {
  return ShardingRule::getElementwise(*this);
}

OpWork LRScheduleOp::getWork(const OpShapes &s) {
  return streamingWork(s, 10, /*fusable=*/false);
}
