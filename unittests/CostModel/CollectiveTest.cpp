//===- CollectiveTest.cpp - Alpha-beta collective costs -------------------===//

#include "TestUtil.h"

using namespace cleave;
using namespace cleave::cost;

namespace {

/// One node of 4 GPUs on a 100 GB/s switch with 2 us per ring step, and a
/// 12.5 GB/s NIC per node with 10 us per step.
ClusterSpec toyCluster(int nodes, int gpusPerNode) {
  ClusterSpec c = test::preset("dgx-a100-80gb", nodes);
  c.gpusPerNode = gpusPerNode;
  c.intra.bandwidth = 100e9;
  c.intra.latency = 2e-6;
  c.intra.nvls = false;
  c.inter.nicsPerNode = 1;
  c.inter.nicBandwidth = 12.5e9;
  c.inter.latency = 10e-6;
  return c;
}

TEST(CollectiveTest, PlacementFollowsTheRankOrder) {
  auto check = [](int size, int stride, int k, int nodes) {
    GroupPlacement g = placeGroup(size, stride, 8);
    EXPECT_EQ(g.ranksPerNode, k) << size << " " << stride;
    EXPECT_EQ(g.nodes, nodes) << size << " " << stride;
  };
  check(8, 1, 8, 1); // TP inside a node
  check(2, 1, 2, 1);
  check(16, 1, 8, 2);  // TP = 1, DP over two nodes
  check(32, 8, 1, 32); // DP after TP = 8: one rank per node
  check(32, 2, 4, 8);  // DP after TP = 2
  check(1, 1, 1, 1);
}

TEST(CollectiveTest, BusFactors) {
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::AllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::AllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::ReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::AllReduce, 1), 0);
}

/// Ring all-reduce of 1 GB over 4 GPUs of one node: NCCL's Simple protocol
/// latency (8.4 us base + 2(n-1) = 6 steps of 2 us) plus 2(n-1)/n bytes at
/// the bus bandwidth.
TEST(CollectiveTest, RingAllReduceByHand) {
  ClusterSpec c = toyCluster(1, 4);
  CostConstants k = test::exactConstants();
  CollectiveOptions ring;
  ring.algo = CollectiveAlgo::Ring;
  CollectiveCost cost = collectiveCost(CollectiveKind::AllReduce, 1e9,
                                       placeGroup(4, 1, 4), c, k, ring);
  EXPECT_EQ(cost.protocol, Protocol::Simple);
  EXPECT_NEAR(cost.latency, 8.4e-6 + 6 * 2e-6, 1e-15);
  EXPECT_NEAR(cost.time, 8.4e-6 + 6 * 2e-6 + 1.5e9 / 100e9, 1e-12);
  EXPECT_DOUBLE_EQ(cost.busBandwidth, 100e9);
  // A tiny message takes the low-latency protocol: 3.6 us base, NVLink LL
  // steps at 0.47 / 3.4 of the Simple step, a quarter of the bandwidth.
  CollectiveCost small = collectiveCost(CollectiveKind::AllReduce, 1e3,
                                        placeGroup(4, 1, 4), c, k, ring);
  EXPECT_EQ(small.protocol, Protocol::LL);
  EXPECT_NEAR(small.time, 3.6e-6 + 6 * 2e-6 * 0.47 / 3.4 + 1.5e3 / 25e9, 1e-15);
}

/// Ring all-gather across 4 nodes with one GPU each: every step crosses
/// the network.
TEST(CollectiveTest, InterNodeRingByHand) {
  ClusterSpec c = toyCluster(4, 1);
  CostConstants k = test::exactConstants();
  CollectiveCost cost =
      collectiveCost(CollectiveKind::AllGather, 1e9, placeGroup(4, 1, 1), c, k);
  EXPECT_NEAR(cost.time, 8.4e-6 + 3 * 10e-6 + 0.75e9 / 12.5e9, 1e-12);
  EXPECT_NEAR(p2pTime(1e9, true, c, k), 10e-6 + 1e9 / 12.5e9, 1e-12);
  EXPECT_NEAR(p2pTime(1e9, false, c, k), 2e-6 + 1e9 / 100e9, 1e-12);
}

TEST(CollectiveTest, HierarchicalAllReduceUsesEveryNic) {
  ClusterSpec c = test::preset("dgx-a100-80gb", 4);
  CostConstants k;
  GroupPlacement g = placeGroup(32, 1, 8);
  CollectiveOptions ring, hier;
  ring.algo = CollectiveAlgo::Ring;
  hier.algo = CollectiveAlgo::Hierarchical;
  double ringT =
      collectiveCost(CollectiveKind::AllReduce, 4e9, g, c, k, ring).time;
  double hierT =
      collectiveCost(CollectiveKind::AllReduce, 4e9, g, c, k, hier).time;
  double autoT = collectiveCost(CollectiveKind::AllReduce, 4e9, g, c, k).time;
  EXPECT_LT(hierT, ringT); // 1/8 of the data per NIC vs a flat ring
  EXPECT_LE(autoT, std::min(ringT, hierT));
  // With rail aggregation a flat ring drives all 8 NICs too.
  CollectiveOptions rails = ring;
  rails.railAggregation = true;
  EXPECT_LT(collectiveCost(CollectiveKind::AllReduce, 4e9, g, c, k, rails).time,
            ringT);
}

TEST(CollectiveTest, InNetworkReductionAndNvlsHelp) {
  ClusterSpec c = test::preset("dgx-h100", 8);
  CostConstants k;
  GroupPlacement dp = placeGroup(64, 1, 8);
  double plain = collectiveCost(CollectiveKind::AllReduce, 1e9, dp, c, k).time;
  c.inter.sharp = true;
  CollectiveCost sharp =
      collectiveCost(CollectiveKind::AllReduce, 1e9, dp, c, k);
  EXPECT_LE(sharp.time, plain);
  EXPECT_EQ(sharp.algo, CollectiveAlgo::CollNet);
  CollectiveCost nvls =
      collectiveCost(CollectiveKind::AllReduce, 1e9, placeGroup(8, 1, 8), c, k);
  EXPECT_EQ(nvls.algo, CollectiveAlgo::NVLS);
  // ~480 GB/s bus bandwidth on 8 H100s (the NCCL maintainers' figure).
  EXPECT_NEAR(nvls.busBandwidth / 1e9, 480, 5);
}

/// NVLink SHARP does not speed up reduce-scatter or all-gather inside a
/// node: each member still sends or receives the whole buffer once (NCCL
/// maintainers, NVIDIA/nccl#1506: "NVLink SHARP does not promise a
/// bandwidth improvement over point-to-point based operations for allgather
/// and reduce scatter"; measured 300 GB/s NVLS vs 350 GB/s ring all-gather
/// on 8 H100s), so NCCL's tuner keeps rings.
TEST(CollectiveTest, NvlsLeavesReduceScatterAndAllGather) {
  ClusterSpec c = test::preset("dgx-h100", 8);
  CostConstants k;
  GroupPlacement node = placeGroup(8, 1, 8);
  for (CollectiveKind kind :
       {CollectiveKind::ReduceScatter, CollectiveKind::AllGather}) {
    ClusterSpec plain = c, nvls = c;
    plain.intra.nvls = false;
    nvls.intra.nvls = true;
    CollectiveCost a = collectiveCost(kind, 1e9, node, plain, k);
    CollectiveCost b = collectiveCost(kind, 1e9, node, nvls, k);
    EXPECT_DOUBLE_EQ(a.time, b.time);
    EXPECT_EQ(b.algo, CollectiveAlgo::Ring);
  }
}

/// IB SHARP (NCCL >= 2.20 CollNet) reduce-scatters and all-gathers across
/// nodes: the node's 8 members split the buffer over NVLink and each sends
/// its 1/8 through its own NIC once, where a flat ring gets one NIC's share
/// per member: a ZeRO-1/2 group with 8 members per node gets faster. A
/// rail-aligned group (one member per node) sends its whole buffer either
/// way, and the ring's (N-1)/N of it wins for large buffers.
TEST(CollectiveTest, SharpSpeedsUpReduceScatterAndAllGatherAcrossNodes) {
  ClusterSpec c = test::preset("dgx-h100", 8);
  CostConstants k;
  ClusterSpec sharp = c;
  sharp.inter.sharp = true;
  GroupPlacement dense = placeGroup(64, 1, 8), railed = placeGroup(8, 8, 8);
  for (CollectiveKind kind :
       {CollectiveKind::ReduceScatter, CollectiveKind::AllGather}) {
    CollectiveCost ring = collectiveCost(kind, 1e9, dense, c, k);
    CollectiveCost net = collectiveCost(kind, 1e9, dense, sharp, k);
    EXPECT_EQ(net.algo, CollectiveAlgo::CollNet);
    // 7/8 of 1 GB over NVLink plus 1/8 GB over a 45 GB/s NIC share, vs
    // 63/64 GB over the NIC share: about 4x.
    double nvlink = 450e9 * k.intraNodeBusEfficiency;
    double nic = 50e9 * k.interNodeBusEfficiency;
    EXPECT_NEAR(net.time - net.latency, 1e9 * 7 / 8 / nvlink + 1e9 / 8 / nic,
                1e-6);
    EXPECT_GT(ring.time / net.time, 3.5);
    CollectiveCost railRing = collectiveCost(kind, 1e9, railed, c, k);
    CollectiveCost railSharp = collectiveCost(kind, 1e9, railed, sharp, k);
    EXPECT_DOUBLE_EQ(railSharp.time, railRing.time);
    // Small buffers: one network step instead of seven.
    EXPECT_LT(collectiveCost(kind, 1e5, railed, sharp, k).time,
              collectiveCost(kind, 1e5, railed, c, k).time);
  }
}

/// Bandwidth-bound time of one collective (its latency removed).
double transferTime(CollectiveKind kind, const GroupPlacement &g,
                    const ClusterSpec &c, const CostConstants &k) {
  CollectiveCost cost = collectiveCost(kind, 1e9, g, c, k);
  return cost.time - cost.latency;
}

/// Above a pod the uplinks carry 1/oversubscription of the pod's NIC
/// bandwidth. A ring leaves a pod once per segment of members inside it, so
/// with every GPU of the pod in such a ring the uplinks carry one flow per
/// m members: slower by r / m when that exceeds 1.
TEST(CollectiveTest, OversubscriptionSlowsRingsWithFewMembersPerPod) {
  ClusterSpec c = test::preset("dgx-h100", 16);
  CostConstants k;
  auto ag = CollectiveKind::AllGather;
  GroupPlacement dense = placeGroup(16, 8, 8); // one member per node
  EXPECT_EQ(dense.span, 16);
  GroupPlacement sparse = placeGroup(4, 32, 8); // every fourth node
  EXPECT_EQ(sparse.nodes, 4);
  EXPECT_EQ(sparse.span, 13);
  double denseBase = transferTime(ag, dense, c, k);
  double sparseBase = transferTime(ag, sparse, c, k);
  c.inter.podNodes = 4;
  c.inter.oversubscription = 2;
  // Four members in each pod: 2 / 4 < 1, the uplinks keep up.
  EXPECT_DOUBLE_EQ(transferTime(ag, dense, c, k), denseBase);
  // 4 x 4 / 13 members per pod: 2 / 1.23 slower.
  EXPECT_NEAR(transferTime(ag, sparse, c, k) / sparseBase, 2 * 13.0 / 16, 1e-9);
  c.inter.oversubscription = 8; // 8 / 4
  EXPECT_NEAR(transferTime(ag, dense, c, k) / denseBase, 2, 1e-9);
  // A group inside one pod never uses the uplinks.
  GroupPlacement inPod = placeGroup(4, 8, 8);
  ClusterSpec flat = test::preset("dgx-h100", 16);
  EXPECT_DOUBLE_EQ(transferTime(ag, inPod, c, k),
                   transferTime(ag, inPod, flat, k));
}

/// All-to-all sends the share of its bytes bound outside the pod through
/// the uplinks: 1 - 4/16 of it with 4-node pods, slower by 2 x 0.75.
TEST(CollectiveTest, OversubscriptionSlowsAllToAllByItsShareLeavingThePod) {
  ClusterSpec c = test::preset("dgx-h100", 16);
  CostConstants k;
  GroupPlacement g = placeGroup(16, 8, 8);
  double base = transferTime(CollectiveKind::AllToAll, g, c, k);
  c.inter.podNodes = 4;
  c.inter.oversubscription = 2;
  EXPECT_NEAR(transferTime(CollectiveKind::AllToAll, g, c, k) / base, 1.5,
              1e-9);
}

/// More bandwidth (per GPU link or per NIC) is never slower, for every
/// collective, size and placement.
TEST(CollectiveTest, MoreBandwidthIsNeverSlower) {
  CostConstants k;
  ClusterSpec slow = test::preset("dgx-a100-80gb", 8);
  for (int which = 0; which < 2; ++which) {
    ClusterSpec fast = slow;
    (which ? fast.inter.nicBandwidth : fast.intra.bandwidth) *= 2;
    for (CollectiveKind kind :
         {CollectiveKind::AllReduce, CollectiveKind::AllGather,
          CollectiveKind::ReduceScatter, CollectiveKind::AllToAll,
          CollectiveKind::Broadcast, CollectiveKind::SendRecv})
      for (double bytes : {1e2, 1e5, 1e7, 1e9, 1e11})
        for (GroupPlacement g : {placeGroup(8, 1, 8), placeGroup(8, 8, 8),
                                 placeGroup(64, 1, 8), placeGroup(16, 2, 8)})
          EXPECT_LE(collectiveCost(kind, bytes, g, fast, k).time,
                    collectiveCost(kind, bytes, g, slow, k).time)
              << toString(kind) << " " << bytes << " " << g.size;
  }
}

TEST(CollectiveTest, NamesOfTheDialectOps) {
  EXPECT_EQ(parseCollectiveKind("all_reduce"), CollectiveKind::AllReduce);
  EXPECT_EQ(parseCollectiveKind("collective_permute"),
            CollectiveKind::SendRecv);
  EXPECT_FALSE(parseCollectiveKind("matmul"));
}

} // namespace

namespace {

TEST(CollectiveTest, OnlyRailOptimizedFabricsAreNonBlockingInsideAPod) {
  CostConstants k;
  ClusterSpec c = test::preset("dgx-a100-80gb", 4);
  c.inter.oversubscription = 2;
  GroupPlacement g = placeGroup(4, 8, 8);
  double rails = collectiveCost(CollectiveKind::AllGather, 1e9, g, c, k).time;
  c.inter.railOptimized = false;
  double flat = collectiveCost(CollectiveKind::AllGather, 1e9, g, c, k).time;
  EXPECT_GT(flat, 1.8 * rails);
  // Inside one node nothing crosses the fabric.
  EXPECT_DOUBLE_EQ(
      collectiveCost(CollectiveKind::AllGather, 1e9, placeGroup(8, 1, 8), c, k)
          .time,
      collectiveCost(CollectiveKind::AllGather, 1e9, placeGroup(8, 1, 8),
                     test::preset("dgx-a100-80gb", 4), k)
          .time);
}

} // namespace
