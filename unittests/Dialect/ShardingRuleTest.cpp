//===- ShardingRuleTest.cpp - Every op's sharding rule against its shapes -===//

#include "cleave/Dialect/CleaveOps.h"
#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringSet.h"
#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::cleave;

namespace {

class ShardingRuleTest : public ::testing::Test {
protected:
  ShardingRuleTest() {
    context.loadDialect<CleaveDialect, func::FuncDialect>();
  }

  OwningOpRef<ModuleOp> parse(StringRef ir) {
    return parseSourceString<ModuleOp>(ir, &context);
  }

  /// Parses `ir` and returns the first op of type OpTy in it.
  template <typename OpTy>
  OpTy first(StringRef ir) {
    module = parse(ir);
    EXPECT_TRUE(module) << "failed to parse:\n" << ir.str();
    OpTy found;
    if (module)
      module->walk([&](OpTy op) {
        if (!found)
          found = op;
      });
    return found;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

/// ops.mlir holds an instance of every op of the dialect (its round trip is a
/// lit test); every rule must be consistent with the instance's shapes, and
/// every op with a rule must be there.
TEST_F(ShardingRuleTest, EveryOpInTheRoundTripTestHasAConsistentRule) {
  OwningOpRef<ModuleOp> all = parseSourceFile<ModuleOp>(
      CLEAVE_SOURCE_DIR "/test/Dialect/ops.mlir", &context);
  ASSERT_TRUE(all);
  llvm::StringSet<> covered;
  all->walk([&](ShardingRuleOpInterface op) {
    ShardingRule rule = op.getShardingRule();
    EXPECT_TRUE(succeeded(rule.verify(op)))
        << op->getName().getStringRef().str() << ": " << rule.toString();
    covered.insert(op->getName().getStringRef());
  });
  for (RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "cleave")
      continue;
    if (name.hasInterface<ShardingRuleOpInterface>())
      EXPECT_TRUE(covered.contains(name.getStringRef()))
          << name.getStringRef().str()
          << " has a sharding rule but no instance in test/Dialect/ops.mlir";
  }
}

/// Model ops (global semantics) all carry a rule; only the mesh declaration
/// and the per-device communication ops do not.
TEST_F(ShardingRuleTest, EveryModelOpImplementsTheInterface) {
  llvm::StringSet<> perDevice = {
      "cleave.mesh", "cleave.all_reduce", "cleave.all_gather",
      "cleave.reduce_scatter", "cleave.all_to_all", "cleave.collective_permute",
      "cleave.send", "cleave.recv", "cleave.axis_index", "cleave.shard",
      // The asynchronous forms (cleave-async-collectives), per device too.
      "cleave.all_reduce_start", "cleave.all_gather_start",
      "cleave.reduce_scatter_start", "cleave.all_to_all_start",
      "cleave.collective_permute_start", "cleave.send_start",
      "cleave.recv_start", "cleave.wait"};
  for (RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "cleave")
      continue;
    bool expected = !perDevice.contains(name.getStringRef());
    EXPECT_EQ(name.hasInterface<ShardingRuleOpInterface>(), expected)
        << name.getStringRef().str();
    EXPECT_EQ(name.hasInterface<CostOpInterface>(), expected)
        << name.getStringRef().str();
  }
}

TEST_F(ShardingRuleTest, MatmulHasBatchRowColumnAndReductionFactors) {
  auto op = first<MatmulOp>(R"mlir(
    func.func @f(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>) -> tensor<2x4x16xf32> {
      %0 = cleave.matmul %x, %w {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
      return %0 : tensor<2x4x16xf32>
    })mlir");
  ASSERT_TRUE(op);
  ShardingRule rule = op.getShardingRule();
  ASSERT_EQ(rule.getNumFactors(), 4);
  // batch, M, N pass through; K (size 8) is a reduction shared by lhs dim 2
  // and rhs dim 1 (rhs is transposed).
  EXPECT_EQ(rule.getFactorKind(3), FactorKind::Reduction);
  EXPECT_EQ(rule.getFactorSize(3), 8);
  EXPECT_EQ(rule.getOperand(0)[2][0], 3);
  EXPECT_EQ(rule.getOperand(1)[1][0], 3);
  EXPECT_EQ(rule.getResult(0)[2][0], 2);
  EXPECT_EQ(rule.getOperand(1)[0][0], 2);
  EXPECT_EQ(cast<CostOpInterface>(op.getOperation()).getFlops(),
            2.0 * 2 * 4 * 16 * 8);
}

TEST_F(ShardingRuleTest, ReshapeSplitsHiddenIntoHeads) {
  auto op = first<ReshapeOp>(R"mlir(
    func.func @f(%x: tensor<8x128x768xf32>) -> tensor<8x128x12x64xf32> {
      %0 = cleave.reshape %x : tensor<8x128x768xf32> to tensor<8x128x12x64xf32>
      return %0 : tensor<8x128x12x64xf32>
    })mlir");
  ASSERT_TRUE(op);
  ShardingRule rule = op.getShardingRule();
  EXPECT_EQ(rule.toString(),
            "([i, j, (k, l)]) -> ([i, j, k, l]) {i=8, j=128, k=12, l=64}");
}

TEST_F(ShardingRuleTest, ReshapeWithoutCommonFactorsNeedsReplication) {
  auto op = first<ReshapeOp>(R"mlir(
    func.func @f(%x: tensor<3x1x4x5xf32>) -> tensor<4x3x5xf32> {
      %0 = cleave.reshape %x : tensor<3x1x4x5xf32> to tensor<4x3x5xf32>
      return %0 : tensor<4x3x5xf32>
    })mlir");
  ASSERT_TRUE(op);
  ShardingRule rule = op.getShardingRule();
  EXPECT_TRUE(succeeded(rule.verify(op)));
  // [3, 1, 4] and [4, 3] share no factor order; the trailing 5 still does.
  EXPECT_EQ(rule.toString(), "([i, 1, j, m]) -> ([k, l, m]) {i=3, j=4, k=4, "
                             "l=3, m=5} need-replication={i, j, k, l}");
}

TEST_F(ShardingRuleTest, GroupedQueryAttentionSplitsHeadsConsistently) {
  auto op = first<AttentionOp>(R"mlir(
    func.func @f(%q: tensor<2x8x8x16xf32>, %k: tensor<2x8x2x16xf32>) -> tensor<2x8x8x16xf32> {
      %0 = cleave.attention %q, %k, %k {causal} : (tensor<2x8x8x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x8x16xf32>
      return %0 : tensor<2x8x8x16xf32>
    })mlir");
  ASSERT_TRUE(op);
  ShardingRule rule = op.getShardingRule();
  // The query head dim is (kv head, group); splitting the kv-head factor
  // splits q, k, v and the result the same way.
  const auto &qHeads = rule.getOperand(0)[2];
  ASSERT_EQ(qHeads.size(), 2u);
  EXPECT_EQ(rule.getOperand(1)[2][0], qHeads[0]);
  EXPECT_EQ(rule.getFactorSize(qHeads[0]), 2);
  EXPECT_EQ(rule.getFactorSize(qHeads[1]), 4);
  // Context parallelism: the query sequence may be split (each device keeps
  // its queries), the key sequence may not (keys are gathered).
  EXPECT_EQ(rule.getFactorKind(rule.getOperand(0)[1][0]),
            FactorKind::PassThrough);
  EXPECT_EQ(rule.getFactorKind(rule.getOperand(1)[1][0]),
            FactorKind::NeedReplication);
  EXPECT_DOUBLE_EQ(cast<CostOpInterface>(op.getOperation()).getFlops(),
                   2.0 * 2 * 8 * 8 * 8 * (16 + 16));
  EXPECT_DOUBLE_EQ(op.getScaleOrDefault(), 0.25);
}

TEST_F(ShardingRuleTest, AttentionGradSumsKeyGradientsOverQueryBlocks) {
  auto op = first<AttentionGradOp>(R"mlir(
    func.func @f(%q: tensor<2x4x2x16xf32>, %k: tensor<2x8x2x16xf32>, %b: tensor<i64>) {
      %0:3 = cleave.attention_grad %q, %k, %k, %q, %b {causal} : (tensor<2x4x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x4x2x16xf32>, tensor<i64>) -> (tensor<2x4x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
      return
    })mlir");
  ASSERT_TRUE(op);
  ShardingRule rule = op.getShardingRule();
  EXPECT_TRUE(succeeded(rule.verify(op)));
  // The query sequence j is absent from dk and dv: pending sums there.
  EXPECT_EQ(rule.toString(),
            "([i, j, l, m], [i, k, l, m], [i, k, l, n], [i, j, l, n], []) -> "
            "([i, j, l, m], [i, k, l, m], [i, k, l, n]) {i=2, j=4, k=8, l=2, "
            "m=16, n=16} reduction={j, n} need-replication={k, m}");
}

TEST_F(ShardingRuleTest, RotarySplitsTheSequence) {
  auto op = first<RotaryOp>(R"mlir(
    func.func @f(%x: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
      %0 = cleave.rotary %x : tensor<2x8x4x16xf32>
      return %0 : tensor<2x8x4x16xf32>
    })mlir");
  ASSERT_TRUE(op);
  ShardingRule rule = op.getShardingRule();
  EXPECT_EQ(rule.toString(), "([i, j, k, l]) -> ([i, j, k, l]) {i=2, j=8, "
                             "k=4, l=16} need-replication={l}");
}

TEST_F(ShardingRuleTest, WeightGradientsOfNormsArePartialOverRows) {
  auto op = first<LayerNormGradOp>(R"mlir(
    func.func @f(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
      %0:3 = cleave.layer_norm_grad %x, %g, %x : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
      return
    })mlir");
  ASSERT_TRUE(op);
  ShardingRule rule = op.getShardingRule();
  EXPECT_EQ(rule.toString(), "([i, j], [j], [i, j]) -> ([i, j], [j], [j]) "
                             "{i=4, j=8} reduction={i} need-replication={j}");
}

TEST_F(ShardingRuleTest, VerifyRejectsInconsistentRules) {
  auto op = first<AddOp>(R"mlir(
    func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = cleave.add %x, %x : tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })mlir");
  ASSERT_TRUE(op);
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  ShardingRule wrongSize(op);
  wrongSize.addFactor({0, 0}, {0}, 4);
  wrongSize.addFactor({1, 1}, {1}, 4);
  EXPECT_TRUE(failed(wrongSize.verify(op)));
  EXPECT_NE(message.find("dimension 1 multiply to 4, but the dimension has "
                         "size 8"),
            std::string::npos)
      << message;

  ShardingRule missingFromResult(op);
  missingFromResult.addFactor({0, 0}, {0}, 4);
  missingFromResult.addFactor({1, 1}, {ShardingRule::kNoDim}, 8);
  EXPECT_TRUE(failed(missingFromResult.verify(op)));
}

TEST(ShardingAttrTest, AccessorsAndReplication) {
  MLIRContext context;
  context.loadDialect<CleaveDialect>();
  auto sharding =
      ShardingAttr::get(&context, "world", {{"dp"}, {}, {"tp", "sp"}}, {"pp"});
  EXPECT_EQ(sharding.getRank(), 3u);
  EXPECT_EQ(sharding.getDimAxes(2), (SmallVector<StringRef>{"tp", "sp"}));
  EXPECT_EQ(sharding.getUsedAxes(),
            (SmallVector<StringRef>{"dp", "tp", "sp", "pp"}));
  EXPECT_FALSE(sharding.isFullyReplicated());
  EXPECT_TRUE(
      ShardingAttr::getReplicated(&context, "world", 2).isFullyReplicated());
  std::string printed;
  llvm::raw_string_ostream os(printed);
  os << Attribute(sharding);
  EXPECT_EQ(printed,
            "#cleave.sharding<@world, [dp, _, (tp, sp)], partial = [pp]>");
  EXPECT_EQ(parseAttribute(printed, &context), Attribute(sharding));
}

TEST(ShardingAttrTest, VerifiedAgainstMeshAndShape) {
  MLIRContext context;
  context.loadDialect<CleaveDialect, func::FuncDialect>();
  OpBuilder builder(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(builder.getUnknownLoc());
  builder.setInsertionPointToEnd(module->getBody());
  auto mesh = builder.create<MeshOp>(
      builder.getUnknownLoc(), "m", SmallVector<StringRef>{"dp", "tp"},
      SmallVector<int64_t>{2, 4},
      SmallVector<LinkKind>{LinkKind::InfiniBand, LinkKind::NVLink});
  EXPECT_EQ(mesh.getNumDevices(), 8);
  EXPECT_EQ(mesh.getAxisLink("tp"), LinkKind::NVLink);
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  auto emit = [&] { return mesh->emitError(); };
  auto type = RankedTensorType::get({8, 12}, builder.getF32Type());
  auto ok = ShardingAttr::get(&context, "m", {{"dp"}, {"tp"}});
  EXPECT_TRUE(succeeded(verifySharding(ok, type, mesh, emit, "x")));
  auto bad = ShardingAttr::get(&context, "m", {{}, {"dp", "tp"}});
  EXPECT_TRUE(failed(verifySharding(bad, type, mesh, emit, "x")));
  EXPECT_EQ(message, "dimension 1 of x has size 12, which is not divisible by "
                     "8 (the number of devices on axes dp, tp)");
}

} // namespace
