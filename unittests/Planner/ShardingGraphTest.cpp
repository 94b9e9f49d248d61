//===- ShardingGraphTest.cpp - Forward view, strategy graph, ILP on IR ----===//

#include "cleave/Dialect/CleaveDialect.h"
#include "cleave/Models/ModelZoo.h"
#include "cleave/Planner/ShardingGraph.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

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
