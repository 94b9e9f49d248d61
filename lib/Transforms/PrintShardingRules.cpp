//===- PrintShardingRules.cpp - Report and check every op's rule ----------===//
//
// Implements -cleave-print-sharding-rules. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Transforms/Passes.h"

#define DEBUG_TYPE "cleave-print-sharding-rules"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEPRINTSHARDINGRULESPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct CleavePrintShardingRulesPass final
    : cleave::impl::CleavePrintShardingRulesPassBase<
          CleavePrintShardingRulesPass> {
  using Base::Base;

  void runOnOperation() override {
    bool ok = true;
    getOperation().walk([&](ShardingRuleOpInterface op) {
      ShardingRule rule = op.getShardingRule();
      if (failed(rule.verify(op))) {
        ok = false;
        return;
      }
      op->emitRemark() << "sharding rule: " << rule.toString();
    });
    if (!ok)
      signalPassFailure();
  }
};

} // namespace
