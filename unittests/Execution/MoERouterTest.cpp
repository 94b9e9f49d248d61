//===- MoERouterTest.cpp - The router's choices on hand-made logits -------===//
//
// cleave.moe_router compiled and run on logits whose routing is worked out
// by hand: ties go to the lower expert index, slots are taken by all first
// choices in token order before any second choice, and a selection finding
// its expert full is dropped. The gradients are checked against finite
// differences in GradientTest; this checks the forward choices themselves.
//
//===----------------------------------------------------------------------===//

#include "cleave/Execution/Compiler.h"
#include "cleave/Runtime/Runtime.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include <cmath>
#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::cleave;

namespace {

class MoERouterTest : public ::testing::Test {
protected:
  MoERouterTest() {
    registerCompilerDialects(registry);
    context = std::make_unique<MLIRContext>(registry);
    context->loadAllAvailableDialects();
  }

  /// Routes `logits` ([1, S, E]) with `attrs`; returns combine and dispatch
  /// ([1, S, E, C], flattened).
  std::pair<std::vector<double>, std::vector<double>>
  route(int64_t s, int64_t e, int64_t c, const std::string &attrs,
        std::vector<double> logits) {
    std::string in =
        "tensor<1x" + std::to_string(s) + "x" + std::to_string(e) + "xf64>";
    std::string out = "tensor<1x" + std::to_string(s) + "x" +
                      std::to_string(e) + "x" + std::to_string(c) + "xf64>";
    std::string ir = "func.func @route(%l: " + in +
                     " {cleave.input = \"l\"}) -> (" + out +
                     " {cleave.output = \"combine\"}, " + out +
                     " {cleave.output = \"dispatch\"}) {\n"
                     "  %c, %d = cleave.moe_router %l " +
                     attrs + " : (" + in + ") -> (" + out + ", " + out +
                     ")\n  return %c, %d : " + out + ", " + out + "\n}\n";
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(ir, context.get());
    EXPECT_TRUE(module) << ir;
    auto program = JitProgram::compile(*module);
    EXPECT_TRUE(static_cast<bool>(program)) << toString(program.takeError());
    if (!program)
      return {};
    const FunctionSpec *spec = (*program)->getManifest().lookup("route");
    EntryFn entry = cantFail((*program)->lookup("route"));
    std::vector<double> combine(s * e * c), dispatch(s * e * c);
    std::vector<void *> buffers;
    for (const BufferSpec &b : spec->buffers)
      buffers.push_back(b.name == "l"         ? logits.data()
                        : b.name == "combine" ? combine.data()
                                              : dispatch.data());
    entry(buffers.data());
    return {combine, dispatch};
  }

  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
};

// Top-1 over 3 experts with one slot each (ceil(0.75 * 4 / 3) = 1). Token 1
// ties experts 0 and 1 and takes 0; token 2 wants expert 1, which token 0
// took first, and is dropped.
TEST_F(MoERouterTest, TiesGoToTheLowerExpertAndLateTokensAreDropped) {
  auto [combine, dispatch] =
      route(4, 3, 1, "{top_k = 1 : i64, capacity_factor = 0.75 : f64}",
            {1, 2, 0, 3, 3, 0, 0, 5, 1, 0, 0, 2});
  ASSERT_EQ(dispatch.size(), 12u);
  EXPECT_EQ(dispatch,
            (std::vector<double>{0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}));
  double e = std::exp(1.0), e2 = e * e, e3 = e2 * e;
  std::vector<double> want = {
      0, e2 / (e + e2 + 1), 0, e3 / (2 * e3 + 1), 0, 0, 0, 0, 0, 0,
      0, e2 / (2 + e2)};
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(combine[i], want[i], 1e-12) << i;
}

// Top-2 of 2 experts with 2 slots (ceil(0.5 * 3 * 2 / 2) = 2): the three
// first choices (e0, e1, e0) take slots before any second choice, so only
// token 0's second choice fits; normalized gates are the softmax.
TEST_F(MoERouterTest, FirstChoicesComeBeforeSecondChoices) {
  auto [combine, dispatch] = route(
      3, 2, 2, "{top_k = 2 : i64, normalize, capacity_factor = 0.5 : f64}",
      {1, 0, 0, 1, 2, 0});
  ASSERT_EQ(dispatch.size(), 12u);
  // [token][expert][slot]
  EXPECT_EQ(dispatch,
            (std::vector<double>{1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0}));
  double e = std::exp(1.0), e2 = e * e;
  std::vector<double> want = {e / (e + 1), 0, 0, 1 / (e + 1),   0, 0,
                              e / (e + 1), 0, 0, e2 / (e2 + 1), 0, 0};
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(combine[i], want[i], 1e-12) << i;
}

// Dropless sigmoid routing: C = S, nothing dropped, gates are sigmoids.
TEST_F(MoERouterTest, DroplessKeepsEverySelection) {
  auto [combine, dispatch] =
      route(2, 2, 2, "{top_k = 1 : i64, sigmoid}", {0, 1, 0, 2});
  EXPECT_EQ(dispatch, (std::vector<double>{0, 0, 1, 0, 0, 0, 0, 1}));
  EXPECT_NEAR(combine[2], 1 / (1 + std::exp(-1.0)), 1e-12);
  EXPECT_NEAR(combine[7], 1 / (1 + std::exp(-2.0)), 1e-12);
}

} // namespace
