//===- Validation.h - Out-of-sample checks of the cost model ----*- C++ -*-===//
//
// In-sample error says little about the next run a user asks about. This
// fits the global constants the calibration chooses (FitParameter) the
// same way for every subset of the rows, and reports:
//  * in-sample: fitted on all rows, predicting all rows;
//  * leave-one-source-out (LOSO): for each source, fitted on the other
//    sources' rows, predicting the held-out source;
//  * ratios: for every pair of rows of one source and one model family,
//    the error of the predicted ratio of their quantities (the LOSO
//    predictions: the planner compares plans of a stack it was not fitted
//    on);
// each beside two null models fitted the same way: a constant MFU, and a
// constant fraction of peak on the executed FLOPs (model FLOPs plus the
// recomputed forward). Errors are relative: predicted / measured - 1.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_BENCH_COSTMODEL_VALIDATION_H
#define CLEAVE_BENCH_COSTMODEL_VALIDATION_H

#include "PublishedRuns.h"

#include <functional>
#include <string>
#include <vector>

namespace cleave::bench {

/// A global constant the calibration chooses by minimizing the mean
/// absolute error, with the values it tries.
struct FitParameter {
  std::string name;
  std::vector<double> values;
  /// Sets `value` on the constants or the cluster; returns false when the
  /// parameter does not affect this cluster (the row is then estimated
  /// once for all its values).
  std::function<bool(double value, cost::CostConstants &, cost::ClusterSpec &)>
      apply;
};

/// The parameters the calibration fits, over their full grid or a coarse
/// one (`quick`, for the test).
std::vector<FitParameter> fittedParameters(bool quick);

/// The cluster a row runs on.
using ClusterFn =
    std::function<cost::Result<cost::ClusterSpec>(const PublishedRun &)>;

struct ValidationOptions {
  /// The rows' clusters before the parameters apply (null: clusterOf).
  ClusterFn cluster;
  /// The constants the parameters are applied to.
  cost::CostConstants base;
  /// Coarse grids (the ctest); the report's structure is the same.
  bool quick = false;
  /// Where to write the whole computation as JSON (empty: nowhere).
  std::string jsonPath;
};

/// Runs the validation on `runs` and prints it; returns false (after
/// printing why) when a row cannot be estimated or the JSON not written.
bool runValidation(const std::vector<PublishedRun> &runs,
                   const ValidationOptions &options);

} // namespace cleave::bench

#endif // CLEAVE_BENCH_COSTMODEL_VALIDATION_H
