//===- Plan.h - Plans as the tools name them --------------------*- C++ -*-===//
//
// The text of `cleave-run --plan`: a named plan ("dp=2,tp=2,sp,zero=1",
// "pp=2,dp=2,micro=4,schedule=1f1b", the options of cleave-apply-plan) or
// the planner's choice ("auto", "auto,tp=2,zero=1": cleave-auto-shard with
// constraints). docs/partitioning.md and docs/planner.md describe both.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PIPELINES_PLAN_H
#define CLEAVE_PIPELINES_PLAN_H

#include "cleave/Transforms/Passes.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <vector>

namespace mlir::cleave {

/// A parsed plan.
struct PlanSpec {
  /// "auto": the planner chooses; otherwise a named plan.
  bool automatic = false;
  /// The named plan as cleave-apply-plan options.
  CleaveApplyPlanPassOptions named;
  /// The planner's constraints ("auto,tp=N,pp=P,zero=K"): a fixed
  /// tensor-parallel and pipeline-parallel degree (0: search) and ZeRO stage
  /// (-1: search).
  int fixedTp = 0;
  int fixedPp = 0;
  int fixedZero = -1;
  /// Layers of each pipeline stage in model order (`layers=1/3`; empty: an
  /// even split), pp x virtual entries.
  std::vector<int64_t> layersPerStage;

  /// Whether the step is pipelined or micro-batched (a named plan with
  /// pp > 1 or micro > 1).
  bool pipelines() const {
    return !automatic && (named.pp > 1 || named.micro > 1);
  }
  /// Pipeline stages the forward function is cut into before
  /// differentiation (pp x virtual stages); 1 for a plan without pipeline.
  int64_t stages() const {
    return automatic ? 1 : named.pp * named.virtualStages;
  }
};

/// What a plan may contain, for messages and --help.
extern const char *const kPlanSyntax;

/// Parses `text`. Without dp, a named plan is data parallel over the ranks
/// that tensor, expert, context and pipeline parallelism leave over of
/// `world` (when `world`
/// is known, i.e. > 0, and they divide it). Errors name the part that
/// cannot be read and what was expected, after `what` (how the caller names
/// the plan: "--plan" in cleave-run). The values are checked where the
/// plan is applied (cleave-apply-plan, the planner), with the program.
llvm::Expected<PlanSpec> parsePlan(llvm::StringRef text, int world = 0,
                                   llvm::StringRef what = "plan");

} // namespace mlir::cleave

#endif // CLEAVE_PIPELINES_PLAN_H
