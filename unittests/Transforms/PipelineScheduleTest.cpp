//===- PipelineScheduleTest.cpp - cleave-pipeline runs the cost model's order //
//
// The cost model's simulator and memory model replay cost::pipelineOrders;
// cleave-pipeline must generate programs that run exactly those orders. For
// every schedule and several (pp, micro-batches, virtual stages), an MLP
// with one layer per stage is pipelined and each rank's calls of pass
// functions are read back: their order must equal pipelineOrders, and the
// micro-batches whose forward results are still waiting for a backward
// pass (the in-flight activations) must peak where cost::peakLive says.
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Schedule.h"
#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Pipelines/Compile.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include <gtest/gtest.h>

#include <map>
#include <sstream>

using namespace mlir;
using namespace mlir::cleave;
namespace cost = ::cleave::cost;

namespace {

/// An MLP over a batch of 16 with `stages` layers, layer k on stage k (the
/// head and loss with the last layer).
std::string stagedMlp(int stages) {
  std::ostringstream s;
  s << "func.func @forward(%x: tensor<16x8xf32> {cleave.input = \"x\"}, "
       "%y: tensor<16xi32> {cleave.input = \"y\"}";
  for (int k = 0; k < stages; ++k)
    s << ", %w" << k << ": tensor<8x8xf32> {cleave.param = \"l." << k
      << ".weight\"}";
  s << ", %head: tensor<4x8xf32> {cleave.param = \"head.weight\"}) -> "
       "tensor<f32> {\n  %h0 = cleave.gelu %x {cleave.stage = 0 : i64} : "
       "tensor<16x8xf32>\n";
  for (int k = 0; k < stages; ++k)
    s << "  %m" << k << " = cleave.matmul %h" << k << ", %w" << k
      << " {transpose_rhs, cleave.stage = " << k
      << " : i64} : (tensor<16x8xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>\n"
      << "  %h" << k + 1 << " = cleave.gelu %m" << k << " {cleave.stage = " << k
      << " : i64} : tensor<16x8xf32>\n";
  int last = stages - 1;
  s << "  %z = cleave.matmul %h" << stages << ", %head {transpose_rhs, "
    << "cleave.stage = " << last
    << " : i64} : (tensor<16x8xf32>, tensor<4x8xf32>) -> tensor<16x4xf32>\n"
    << "  %l = cleave.cross_entropy %z, %y {cleave.stage = " << last
    << " : i64} : (tensor<16x4xf32>, tensor<16xi32>) -> tensor<f32>\n"
    << "  return %l : tensor<f32>\n}\n";
  return s.str();
}

struct Case {
  int pp, micro, virtualStages;
  const char *schedule;
};

class PipelineScheduleTest : public ::testing::TestWithParam<Case> {
protected:
  void SetUp() override {
    registry.insert<CleaveDialect, func::FuncDialect,
                    bufferization::BufferizationDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// The pipelined program of the case, or null (the diagnostics printed).
  OwningOpRef<ModuleOp> pipelined(const Case &c) {
    auto module =
        parseSourceString<ModuleOp>(stagedMlp(c.pp * c.virtualStages), &ctx);
    if (!module)
      return nullptr;
    // The driver's front half, as cleave-run compiles a pipelined plan.
    RankCompileOptions options;
    options.world = c.pp;
    options.plan.emplace();
    options.plan->named.pp = c.pp;
    options.plan->named.micro = c.micro;
    options.plan->named.schedule = c.schedule;
    options.plan->named.virtualStages = c.virtualStages;
    options.verify = true;
    if (llvm::Error err = compileForRanks(*module, options)) {
      ADD_FAILURE() << llvm::toString(std::move(err));
      return nullptr;
    }
    return module;
  }

  DialectRegistry registry;
  MLIRContext ctx;
};

/// A call of a pass function as the schedule names it: the callee is
/// `<step>_<f|b|w><stage>`, the location "<F|B|W> mb=<i> stage=<k>".
struct ReadCall {
  cost::PassRef pass;
  Operation *call;
};

std::vector<ReadCall> readCalls(func::FuncOp rank, int pp) {
  std::vector<ReadCall> calls;
  rank.walk([&](func::CallOp call) {
    auto name = dyn_cast<NameLoc>(call.getLoc());
    if (!name)
      return;
    char kind;
    int mb, stage;
    if (sscanf(name.getName().str().c_str(), "%c mb=%d stage=%d", &kind, &mb,
               &stage) != 3)
      return;
    cost::PassKind k = kind == 'F'   ? cost::PassKind::Forward
                       : kind == 'B' ? cost::PassKind::Backward
                                     : cost::PassKind::WeightGrad;
    calls.push_back({{k, mb, stage / pp}, call.getOperation()});
    // The callee is the pass function of that kind and stage.
    std::string callee = "train_step_" +
                         std::string(1, char(std::tolower(kind))) +
                         std::to_string(stage);
    EXPECT_EQ(call.getCallee().str(), callee);
  });
  return calls;
}

/// The values a forward call keeps alive for its micro-batch: its results
/// and the per-micro-batch inputs it got (received activations, slices of
/// the batch).
SmallVector<Value> forwardValues(Operation *call) {
  SmallVector<Value> values(call->getResults());
  // Received activations: a recv, or the wait of a recv_start (the
  // asynchronous form cleave-async-collectives makes of it).
  auto received = [](Operation *def) {
    if (auto wait = dyn_cast<WaitOp>(def))
      return isa_and_nonnull<RecvStartOp>(wait.getRequest().getDefiningOp());
    return isa<RecvOp>(def);
  };
  for (Value v : call->getOperands())
    if (Operation *def = v.getDefiningOp();
        def && (received(def) || isa<bufferization::AllocTensorOp>(def)))
      values.push_back(v);
  return values;
}

/// The largest number of (micro-batch, chunk) pairs whose forward pass has
/// run and whose forward values a later call of the rank still reads (the
/// in-flight activations).
int64_t peakInFlight(const std::vector<ReadCall> &calls) {
  // For each forward call, the index of the last call reading its values.
  std::vector<size_t> lastReader(calls.size(), 0);
  for (size_t j = 0; j < calls.size(); ++j) {
    if (calls[j].pass.kind != cost::PassKind::Forward)
      continue;
    for (Value v : forwardValues(calls[j].call))
      for (Operation *user : v.getUsers())
        for (size_t i = j + 1; i < calls.size(); ++i)
          if (calls[i].call == user)
            lastReader[j] = std::max(lastReader[j], i);
  }
  int64_t live = 0, peak = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (lastReader[i] > i)
      peak = std::max(peak, ++live);
    for (size_t j = 0; j < i; ++j)
      if (lastReader[j] == i)
        --live;
  }
  return peak;
}

std::string text(const std::vector<cost::PassRef> &order) {
  std::string s;
  for (const cost::PassRef &p : order)
    s += std::string(p.kind == cost::PassKind::Forward    ? "F"
                     : p.kind == cost::PassKind::Backward ? "B"
                                                          : "W") +
         std::to_string(p.microBatch) + "." + std::to_string(p.chunk) + " ";
  return s;
}

TEST_P(PipelineScheduleTest, RanksRunTheCostModelsOrder) {
  const Case &c = GetParam();
  OwningOpRef<ModuleOp> module = pipelined(c);
  ASSERT_TRUE(module);
  cost::ParallelPlan plan;
  plan.pp = c.pp;
  plan.numMicroBatches = c.micro;
  plan.virtualStages = c.virtualStages;
  plan.schedule = *cost::parseSchedule(c.schedule);
  std::vector<std::vector<cost::PassRef>> orders = cost::pipelineOrders(plan);
  bool splitW = plan.schedule == cost::Schedule::ZeroBubbleH1;
  std::vector<double> ones(c.virtualStages, 1.0);
  for (int r = 0; r < c.pp; ++r) {
    auto rank =
        module->lookupSymbol<func::FuncOp>("train_step_s" + std::to_string(r));
    ASSERT_TRUE(rank) << "no function for rank " << r;
    std::vector<ReadCall> calls = readCalls(rank, c.pp);
    std::vector<cost::PassRef> got;
    for (const ReadCall &call : calls)
      got.push_back(call.pass);
    // A pass without ops (stage 0's B pass under zb-h1: no earlier stage
    // waits for input gradients) has no function and is not called.
    std::vector<cost::PassRef> expected;
    for (const cost::PassRef &p : orders[r]) {
      std::string name = std::string("train_step_") +
                         (p.kind == cost::PassKind::Forward    ? "f"
                          : p.kind == cost::PassKind::Backward ? "b"
                                                               : "w") +
                         std::to_string(p.chunk * c.pp + r);
      if (module->lookupSymbol(name))
        expected.push_back(p);
    }
    EXPECT_EQ(text(got), text(expected)) << "rank " << r;
    EXPECT_EQ(peakInFlight(calls), int64_t(cost::peakLive(got, splitW, ones)))
        << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, PipelineScheduleTest,
    ::testing::Values(
        Case{2, 2, 1, "gpipe"}, Case{4, 8, 1, "gpipe"}, Case{2, 4, 1, "1f1b"},
        Case{4, 4, 1, "1f1b"}, Case{4, 8, 1, "1f1b"}, Case{4, 2, 1, "1f1b"},
        Case{2, 4, 1, "zb-h1"}, Case{4, 8, 1, "zb-h1"},
        Case{2, 2, 2, "interleaved"}, Case{2, 8, 2, "interleaved"},
        Case{4, 4, 2, "interleaved"}, Case{2, 4, 3, "interleaved"}),
    [](const ::testing::TestParamInfo<Case> &info) {
      std::string name = info.param.schedule;
      llvm::erase(name, '-');
      return name + "_pp" + std::to_string(info.param.pp) + "_m" +
             std::to_string(info.param.micro) + "_v" +
             std::to_string(info.param.virtualStages);
    });

} // namespace
