//===- FlashAttentionTest.cpp - Tiled attention against the full one ------===//
//
// cleave.attention and cleave.attention_grad compiled twice, with the tiled
// online-softmax lowering (attention-tile = 4, so sequences span several
// tiles, and lengths that are not a multiple of 4 exercise the padding) and
// with the materialised lowering (attention-tile = 0); both run on the same
// random f64 inputs and every output must agree. The materialised lowering
// is itself checked against finite differences in GradientTest.
//
//===----------------------------------------------------------------------===//

#include "cleave/Execution/Compiler.h"
#include "cleave/Runtime/Runtime.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include <cmath>
#include <gtest/gtest.h>
#include <random>

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// One attention case: shapes, attributes and the query block (-1: none).
struct Case {
  int64_t b, s, skv, hq, hkv, d, dv;
  std::string attrs;
  int64_t queryBlock = -1;
};

std::string tensor(int64_t b, int64_t l, int64_t h, int64_t d) {
  return "tensor<" + std::to_string(b) + "x" + std::to_string(l) + "x" +
         std::to_string(h) + "x" + std::to_string(d) + "xf64>";
}

/// @fwd(q, k, v[, block]) -> o and @bwd(q, k, v, do[, block]) -> dq, dk, dv.
std::string program(const Case &c) {
  std::string q = tensor(c.b, c.s, c.hq, c.d),
              k = tensor(c.b, c.skv, c.hkv, c.d),
              v = tensor(c.b, c.skv, c.hkv, c.dv),
              o = tensor(c.b, c.s, c.hq, c.dv);
  bool block = c.queryBlock >= 0;
  std::string args = "%q: " + q + " {cleave.input = \"q\"}, %k: " + k +
                     " {cleave.input = \"k\"}, %v: " + v +
                     " {cleave.input = \"v\"}";
  std::string blockArg =
      block ? ", %blk: tensor<i64> {cleave.input = \"blk\"}" : "";
  std::string blockUse = block ? ", %blk" : "";
  std::string blockType = block ? ", tensor<i64>" : "";
  return "func.func @fwd(" + args + blockArg + ") -> (" + o +
         " {cleave.output = \"o\"}) {\n  %o = cleave.attention %q, %k, %v" +
         blockUse + " " + c.attrs + " : (" + q + ", " + k + ", " + v +
         blockType + ") -> " + o + "\n  return %o : " + o +
         "\n}\nfunc.func @bwd(" + args + ", %do: " + o +
         " {cleave.input = \"do\"}" + blockArg + ") -> (" + q +
         " {cleave.output = \"dq\"}, " + k + " {cleave.output = \"dk\"}, " + v +
         " {cleave.output = \"dv\"}) {\n  %dq, %dk, %dv = "
         "cleave.attention_grad "
         "%q, %k, %v, %do" +
         blockUse + " " + c.attrs + " : (" + q + ", " + k + ", " + v + ", " +
         o + blockType + ") -> (" + q + ", " + k + ", " + v +
         ")\n  return %dq, %dk, %dv : " + q + ", " + k + ", " + v + "\n}\n";
}

class FlashAttentionTest : public ::testing::Test {
protected:
  FlashAttentionTest() {
    registerCompilerDialects(registry);
    context = std::make_unique<MLIRContext>(registry);
    context->loadAllAvailableDialects();
  }

  /// Runs `function` of `ir` compiled with `tile`; returns every output by
  /// name. Inputs are drawn from a fixed seed, so both compilations see the
  /// same values.
  std::map<std::string, std::vector<double>> run(const std::string &ir,
                                                 const std::string &function,
                                                 int64_t tile,
                                                 int64_t queryBlock) {
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(ir, context.get());
    EXPECT_TRUE(module) << ir;
    CompileOptions options;
    options.pipeline.attentionTile = tile;
    auto program = JitProgram::compile(*module, options);
    EXPECT_TRUE(static_cast<bool>(program)) << toString(program.takeError());
    if (!program)
      return {};
    const FunctionSpec *spec = (*program)->getManifest().lookup(function);
    EntryFn entry = cantFail((*program)->lookup(function));
    std::mt19937_64 rng(7);
    std::normal_distribution<double> dist(0.0, 1.0);
    std::vector<std::vector<double>> storage;
    std::vector<int64_t> block = {queryBlock};
    std::vector<void *> buffers;
    for (const BufferSpec &b : spec->buffers) {
      storage.emplace_back(std::max<int64_t>(b.numElements(), 1));
      if (b.name == "blk") {
        buffers.push_back(block.data());
        continue;
      }
      if (b.role == BufferSpec::Role::Input)
        for (double &x : storage.back())
          x = dist(rng);
      buffers.push_back(storage.back().data());
    }
    entry(buffers.data());
    std::map<std::string, std::vector<double>> outputs;
    for (auto [i, b] : llvm::enumerate(spec->buffers))
      if (b.role == BufferSpec::Role::Output)
        outputs[b.name] = storage[i];
    return outputs;
  }

  /// Forward and backward of `c`: tiled against materialised.
  void check(const Case &c) {
    std::string ir = program(c);
    for (const char *function : {"fwd", "bwd"}) {
      auto full = run(ir, function, 0, c.queryBlock);
      auto tiled = run(ir, function, 4, c.queryBlock);
      ASSERT_FALSE(full.empty());
      ASSERT_EQ(full.size(), tiled.size());
      for (auto &[name, want] : full) {
        const std::vector<double> &got = tiled[name];
        ASSERT_EQ(got.size(), want.size()) << name;
        double norm = 0;
        for (double x : want)
          norm = std::max(norm, std::fabs(x));
        EXPECT_GT(norm, 0.0) << function << " " << name;
        for (size_t e = 0; e < want.size(); ++e)
          ASSERT_NEAR(got[e], want[e], 1e-12 * std::max(1.0, norm))
              << function << " " << name << "[" << e << "]";
      }
    }
  }

  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
};

TEST_F(FlashAttentionTest, CausalGqaPartialTile) {
  check({/*b=*/2, /*s=*/10, /*skv=*/10, /*hq=*/4, /*hkv=*/2, /*d=*/8,
         /*dv=*/8, "{causal}"});
}

TEST_F(FlashAttentionTest, NonCausalMultiQueryScaled) {
  check({1, 6, 11, 3, 1, 5, 3, "{scale = 0.3 : f64}"});
}

TEST_F(FlashAttentionTest, CausalQueryBlock) {
  // Queries are rows [10, 15) of 15 keys: the diagonal falls inside a tile.
  check({1, 5, 15, 2, 2, 4, 4, "{causal}", /*queryBlock=*/2});
}

TEST_F(FlashAttentionTest, CausalFirstQueryBlock) {
  check({2, 7, 14, 2, 1, 4, 4, "{causal}", /*queryBlock=*/0});
}

} // namespace
