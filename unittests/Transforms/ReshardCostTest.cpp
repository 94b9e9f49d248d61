//===- ReshardCostTest.cpp - Candidate reshardings and their prices -------===//
//
// planReshardCandidates lists the greedy sequence first and the other
// choices after it; planReshard keeps the cheapest under the given price;
// reshardStepTime prices each step with the collective model on its axes'
// links (MeshCost.h). The sequences themselves are run for real in
// unittests/Execution/ReshardExecutionTest.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/CleaveDialect.h"
#include "cleave/Transforms/MeshCost.h"
#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::cleave;
namespace cost = ::cleave::cost;

namespace {

class ReshardCostTest : public ::testing::Test {
protected:
  ReshardCostTest() {
    context.loadDialect<CleaveDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(
        "cleave.mesh @m(a = 2 : ib, b = 4 : nvlink)", &context);
    mesh = *module->getOps<MeshOp>().begin();
  }

  ShardingAttr sharding(StringRef dims) {
    return cast<ShardingAttr>(
        parseAttribute(("#cleave.sharding<@m, " + dims + ">").str(), &context));
  }

  RankedTensorType tensor() {
    return RankedTensorType::get({1024, 1024}, Float32Type::get(&context));
  }

  static std::vector<std::string> describe(ArrayRef<ReshardStep> steps) {
    std::vector<std::string> out;
    for (const ReshardStep &s : steps)
      out.push_back(s.toString());
    return out;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  MeshOp mesh;
};

TEST_F(ReshardCostTest, CandidatesStartWithTheGreedySequence) {
  std::string why;
  auto candidates = planReshardCandidates(tensor(), sharding("[a, b]"),
                                          sharding("[_, (a, b)]"), mesh, why);
  ASSERT_TRUE(succeeded(candidates)) << why;
  ASSERT_EQ(candidates->size(), 2u);
  using V = std::vector<std::string>;
  EXPECT_EQ(describe((*candidates)[0]),
            (V{"all_gather [a] dim 0", "all_gather [b] dim 1",
               "shard [a, b] dim 1"}));
  EXPECT_EQ(describe((*candidates)[1]),
            (V{"all_gather [b] dim 1",
               "all_to_all [a] split_dim 1 concat_dim 0", "shard [b] dim 1"}));
  // Bytes each device sends and the buffers the cost model prices.
  EXPECT_EQ((*candidates)[0][0].bytesSent, 512 * 1024);
  EXPECT_EQ((*candidates)[0][0].bufferBytes, 1024 * 1024);
  EXPECT_EQ((*candidates)[0][1].bytesSent, 3 * 1024 * 1024);
  EXPECT_EQ((*candidates)[1][1].bufferBytes, 2 * 1024 * 1024);
  EXPECT_EQ(reshardCost((*candidates)[0], reshardStepBytes), 3.5 * (1 << 20));
  EXPECT_EQ(reshardCost((*candidates)[1], reshardStepBytes), 2.5 * (1 << 20));
}

TEST_F(ReshardCostTest, TimeAndBytesPickDifferentSequences) {
  auto cluster = clusterForModule(*module, "dgx-a100-80gb", "", 0);
  ASSERT_TRUE(bool(cluster)) << cluster.error();
  // One node of 8 GPUs would hold the mesh, but 'a' crosses nodes.
  EXPECT_EQ(cluster->nodes, 2);
  auto time = [&](const ReshardStep &s) {
    return reshardStepTime(s, mesh, *cluster);
  };
  std::string why;
  auto byTime = planReshard(tensor(), sharding("[a, b]"),
                            sharding("[_, (a, b)]"), mesh, why, time);
  auto byBytes = planReshard(tensor(), sharding("[a, b]"),
                             sharding("[_, (a, b)]"), mesh, why);
  ASSERT_TRUE(succeeded(byTime) && succeeded(byBytes)) << why;
  EXPECT_EQ(byTime->front().toString(), "all_gather [a] dim 0");
  EXPECT_EQ(byBytes->front().toString(), "all_gather [b] dim 1");
  EXPECT_LT(reshardCost(*byTime, time), reshardCost(*byBytes, time));
  EXPECT_GT(reshardCost(*byTime, reshardStepBytes),
            reshardCost(*byBytes, reshardStepBytes));
}

TEST_F(ReshardCostTest, StepTimeFollowsTheAxisLink) {
  auto cluster = clusterForModule(*module, "dgx-a100-80gb", "", 0);
  ASSERT_TRUE(bool(cluster)) << cluster.error();
  ReshardStep gather{ReshardStep::Kind::AllGather, {"a"}, 0, -1, 0, 1 << 22};
  double overIb = reshardStepTime(gather, mesh, *cluster);
  gather.axes = {"b"};
  double overNvlink = reshardStepTime(gather, mesh, *cluster);
  // Over the NICs each device sends 2 MiB, over NVLink 3 MiB, yet the
  // NICs take several times longer.
  EXPECT_GT(overIb, 3 * overNvlink);
  // The group of both axes spans 2 nodes with 4 members each.
  cost::GroupPlacement g = placeAxes(mesh, {"a", "b"});
  EXPECT_EQ(g.size, 8);
  EXPECT_EQ(g.ranksPerNode, 4);
  EXPECT_EQ(g.nodes, 2);
  ReshardStep slice{ReshardStep::Kind::Shard, {"a"}, 0, -1, 0, 0};
  EXPECT_EQ(reshardStepTime(slice, mesh, *cluster), 0);
}

TEST_F(ReshardCostTest, PendingSumsOfferScatterAndReduce) {
  std::string why;
  auto candidates =
      planReshardCandidates(tensor(), sharding("[_, _], partial = [b]"),
                            sharding("[b, _]"), mesh, why);
  ASSERT_TRUE(succeeded(candidates)) << why;
  ASSERT_EQ(candidates->size(), 2u);
  EXPECT_EQ((*candidates)[0].front().toString(), "reduce_scatter [b] dim 0");
  EXPECT_EQ((*candidates)[1].front().toString(), "all_reduce [b]");
  EXPECT_EQ((*candidates)[1].back().toString(), "shard [b] dim 0");
  // A sum cannot be created.
  EXPECT_TRUE(failed(planReshardCandidates(tensor(), sharding("[_, _]"),
                                           sharding("[_, _], partial = [a]"),
                                           mesh, why)));
  EXPECT_EQ(why, "a replicated or split value cannot become a pending sum "
                 "over 'a'");
}

} // namespace
