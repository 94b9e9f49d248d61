//===- PartitionOpsTest.cpp - Every op, partitioned, run on ranks ---------===//
//
// For every model op, under many shardings of its operands on dp=2 x tp=2 and
// dp=2 x tp=4 meshes, the partitioned program (propagation, the op's per-device
// form, the resharding collectives, their lowering and the runtime) run on
// forked ranks must compute what the unpartitioned program computes on one: the
// sharding rule and buildLocalOp of each op are checked by execution, not by
// reading IR. Results are requested replicated, so every rank holds the
// whole value.
//
//===----------------------------------------------------------------------===//

#include "../Runtime/MultiProcess.h"
#include "cleave/Execution/Compiler.h"
#include "cleave/Execution/Layout.h"
#include "cleave/Execution/Trainer.h"
#include "cleave/Runtime/Runtime.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <random>
#include <sstream>

using namespace mlir;
using namespace mlir::cleave;
using namespace ::cleave::test;

namespace {

/// One op (or a short chain) to partition. Arguments are `%a0`, `%a1`, ...
struct Sample {
  std::string name;
  /// Argument types; integer arguments take values in [0, bound).
  std::vector<std::string> args;
  std::vector<int64_t> bounds; ///< per argument; 0 for floats
  std::string body;            ///< ends with `return ...`
  std::vector<std::string> results;
};

const std::vector<Sample> kSamples = {
    {"matmul_rhs_t",
     {"tensor<4x8x8xf32>", "tensor<12x8xf32>"},
     {0, 0},
     "%r = cleave.matmul %a0, %a1 {transpose_rhs} : (tensor<4x8x8xf32>, "
     "tensor<12x8xf32>) -> tensor<4x8x12xf32>\n return %r : "
     "tensor<4x8x12xf32>",
     {"tensor<4x8x12xf32>"}},
    {"matmul_lhs_t",
     {"tensor<4x8x4xf32>", "tensor<4x8x8xf32>"},
     {0, 0},
     "%r = cleave.matmul %a0, %a1 {transpose_lhs} : (tensor<4x8x4xf32>, "
     "tensor<4x8x8xf32>) -> tensor<4x4x8xf32>\n return %r : tensor<4x4x8xf32>",
     {"tensor<4x4x8xf32>"}},
    {"add_gelu",
     {"tensor<4x8xf32>", "tensor<4x8xf32>"},
     {0, 0},
     "%t = cleave.add %a0, %a1 : tensor<4x8xf32>\n %r = cleave.gelu %t : "
     "tensor<4x8xf32>\n return %r : tensor<4x8xf32>",
     {"tensor<4x8xf32>"}},
    {"softmax",
     {"tensor<4x4x8xf32>", "tensor<4x4x8xf32>"},
     {0, 0},
     "%s = cleave.softmax %a0 dim = 2 : tensor<4x4x8xf32>\n %g = "
     "cleave.softmax_grad %s, %a1 dim = 2 : tensor<4x4x8xf32>\n return %s, "
     "%g : tensor<4x4x8xf32>, tensor<4x4x8xf32>",
     {"tensor<4x4x8xf32>", "tensor<4x4x8xf32>"}},
    {"layer_norm",
     {"tensor<4x8x8xf32>", "tensor<8xf32>", "tensor<8xf32>",
      "tensor<4x8x8xf32>"},
     {0, 0, 0, 0},
     "%y = cleave.layer_norm %a0, %a1, %a2 : (tensor<4x8x8xf32>, "
     "tensor<8xf32>, tensor<8xf32>) -> tensor<4x8x8xf32>\n %g:3 = "
     "cleave.layer_norm_grad %a0, %a1, %a3 : (tensor<4x8x8xf32>, "
     "tensor<8xf32>, tensor<4x8x8xf32>) -> (tensor<4x8x8xf32>, tensor<8xf32>, "
     "tensor<8xf32>)\n return %y, %g#0, %g#1, %g#2 : tensor<4x8x8xf32>, "
     "tensor<4x8x8xf32>, tensor<8xf32>, tensor<8xf32>",
     {"tensor<4x8x8xf32>", "tensor<4x8x8xf32>", "tensor<8xf32>",
      "tensor<8xf32>"}},
    {"rms_norm",
     {"tensor<4x8x8xf32>", "tensor<8xf32>", "tensor<4x8x8xf32>"},
     {0, 0, 0},
     "%y = cleave.rms_norm %a0, %a1 : (tensor<4x8x8xf32>, tensor<8xf32>) -> "
     "tensor<4x8x8xf32>\n %g:2 = cleave.rms_norm_grad %a0, %a1, %a2 : "
     "(tensor<4x8x8xf32>, tensor<8xf32>, tensor<4x8x8xf32>) -> "
     "(tensor<4x8x8xf32>, tensor<8xf32>)\n return %y, %g#0, %g#1 : "
     "tensor<4x8x8xf32>, tensor<4x8x8xf32>, tensor<8xf32>",
     {"tensor<4x8x8xf32>", "tensor<4x8x8xf32>", "tensor<8xf32>"}},
    {"embedding",
     {"tensor<16x8xf32>", "tensor<4x8xi32>", "tensor<4x8x8xf32>"},
     {0, 16, 0},
     "%e = cleave.embedding %a0, %a1 : (tensor<16x8xf32>, tensor<4x8xi32>) -> "
     "tensor<4x8x8xf32>\n %g = cleave.embedding_grad %a1, %a2 : "
     "(tensor<4x8xi32>, tensor<4x8x8xf32>) -> tensor<16x8xf32>\n return %e, "
     "%g : tensor<4x8x8xf32>, tensor<16x8xf32>",
     {"tensor<4x8x8xf32>", "tensor<16x8xf32>"}},
    {"attention",
     {"tensor<2x8x4x8xf32>", "tensor<2x8x2x8xf32>", "tensor<2x8x2x8xf32>",
      "tensor<2x8x4x8xf32>"},
     {0, 0, 0, 0},
     "%q = cleave.rotary %a0 : tensor<2x8x4x8xf32>\n %k = cleave.rotary %a1 "
     ": tensor<2x8x2x8xf32>\n %o = cleave.attention %q, %k, %a2 {causal} : "
     "(tensor<2x8x4x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>) -> "
     "tensor<2x8x4x8xf32>\n %g:3 = cleave.attention_grad %q, %k, %a2, %a3 "
     "{causal} : (tensor<2x8x4x8xf32>, tensor<2x8x2x8xf32>, "
     "tensor<2x8x2x8xf32>, tensor<2x8x4x8xf32>) -> (tensor<2x8x4x8xf32>, "
     "tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>)\n return %o, %g#0, %g#1, "
     "%g#2 : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>, tensor<2x8x2x8xf32>, "
     "tensor<2x8x2x8xf32>",
     {"tensor<2x8x4x8xf32>", "tensor<2x8x4x8xf32>", "tensor<2x8x2x8xf32>",
      "tensor<2x8x2x8xf32>"}},
    {"cross_entropy",
     {"tensor<4x8x16xf32>", "tensor<4x8xi32>"},
     {0, 16},
     "%l = cleave.cross_entropy %a0, %a1 : (tensor<4x8x16xf32>, "
     "tensor<4x8xi32>) -> tensor<f32>\n %g = cleave.cross_entropy_grad %a0, "
     "%a1, %l : (tensor<4x8x16xf32>, tensor<4x8xi32>, tensor<f32>) -> "
     "tensor<4x8x16xf32>\n return %l, %g : tensor<f32>, tensor<4x8x16xf32>",
     {"tensor<f32>", "tensor<4x8x16xf32>"}},
    {"reductions",
     {"tensor<4x8x8xf32>"},
     {0},
     "%s = cleave.reduce_sum %a0 dims = [0, 1] : tensor<4x8x8xf32> -> "
     "tensor<8xf32>\n %m = cleave.reduce_mean %a0 dims = [1] : "
     "tensor<4x8x8xf32> -> tensor<4x8xf32>\n %x = cleave.reduce_max %a0 dims "
     "= [2] : tensor<4x8x8xf32> -> tensor<4x8xf32>\n return %s, %m, %x : "
     "tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>",
     {"tensor<8xf32>", "tensor<4x8xf32>", "tensor<4x8xf32>"}},
    {"shapes",
     {"tensor<4x8x8xf32>", "tensor<8xf32>"},
     {0, 0},
     "%h = cleave.reshape %a0 : tensor<4x8x8xf32> to tensor<4x8x2x4xf32>\n "
     "%f = cleave.reshape %a0 : tensor<4x8x8xf32> to tensor<32x8xf32>\n %t = "
     "cleave.transpose %a0 permutation = [2, 0, 1] : tensor<4x8x8xf32> -> "
     "tensor<8x4x8xf32>\n %b = cleave.broadcast %a1 dims = [2] : "
     "tensor<8xf32> -> tensor<4x8x8xf32>\n %s = cleave.slice %a0 offsets = "
     "[0, 2, 0] sizes = [4, 4, 8] strides = [1, 1, 1] : tensor<4x8x8xf32> -> "
     "tensor<4x4x8xf32>\n %c = cleave.concat %a0, %b dim = 1 : "
     "(tensor<4x8x8xf32>, tensor<4x8x8xf32>) -> tensor<4x16x8xf32>\n %p = "
     "cleave.pad %a0 low = [0, 1, 0] high = [0, 1, 0] interior = [0, 0, 0] : "
     "tensor<4x8x8xf32> -> tensor<4x10x8xf32>\n return %h, %f, %t, %s, %c, "
     "%p : tensor<4x8x2x4xf32>, tensor<32x8xf32>, tensor<8x4x8xf32>, "
     "tensor<4x4x8xf32>, tensor<4x16x8xf32>, tensor<4x10x8xf32>",
     {"tensor<4x8x2x4xf32>", "tensor<32x8xf32>", "tensor<8x4x8xf32>",
      "tensor<4x4x8xf32>", "tensor<4x16x8xf32>", "tensor<4x10x8xf32>"}},
    {"optimizers",
     {"tensor<4x8xf32>", "tensor<4x8xf32>", "tensor<4x8xf32>",
      "tensor<4x8xf32>", "tensor<f32>", "tensor<f32>"},
     {0, 0, 0, 0, 0, 0},
     "%s = cleave.sgd %a0, %a1, %a4 : (tensor<4x8xf32>, tensor<4x8xf32>, "
     "tensor<f32>) -> tensor<4x8xf32>\n %n:3 = cleave.adamw %a0, %a1, %a2, "
     "%a3, %a4, %a5 : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, "
     "tensor<4x8xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x8xf32>, "
     "tensor<4x8xf32>, tensor<4x8xf32>)\n return %s, %n#0, %n#1, %n#2 : "
     "tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>",
     {"tensor<4x8xf32>", "tensor<4x8xf32>", "tensor<4x8xf32>",
      "tensor<4x8xf32>"}},
    {"dropout",
     {"tensor<4x8x8xf32>", "tensor<i64>"},
     {0, 1000},
     "%r = cleave.dropout %a0, %a1 {rate = 0.25 : f64, stream = 3 : i64} : "
     "(tensor<4x8x8xf32>, tensor<i64>) -> tensor<4x8x8xf32>\n return %r : "
     "tensor<4x8x8xf32>",
     {"tensor<4x8x8xf32>"}},
};

/// Dimensions of "tensor<4x8xf32>" (empty for a scalar).
std::vector<int64_t> dimsOf(const std::string &type) {
  std::vector<int64_t> dims;
  std::string inner = type.substr(7, type.size() - 8);
  std::stringstream ss(inner);
  std::string part;
  while (std::getline(ss, part, 'x'))
    if (!part.empty() && std::isdigit(part[0]))
      dims.push_back(std::stoll(part));
  return dims;
}

/// The mesh of the test: dp = 2 and tp = kTp.
struct Mesh {
  int64_t tp;
  int ranks() const { return int(2 * tp); }
};

/// Candidate shardings of a tensor with `dims` on the dp=2 x tp mesh.
std::vector<std::string> candidates(const std::vector<int64_t> &dims,
                                    int64_t tp) {
  auto spell = [&](const std::vector<std::string> &per) {
    std::string s = "[";
    for (size_t d = 0; d < per.size(); ++d)
      s += (d ? ", " : "") + per[d];
    return s + "]";
  };
  std::vector<std::string> out;
  std::vector<std::string> none(dims.size(), "_");
  out.push_back(spell(none));
  for (size_t d = 0; d < dims.size(); ++d) {
    for (auto [axis, size] : {std::pair{"dp", int64_t(2)}, {"tp", tp}})
      if (dims[d] % size == 0) {
        auto per = none;
        per[d] = axis;
        out.push_back(spell(per));
      }
    if (dims[d] % (2 * tp) == 0) {
      auto per = none;
      per[d] = "(tp, dp)";
      out.push_back(spell(per));
    }
    for (size_t e = 0; e < dims.size(); ++e)
      if (e != d && dims[d] % 2 == 0 && dims[e] % tp == 0) {
        auto per = none;
        per[d] = "dp";
        per[e] = "tp";
        out.push_back(spell(per));
      }
  }
  return out;
}

/// Functions for every sample: one per combination of argument shardings
/// (every single-argument choice, plus random mixes).
std::string buildModule(bool sharded, int64_t tp,
                        std::vector<std::string> &names) {
  std::mt19937 rng(7 + tp);
  std::string ir;
  if (sharded)
    ir += "cleave.mesh @m(dp = 2 : host, tp = " + std::to_string(tp) +
          " : host)\n";
  names.clear();
  for (const Sample &s : kSamples) {
    std::vector<std::vector<std::string>> options;
    for (const std::string &t : s.args)
      options.push_back(candidates(dimsOf(t), tp));
    // The reference needs each computation once.
    std::vector<std::vector<size_t>> combos;
    combos.push_back(std::vector<size_t>(s.args.size(), 0));
    for (int k = 0; sharded && k < 9; ++k) {
      std::vector<size_t> c;
      for (auto &opt : options)
        c.push_back(rng() % opt.size());
      combos.push_back(c);
    }
    for (size_t ci = 0; ci < combos.size(); ++ci) {
      std::string name = s.name + "_" + std::to_string(ci);
      names.push_back(name);
      ir += "func.func @" + name + "(";
      for (size_t a = 0; a < s.args.size(); ++a) {
        ir += (a ? ", " : "") + ("%a" + std::to_string(a)) + ": " + s.args[a] +
              " {cleave.input = \"a" + std::to_string(a) + "\"";
        if (sharded)
          ir += ", cleave.sharding = #cleave.sharding<@m, " +
                options[a][combos[ci][a]] + ">";
        ir += "}";
      }
      ir += ") -> (";
      for (size_t r = 0; r < s.results.size(); ++r) {
        ir += (r ? ", " : "") + s.results[r] + " {cleave.output = \"r" +
              std::to_string(r) + "\"";
        if (sharded) {
          std::string rep = "[";
          for (size_t d = 0; d < dimsOf(s.results[r]).size(); ++d)
            rep += d ? ", _" : "_";
          ir += ", cleave.sharding = #cleave.sharding<@m, " + rep + "]>";
        }
        ir += "}";
      }
      ir += ") {\n " + s.body + "\n}\n";
    }
  }
  return ir;
}

/// The global inputs of function `f` (deterministic values).
std::vector<std::vector<char>>
inputsFor(const FunctionSpec &f, const Sample &sample, const MeshSpec *mesh) {
  std::vector<std::vector<char>> data;
  for (size_t i = 0; i < f.buffers.size(); ++i) {
    const BufferSpec &b = f.buffers[i];
    if (b.role != BufferSpec::Role::Input)
      break;
    std::vector<int64_t> shape = mesh ? globalShape(b, *mesh) : b.shape;
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    std::vector<char> bytes(n * cleave_rt_dtype_size(b.dtype));
    for (int64_t k = 0; k < n; ++k) {
      int64_t bound = sample.bounds[i];
      if (b.dtype == CLEAVE_F32) {
        float v = std::sin(0.61f * float(k) + float(i)) * 0.8f + 0.05f;
        if (sample.name == "optimizers" && i >= 3)
          v = i == 4 ? 0.01f : (i == 5 ? 3.0f : std::fabs(v)); // lr, step, v
        std::memcpy(bytes.data() + 4 * k, &v, 4);
      } else if (b.dtype == CLEAVE_I32) {
        int32_t v = int32_t((k * 7 + 3) % bound);
        std::memcpy(bytes.data() + 4 * k, &v, 4);
      } else {
        int64_t v = (k * 7 + 3) % bound;
        std::memcpy(bytes.data() + 8 * k, &v, 8);
      }
    }
    data.push_back(std::move(bytes));
  }
  return data;
}

const Sample &sampleOf(const std::string &function) {
  for (const Sample &s : kSamples)
    if (function.rfind(s.name + "_", 0) == 0)
      return s;
  std::abort();
}

/// Runs `f` with `inputs` (blocks for `rank` when `mesh` is set); returns
/// the outputs.
std::vector<std::vector<float>>
runFunction(JitProgram &program, const FunctionSpec &f,
            const std::vector<std::vector<char>> &inputs, const MeshSpec *mesh,
            int rank) {
  std::vector<std::vector<char>> buffers;
  for (size_t i = 0; i < f.buffers.size(); ++i) {
    const BufferSpec &b = f.buffers[i];
    std::vector<char> local(std::max<int64_t>(b.numBytes(), 8));
    if (i < inputs.size()) {
      if (mesh)
        copyBlock(inputs[i].data(), globalShape(b, *mesh), local.data(),
                  blockOf(b, *mesh, rank), cleave_rt_dtype_size(b.dtype), true);
      else
        std::memcpy(local.data(), inputs[i].data(), b.numBytes());
    }
    buffers.push_back(std::move(local));
  }
  std::vector<void *> pointers;
  for (auto &b : buffers)
    pointers.push_back(b.data());
  auto entry = program.lookup(f.name);
  if (!entry)
    return {};
  (*entry)(pointers.data());
  std::vector<std::vector<float>> outputs;
  for (size_t i = inputs.size(); i < f.buffers.size(); ++i) {
    std::vector<float> v(f.buffers[i].numElements());
    std::memcpy(v.data(), buffers[i].data(), v.size() * 4);
    outputs.push_back(std::move(v));
  }
  return outputs;
}

class PartitionOpsTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(PartitionOpsTest, EveryOpUnderManySplitsComputesTheGlobalResult) {
  int64_t tp = GetParam();
  CompileOptions fast;
  fast.optLevel = 1;
  DialectRegistry registry;
  registerCompilerDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  std::vector<std::string> names;
  std::error_code ec_;

  // The reference: the global program on one process.
  OwningOpRef<ModuleOp> global =
      parseSourceString<ModuleOp>(buildModule(false, tp, names), &context);
  ASSERT_TRUE(global);
  auto reference = JitProgram::compile(*global, fast);
  ASSERT_TRUE(bool(reference)) << llvm::toString(reference.takeError());
  std::map<std::string, std::vector<std::vector<float>>> expected;
  for (const FunctionSpec &f : (*reference)->getManifest().functions)
    expected[sampleOf(f.name).name] = runFunction(
        **reference, f, inputsFor(f, sampleOf(f.name), nullptr), nullptr, 0);

  std::string shardedIR = buildModule(true, tp, names);
  if (const char *dump = std::getenv("CLEAVE_TEST_DUMP"))
    llvm::raw_fd_ostream(dump, ec_) << shardedIR;
  OwningOpRef<ModuleOp> sharded =
      parseSourceString<ModuleOp>(shardedIR, &context);
  ASSERT_TRUE(sharded);
  PassManager pm(&context);
  pm.addPass(createCleavePropagateShardingPass());
  pm.addPass(createCleavePartitionPass());
  ASSERT_TRUE(succeeded(pm.run(*sharded)));
  auto program = JitProgram::compile(*sharded, fast);
  ASSERT_TRUE(bool(program)) << llvm::toString(program.takeError());
  const ProgramManifest &manifest = (*program)->getManifest();
  ASSERT_EQ(manifest.functions.size(), names.size());
  ASSERT_GT(names.size(), 100u);

  RunOptions options;
  options.deadlineSeconds = 180;
  // Ranks run at uneven speeds on a loaded machine; the deadline catches
  // hangs.
  options.timeoutMs = 60000;
  auto results = runRanks(
      int(2 * tp),
      [&](int) -> int {
        cleave_rt_options_t rt;
        cleave_rt_default_options(&rt);
        RT_CHECK(cleave_rt_init(&rt) == 0, "%s", cleave_rt_error_message());
        llvm::Error err = defineCommunicators(manifest);
        RT_CHECK(!err, "%s", llvm::toString(std::move(err)).c_str());
        int rank = cleave_rt_rank(), failures = 0;
        for (const FunctionSpec &f : manifest.functions) {
          auto inputs = inputsFor(f, sampleOf(f.name), &*manifest.mesh);
          auto got = runFunction(**program, f, inputs, &*manifest.mesh, rank);
          RT_CHECK(!cleave_rt_failed(), "%s: %s", f.name.c_str(),
                   cleave_rt_error_message());
          const auto &want = expected.at(sampleOf(f.name).name);
          RT_CHECK(got.size() == want.size(), "%s: result count",
                   f.name.c_str());
          for (size_t r = 0; r < want.size(); ++r) {
            float scale = 1e-6f;
            for (float v : want[r])
              scale = std::max(scale, std::fabs(v));
            for (size_t i = 0; i < want[r].size(); ++i)
              if (!(std::fabs(got[r][i] - want[r][i]) <= 2e-5f * scale)) {
                if (rank == 0)
                  std::fprintf(stderr,
                               "%s result %zu element %zu: %g on %d ranks, %g "
                               "on one\n",
                               f.name.c_str(), r, i, got[r][i],
                               cleave_rt_world_size(), want[r][i]);
                ++failures;
                break;
              }
          }
        }
        cleave_rt_finalize();
        return failures ? 1 : 0;
      },
      options);
  for (const RankResult &r : results)
    EXPECT_EQ(r.exitCode, 0) << describe(results);
}

// dp = 2 with tp = 2 (4 ranks) and tp = 4 (8 ranks).
INSTANTIATE_TEST_SUITE_P(Meshes, PartitionOpsTest, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int64_t> &info) {
                           return "dp2xtp" + std::to_string(info.param);
                         });

} // namespace
