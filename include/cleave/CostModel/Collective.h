//===- Collective.h - NCCL-like collective costs ----------------*- C++ -*-===//
//
// Alpha-beta costs of the collectives NCCL runs, per communicator placement:
//
//   time = latency(algorithm, protocol, steps) + busBytes / busBandwidth
//
// with the bus-bandwidth convention of nccl-tests (doc/PERFORMANCE.md):
// busBytes = bytes * 2(n-1)/n for all-reduce and bytes * (n-1)/n for
// all-gather, reduce-scatter and all-to-all, where `bytes` is the size of
// the full buffer (the all-gather output, the reduce-scatter input).
//
// Algorithms: ring (every collective), tree and hierarchical (all-reduce
// across nodes), NVLS (all-reduce inside an NVSwitch node with NVLink
// SHARP), CollNet (all-reduce with in-network SHARP reduction); each with
// NCCL's three protocols (LL, LL128, Simple), whose latencies and bandwidth
// factors come from NCCL's tuning model (src/graph/tuning.cc). `Auto` picks
// the fastest, as NCCL's tuner does.
//
// Across nodes, a ring's bus bandwidth is bounded by the network share of
// its members: one NIC's share per GPU (the node's NICs split evenly over
// its GPUs), times k members per node if the rings aggregate rails
// (CostConstants::ringRailAggregation). The hierarchical all-reduce always
// uses each member's own NIC for 1/k of the data.
//
// A cluster with a measured table for a collective and group size
// (ClusterSpec::measuredCollectives, written by cleave-measure-local-cpu)
// is priced from the table instead: linear between measured sizes.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_COLLECTIVE_H
#define CLEAVE_COSTMODEL_COLLECTIVE_H

#include "cleave/CostModel/Cluster.h"
#include "cleave/CostModel/Constants.h"

#include <optional>
#include <string>

namespace cleave::cost {

enum class CollectiveKind {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Broadcast,
  /// Point to point (one send matched by one receive).
  SendRecv,
};

enum class CollectiveAlgo { Auto, Ring, Tree, Hierarchical, NVLS, CollNet };
enum class Protocol { LL, LL128, Simple };

const char *toString(CollectiveKind kind);
const char *toString(CollectiveAlgo algo);
const char *toString(Protocol protocol);
/// "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
/// "send", "recv", "collective_permute" (the cleave dialect's op names).
std::optional<CollectiveKind> parseCollectiveKind(const std::string &name);

/// Where the members of one communicator sit.
struct GroupPlacement {
  int size = 1;
  /// Members that share a node (k).
  int ranksPerNode = 1;
  /// Nodes the group spans (N); size = k * N.
  int nodes = 1;
  /// Nodes from the group's first member to its last, the nodes between
  /// included: a group one member per node at a stride of several nodes
  /// covers more nodes than it has, and can leave a pod with few members.
  int span = 1;
};

/// The group of a mesh axis of `size` members `stride` ranks apart, with
/// ranks numbered node by node (`gpusPerNode` consecutive ranks per node).
GroupPlacement placeGroup(int size, int stride, int gpusPerNode);

struct CollectiveOptions {
  CollectiveAlgo algo = CollectiveAlgo::Auto;
  /// Whether a ring across nodes drives one NIC per member on each node
  /// (unset: CostConstants::ringRailAggregation).
  std::optional<bool> railAggregation;
  /// Fraction of the links this collective gets when other traffic shares
  /// them (static contention; the simulator models it dynamically).
  double bandwidthShare = 1.0;
};

struct CollectiveCost {
  double time = 0;
  double latency = 0;
  /// Achieved bus bandwidth (bytes/s, nccl-tests convention).
  double busBandwidth = 0;
  CollectiveAlgo algo = CollectiveAlgo::Ring;
  Protocol protocol = Protocol::Simple;
};

/// busBytes / bytes for `kind` over `n` ranks: 2(n-1)/n for all-reduce,
/// (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 otherwise.
double busFactor(CollectiveKind kind, int n);

/// The cost of one collective moving `bytes` (full-buffer size, see above).
CollectiveCost collectiveCost(CollectiveKind kind, double bytes,
                              const GroupPlacement &group,
                              const ClusterSpec &cluster,
                              const CostConstants &c,
                              const CollectiveOptions &options = {});

/// CPU seconds one call of `kind` on `bytes` costs each member rank's
/// process on a shared host, from the cluster's measured table (0 when the
/// cluster has none: devices communicate without the host's cores).
double collectiveCpu(CollectiveKind kind, double bytes,
                     const GroupPlacement &group, const ClusterSpec &cluster);
/// The same for one message of a point-to-point transfer (the sender's and
/// the receiver's each).
double p2pCpu(double bytes, bool interNode, const ClusterSpec &cluster);

/// Seconds for a point-to-point transfer of `bytes` to a rank in the same
/// node or, if `interNode`, another node.
double p2pTime(double bytes, bool interNode, const ClusterSpec &cluster,
               const CostConstants &c);

} // namespace cleave::cost

#endif // CLEAVE_COSTMODEL_COLLECTIVE_H
