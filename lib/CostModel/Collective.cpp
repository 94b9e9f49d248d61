//===- Collective.cpp - NCCL-like collective costs ------------------------===//
//
// Latency tables: NCCL src/graph/tuning.cc (baseLat, hwLat, in
// microseconds). The cluster spec carries the per-step latency of a ring
// with the Simple protocol for its NVLink and its network; the other
// algorithm/protocol latencies keep NCCL's ratios to that value, so a
// faster or slower fabric scales them all.
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Collective.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace cleave::cost {

const char *toString(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllToAll:
    return "all_to_all";
  case CollectiveKind::Broadcast:
    return "broadcast";
  case CollectiveKind::SendRecv:
    return "send_recv";
  }
  return "?";
}

const char *toString(CollectiveAlgo algo) {
  switch (algo) {
  case CollectiveAlgo::Auto:
    return "auto";
  case CollectiveAlgo::Ring:
    return "ring";
  case CollectiveAlgo::Tree:
    return "tree";
  case CollectiveAlgo::Hierarchical:
    return "hierarchical";
  case CollectiveAlgo::NVLS:
    return "nvls";
  case CollectiveAlgo::CollNet:
    return "collnet";
  }
  return "?";
}

const char *toString(Protocol p) {
  switch (p) {
  case Protocol::LL:
    return "LL";
  case Protocol::LL128:
    return "LL128";
  case Protocol::Simple:
    return "Simple";
  }
  return "?";
}

std::optional<CollectiveKind> parseCollectiveKind(const std::string &name) {
  if (name == "all_reduce")
    return CollectiveKind::AllReduce;
  if (name == "all_gather")
    return CollectiveKind::AllGather;
  if (name == "reduce_scatter")
    return CollectiveKind::ReduceScatter;
  if (name == "all_to_all")
    return CollectiveKind::AllToAll;
  if (name == "broadcast")
    return CollectiveKind::Broadcast;
  if (name == "send" || name == "recv" || name == "collective_permute" ||
      name == "send_recv")
    return CollectiveKind::SendRecv;
  return std::nullopt;
}

GroupPlacement placeGroup(int size, int stride, int gpusPerNode) {
  GroupPlacement g;
  g.size = std::max(size, 1);
  stride = std::max(stride, 1);
  gpusPerNode = std::max(gpusPerNode, 1);
  if (g.size == 1)
    return g;
  if (stride >= gpusPerNode) {
    g.ranksPerNode = 1;
  } else if (stride * g.size <= gpusPerNode &&
             gpusPerNode % (stride * g.size) == 0) {
    g.ranksPerNode = g.size;
  } else if (stride * g.size < gpusPerNode) {
    // The group straddles a node boundary for some of its instances.
    g.ranksPerNode = (g.size + 1) / 2;
  } else {
    g.ranksPerNode = std::max(1, gpusPerNode / stride);
  }
  g.nodes = (g.size + g.ranksPerNode - 1) / g.ranksPerNode;
  g.span = g.nodes;
  if (stride >= gpusPerNode)
    g.span = (g.size - 1) * (stride / gpusPerNode) + 1;
  return g;
}

double busFactor(CollectiveKind kind, int n) {
  if (n <= 1)
    return 0;
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2.0 * (n - 1) / n;
  case CollectiveKind::AllGather:
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllToAll:
    return double(n - 1) / n;
  case CollectiveKind::Broadcast:
  case CollectiveKind::SendRecv:
    return 1;
  }
  return 1;
}

namespace {

constexpr double kUs = 1e-6;
enum Link { NVLink = 0, Net = 1 };
enum AlgoRow { TreeRow = 0, RingRow = 1, CollNetRow = 2 };

// NCCL tuning.cc: baseLat[algorithm][protocol] and hwLat[link][algorithm]
// [protocol] in us, protocols ordered LL, LL128, Simple.
constexpr double kBaseLat[3][3] = {
    {4.4, 4.4, 0}, {3.6, 10.0, 8.4}, {4.4, 4.4, 0}};
constexpr double kHwLat[2][3][3] = {
    {{.52, 1.2, 28}, {.47, 1.9, 3.4}, {.5, 1.2, 4.0}},
    {{5.0, 8.5, 50}, {2.7, 4.0, 9.6}, {5.0, 5.0, 10.7}}};

/// Per-step latency on `link` for an algorithm row and protocol, scaled to
/// the cluster's measured Simple-ring latency.
double hwLatency(const ClusterSpec &cl, Link link, AlgoRow row, int proto) {
  double measured = link == NVLink ? cl.intra.latency : cl.inter.latency;
  return measured * kHwLat[link][row][proto] / kHwLat[link][RingRow][2];
}

/// NCCL's bandwidth derating for the low-latency protocols.
double protocolFactor(int proto, const GroupPlacement &g, bool allReduce) {
  if (proto == 0)
    return (g.nodes > 1 || allReduce) ? 0.25 : 1.0 / 3.0;
  if (proto == 1)
    return (g.nodes > 1 && g.ranksPerNode < 2) ? 0.7 : 0.92;
  return 1.0;
}

struct Links {
  double intra; ///< bus bandwidth inside a node
  double net;   ///< bus bandwidth the group gets across nodes
  double perGpuNet;
  double allToAllNet; ///< per GPU across nodes, for all-to-all traffic
};

/// How much slower the uplinks above a pod make a group's traffic, when
/// every GPU of the pod runs a collective of the same kind at once (the
/// data-parallel phase). A rail-optimized fabric is non-blocking inside a
/// pod, and `oversubscription` times less above it; a fabric that is not
/// rail-optimized sends every inter-node flow through oversubscribed
/// uplinks. A ring (NCCL orders it by rank, so pods are contiguous
/// segments) leaves a pod once per segment: the pod's GPUs in segments of
/// m members send podGPUs/m ring flows through uplinks of podGPUs/r NIC
/// shares, slower by r/m (times the rails a flow drives) when above 1.
/// All-to-all sends the share of its bytes bound outside the pod, 1 -
/// pod/span, through the uplinks: slower by r (1 - pod/span) when above 1.
std::pair<double, double> podPenalties(const GroupPlacement &g,
                                       const ClusterSpec &cl, double rails) {
  double r = cl.inter.oversubscription;
  if (g.nodes <= 1)
    return {1, 1};
  if (!cl.inter.railOptimized)
    return {r, r};
  int pod = cl.inter.podNodes;
  if (pod <= 0 || g.span <= pod)
    return {1, 1};
  double membersPerPod = double(g.size) * pod / g.span;
  double ringPenalty = std::max(1.0, r * rails / membersPerPod);
  double allToAllPenalty =
      std::max(1.0, r * (1 - double(pod) / double(g.span)));
  return {ringPenalty, allToAllPenalty};
}

Links linkBandwidths(const GroupPlacement &g, const ClusterSpec &cl,
                     const CostConstants &c, const CollectiveOptions &o) {
  Links l;
  l.intra = cl.intra.bandwidth * c.intraNodeBusEfficiency * o.bandwidthShare;
  bool rails = o.railAggregation.value_or(c.ringRailAggregation);
  double railsPerFlow = rails ? g.ranksPerNode : 1;
  auto [ring, allToAll] = podPenalties(g, cl, railsPerFlow);
  double nic =
      cl.nicBandwidthPerGpu() * c.interNodeBusEfficiency * o.bandwidthShare;
  l.perGpuNet = nic / ring;
  l.net = l.perGpuNet * railsPerFlow;
  l.allToAllNet = nic / allToAll;
  return l;
}

double ringBusBandwidth(const GroupPlacement &g, const Links &l) {
  if (g.nodes <= 1)
    return l.intra;
  return g.ranksPerNode > 1 ? std::min(l.intra, l.net) : l.net;
}

/// Best protocol for a ring collective.
CollectiveCost ring(CollectiveKind kind, double bytes, const GroupPlacement &g,
                    const ClusterSpec &cl, const Links &l) {
  int n = g.size, nodes = g.nodes;
  bool ar = kind == CollectiveKind::AllReduce;
  int steps = ar ? 2 * (n - 1) : n - 1;
  int interSteps = ar ? 2 * (nodes - 1) : nodes - 1;
  double bus = ringBusBandwidth(g, l);
  double busBytes = bytes * busFactor(kind, n);
  CollectiveCost best;
  best.time = std::numeric_limits<double>::infinity();
  for (int p = 0; p < 3; ++p) {
    double lat = kBaseLat[RingRow][p] * kUs +
                 (steps - interSteps) * hwLatency(cl, NVLink, RingRow, p) +
                 interSteps * hwLatency(cl, Net, RingRow, p);
    double bw = bus * protocolFactor(p, g, ar);
    double t = lat + busBytes / bw;
    if (t < best.time)
      best = {t, lat, bw, CollectiveAlgo::Ring, Protocol(p)};
  }
  return best;
}

CollectiveCost tree(double bytes, const GroupPlacement &g,
                    const ClusterSpec &cl, const Links &l) {
  CollectiveCost best;
  best.time = std::numeric_limits<double>::infinity();
  double bus = 0.9 * ringBusBandwidth(g, l);
  double depth = std::ceil(std::log2(double(g.nodes)));
  for (int p = 0; p < 3; ++p) {
    double lat = kBaseLat[TreeRow][p] * kUs +
                 2 * ((g.ranksPerNode - 1) * hwLatency(cl, NVLink, TreeRow, p) +
                      depth * hwLatency(cl, Net, TreeRow, p));
    double bw = bus * protocolFactor(p, g, true);
    double t = lat + 2 * bytes / bw;
    if (t < best.time)
      best = {t, lat, bw, CollectiveAlgo::Tree, Protocol(p)};
  }
  return best;
}

GroupPlacement intraPart(const GroupPlacement &g) {
  return {g.ranksPerNode, g.ranksPerNode, 1, 1};
}
GroupPlacement interPart(const GroupPlacement &g) {
  return {g.nodes, 1, g.nodes, g.span};
}

/// Reduce-scatter inside the node, all-reduce of 1/k across nodes (ring, or
/// in-network with SHARP), all-gather inside the node.
CollectiveCost twoLevel(double bytes, const GroupPlacement &g,
                        const ClusterSpec &cl, const CostConstants &c,
                        const CollectiveOptions &o, bool sharp) {
  CollectiveOptions one = o;
  one.railAggregation = false;
  Links l = linkBandwidths(g, cl, c, one);
  GroupPlacement in = intraPart(g), out = interPart(g);
  double t = 0, lat = 0;
  if (in.size > 1) {
    CollectiveCost rs = ring(CollectiveKind::ReduceScatter, bytes, in, cl, l);
    CollectiveCost ag = ring(CollectiveKind::AllGather, bytes, in, cl, l);
    t += rs.time + ag.time;
    lat += rs.latency + ag.latency;
  }
  double shard = bytes / in.size;
  if (sharp) {
    double sLat =
        kBaseLat[CollNetRow][2] * kUs + hwLatency(cl, Net, CollNetRow, 2);
    t += sLat + shard / l.perGpuNet;
    lat += sLat;
  } else {
    CollectiveCost ar = ring(CollectiveKind::AllReduce, shard, out, cl, l);
    t += ar.time;
    lat += ar.latency;
  }
  CollectiveCost r;
  r.time = t;
  r.latency = lat;
  r.busBandwidth = bytes * busFactor(CollectiveKind::AllReduce, g.size) /
                   std::max(t - lat, 1e-30);
  r.algo = sharp ? CollectiveAlgo::CollNet : CollectiveAlgo::Hierarchical;
  r.protocol = Protocol::Simple;
  return r;
}

/// In-network (IB SHARP, NCCL CollNet) reduce-scatter or all-gather: the
/// node's members split the buffer over NVLink (a ring reduce-scatter or
/// all-gather of the whole buffer among the k members) and each sends (or
/// receives) its 1/k once through its own NIC, reduced (or multicast) by the
/// switches, in one network step instead of a ring's N - 1. NCCL >= 2.20
/// with SHARP 3.5.2 (HPC-X 2.18.1) runs reduce-scatter and all-gather this
/// way (SHARP 3.5.2 release notes).
CollectiveCost collNetScatterGather(CollectiveKind kind, double bytes,
                                    const GroupPlacement &g,
                                    const ClusterSpec &cl,
                                    const CostConstants &c,
                                    const CollectiveOptions &o) {
  CollectiveOptions one = o;
  one.railAggregation = false;
  Links l = linkBandwidths(g, cl, c, one);
  GroupPlacement in = intraPart(g);
  double t = 0, lat = 0;
  if (in.size > 1) {
    CollectiveCost node = ring(kind, bytes, in, cl, l);
    t += node.time;
    lat += node.latency;
  }
  double sLat =
      kBaseLat[CollNetRow][2] * kUs + hwLatency(cl, Net, CollNetRow, 2);
  t += sLat + bytes / in.size / l.perGpuNet;
  lat += sLat;
  CollectiveCost r;
  r.time = t;
  r.latency = lat;
  r.busBandwidth = bytes * busFactor(kind, g.size) / std::max(t - lat, 1e-30);
  r.algo = CollectiveAlgo::CollNet;
  r.protocol = Protocol::Simple;
  return r;
}

CollectiveCost allToAll(double bytes, const GroupPlacement &g,
                        const ClusterSpec &cl, const Links &l) {
  double n = g.size, k = g.ranksPerNode;
  double intraBytes = bytes * (k - 1) / n;
  double interBytes = bytes * (n - k) / n;
  double lat = kBaseLat[RingRow][2] * kUs +
               (g.nodes > 1 ? hwLatency(cl, Net, RingRow, 2)
                            : hwLatency(cl, NVLink, RingRow, 2));
  double t = std::max(intraBytes / l.intra,
                      g.nodes > 1 ? interBytes / l.allToAllNet : 0.0);
  CollectiveCost r{lat + t, lat, 0, CollectiveAlgo::Ring, Protocol::Simple};
  r.busBandwidth =
      bytes * busFactor(CollectiveKind::AllToAll, g.size) / std::max(t, 1e-30);
  return r;
}

/// Seconds for `bytes` from a measured table (`cpu`: the CPU seconds per
/// rank; 0 if not measured): linear between the points around `bytes`, the
/// first point's value below it (latency-bound), the last two points' slope
/// above the last.
double interpolate(const MeasuredCollective &m, double bytes,
                   bool cpu = false) {
  const auto &p = m.points;
  if (cpu && m.cpuSeconds.size() != p.size())
    return 0;
  auto value = [&](size_t i) { return cpu ? m.cpuSeconds[i] : p[i].second; };
  if (p.size() == 1 || bytes <= p.front().first)
    return value(0);
  size_t hi = 1;
  while (hi + 1 < p.size() && p[hi].first < bytes)
    ++hi;
  double x0 = p[hi - 1].first, x1 = p[hi].first;
  double t0 = value(hi - 1), t1 = value(hi);
  double slope = std::max(0.0, (t1 - t0) / (x1 - x0));
  return t0 + (bytes - x0) * slope;
}

/// The cost of `kind` from the cluster's measured table for groups of this
/// size, if it has one.
std::optional<CollectiveCost> measuredCost(CollectiveKind kind, double bytes,
                                           const GroupPlacement &g,
                                           const ClusterSpec &cl,
                                           const CollectiveOptions &o) {
  const MeasuredCollective *m = cl.measured(toString(kind), g.size);
  if (!m)
    return std::nullopt;
  double lat = m->points.front().second;
  double t = interpolate(*m, bytes);
  t = std::min(lat, t) + std::max(0.0, t - lat) / o.bandwidthShare;
  double transfer = std::max(t - lat, 1e-30);
  return CollectiveCost{t, lat, bytes * busFactor(kind, g.size) / transfer,
                        CollectiveAlgo::Ring, Protocol::Simple};
}

} // namespace

CollectiveCost collectiveCost(CollectiveKind kind, double bytes,
                              const GroupPlacement &g, const ClusterSpec &cl,
                              const CostConstants &c,
                              const CollectiveOptions &o) {
  if (g.size <= 1 || bytes <= 0)
    return {};
  if (std::optional<CollectiveCost> m = measuredCost(kind, bytes, g, cl, o))
    return *m;
  if (kind == CollectiveKind::SendRecv) {
    double t = p2pTime(bytes, g.nodes > 1, cl, c) / o.bandwidthShare;
    return {t, 0, bytes / t, CollectiveAlgo::Ring, Protocol::Simple};
  }
  Links l = linkBandwidths(g, cl, c, o);
  if (kind == CollectiveKind::AllToAll)
    return allToAll(bytes, g, cl, l);
  auto want = [&](CollectiveAlgo a) {
    return o.algo == CollectiveAlgo::Auto || o.algo == a;
  };
  CollectiveCost best;
  best.time = std::numeric_limits<double>::infinity();
  auto consider = [&](const CollectiveCost &cost) {
    if (cost.time < best.time)
      best = cost;
  };
  if (want(CollectiveAlgo::Ring))
    consider(ring(kind, bytes, g, cl, l));
  bool scatterGather = kind == CollectiveKind::ReduceScatter ||
                       kind == CollectiveKind::AllGather;
  if (scatterGather && g.nodes > 1 && cl.inter.sharp &&
      want(CollectiveAlgo::CollNet))
    consider(collNetScatterGather(kind, bytes, g, cl, c, o));
  if (kind == CollectiveKind::AllReduce) {
    bool multiNode = g.nodes > 1;
    if (multiNode && want(CollectiveAlgo::Tree))
      consider(tree(bytes, g, cl, l));
    if (multiNode && g.ranksPerNode > 1 && want(CollectiveAlgo::Hierarchical))
      consider(twoLevel(bytes, g, cl, c, o, false));
    if (multiNode && cl.inter.sharp && want(CollectiveAlgo::CollNet))
      consider(twoLevel(bytes, g, cl, c, o, true));
    if (!multiNode && cl.intra.nvls && g.size > 2 &&
        want(CollectiveAlgo::NVLS)) {
      double lat = 2 * cl.intra.latency;
      double bw = cl.intra.bandwidth * c.nvlsEfficiency * o.bandwidthShare;
      double t = lat + bytes / bw;
      consider({t, lat, bytes * busFactor(kind, g.size) / (bytes / bw),
                CollectiveAlgo::NVLS, Protocol::Simple});
    }
  }
  if (!std::isfinite(best.time)) // the requested algorithm does not apply
    return ring(kind, bytes, g, cl, l);
  return best;
}

double collectiveCpu(CollectiveKind kind, double bytes, const GroupPlacement &g,
                     const ClusterSpec &cl) {
  if (g.size <= 1 || bytes <= 0)
    return 0;
  const MeasuredCollective *m = cl.measured(toString(kind), g.size);
  return m ? interpolate(*m, bytes, /*cpu=*/true) : 0;
}

double p2pCpu(double bytes, bool interNode, const ClusterSpec &cl) {
  const MeasuredCollective *m = cl.measured("send_recv", 2);
  return m && !interNode && bytes > 0 ? interpolate(*m, bytes, /*cpu=*/true)
                                      : 0;
}

double p2pTime(double bytes, bool interNode, const ClusterSpec &cl,
               const CostConstants &c) {
  if (bytes <= 0)
    return 0;
  if (const MeasuredCollective *m = cl.measured("send_recv", 2);
      m && !interNode)
    return interpolate(*m, bytes);
  if (interNode)
    return cl.inter.latency +
           bytes / (cl.nicBandwidthPerGpu() * c.interNodeBusEfficiency);
  return cl.intra.latency +
         bytes / (cl.intra.bandwidth * c.intraNodeBusEfficiency);
}

} // namespace cleave::cost
