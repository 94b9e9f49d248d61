//===- TestUtil.h - Shared helpers of the cost-model tests ------*- C++ -*-===//

#ifndef CLEAVE_UNITTESTS_COSTMODEL_TESTUTIL_H
#define CLEAVE_UNITTESTS_COSTMODEL_TESTUTIL_H

#include "cleave/CostModel/Estimate.h"

#include <gtest/gtest.h>

namespace cleave::cost::test {

/// A preset cluster that must exist.
inline ClusterSpec preset(const std::string &name, int nodes) {
  Result<ClusterSpec> c = lookupClusterPreset(name, nodes);
  EXPECT_TRUE(c) << c.error();
  return *c;
}

inline ModelConfig model(const std::string &name) {
  std::optional<ModelConfig> m = lookupPreset(name);
  EXPECT_TRUE(m) << name;
  return *m;
}

/// A plan with the given mesh and defaults elsewhere.
inline ParallelPlan plan(int tp, int pp, int dp, int64_t microBatches = 1) {
  ParallelPlan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.numMicroBatches = microBatches;
  return p;
}

/// Constants with every overhead that would blur a hand computation zeroed.
inline CostConstants exactConstants() {
  CostConstants c;
  c.kernelOverhead = 0;
  c.overlapSlowdown = 0;
  c.intraNodeBusEfficiency = 1;
  c.interNodeBusEfficiency = 1;
  return c;
}

} // namespace cleave::cost::test

#endif // CLEAVE_UNITTESTS_COSTMODEL_TESTUTIL_H
