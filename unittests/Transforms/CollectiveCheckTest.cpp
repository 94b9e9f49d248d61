//===- CollectiveCheckTest.cpp - The verifier on random pipelines ---------===//
//
// Random pipelined programs on a pp x dp x tp mesh, built by projecting one
// global order of interactions (send/recv between two stages, collectives
// over groups spanning the stages, collectives inside a stage) onto the
// stages. Such programs complete by construction: the check must prove
// them. Mutating one stage (another shape, a dropped call) must fail, and
// the check with one simulated device per class must always agree with the
// check that simulates every device.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/CleaveDialect.h"
#include "cleave/Transforms/CollectiveTrace.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include <gtest/gtest.h>

#include <random>
#include <sstream>

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// One interaction of the global order.
struct Interaction {
  enum Kind { P2P, Spanning, Local } kind;
  int src = 0, dst = 0; ///< P2P: the stages; Local: the stage (src).
  int size = 4;         ///< Elements of the 1-d payload.
  const char *axes = "[pp]";
  const char *reduction = "sum";
};

/// One stage's call in the projected program.
struct Call {
  size_t interaction;
  int size;
  bool dropped = false;
};

struct Program {
  int stages = 2;
  std::vector<Interaction> order;
  std::vector<std::vector<Call>> calls; ///< Per stage.
};

/// With `wideP2P`, some send/recv go along [pp, dp] to the peer at dp = 0:
/// broken for the devices at dp = 1, and a case where the simulation must
/// keep the dp axis.
Program randomProgram(std::mt19937 &rng, bool wideP2P = false) {
  Program p;
  p.stages = 2 + int(rng() % 3);
  int n = 4 + int(rng() % 10);
  const char *spanning[] = {"[pp]", "[pp, dp]", "[dp, pp]", "[pp, tp]"};
  const char *local[] = {"[tp]", "[dp]", "[dp, tp]"};
  const char *reductions[] = {"sum", "max"};
  for (int i = 0; i < n; ++i) {
    Interaction x;
    int r = int(rng() % 10);
    x.kind = r < 5   ? Interaction::P2P
             : r < 7 ? Interaction::Spanning
                     : Interaction::Local;
    x.size = 2 << (rng() % 3);
    x.src = int(rng() % p.stages);
    x.dst = (x.src + 1 + int(rng() % (p.stages - 1))) % p.stages;
    x.axes = x.kind == Interaction::Spanning ? spanning[rng() % 4]
                                             : local[rng() % 3];
    x.reduction = reductions[rng() % 2];
    if (x.kind == Interaction::P2P)
      x.axes = wideP2P && rng() % 4 == 0 ? "[pp, dp]" : "[pp]";
    p.order.push_back(x);
  }
  p.calls.resize(p.stages);
  for (size_t i = 0; i < p.order.size(); ++i) {
    const Interaction &x = p.order[i];
    for (int s = 0; s < p.stages; ++s) {
      bool takesPart = x.kind == Interaction::Spanning || s == x.src ||
                       (x.kind == Interaction::P2P && s == x.dst);
      if (takesPart)
        p.calls[s].push_back({i, x.size});
    }
  }
  return p;
}

std::string render(const Program &p) {
  std::ostringstream os;
  os << "module attributes {cleave.pipeline = {axis = \"pp\", stages = [";
  for (int s = 0; s < p.stages; ++s)
    os << (s ? ", " : "") << "@s" << s;
  os << "]}} {\n  cleave.mesh @m(pp = " << p.stages
     << " : ib, dp = 2 : ib, tp = 2 : nvlink)\n";
  for (int s = 0; s < p.stages; ++s) {
    os << "  func.func @s" << s << "(%x: tensor<2xf32>, %y: tensor<4xf32>, "
       << "%z: tensor<8xf32>) {\n";
    int v = 0;
    for (const Call &c : p.calls[s]) {
      if (c.dropped)
        continue;
      const Interaction &x = p.order[c.interaction];
      std::string type = "tensor<" + std::to_string(c.size) + "xf32>";
      std::string arg = c.size == 2 ? "%x" : c.size == 4 ? "%y" : "%z";
      // Along [pp, dp], the peer's index is pp * 2 + dp.
      int scale = std::string(x.axes) == "[pp, dp]" ? 2 : 1;
      if (x.kind == Interaction::P2P && s == x.src)
        os << "    cleave.send " << arg << " on @m axes = " << x.axes << " to "
           << x.dst * scale << " : " << type << "\n";
      else if (x.kind == Interaction::P2P)
        os << "    %v" << v++ << " = cleave.recv on @m axes = " << x.axes
           << " from " << x.src * scale << " : " << type << "\n";
      else
        os << "    %v" << v++ << " = cleave.all_reduce " << arg << " on @m "
           << "axes = " << x.axes << " reduction = " << x.reduction << " : "
           << type << "\n";
    }
    os << "    return\n  }\n";
  }
  os << "}\n";
  return os.str();
}

class CollectiveCheckTest : public ::testing::Test {
protected:
  CollectiveCheckTest() {
    context.loadDialect<CleaveDialect, func::FuncDialect, arith::ArithDialect,
                        scf::SCFDialect>();
  }

  /// Checks the program; returns whether it passed, and the diagnostics.
  bool check(const std::string &text, bool exhaustive, std::string &errors) {
    errors.clear();
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      errors += diag.str() + "\n";
      return success();
    });
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
    if (!module) {
      ADD_FAILURE() << "does not parse:\n" << text << errors;
      return false;
    }
    SymbolTableCollection symbols;
    CommTable table(symbols);
    TraceReplayer replayer(table, symbols);
    SmallVector<func::FuncOp> stages(module->getOps<func::FuncOp>());
    CheckOptions options;
    options.exhaustive = exhaustive;
    return succeeded(verifyEntry(stages, StringRef("pp"), module->getLoc(),
                                 replayer, table, symbols, options));
  }

  /// Both simulations agree; returns whether the program passed.
  bool checkBoth(const std::string &text, std::string &errors) {
    std::string exhaustiveErrors;
    bool reduced = check(text, false, errors);
    bool exhaustive = check(text, true, exhaustiveErrors);
    EXPECT_EQ(reduced, exhaustive) << text << "reduced:\n"
                                   << errors << "exhaustive:\n"
                                   << exhaustiveErrors;
    return reduced;
  }

  MLIRContext context;
};

TEST_F(CollectiveCheckTest, ProjectedGlobalOrdersAreProven) {
  std::mt19937 rng(7);
  for (int i = 0; i < 150; ++i) {
    std::string text = render(randomProgram(rng)), errors;
    EXPECT_TRUE(checkBoth(text, errors)) << text << errors;
  }
}

/// Another payload size on one side of a cross-stage call: a mismatch.
TEST_F(CollectiveCheckTest, AnotherShapeOnOneStageFails) {
  std::mt19937 rng(11);
  int tried = 0;
  while (tried < 150) {
    Program p = randomProgram(rng);
    int s = int(rng() % p.stages);
    std::vector<Call> &calls = p.calls[s];
    if (calls.empty())
      continue;
    Call &c = calls[rng() % calls.size()];
    if (p.order[c.interaction].kind == Interaction::Local)
      continue; // Every member of a local group runs this same program.
    c.size = c.size == 8 ? 2 : 2 * c.size;
    std::string text = render(p), errors;
    EXPECT_FALSE(checkBoth(text, errors)) << text;
    EXPECT_NE(errors.find("rank "), std::string::npos) << errors;
    ++tried;
  }
}

/// A call dropped on one stage leaves a partner waiting forever.
TEST_F(CollectiveCheckTest, ADroppedCallFails) {
  std::mt19937 rng(13);
  int tried = 0;
  while (tried < 150) {
    Program p = randomProgram(rng);
    int s = int(rng() % p.stages);
    std::vector<Call> &calls = p.calls[s];
    if (calls.empty())
      continue;
    Call &c = calls[rng() % calls.size()];
    if (p.order[c.interaction].kind == Interaction::Local)
      continue;
    c.dropped = true;
    std::string text = render(p), errors;
    EXPECT_FALSE(checkBoth(text, errors)) << text;
    ++tried;
  }
}

/// Swapped calls may or may not deadlock, send/recv along [pp, dp] are
/// broken: both simulations must agree, and a failure names ranks.
TEST_F(CollectiveCheckTest, SwapsAgreeBetweenReducedAndExhaustive) {
  std::mt19937 rng(17);
  int failed = 0;
  for (int i = 0; i < 200; ++i) {
    Program p = randomProgram(rng, /*wideP2P=*/i % 2 == 1);
    int s = int(rng() % p.stages);
    std::vector<Call> &calls = p.calls[s];
    if (calls.size() < 2)
      continue;
    size_t k = rng() % (calls.size() - 1);
    std::swap(calls[k], calls[k + 1]);
    std::string text = render(p), errors;
    if (!checkBoth(text, errors)) {
      ++failed;
      EXPECT_NE(errors.find("rank "), std::string::npos) << errors;
    }
  }
  EXPECT_GT(failed, 20); // The swaps do produce broken programs.
}

} // namespace
