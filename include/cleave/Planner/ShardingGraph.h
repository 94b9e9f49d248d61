//===- ShardingGraph.h - The intra-op sharding problem -----------*- C++
//-*-===//
//
// From a function's forward view, the strategy graph the ILP chooses on:
// one node per op (one instance of the repeated block stands for all of
// them), per parameter and per data input; one edge per use of a value.
//
// An op's strategies come from its factor-based sharding rule alone: every
// mesh axis splits one factor of the op (or none: the op is replicated over
// it), the data-parallel axis always the batch factor; splitting is allowed
// where the factor is not need-replication, divides evenly and is the major
// factor of every dimension it occupies. A strategy fixes the layout of
// every operand and result (a factor missing from a result makes it a
// partial sum over that axis) and of every operand's gradient. It costs the
// local roofline time of the op's forward and backward (3x the forward) on
// the cluster's GPU, and the memory of its saved results.
//
// An edge costs the collectives that convert the producer's layout into the
// consumer's (all-reduce or reduce-scatter of a partial sum, all-gather,
// all-to-all) and the gradient's layout back (Megatron's conjugate
// collectives fall out of this), priced by the cost model on the axis's
// communicator group. Unary elementwise ops whose input has no other use
// and can never be a partial sum (casts, activations, dropout) are merged
// into their producer's node.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_SHARDINGGRAPH_H
#define CLEAVE_PLANNER_SHARDINGGRAPH_H

#include "cleave/CostModel/Collective.h"
#include "cleave/Planner/ForwardView.h"
#include "cleave/Planner/Ilp.h"

namespace cleave::planner {

/// A mesh axis the intra-op plan uses.
struct MeshAxis {
  std::string name;
  int64_t size = 1;
  /// Its communicator groups on the cluster.
  cost::GroupPlacement group;
  /// Data parallel: always splits the batch.
  bool batch = false;
};

/// How a tensor is laid out: per dimension the axes splitting it (a bit
/// per axis; several axes split a dimension in axis order) and the axes
/// over which it is a pending sum.
struct Layout {
  llvm::SmallVector<uint8_t, 4> dims;
  uint8_t partial = 0;
  bool operator==(const Layout &o) const {
    return dims == o.dims && partial == o.partial;
  }
  bool operator!=(const Layout &o) const { return !(*this == o); }
  /// Axes splitting some dimension.
  uint8_t splitAxes() const;
};

struct Strategy {
  /// Op nodes: per axis the factor it splits (-1: none). Argument nodes:
  /// per axis the dimension it splits (-1: none).
  llvm::SmallVector<int8_t, 4> choice;
  llvm::SmallVector<Layout, 4> operands;
  /// Op nodes: every result. Argument nodes: the argument.
  llvm::SmallVector<Layout, 2> results;
  /// Per operand: the axes over which its gradient is a partial sum.
  llvm::SmallVector<uint8_t, 4> gradPartial;
  /// Seconds of one occurrence (forward + backward).
  double time = 0;
  /// Bytes per device of one occurrence: results saved for the backward
  /// pass (for the whole batch of the IR), and parameter bytes (of the IR's
  /// type; the plan scales both).
  double activationBytes = 0, parameterBytes = 0;
};

enum class NodeKind : uint8_t { Op, Parameter, Input };
/// Where a node sits: before the repeated block, in it, or after it.
enum class Region : uint8_t { Before, Block, After };

struct Node {
  NodeKind kind = NodeKind::Op;
  Region region = Region::Before;
  /// Op nodes: the op (instance 0 of block nodes).
  mlir::Operation *op = nullptr;
  /// Argument nodes: the argument (instance 0's, for block parameters),
  /// and for block parameters instance 1's (their names give the pattern).
  mlir::BlockArgument arg, secondArg;
  /// Unary elementwise ops merged into this node, in order.
  std::vector<mlir::Operation *> followers;
  std::vector<Strategy> strategies;
};

/// How often an edge occurs per block instance.
enum class EdgeKind : uint8_t {
  /// Both ends outside the block, or in the same instance.
  Local,
  /// From the previous instance (the residual stream).
  Wrap,
  /// From before the block into the first instance, or from the last
  /// instance to after the block.
  Entry,
  /// A value from outside the block read by every instance.
  Shared,
};

struct Edge {
  int from = 0, to = 0;
  unsigned result = 0, operand = 0;
  EdgeKind kind = EdgeKind::Local;
  /// A gradient flows back along the edge (a float value that is not data).
  bool gradient = false;
  /// Row-major over (producer, consumer) strategies: seconds per occurrence.
  std::vector<double> cost;
};

struct GraphOptions {
  /// How often per step a parameter's layout changes are paid. The IR is
  /// one whole step, so activation resharding already sums over the
  /// micro-batches; a parameter gathered for its use (and its gradient
  /// reduced back) is gathered again for every micro-batch.
  double parameterUses = 1;
  /// Compute precision of the plan (for the roofline).
  DType dtype = DType::F32;
};

struct ShardingGraph {
  ForwardView view;
  std::vector<MeshAxis> axes;
  std::vector<Node> nodes;
  std::vector<Edge> edges;
  /// The node of every forward op (all instances map to their slot's node;
  /// followers to their producer's node).
  llvm::DenseMap<mlir::Operation *, int> nodeOfOp;
  /// The node of every argument (per-instance parameters to their slot's).
  llvm::DenseMap<mlir::Value, int> nodeOfArg;

  /// The ILP for a stage holding `layers` block instances, the nodes
  /// before the block (`first`) and after it (`last`). Memory: activation
  /// bytes x `activationFactor` + parameter bytes x `parameterFactor` <=
  /// `memoryLimit`. Nodes outside the stage cost nothing.
  IlpProblem problem(int64_t layers, bool first, bool last, double memoryLimit,
                     double activationFactor, double parameterFactor) const;
  /// Raw activation and parameter bytes of an assignment on a stage (as
  /// `problem` counts them, before its factors).
  std::pair<double, double> memoryOf(const std::vector<int> &choice,
                                     int64_t layers, bool first,
                                     bool last) const;
  /// The layout of value `v` (a forward op's result or an argument) under
  /// `choice`: the producer's.
  Layout layoutOf(mlir::Value v, const std::vector<int> &choice) const;
};

/// Builds the strategy graph of `view` on `axes` (names, sizes, groups).
ShardingGraph buildShardingGraph(ForwardView view, std::vector<MeshAxis> axes,
                                 const cost::ClusterSpec &cluster,
                                 const GraphOptions &options,
                                 const cost::CostConstants &constants);

/// "[dp, (cp, tp)] partial [tp]" style text of a layout.
std::string formatLayout(const Layout &l, const std::vector<MeshAxis> &axes);

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_SHARDINGGRAPH_H
