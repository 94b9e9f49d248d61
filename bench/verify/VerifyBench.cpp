//===- VerifyBench.cpp - How fast cleave-verify-collectives is at scale ---===//
//
// Generates pipelined programs as the pipeline pass would write them
// (1F1B over scf.for loops, tensor-parallel all-reduces in every layer of
// every micro-batch, data-parallel gradient all-reduces at the end) on large
// meshes, and times the replay of the stage functions and the check, with
// the symmetry reduction (one simulated device per class, as the pass runs)
// and without it (every device of the mesh).
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/CleaveDialect.h"
#include "cleave/Support/ClosedPipeLLVM.h"
#include "cleave/Transforms/CollectiveTrace.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

#include <chrono>
#include <cstdio>
#include <sstream>

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct Case {
  int pp, dp, tp;
  int microBatches;
  int layers; ///< Layers per stage.
};

/// Writes one stage of Megatron's non-interleaved 1F1B, paired calls
/// ordered by stage parity (sends block until the peer receives).
class StageWriter {
public:
  StageWriter(std::ostream &os, const Case &c, int s)
      : os(os), c(c), s(s), first(s == 0), last(s == c.pp - 1),
        even(s % 2 == 0) {}

  void write() {
    int warmup = std::min(c.pp - s - 1, c.microBatches);
    int steady = c.microBatches - warmup;
    os << "  func.func @s" << s << "(%x: " << act
       << ", %w: tensor<1024x1024xf32>) {\n"
       << "    %c0 = arith.constant 0 : index\n"
       << "    %c1 = arith.constant 1 : index\n"
       << "    %layers = arith.constant " << c.layers << " : index\n"
       << "    %warmup = arith.constant " << warmup << " : index\n"
       << "    %steady = arith.constant " << steady << " : index\n"
       << "    scf.for %i = %c0 to %warmup step %c1 {\n";
    recvFwd();
    layers();
    sendFwd();
    os << "    }\n";
    if (steady > 0)
      recvFwd();
    os << "    scf.for %i = %c0 to %steady step %c1 {\n";
    layers();
    pair(&StageWriter::sendFwd, &StageWriter::recvBwd);
    layers();
    os << "    %next = arith.addi %i, %c1 : index\n"
       << "    %done = arith.cmpi eq, %next, %steady : index\n"
       << "    scf.if %done {\n";
    sendBwd();
    os << "    } else {\n";
    pair(&StageWriter::sendBwd, &StageWriter::recvFwd);
    os << "    }\n    }\n"
       << "    scf.for %i = %c0 to %warmup step %c1 {\n";
    recvBwd();
    layers();
    sendBwd();
    os << "    }\n";
    for (int l = 0; l < c.layers; ++l)
      os << "    %dw" << l << " = cleave.all_reduce %w on @world axes = [dp] "
         << ": tensor<1024x1024xf32>\n";
    os << "    return\n  }\n";
  }

private:
  void recv(int from) {
    os << "    %r" << names++ << " = cleave.recv on @world axes = [pp] from "
       << from << " : " << act << "\n";
  }
  void send(int to) {
    os << "    cleave.send %x on @world axes = [pp] to " << to << " : " << act
       << "\n";
  }
  void recvFwd() {
    if (!first)
      recv(s - 1);
  }
  void sendFwd() {
    if (!last)
      send(s + 1);
  }
  void recvBwd() {
    if (!last)
      recv(s + 1);
  }
  void sendBwd() {
    if (!first)
      send(s - 1);
  }
  /// Two tensor-parallel all-reduces per layer.
  void layers() {
    os << "    scf.for %l = %c0 to %layers step %c1 {\n";
    for (int k = 0; k < 2; ++k)
      os << "      %t" << names++ << " = cleave.all_reduce %x on @world axes = "
         << "[tp] : " << act << "\n";
    os << "    }\n";
  }
  void pair(void (StageWriter::*sendCall)(), void (StageWriter::*recvCall)()) {
    (this->*(even ? sendCall : recvCall))();
    (this->*(even ? recvCall : sendCall))();
  }

  static constexpr const char *act = "tensor<8x1024xbf16>";
  std::ostream &os;
  const Case &c;
  int s;
  bool first, last, even;
  int names = 0; ///< SSA names are unique per function.
};

std::string writeModule(const Case &c) {
  std::ostringstream os;
  os << "module attributes {cleave.pipeline = {axis = \"pp\", stages = [";
  for (int s = 0; s < c.pp; ++s)
    os << (s ? ", " : "") << "@s" << s;
  os << "]}} {\n  cleave.mesh @world(pp = " << c.pp << " : ib, dp = " << c.dp
     << " : ib, tp = " << c.tp << " : nvlink)\n";
  for (int s = 0; s < c.pp; ++s)
    StageWriter(os, c, s).write();
  os << "}\n";
  return os.str();
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - t0)
      .count();
}

/// Replays the stages and checks them; prints one line.
bool run(MLIRContext &context, const Case &c, bool exhaustive) {
  std::string text = writeModule(c);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module)
    return false;
  SymbolTableCollection symbols;
  CommTable table(symbols);
  TraceReplayer replayer(table, symbols);
  SmallVector<func::FuncOp> stages;
  for (int s = 0; s < c.pp; ++s)
    stages.push_back(
        module->lookupSymbol<func::FuncOp>("s" + std::to_string(s)));
  CheckOptions options;
  options.exhaustive = exhaustive;
  CheckStats stats;
  if (failed(verifyEntry(stages, StringRef("pp"), module->getLoc(), replayer,
                         table, symbols, options, &stats)))
    return false;
  std::printf("%4d x %4d x %2d %8lld %9lld %10lld %13lld %10.1f %10.1f\n", c.pp,
              c.dp, c.tp, (long long)stats.meshDevices,
              (long long)stats.simulatedDevices,
              (long long)(stats.calls / stats.simulatedDevices),
              (long long)stats.calls, stats.replayMs, stats.checkMs);
  return true;
}

/// The whole pass, as the CPU pipeline runs it (parsing excluded).
bool runPass(MLIRContext &context, const Case &c) {
  std::string text = writeModule(c);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  PassManager pm(&context);
  pm.addPass(createCleaveVerifyCollectivesPass());
  auto t0 = std::chrono::steady_clock::now();
  bool ok = module && succeeded(pm.run(*module));
  std::printf("pass on %d x %d x %d, %d micro-batches, %d layers per stage: "
              "%.1f ms\n",
              c.pp, c.dp, c.tp, c.microBatches, c.layers, since(t0));
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  ::cleave::exitQuietlyOnClosedStdout();
  // No options of its own: --help lists none of the libraries' either.
  llvm::cl::OptionCategory category("cleave-bench-verify options");
  llvm::cl::HideUnrelatedOptions(category);
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "Times cleave-verify-collectives on 1F1B pipelines of growing meshes\n");
  DialectRegistry registry;
  registry.insert<CleaveDialect, arith::ArithDialect, func::FuncDialect,
                  scf::SCFDialect, tensor::TensorDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  const Case cases[] = {{4, 8, 8, 16, 4},    {8, 16, 8, 32, 4},
                        {8, 64, 8, 32, 4},   {8, 512, 8, 32, 4},
                        {16, 128, 8, 64, 2}, {64, 16, 16, 128, 1},
                        {8, 128, 8, 64, 16}};
  for (bool exhaustive : {false, true}) {
    std::printf("\n%s (times in ms)\n"
                "mesh pp x dp x tp  devices simulated  calls/dev "
                "calls checked     replay      check\n",
                exhaustive ? "every device simulated (exhaustive=1)"
                           : "one device per class (as the pass runs)");
    for (const Case &c : cases) {
      if (!run(context, c, exhaustive)) {
        std::fprintf(stderr, "verification failed\n");
        return 1;
      }
    }
  }
  std::printf("\n");
  for (const Case &c : {cases[2], cases[4], cases[6]})
    if (!runPass(context, c))
      return 1;
  return 0;
}
