//===- ClusterTest.cpp - Presets and JSON cluster specs -------------------===//

#include "TestUtil.h"

#include <fstream>

using namespace cleave;
using namespace cleave::cost;

namespace {

TEST(ClusterTest, PresetsCarryDatasheetNumbers) {
  ClusterSpec a100 = test::preset("dgx-a100-80gb", 4);
  EXPECT_EQ(a100.numGpus(), 32);
  EXPECT_DOUBLE_EQ(a100.gpu.peakFlops(DType::BF16), 312e12);
  // Device memory as CUDA reports it (totalGlobalMem), in MiB.
  EXPECT_DOUBLE_EQ(a100.gpu.hbmBytes, 81117 * 1048576.0);
  EXPECT_DOUBLE_EQ(a100.gpu.hbmBandwidth, 2039e9);
  EXPECT_EQ(a100.gpu.peakFlops(DType::F8E4M3), 0);
  EXPECT_DOUBLE_EQ(a100.nicBandwidthPerGpu(), 25e9); // 8 x 200 Gb/s / 8
  ClusterSpec h100 = test::preset("dgx-h100", 2);
  EXPECT_DOUBLE_EQ(h100.gpu.peakFlops(DType::F8E4M3), 1978.9e12);
  EXPECT_DOUBLE_EQ(h100.intra.bandwidth, 450e9);
  EXPECT_TRUE(h100.intra.nvls);
  EXPECT_DOUBLE_EQ(h100.gpu.hbmBytes, 81090 * 1048576.0);
  EXPECT_DOUBLE_EQ(test::preset("dgx-h200", 1).gpu.hbmBytes,
                   143156 * 1048576.0);
  EXPECT_DOUBLE_EQ(test::preset("dgx-a100-40gb", 1).gpu.hbmBytes,
                   40536 * 1048576.0);
  for (const std::string &name : clusterPresetNames())
    EXPECT_EQ(test::preset(name, 3).validate(), "") << name;
}

TEST(ClusterTest, UnknownPresetListsTheKnownOnes) {
  Result<ClusterSpec> c = lookupClusterPreset("dgx-b300", 1);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().find("unknown cluster preset 'dgx-b300'"),
            std::string::npos);
  EXPECT_NE(c.error().find("dgx-h100"), std::string::npos);
  EXPECT_FALSE(lookupClusterPreset("dgx-h100", 0));
}

TEST(ClusterTest, JsonRoundTrip) {
  ClusterSpec c = test::preset("dgx-h100", 16);
  c.inter.sharp = true;
  c.inter.podNodes = 4;
  c.inter.oversubscription = 2;
  Result<ClusterSpec> back = clusterFromJson(clusterToJson(c));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->nodes, 16);
  EXPECT_DOUBLE_EQ(back->gpu.peakBF16, c.gpu.peakBF16);
  EXPECT_DOUBLE_EQ(back->inter.nicBandwidth, c.inter.nicBandwidth);
  EXPECT_DOUBLE_EQ(back->intra.latency, c.intra.latency);
  EXPECT_TRUE(back->inter.sharp);
  EXPECT_EQ(back->inter.podNodes, 4);
  EXPECT_DOUBLE_EQ(back->inter.oversubscription, 2);
}

TEST(ClusterTest, BaseOverridesOnlyTheGivenFields) {
  Result<ClusterSpec> c = clusterFromJson(R"({
    "base": "dgx-a100-80gb", "nodes": 4, "name": "selene-slice",
    "inter_node": {"sharp": true, "nic_gbit_per_s": 100}
  })");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->name, "selene-slice");
  EXPECT_EQ(c->numGpus(), 32);
  EXPECT_TRUE(c->inter.sharp);
  EXPECT_DOUBLE_EQ(c->inter.nicBandwidth, 12.5e9);
  EXPECT_DOUBLE_EQ(c->gpu.hbmBytes, 81117 * 1048576.0);
}

/// Every bad file is rejected with a message that names the field.
TEST(ClusterTest, BadSpecsNameTheField) {
  struct Case {
    const char *json, *message;
  } cases[] = {
      {R"({"base": "dgx-h100", "nodes": 2, "gpu": {"hbm_gb": -3}})",
       "cluster.gpu.hbm_gb: expected a positive number, got -3"},
      {R"({"base": "dgx-h100", "nodes": "four"})",
       "cluster.nodes: expected a positive integer, got \"four\""},
      {R"({"base": "dgx-h100"})",
       "cluster.nodes: missing (required unless \"base\" names a preset)"},
      {R"({"base": "dgx-h100", "nodes": 1, "gpu": {"hbm": 80}})",
       "cluster.gpu.hbm: unknown field (known fields: name, peak_tflops, "
       "hbm_gb, hbm_tb_per_s, sm_count, gemm_efficiency, gemm_efficiency_fp8, "
       "memory_efficiency, runtime_reserved_gb, communicator_buffer_mb)"},
      {R"({"base": "dgx-h100", "nodes": 1, "intra_node": {"kind": "ib"}})",
       "cluster.intra_node.kind: expected \"nvswitch\", \"nvlink-mesh\" or "
       "\"pcie\", got \"ib\""},
      {R"({"base": "dgx-h100", "nodes": 1,
           "gpu": {"gemm_efficiency": 1.5}})",
       "cluster.gpu.gemm_efficiency: expected a number in (0, 1], got 1.5"},
      {R"({"base": "dgx-h100", "nodes": 1,
           "inter_node": {"oversubscription": 0.5}})",
       "cluster.inter_node.oversubscription: expected a number >= 1, got "
       "0.5"},
      {R"({"base": "dgx-h100", "nodes": 1, "inter_node": {"sharp": 1}})",
       "cluster.inter_node.sharp: expected true or false, got 1"},
      {R"({"base": "tpu-v5", "nodes": 1})",
       "cluster.base: unknown cluster preset 'tpu-v5'"},
      {R"({"nodes": 1, "gpus_per_node": 8})",
       "cluster.name: missing (required unless \"base\" names a preset)"},
      {R"({"base": "dgx-h100", "nodes": 1,)", "cluster: not valid JSON"},
  };
  for (const Case &c : cases) {
    Result<ClusterSpec> r = clusterFromJson(c.json);
    ASSERT_FALSE(r) << c.json;
    EXPECT_EQ(r.error().rfind(c.message, 0), 0u)
        << "got: " << r.error() << "\nwant: " << c.message;
  }
}

TEST(ClusterTest, FullSpecWithoutBase) {
  Result<ClusterSpec> c = clusterFromJson(R"({
    "name": "tiny", "nodes": 2, "gpus_per_node": 4,
    "gpu": {"name": "g", "peak_tflops": {"bf16": 100}, "hbm_gb": 24,
            "hbm_tb_per_s": 1, "sm_count": 60, "gemm_efficiency": 0.7,
            "memory_efficiency": 0.8},
    "intra_node": {"kind": "pcie", "gb_per_s": 32, "latency_us": 5,
                   "nvls": false},
    "inter_node": {"nics_per_node": 1, "nic_gbit_per_s": 100,
                   "latency_us": 10, "rail_optimized": false, "sharp": false}
  })");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->intra.kind, IntraNodeKind::PCIe);
  EXPECT_DOUBLE_EQ(c->nicBandwidthPerGpu(), 12.5e9 / 4);
  EXPECT_EQ(c->gpu.peakFlops(DType::F32), 0);
}

TEST(ClusterTest, FilesReportTheirPath) {
  Result<ClusterSpec> missing = loadClusterFile("/nonexistent/c.json");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), "/nonexistent/c.json: cannot open the file");
  std::string path = ::testing::TempDir() + "/bad-cluster.json";
  std::ofstream(path) << R"({"base": "dgx-h100", "nodes": -1})";
  Result<ClusterSpec> bad = loadClusterFile(path);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(),
            path + ": cluster.nodes: expected a positive integer, got -1");
}

TEST(ClusterTest, ConstantsFromJson) {
  Result<CostConstants> c = constantsFromJson(R"({"overlap_slowdown": 0.2,
                            "ring_rail_aggregation": true})");
  ASSERT_TRUE(c) << c.error();
  EXPECT_DOUBLE_EQ(c->overlapSlowdown, 0.2);
  EXPECT_TRUE(c->ringRailAggregation);
  EXPECT_DOUBLE_EQ(c->kernelOverhead, CostConstants().kernelOverhead);
  EXPECT_EQ(constantsFromJson(R"({"overlap_slowdown": -1})").error(),
            "constants.overlap_slowdown: expected a number >= 0, got -1");
  EXPECT_EQ(constantsFromJson(R"({"speed": 1})").error(),
            "constants.speed: unknown constant");
  Result<CostConstants> back =
      constantsFromJson(constantsToJson(defaultConstants()));
  ASSERT_TRUE(back);
  EXPECT_DOUBLE_EQ(back->interNodeBusEfficiency,
                   defaultConstants().interNodeBusEfficiency);
}

} // namespace

/// A measured spec (cleave-measure-local-cpu) carries its tables through
/// the file, and collectives and GEMMs are priced from them.
TEST(ClusterTest, MeasuredTablesRoundTripAndPrice) {
  Result<ClusterSpec> c = clusterFromJson(R"({
    "base": "dgx-a100-80gb", "nodes": 1, "gpus_per_node": 4,
    "measured": {
      "compute_capacity": 1.5,
      "cpu_cores": 2,
      "gemm": [{"m": 256, "n": 128, "k": 128, "gflops": 10},
               {"m": 1024, "n": 1024, "k": 1024, "gflops": 40}],
      "collectives": [
        {"op": "all_reduce", "group_size": 2,
         "points": [[1024, 1000], [1048576, 3000], [4194304, 9000]],
         "cpu_us": [100, 300, 900]},
        {"op": "send_recv", "group_size": 2, "points": [[1024, 200]]}]}
  })");
  ASSERT_TRUE(c) << c.error();
  Result<ClusterSpec> back = clusterFromJson(clusterToJson(*c));
  ASSERT_TRUE(back) << back.error();
  ASSERT_EQ(back->measuredCollectives.size(), 2u);
  ASSERT_EQ(back->gpu.measuredGemms.size(), 2u);
  EXPECT_DOUBLE_EQ(back->measuredCollectives[0].points[1].second, 3e-3);
  EXPECT_DOUBLE_EQ(back->gpu.measuredGemms[0].flopsPerSecond, 10e9);
  EXPECT_DOUBLE_EQ(back->hostComputeCapacity, 1.5);
  EXPECT_EQ(back->hostCores, 2);
  ASSERT_EQ(back->measuredCollectives[0].cpuSeconds.size(), 3u);
  EXPECT_TRUE(back->measuredCollectives[1].cpuSeconds.empty());

  const CostConstants &k = defaultConstants();
  GroupPlacement pair = placeGroup(2, 1, 4), four = placeGroup(4, 1, 4);
  auto ar = [&](double bytes, const GroupPlacement &g) {
    return collectiveCost(CollectiveKind::AllReduce, bytes, g, *back, k).time;
  };
  // Below the smallest size: its time; between sizes: linear; above the
  // largest: the last slope (6 ms per 3 MiB).
  EXPECT_DOUBLE_EQ(ar(100, pair), 1e-3);
  EXPECT_NEAR(ar(0.5 * (1048576 + 4194304), pair), 6e-3, 1e-12);
  EXPECT_NEAR(ar(7340032, pair), 15e-3, 1e-12);
  // A group size without a table: the link model.
  EXPECT_LT(ar(1048576, four), 1e-3);
  EXPECT_DOUBLE_EQ(p2pTime(4096, false, *back, k), 200e-6);
  // The CPU a call costs: interpolated the same way; 0 where not measured.
  EXPECT_DOUBLE_EQ(collectiveCpu(CollectiveKind::AllReduce, 100, pair, *back),
                   100e-6);
  EXPECT_NEAR(collectiveCpu(CollectiveKind::AllReduce,
                            0.5 * (1048576 + 4194304), pair, *back),
              600e-6, 1e-12);
  EXPECT_EQ(collectiveCpu(CollectiveKind::AllReduce, 1024, four, *back), 0);
  EXPECT_EQ(p2pCpu(4096, false, *back), 0);
  // GEMMs: the nearest measured shape's rate.
  GemmShape small{512, 128, 128};
  EXPECT_NEAR(gemmTime(small, DType::F32, back->gpu, k), small.flops() / 10e9,
              1e-12);
}

TEST(ClusterTest, BadMeasuredTablesNameTheEntry) {
  struct Case {
    const char *json, *message;
  } cases[] = {
      {R"({"base": "dgx-h100", "nodes": 1, "measured": {"collectives": [
           {"op": "all_reduce", "group_size": 2,
            "points": [[4096, 10], [1024, 20]]}]}})",
       "cluster.measured.collectives[0].points[1]: expected [bytes, us], "
       "both positive, bytes ascending, got [1024,20]"},
      {R"({"base": "dgx-h100", "nodes": 1, "measured": {"collectives": [
           {"op": "all_to_all", "group_size": 2, "points": [[1, 1]]}]}})",
       "cluster.measured.collectives[0].op: expected \"all_reduce\", "
       "\"all_gather\", \"reduce_scatter\" or \"send_recv\", got "
       "\"all_to_all\""},
      {R"({"base": "dgx-h100", "nodes": 1, "measured": {"gemm": [
           {"m": 8, "n": 8, "k": 8}]}})",
       "cluster.measured.gemm[0].gflops: missing"},
      {R"({"base": "dgx-h100", "nodes": 1,
           "measured": {"compute_capacity": 0.5}})",
       "cluster.measured.compute_capacity: expected a number >= 1, got 0.5"},
      {R"({"base": "dgx-h100", "nodes": 1,
           "measured": {"compute_capacity": 9}})",
       "cluster.measured.compute_capacity: expected a number from 1 to "
       "gpus_per_node (8), got 9"},
      {R"({"base": "dgx-h100", "nodes": 1, "measured": {"collectives": [
           {"op": "all_reduce", "group_size": 2, "points": [[1, 1], [2, 2]],
            "cpu_us": [5]}]}})",
       "cluster.measured.collectives[0].cpu_us: expected one CPU time per "
       "point (2 non-negative numbers, us), got [5]"},
      {R"({"base": "dgx-h100", "nodes": 1, "measured": {"cpu_cores": 0}})",
       "cluster.measured.cpu_cores: expected a positive integer, got 0"},
  };
  for (const Case &c : cases) {
    Result<ClusterSpec> r = clusterFromJson(c.json);
    ASSERT_FALSE(r) << c.json;
    EXPECT_EQ(r.error(), c.message);
  }
}
