//===- AutoShard.cpp - The planner as a pass ------------------------------===//
//
// Implements -cleave-auto-shard. See Passes.td for the contract; the work is
// in lib/Planner (autoShard).
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/AutoShard.h"
#include "cleave/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "cleave-auto-shard"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEAUTOSHARDPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
namespace planner = ::cleave::planner;

namespace {

struct CleaveAutoShardPass final
    : mlir::cleave::impl::CleaveAutoShardPassBase<CleaveAutoShardPass> {
  using Base::Base;

  /// Writes `text` to `path` ("-": stderr); false with a diagnostic if the
  /// file cannot be written.
  bool write(StringRef path, StringRef text, StringRef option) {
    if (path.empty())
      return true;
    if (path == "-") {
      llvm::errs() << text;
      return true;
    }
    std::error_code ec;
    llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_Text);
    if (ec) {
      getOperation().emitError()
          << "cleave-auto-shard: " << option << ": cannot write " << path
          << ": " << ec.message();
      return false;
    }
    out << text;
    return true;
  }

  void runOnOperation() override {
    planner::AutoShardOptions o;
    o.cluster = cluster;
    o.gpus = gpus;
    o.globalBatch = globalBatch;
    o.fixedTp = tp;
    o.fixedZero = zero;
    o.maxPp = maxPp;
    o.memoryHeadroom = headroom;
    o.maxMicroBatches = maxMicroBatches;
    o.model = model;
    o.function = function;
    ModuleOp module = getOperation();
    ::cleave::cost::Result<planner::AutoShardResult> r =
        planner::autoShard(module, o);
    if (!r) {
      module.emitError() << "cleave-auto-shard: " << r.error();
      return signalPassFailure();
    }
    if (!write(report, r->report(), "report") ||
        !write(json, r->toJson().dump(1) + "\n", "json"))
      return signalPassFailure();
    if (!r->search.best) {
      InFlightDiagnostic d = module.emitError()
                             << "cleave-auto-shard: no plan fits";
      for (const std::string &line : r->search.infeasible)
        d << "\n" << line;
      return signalPassFailure();
    }
    const planner::Candidate &best = *r->search.best;
    module.emitRemark() << "cleave-auto-shard: "
                        << ::cleave::cost::describe(best.plan) << "; step "
                        << llvm::formatv("{0:e3}", best.stepTime).str()
                        << " s, MFU "
                        << llvm::formatv("{0:f1}", 100 * best.mfu).str()
                        << "%, "
                        << llvm::formatv("{0:f2}", best.peakMemory / 1e9).str()
                        << " GB per device";
  }
};

} // namespace
