//===- ReshardExecutionTest.cpp - Resharding, run for real on ranks -------===//
//
// For many pairs of shardings of one global tensor, the partitioned program
// `return x` (argument sharded one way, result the other) is compiled once
// and run on forked ranks over Gloo: every rank must end with exactly its
// block of the input under the result's sharding. Pending sums come from a
// matmul whose contraction is split. This exercises the resharding planner,
// the partitioner, cleave-lower-collectives (including the transposes for
// non-leading dimensions and the all-to-all reshapes) and the runtime
// together, on 2-d and 3-d meshes.
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
#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::cleave;
using namespace ::cleave::test;

namespace {

/// A global tensor of `shape` with distinct values.
std::vector<float> globalValues(const std::vector<int64_t> &shape, float salt) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = std::sin(0.37f * float(i) + salt) + 0.01f * float(i % 7);
  return v;
}

std::vector<float> matmul(const std::vector<float> &a,
                          const std::vector<float> &b, int64_t m, int64_t k,
                          int64_t n) {
  std::vector<float> c(m * n, 0.0f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += double(a[i * k + p]) * double(b[p * n + j]);
      c[i * n + j] = float(s);
    }
  return c;
}

struct Case {
  std::string mesh; ///< "dp = 2 : host, tp = 2 : host"
  int ranks;
  std::vector<std::string> shardings; ///< of a tensor<4x8x6xf32>
  /// How the partitioner ranks candidate sequences ("time" on the mesh's
  /// links, or "bytes"): each ranking picks other candidates, and every
  /// candidate it picks must run correctly.
  std::string reshardCost = "time";
};

/// How ctest lists a case.
void PrintTo(const Case &c, std::ostream *os) {
  *os << c.ranks << " ranks on mesh (" << c.mesh << "), ranked by "
      << c.reshardCost;
}

class ReshardExecutionTest : public ::testing::TestWithParam<Case> {};

/// The module: one function per (from, to) pair, plus matmuls whose
/// contraction dimension is split (pending sums) resharded to every target.
std::string buildModule(const Case &c, int &numFunctions) {
  std::string ir = "cleave.mesh @m(" + c.mesh + ")\n";
  numFunctions = 0;
  auto sh = [](const std::string &dims) {
    return "#cleave.sharding<@m, " + dims + ">";
  };
  for (const std::string &from : c.shardings)
    for (const std::string &to : c.shardings)
      ir += "func.func @f" + std::to_string(numFunctions++) +
            "(%x: tensor<4x8x6xf32> {cleave.input = \"x\", cleave.sharding = " +
            sh(from) +
            "}) -> (tensor<4x8x6xf32> {cleave.output = \"y\", "
            "cleave.sharding = " +
            sh(to) +
            "}) {\n"
            "  return %x : tensor<4x8x6xf32>\n}\n";
  // [4, 8] x [8, 6]: K split over every axis pattern of the mesh.
  for (const std::string &k : {"tp", "dp", "(dp, tp)"})
    for (const std::string &to :
         {"[_, _]", "[dp, _]", "[tp, _]", "[_, tp]", "[(dp, tp), _]"})
      ir +=
          "func.func @f" + std::to_string(numFunctions++) +
          "(%a: tensor<4x8xf32> {cleave.input = \"a\", cleave.sharding = " +
          sh("[_, " + k + "]") +
          "}, %b: tensor<8x6xf32> {cleave.input = \"b\", cleave.sharding = " +
          sh("[" + k + ", _]") +
          "}) -> (tensor<4x6xf32> {cleave.output = \"y\", cleave.sharding = " +
          sh(to) +
          "}) {\n"
          "  %y = cleave.matmul %a, %b : (tensor<4x8xf32>, tensor<8x6xf32>) "
          "-> tensor<4x6xf32>\n  return %y : tensor<4x6xf32>\n}\n";
  return ir;
}

/// One rank: runs every function on its blocks and checks its output block.
int checkRank(const ProgramManifest &manifest, JitProgram &program) {
  cleave_rt_options_t options;
  cleave_rt_default_options(&options);
  RT_CHECK(cleave_rt_init(&options) == 0, "%s", cleave_rt_error_message());
  llvm::Error err = defineCommunicators(manifest);
  RT_CHECK(!err, "%s", llvm::toString(std::move(err)).c_str());
  int rank = cleave_rt_rank();
  const MeshSpec &mesh = *manifest.mesh;
  for (const FunctionSpec &f : manifest.functions) {
    auto entry = program.lookup(f.name);
    RT_CHECK(bool(entry), "no entry for %s", f.name.c_str());
    std::vector<std::vector<float>> globals, locals;
    for (const BufferSpec &b : f.buffers) {
      std::vector<int64_t> shape = globalShape(b, mesh);
      globals.push_back(b.role == BufferSpec::Role::Input
                            ? globalValues(shape, float(globals.size()))
                            : std::vector<float>());
      locals.emplace_back(b.numElements());
      if (b.role == BufferSpec::Role::Input)
        copyBlock(globals.back().data(), shape, locals.back().data(),
                  blockOf(b, mesh, rank), 4, /*intoBlock=*/true);
    }
    std::vector<void *> pointers;
    for (auto &l : locals)
      pointers.push_back(l.data());
    (*entry)(pointers.data());
    RT_CHECK(!cleave_rt_failed(), "%s: %s", f.name.c_str(),
             cleave_rt_error_message());
    const BufferSpec &out = f.buffers.back();
    std::vector<float> expected = f.buffers.size() == 2
                                      ? globals[0]
                                      : matmul(globals[0], globals[1], 4, 8, 6);
    std::vector<float> block(out.numElements());
    copyBlock(expected.data(), globalShape(out, mesh), block.data(),
              blockOf(out, mesh, rank), 4, /*intoBlock=*/true);
    for (size_t i = 0; i < block.size(); ++i)
      RT_CHECK(std::fabs(block[i] - locals.back()[i]) <=
                   1e-5f * (1.0f + std::fabs(block[i])),
               "%s element %zu: expected %g, got %g", f.name.c_str(), i,
               block[i], locals.back()[i]);
  }
  cleave_rt_finalize();
  return 0;
}

TEST_P(ReshardExecutionTest, EveryRankHoldsItsBlockOfTheTarget) {
  const Case &c = GetParam();
  DialectRegistry registry;
  registerCompilerDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  int numFunctions = 0;
  std::string ir = buildModule(c, numFunctions);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(ir, &context);
  ASSERT_TRUE(module);
  PassManager pm(&context);
  pm.addPass(createCleavePropagateShardingPass());
  CleavePartitionPassOptions partition;
  partition.reshardCost = c.reshardCost;
  pm.addPass(createCleavePartitionPass(partition));
  ASSERT_TRUE(succeeded(pm.run(*module)));
  auto program = JitProgram::compile(*module);
  ASSERT_TRUE(bool(program)) << llvm::toString(program.takeError());
  const ProgramManifest &manifest = (*program)->getManifest();
  ASSERT_EQ(int(manifest.functions.size()), numFunctions);
  RunOptions options;
  options.deadlineSeconds = 120;
  // Ranks run at uneven speeds on a loaded machine; the deadline catches
  // hangs.
  options.timeoutMs = 60000;
  auto results = runRanks(
      c.ranks, [&](int) { return checkRank(manifest, **program); }, options);
  for (const RankResult &r : results)
    EXPECT_EQ(r.exitCode, 0) << describe(results);
}

const std::vector<std::string> kShardings2d = {
    "[_, _, _]",        "[dp, _, _]",  "[tp, _, _]",  "[(dp, tp), _, _]",
    "[(tp, dp), _, _]", "[dp, tp, _]", "[tp, dp, _]", "[_, (dp, tp), _]",
    "[_, tp, dp]",      "[dp, _, tp]", "[_, _, tp]"};

INSTANTIATE_TEST_SUITE_P(
    Meshes, ReshardExecutionTest,
    ::testing::Values(
        Case{"dp = 2 : host, tp = 2 : host", 4, kShardings2d},
        Case{"dp = 2 : ib, tp = 2 : nvlink", 4, kShardings2d},
        Case{"dp = 2 : host, tp = 2 : host", 4, kShardings2d, "bytes"},
        Case{"dp = 2 : host, tp = 2 : host, sp = 2 : host",
             8,
             {"[_, _, _]", "[dp, sp, tp]", "[(dp, sp), tp, _]",
              "[_, (tp, sp, dp), _]", "[sp, _, tp]", "[tp, (dp, sp), _]"}}),
    [](const ::testing::TestParamInfo<Case> &info) {
      return std::to_string(info.param.ranks) + "ranks" +
             std::to_string(info.index);
    });

} // namespace
