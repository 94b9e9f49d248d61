//===- Prediction.h - The cost model's predicted step -----------*- C++ -*-===//
//
// What cleave-run's progress line and run report show beside the measured
// step: the cost model's prediction (lib/Pipelines predictLocalStep, or the
// planner's own for --plan auto).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_EXECUTION_PREDICTION_H
#define CLEAVE_EXECUTION_PREDICTION_H

#include <string>

namespace mlir::cleave {

/// What the cost model predicts for one training step (the progress line
/// and the run report show the measured step beside it).
struct StepPrediction {
  double stepSeconds = 0;
  /// Model FLOPs utilization; the measured one is mfu * stepSeconds / the
  /// measured step time (the same FLOPs and peak).
  double mfu = 0;
  /// What was priced on what, e.g. "tp=2 pp=1 dp=2 ... on local-cpu
  /// (built-in), 4 ranks".
  std::string source;
};

} // namespace mlir::cleave

#endif // CLEAVE_EXECUTION_PREDICTION_H
