//===- GradientTest.cpp - Every VJP against finite differences ------------===//
//
// Each case is a small f64 program whose loss is sum(op(params) * w) with a
// random weight w. The compiled training step (autodiff with
// optimizer=none, lowered and JIT-compiled like any program) returns the
// analytic gradients; central differences of the compiled forward function
// check them, element by element.
//
//===----------------------------------------------------------------------===//

#include "cleave/Execution/Compiler.h"
#include "cleave/Pipelines/Compile.h"
#include "cleave/Runtime/Runtime.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <random>

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// Value ranges of the random parameters of one case.
struct Range {
  double lo = -1.0, hi = 1.0;
};

class GradientTest : public ::testing::Test {
protected:
  GradientTest() {
    registerCompilerDialects(registry);
    context = std::make_unique<MLIRContext>(registry);
    context->loadAllAvailableDialects();
  }

  /// Checks d(loss)/d(param) of `@forward` in `ir` for every parameter.
  /// Integer inputs get `ints` (cycled); parameters are drawn from `range`.
  void check(const std::string &ir, Range range = {},
             std::vector<int64_t> ints = {0, 1, 2}) {
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(ir, context.get());
    ASSERT_TRUE(module) << ir;
    // The training step as the driver builds it, returning the gradients;
    // @forward stays for the finite differences.
    RankCompileOptions options;
    options.autodiff.optimizer = "none";
    options.keepOtherFunctions = true;
    llvm::Error built = compileForRanks(*module, options);
    ASSERT_FALSE(built) << llvm::toString(std::move(built));
    auto program = JitProgram::compile(*module);
    ASSERT_TRUE(static_cast<bool>(program)) << toString(program.takeError());
    const FunctionSpec *fwd = (*program)->getManifest().lookup("forward");
    const FunctionSpec *step = (*program)->getManifest().lookup("train_step");
    ASSERT_TRUE(fwd && step);
    EntryFn forward = cantFail((*program)->lookup("forward"));
    EntryFn grads = cantFail((*program)->lookup("train_step"));

    // Inputs and parameters are shared by both functions (same order).
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> dist(range.lo, range.hi);
    std::vector<std::vector<char>> storage;
    std::vector<void *> fwdBuffers, stepBuffers;
    for (const BufferSpec &b : step->buffers) {
      storage.emplace_back(std::max<int64_t>(b.numBytes(), 8));
      void *p = storage.back().data();
      if (b.role == BufferSpec::Role::Param) {
        ASSERT_EQ(b.dtype, CLEAVE_F64) << b.name;
        for (int64_t i = 0; i < b.numElements(); ++i)
          static_cast<double *>(p)[i] = dist(rng);
      } else if (b.role == BufferSpec::Role::Input) {
        for (int64_t i = 0; i < b.numElements(); ++i) {
          int64_t v = ints[i % ints.size()];
          if (b.dtype == CLEAVE_I32)
            static_cast<int32_t *>(p)[i] = v;
          else
            static_cast<int64_t *>(p)[i] = v;
        }
      }
      stepBuffers.push_back(p);
    }
    // @forward: the same arguments, then the loss.
    size_t numArgs = fwd->buffers.size() - 1;
    fwdBuffers.assign(stepBuffers.begin(), stepBuffers.begin() + numArgs);
    double loss = 0;
    fwdBuffers.push_back(&loss);
    grads(stepBuffers.data());

    for (auto [i, b] : llvm::enumerate(step->buffers)) {
      if (b.role != BufferSpec::Role::Param)
        continue;
      int64_t g = step->find(BufferSpec::Role::Output, "grad:" + b.name);
      ASSERT_GE(g, 0);
      auto *x = static_cast<double *>(stepBuffers[i]);
      auto *analytic = static_cast<double *>(stepBuffers[g]);
      for (int64_t e = 0; e < b.numElements(); ++e) {
        double saved = x[e], h = 1e-6 * std::max(1.0, std::fabs(saved));
        x[e] = saved + h;
        forward(fwdBuffers.data());
        double plus = loss;
        x[e] = saved - h;
        forward(fwdBuffers.data());
        double minus = loss;
        x[e] = saved;
        double numeric = (plus - minus) / (2 * h);
        EXPECT_NEAR(analytic[e], numeric,
                    1e-6 * std::max(1.0, std::fabs(numeric)))
            << b.name << "[" << e << "]";
      }
    }
  }

  /// A forward program: `args` declares parameters and inputs, `body`
  /// computes %y of `type`; the loss is sum(%y * %w).
  static std::string program(const std::string &args, const std::string &body,
                             const std::string &type, const std::string &dims) {
    return "func.func @forward(" + args + ", %w: " + type +
           " {cleave.param = \"w\"}) -> tensor<f64> {\n" + body +
           "\n  %yw = cleave.mul %y, %w : " + type +
           "\n  %loss = cleave.reduce_sum %yw dims = " + dims + " : " + type +
           " -> tensor<f64>\n  return %loss : tensor<f64>\n}\n";
  }

  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
};

const char *kX = "%x: tensor<3x4xf64> {cleave.param = \"x\"}";
const char *kXY = "%x: tensor<3x4xf64> {cleave.param = \"x\"}, "
                  "%z: tensor<3x4xf64> {cleave.param = \"z\"}";
const char *kT = "tensor<3x4xf64>";
const char *kD = "[0, 1]";

#define UNARY(Name, op, lo, hi)                                                \
  TEST_F(GradientTest, Name) {                                                 \
    check(program(kX, "  %y = cleave." op " %x : tensor<3x4xf64>", kT, kD),    \
          {lo, hi});                                                           \
  }
UNARY(Neg, "neg", -1, 1)
UNARY(Exp, "exp", -1, 1)
UNARY(Log, "log", 0.5, 2)
UNARY(Sqrt, "sqrt", 0.5, 2)
UNARY(Rsqrt, "rsqrt", 0.5, 2)
UNARY(Tanh, "tanh", -2, 2)
UNARY(Sigmoid, "sigmoid", -2, 2)
UNARY(Relu, "relu", 0.1, 1)
UNARY(Silu, "silu", -2, 2)
UNARY(GeluTanh, "gelu", -2, 2)
#undef UNARY

TEST_F(GradientTest, GeluErf) {
  check(
      program(kX,
              "  %y = cleave.gelu %x {approximate = #cleave.gelu_approx<none>}"
              " : tensor<3x4xf64>",
              kT, kD));
}

#define BINARY(Name, op, lo, hi)                                               \
  TEST_F(GradientTest, Name) {                                                 \
    check(                                                                     \
        program(kXY, "  %y = cleave." op " %x, %z : tensor<3x4xf64>", kT, kD), \
        {lo, hi});                                                             \
  }
BINARY(Add, "add", -1, 1)
BINARY(Sub, "sub", -1, 1)
BINARY(Mul, "mul", -1, 1)
BINARY(Div, "div", 0.5, 2)
BINARY(Max, "max", -1, 1)
BINARY(Min, "min", -1, 1)
BINARY(Pow, "pow", 0.5, 2)
#undef BINARY

TEST_F(GradientTest, Reductions) {
  check(program(kX,
                "  %s = cleave.reduce_sum %x dims = [1] : tensor<3x4xf64> -> "
                "tensor<3xf64>\n"
                "  %m = cleave.reduce_mean %x dims = [0] : tensor<3x4xf64> -> "
                "tensor<4xf64>\n"
                "  %sb = cleave.broadcast %s dims = [0] : tensor<3xf64> -> "
                "tensor<3x4xf64>\n"
                "  %mb = cleave.broadcast %m dims = [1] : tensor<4xf64> -> "
                "tensor<3x4xf64>\n"
                "  %p = cleave.mul %sb, %mb : tensor<3x4xf64>\n"
                "  %y = cleave.mul %p, %x : tensor<3x4xf64>",
                kT, kD));
}

TEST_F(GradientTest, DataMovement) {
  check(
      program(kX,
              "  %t = cleave.transpose %x permutation = [1, 0] : "
              "tensor<3x4xf64> -> tensor<4x3xf64>\n"
              "  %r = cleave.reshape %t : tensor<4x3xf64> to tensor<2x6xf64>\n"
              "  %s = cleave.slice %r offsets = [0, 1] sizes = [2, 3] "
              "strides = [1, 2] : tensor<2x6xf64> -> tensor<2x3xf64>\n"
              "  %c = cleave.concat %s, %r dim = 1 : (tensor<2x3xf64>, "
              "tensor<2x6xf64>) -> tensor<2x9xf64>\n"
              "  %p = cleave.pad %c low = [1, 0] high = [0, 1] interior = "
              "[1, 0] : tensor<2x9xf64> -> tensor<4x10xf64>\n"
              "  %y = cleave.exp %p : tensor<4x10xf64>",
              "tensor<4x10xf64>", kD));
}

TEST_F(GradientTest, MatmulVariants) {
  std::string args = "%a: tensor<2x3x4xf64> {cleave.param = \"a\"}, "
                     "%b: tensor<2x4x5xf64> {cleave.param = \"b\"}, "
                     "%bt: tensor<2x5x4xf64> {cleave.param = \"bt\"}, "
                     "%at: tensor<2x4x3xf64> {cleave.param = \"at\"}, "
                     "%wm: tensor<5x4xf64> {cleave.param = \"wm\"}";
  std::string body =
      "  %0 = cleave.matmul %a, %b : (tensor<2x3x4xf64>, tensor<2x4x5xf64>) -> "
      "tensor<2x3x5xf64>\n"
      "  %1 = cleave.matmul %a, %bt {transpose_rhs} : (tensor<2x3x4xf64>, "
      "tensor<2x5x4xf64>) -> tensor<2x3x5xf64>\n"
      "  %2 = cleave.matmul %at, %b {transpose_lhs} : (tensor<2x4x3xf64>, "
      "tensor<2x4x5xf64>) -> tensor<2x3x5xf64>\n"
      "  %3 = cleave.matmul %at, %bt {transpose_lhs, transpose_rhs} : "
      "(tensor<2x4x3xf64>, tensor<2x5x4xf64>) -> tensor<2x3x5xf64>\n"
      "  %4 = cleave.matmul %a, %wm {transpose_rhs} : (tensor<2x3x4xf64>, "
      "tensor<5x4xf64>) -> tensor<2x3x5xf64>\n"
      "  %5 = cleave.matmul %at, %wm {transpose_lhs, transpose_rhs} : "
      "(tensor<2x4x3xf64>, tensor<5x4xf64>) -> tensor<2x3x5xf64>\n"
      "  %s0 = cleave.add %0, %1 : tensor<2x3x5xf64>\n"
      "  %s1 = cleave.add %2, %3 : tensor<2x3x5xf64>\n"
      "  %s2 = cleave.add %4, %5 : tensor<2x3x5xf64>\n"
      "  %s3 = cleave.mul %s0, %s1 : tensor<2x3x5xf64>\n"
      "  %y = cleave.add %s3, %s2 : tensor<2x3x5xf64>";
  check(program(args, body, "tensor<2x3x5xf64>", "[0, 1, 2]"));
}

TEST_F(GradientTest, SoftmaxAndNorms) {
  std::string args = "%x: tensor<3x4xf64> {cleave.param = \"x\"}, "
                     "%g: tensor<4xf64> {cleave.param = \"g\"}, "
                     "%b: tensor<4xf64> {cleave.param = \"b\"}";
  std::string body =
      "  %s = cleave.softmax %x dim = 0 : tensor<3x4xf64>\n"
      "  %l = cleave.layer_norm %x, %g, %b : (tensor<3x4xf64>, tensor<4xf64>, "
      "tensor<4xf64>) -> tensor<3x4xf64>\n"
      "  %r = cleave.rms_norm %l, %g : (tensor<3x4xf64>, tensor<4xf64>) -> "
      "tensor<3x4xf64>\n"
      "  %y = cleave.mul %s, %r : tensor<3x4xf64>";
  check(program(args, body, kT, kD));
}

TEST_F(GradientTest, EmbeddingAndCrossEntropy) {
  std::string args = "%t: tensor<5x4xf64> {cleave.param = \"table\"}, "
                     "%ids: tensor<2x3xi32> {cleave.input = \"ids\"}";
  std::string body =
      "  %e = cleave.embedding %t, %ids : (tensor<5x4xf64>, tensor<2x3xi32>) "
      "-> tensor<2x3x4xf64>\n"
      "  %y = cleave.tanh %e : tensor<2x3x4xf64>";
  check(program(args, body, "tensor<2x3x4xf64>", "[0, 1, 2]"), {},
        {0, 3, 3, 1, 4, 0});
  std::string ce = "func.func @forward(%l: tensor<2x3x5xf64> {cleave.param = "
                   "\"logits\"}, %y: tensor<2x3xi32> {cleave.input = "
                   "\"labels\"}) -> tensor<f64> {\n"
                   "  %0 = cleave.cross_entropy %l, %y : (tensor<2x3x5xf64>, "
                   "tensor<2x3xi32>) -> tensor<f64>\n"
                   "  return %0 : tensor<f64>\n}\n";
  check(ce, {-2, 2}, {4, 0, 2, 2, 1, 3});
}

TEST_F(GradientTest, CrossEntropyIgnoredLabels) {
  // Ignored rows (-1) contribute nothing and get a zero gradient; the mean is
  // over the three others.
  std::string ce = "func.func @forward(%l: tensor<2x3x5xf64> {cleave.param = "
                   "\"logits\"}, %y: tensor<2x3xi32> {cleave.input = "
                   "\"labels\"}) -> tensor<f64> {\n"
                   "  %0 = cleave.cross_entropy %l, %y {ignore_index = -1 : "
                   "i64} : (tensor<2x3x5xf64>, tensor<2x3xi32>) -> "
                   "tensor<f64>\n"
                   "  return %0 : tensor<f64>\n}\n";
  check(ce, {-2, 2}, {4, -1, 2, -1, 1, -1});
}

TEST_F(GradientTest, Rotary) {
  for (const char *attrs : {"", " {interleaved}", " {theta = 100.0 : f64}"}) {
    std::string body = std::string("  %y = cleave.rotary %x") + attrs +
                       " : tensor<2x3x2x4xf64>";
    check(program("%x: tensor<2x3x2x4xf64> {cleave.param = \"x\"}", body,
                  "tensor<2x3x2x4xf64>", "[0, 1, 2, 3]"));
  }
}

TEST_F(GradientTest, AttentionCausalGroupedQuery) {
  std::string args = "%q: tensor<2x4x4x3xf64> {cleave.param = \"q\"}, "
                     "%k: tensor<2x4x2x3xf64> {cleave.param = \"k\"}, "
                     "%v: tensor<2x4x2x3xf64> {cleave.param = \"v\"}";
  check(program(args,
                "  %y = cleave.attention %q, %k, %v {causal} : "
                "(tensor<2x4x4x3xf64>, tensor<2x4x2x3xf64>, "
                "tensor<2x4x2x3xf64>) -> tensor<2x4x4x3xf64>",
                "tensor<2x4x4x3xf64>", "[0, 1, 2, 3]"));
}

TEST_F(GradientTest, AttentionNonCausalScaled) {
  std::string args = "%q: tensor<1x3x2x4xf64> {cleave.param = \"q\"}, "
                     "%k: tensor<1x5x2x4xf64> {cleave.param = \"k\"}, "
                     "%v: tensor<1x5x2x2xf64> {cleave.param = \"v\"}";
  check(program(args,
                "  %y = cleave.attention %q, %k, %v {scale = 0.3 : f64} : "
                "(tensor<1x3x2x4xf64>, tensor<1x5x2x4xf64>, "
                "tensor<1x5x2x2xf64>) -> tensor<1x3x2x2xf64>",
                "tensor<1x3x2x2xf64>", "[0, 1, 2, 3]"));
}

TEST_F(GradientTest, Dropout) {
  std::string args = "%x: tensor<3x4xf64> {cleave.param = \"x\"}, "
                     "%seed: tensor<i64> {cleave.input = \"seed\"}";
  check(program(args,
                "  %y = cleave.dropout %x, %seed {rate = 0.3 : f64, stream = 2 "
                ": i64} : (tensor<3x4xf64>, tensor<i64>) -> tensor<3x4xf64>",
                kT, kD),
        {}, {12345});
}

/// A mixture-of-experts layer: router, dispatch, SwiGLU experts as batched
/// matmuls, combine. `router` is the router's attributes; `slots` its C.
static std::string moeLayer(const std::string &router, int slots) {
  std::string c = std::to_string(slots), c2 = std::to_string(2 * slots);
  std::string w = "tensor<2x6x4x" + c + "xf64>";
  std::string buf = "tensor<4x2x" + c + "x4xf64>";
  auto flat = [&](int n) {
    return "tensor<4x" + std::to_string(2 * slots) + "x" + std::to_string(n) +
           "xf64>";
  };
  return "  %l = cleave.matmul %x, %r {transpose_rhs} : (tensor<2x6x4xf64>, "
         "tensor<4x4xf64>) -> tensor<2x6x4xf64>\n"
         "  %cw, %dw = cleave.moe_router %l " +
         router + " : (tensor<2x6x4xf64>) -> (" + w + ", " + w +
         ")\n"
         "  %b = cleave.moe_dispatch %x, %dw : (tensor<2x6x4xf64>, " +
         w + ") -> " + buf +
         "\n"
         "  %bf = cleave.reshape %b : " +
         buf + " to " + flat(4) +
         "\n"
         "  %gt = cleave.matmul %bf, %wg : (" +
         flat(4) + ", tensor<4x4x3xf64>) -> " + flat(3) +
         "\n"
         "  %up = cleave.matmul %bf, %wu : (" +
         flat(4) + ", tensor<4x4x3xf64>) -> " + flat(3) +
         "\n"
         "  %sg = cleave.silu %gt : " +
         flat(3) +
         "\n"
         "  %h = cleave.mul %sg, %up : " +
         flat(3) +
         "\n"
         "  %o = cleave.matmul %h, %wd : (" +
         flat(3) + ", tensor<4x3x4xf64>) -> " + flat(4) +
         "\n"
         "  %ob = cleave.reshape %o : " +
         flat(4) + " to " + buf +
         "\n"
         "  %y = cleave.moe_combine %cw, %ob : (" +
         w + ", " + buf + ") -> tensor<2x6x4xf64>";
}

const char *kMoEArgs = "%x: tensor<2x6x4xf64> {cleave.param = \"x\"}, "
                       "%r: tensor<4x4xf64> {cleave.param = \"router\"}, "
                       "%wg: tensor<4x4x3xf64> {cleave.param = \"gate\"}, "
                       "%wu: tensor<4x4x3xf64> {cleave.param = \"up\"}, "
                       "%wd: tensor<4x3x4xf64> {cleave.param = \"down\"}";

// Softmax top-2 renormalised, capacity 0.75: ceil(0.75 * 6 * 2 / 4) = 3
// slots for up to 6 selections per expert, so some are dropped.
TEST_F(GradientTest, MoELayerSoftmaxTokenDropping) {
  check(program(kMoEArgs,
                moeLayer("{top_k = 2 : i64, normalize, capacity_factor = "
                         "0.75 : f64}",
                         3),
                "tensor<2x6x4xf64>", "[0, 1, 2]"));
}

// Sigmoid scores, not renormalised, dropless (C = S = 6).
TEST_F(GradientTest, MoELayerSigmoidDropless) {
  check(program(kMoEArgs, moeLayer("{top_k = 2 : i64, sigmoid}", 6),
                "tensor<2x6x4xf64>", "[0, 1, 2]"));
}

// Sigmoid renormalised over the top 3 (DeepSeek-V3's gates).
TEST_F(GradientTest, MoELayerSigmoidNormalized) {
  check(program(kMoEArgs,
                moeLayer("{top_k = 3 : i64, sigmoid, normalize, "
                         "capacity_factor = 1.0 : f64}",
                         5),
                "tensor<2x6x4xf64>", "[0, 1, 2]"));
}

TEST_F(GradientTest, MoEAuxLoss) {
  for (const char *attrs :
       {"{top_k = 2 : i64}", "{top_k = 1 : i64, sigmoid}"}) {
    std::string ir = std::string("func.func @forward(%l: tensor<2x6x4xf64> "
                                 "{cleave.param = \"logits\"}) -> tensor<f64> "
                                 "{\n  %0 = cleave.moe_aux_loss %l ") +
                     attrs +
                     " : (tensor<2x6x4xf64>) -> tensor<f64>\n"
                     "  return %0 : tensor<f64>\n}\n";
    check(ir, {-2, 2});
  }
}

} // namespace
