//===- ShardingGraphTest.cpp - Forward view, strategy graph, ILP on IR ----===//

#include "cleave/Planner/ShardingGraph.h"
#include "cleave/CostModel/Plan.h"
#include "cleave/Dialect/CleaveDialect.h"
#include "cleave/Models/ModelZoo.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace cleave;
using namespace cleave::planner;
using namespace mlir;

namespace {

class ShardingGraphTest : public ::testing::Test {
protected:
  ShardingGraphTest() {
    ctx.loadDialect<mlir::cleave::CleaveDialect, func::FuncDialect>();
  }

  OwningOpRef<ModuleOp> zoo(const std::string &preset,
                            std::function<void(ModelConfig &)> tweak = {}) {
    ModelConfig c = *lookupPreset(preset);
    if (tweak)
      tweak(c);
    std::string error;
    OwningOpRef<ModuleOp> m = mlir::cleave::buildModel(&ctx, c, error);
    EXPECT_TRUE(m) << error;
    return m;
  }

  ForwardView view(ModuleOp m, const char *name = "forward") {
    std::string error;
    FailureOr<ForwardView> v =
        analyzeForward(m.lookupSymbol<func::FuncOp>(name), error);
    EXPECT_TRUE(succeeded(v)) << error;
    return *v;
  }

  MLIRContext ctx;
};

/// The repeated block is one transformer layer, found from the ops' types
/// and rules alone, whatever the layer count, precision or dropout.
TEST_F(ShardingGraphTest, FindsTheRepeatedLayer) {
  struct Case {
    const char *preset;
    int layers;
    DType dtype;
    double dropout;
  };
  for (Case c : {Case{"tiny-gpt", 2, DType::F32, 0.0},
                 Case{"tiny-gpt", 4, DType::BF16, 0.1},
                 Case{"tiny-llama", 3, DType::F32, 0.0},
                 Case{"tiny-llama", 2, DType::BF16, 0.0}}) {
    SCOPED_TRACE(std::string(c.preset) + " x" + std::to_string(c.layers));
    OwningOpRef<ModuleOp> m = zoo(c.preset, [&](ModelConfig &cfg) {
      cfg.layers = c.layers;
      cfg.dtype = c.dtype;
      cfg.dropout = c.dropout;
    });
    ForwardView v = view(*m);
    EXPECT_EQ(v.count, c.layers);
    ASSERT_GT(v.length, 0);
    // The block starts at the layer's first norm.
    StringRef first = v.ops[size_t(v.start)]->getName().getStringRef();
    EXPECT_TRUE(first == "cleave.layer_norm" || first == "cleave.rms_norm" ||
                first == "cleave.cast")
        << first.str();
  }
}

} // namespace

namespace {

using Choice = std::vector<int>;

std::vector<MeshAxis> axes(int dp, int cp, int tp) {
  cost::ParallelPlan p;
  p.dp = dp;
  p.cp = cp;
  p.tp = tp;
  cost::ClusterSpec c = *cost::lookupClusterPreset("dgx-a100-80gb", 1);
  int g = c.gpusPerNode;
  return {{"dp", dp, cost::placeGroup(dp, tp * cp, g), true},
          {"cp", cp, cost::placeGroup(cp, tp, g), false},
          {"tp", tp, cost::placeGroup(tp, 1, g), false}};
}

ShardingGraph graphOf(const ForwardView &v, std::vector<MeshAxis> ax) {
  cost::ClusterSpec c = *cost::lookupClusterPreset("dgx-a100-80gb", 1);
  GraphOptions o;
  o.dtype = DType::BF16;
  return buildShardingGraph(v, std::move(ax), c, o, cost::defaultConstants());
}

/// The layout of parameter `name` under `choice`, as text.
std::string paramLayout(const ShardingGraph &g, const Choice &choice,
                        StringRef name) {
  func::FuncOp f = g.view.func;
  for (BlockArgument a : f.getArguments()) {
    auto n = f.getArgAttrOfType<StringAttr>(a.getArgNumber(), "cleave.param");
    if (n && n.getValue() == name)
      return formatLayout(g.layoutOf(a, choice), g.axes);
  }
  return "not found";
}

/// On a wide layer with a short batch, tensor parallelism over 8 GPUs is
/// Megatron's: column-parallel q, k, v and MLP up-projection (weights split
/// by output rows), row-parallel output projections, sequence-parallel
/// norms in between - found from the ops' sharding rules alone.
TEST_F(ShardingGraphTest, FindsMegatronOnAWideLayer) {
  OwningOpRef<ModuleOp> m = zoo("tiny-gpt", [](ModelConfig &c) {
    c.layers = 2;
    c.hidden = 2048;
    c.heads = 16;
    c.kvHeads = 16;
    c.ffnHidden = 8192;
    c.seqLen = 2048;
    c.batch = 2;
    c.vocab = 32768;
    c.dtype = DType::BF16;
  });
  ShardingGraph g = graphOf(view(*m), axes(1, 1, 8));
  IlpSolution s = solveIlp(g.problem(g.view.count, true, true, 1e15, 1, 1));
  ASSERT_TRUE(s.optimal);
  for (const char *col : {"h.0.attn.q.weight", "h.1.attn.k.weight",
                          "h.0.attn.v.weight", "h.1.mlp.fc.weight"})
    EXPECT_EQ(paramLayout(g, s.choice, col), "[tp, _]") << col;
  for (const char *row : {"h.0.attn.proj.weight", "h.1.mlp.proj.weight"})
    EXPECT_EQ(paramLayout(g, s.choice, row), "[_, tp]") << row;
  EXPECT_EQ(paramLayout(g, s.choice, "h.0.ln_1.weight"), "[_]");
  // The layer's block (one instance) stands for both layers.
  EXPECT_EQ(g.view.count, 2);
}

/// CBC's choice is the optimum of every assignment, on small graphs with
/// one and two free mesh axes.
TEST_F(ShardingGraphTest, IlpEqualsExhaustiveEnumeration) {
  const char *mlp = R"mlir(
    func.func @forward(%x: tensor<64x256xbf16> {cleave.input = "x"},
                       %y: tensor<64xi32> {cleave.input = "y"},
                       %w1: tensor<1024x256xbf16> {cleave.param = "w1"},
                       %w2: tensor<32x1024xbf16> {cleave.param = "w2"})
        -> tensor<f32> {
      %h = cleave.matmul %x, %w1 {transpose_rhs} : (tensor<64x256xbf16>, tensor<1024x256xbf16>) -> tensor<64x1024xbf16>
      %g = cleave.gelu %h : tensor<64x1024xbf16>
      %l = cleave.matmul %g, %w2 {transpose_rhs} : (tensor<64x1024xbf16>, tensor<32x1024xbf16>) -> tensor<64x32xbf16>
      %loss = cleave.cross_entropy %l, %y : (tensor<64x32xbf16>, tensor<64xi32>) -> tensor<f32>
      return %loss : tensor<f32>
    })mlir";
  OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(mlp, &ctx);
  ASSERT_TRUE(m);
  ForwardView v = view(*m);
  struct Mesh {
    int dp, cp, tp;
    double memory;
  };
  for (Mesh mesh : {Mesh{2, 1, 4, 1e15}, Mesh{1, 1, 8, 1e15},
                    Mesh{1, 2, 2, 1e15}, Mesh{1, 1, 4, 2.2e6}}) {
    SCOPED_TRACE(std::to_string(mesh.tp) + " " + std::to_string(mesh.cp));
    ShardingGraph g = graphOf(v, axes(mesh.dp, mesh.cp, mesh.tp));
    IlpProblem p = g.problem(0, true, true, mesh.memory, 1, 4);
    IlpSolution all = solveExhaustive(p), cbc = solveIlp(p);
    ASSERT_FALSE(all.infeasible);
    ASSERT_TRUE(cbc.optimal);
    EXPECT_NEAR(cbc.objective, all.objective, 1e-12 + 1e-9 * all.objective);
    EXPECT_TRUE(meetsMemory(p, cbc.choice));
  }
}

/// The per-device memory limit is a constraint: between the least memory
/// any sharding needs and what the fastest needs, the program trades time
/// for memory and meets the limit; below the least, nothing fits.
TEST_F(ShardingGraphTest, MemoryLimitBinds) {
  OwningOpRef<ModuleOp> m = zoo("tiny-gpt", [](ModelConfig &c) {
    c.hidden = 512;
    c.heads = 8;
    c.kvHeads = 8;
    c.ffnHidden = 2048;
    c.seqLen = 256;
    c.batch = 8;
    c.vocab = 4096;
  });
  ShardingGraph g = graphOf(view(*m), axes(1, 1, 4));
  auto memory = [&](const Choice &c) {
    auto [act, par] = g.memoryOf(c, g.view.count, true, true);
    return act + 4 * par;
  };
  IlpProblem roomy = g.problem(g.view.count, true, true, 1e15, 1, 4);
  IlpSolution fast = solveIlp(roomy);
  // The least memory: every node's smallest strategy (memory is a sum).
  Choice least(g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const std::vector<double> &b = roomy.memory[0].bytes[n];
    least[n] = int(std::min_element(b.begin(), b.end()) - b.begin());
  }
  double most = memory(fast.choice), fewest = memory(least);
  ASSERT_LT(fewest, most * 0.9);
  double limit = (most + fewest) / 2;
  IlpSolution tight =
      solveIlp(g.problem(g.view.count, true, true, limit, 1, 4));
  ASSERT_FALSE(tight.choice.empty());
  EXPECT_TRUE(tight.optimal);
  EXPECT_LE(memory(tight.choice), limit * (1 + 1e-9));
  EXPECT_GT(tight.objective, fast.objective);
  EXPECT_TRUE(solveIlp(g.problem(g.view.count, true, true, fewest * 0.99, 1, 4))
                  .infeasible);
}

/// Batch dimensions come from the data inputs through the rules: the
/// embedding's ids and the loss's logits carry it, parameters do not.
TEST_F(ShardingGraphTest, PropagatesTheBatch) {
  OwningOpRef<ModuleOp> m = zoo("tiny-gpt");
  ForwardView v = view(*m);
  for (size_t i = 0; i < v.ops.size(); ++i) {
    StringRef name = v.ops[i]->getName().getStringRef();
    const mlir::cleave::ShardingRule &r = v.rules[i];
    if (name == "cleave.embedding") {
      // ids [B, S] are operand 1: the batch is the factor of its dim 0.
      EXPECT_EQ(v.batchFactor[i], r.getOperand(1)[0][0]);
    } else if (name == "cleave.cross_entropy") {
      EXPECT_EQ(v.batchFactor[i], r.getOperand(0)[0][0]);
    } else if (name == "cleave.matmul" || name == "cleave.attention" ||
               name == "cleave.layer_norm") {
      EXPECT_GE(v.batchFactor[i], 0) << name.str();
    }
  }
}

} // namespace
