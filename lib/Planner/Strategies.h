//===- Strategies.h - Strategies and resharding costs -----------*- C++ -*-===//
//
// Private to the planner: the strategies of op and argument nodes (from the
// ops' sharding rules) and the price of converting one layout into another.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_PLANNER_STRATEGIES_H
#define CLEAVE_LIB_PLANNER_STRATEGIES_H

#include "cleave/Planner/ShardingGraph.h"

namespace cleave::planner::detail {

/// Bytes of a static tensor type (0 otherwise).
double bytesOf(mlir::Type type);
bool isFloatTensor(mlir::Value v);
/// Devices a tensor is split over by the axes in `mask`.
double shardsOf(uint8_t mask, const std::vector<MeshAxis> &axes);
/// Bytes of `v` on one device under layout `l`.
double localBytes(mlir::Value v, const Layout &l,
                  const std::vector<MeshAxis> &axes);

/// The collectives that convert `from` into `to`: "all_reduce(tp),
/// all_gather(dp)"; empty if none.
std::string describeReshard(const Layout &from, const Layout &to,
                            const std::vector<MeshAxis> &axes);

struct StrategyCosts {
  const std::vector<MeshAxis> &axes;
  const cost::ClusterSpec &cluster;
  const cost::CostConstants &constants;
  DType dtype;

  /// Every valid strategy of forward op `i` of `v`.
  std::vector<Strategy> opStrategies(const ForwardView &v, size_t i) const;
  /// Every layout of a parameter or data input (inputs: dim 0 over the
  /// batch axis when `batchDim0`).
  std::vector<Strategy> argStrategies(mlir::Value arg, bool param,
                                      bool batchDim0) const;
  /// Adds a merged unary elementwise op to a strategy (its time and, if
  /// `saved`, its output's memory).
  void addFollower(mlir::Operation *follower, Strategy &s, bool saved) const;
  /// Seconds to convert a tensor of `bytes` from `from` to `to`.
  double reshard(const Layout &from, const Layout &to, double bytes) const;

private:
  double opTime(mlir::Operation *op, const Strategy &s,
                uint8_t computeAxes) const;
  double collective(cost::CollectiveKind kind, double bytes, size_t axis) const;
};

} // namespace cleave::planner::detail

#endif // CLEAVE_LIB_PLANNER_STRATEGIES_H
