//===- Plan.cpp - Plans as the tools name them ----------------------------===//

#include "cleave/Pipelines/Plan.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

using namespace mlir;
using namespace mlir::cleave;

const char *const mlir::cleave::kPlanSyntax =
    "dp=N, tp=N, ep=N, cp=N, cp-layout=balanced|contiguous, sp, zero=K, pp=N, "
    "micro=N, "
    "schedule=gpipe|1f1b|interleaved|zb-h1, virtual=N, "
    "recompute=none|selective|full[/...], layers=N/N/...";

static llvm::Error planError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The parts of `text` between commas, trimmed; an error for an empty part
/// or a key given twice.
static llvm::Expected<llvm::SmallVector<llvm::StringRef>>
splitPlan(llvm::StringRef text, llvm::StringRef what) {
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, ',');
  llvm::StringSet<> seen;
  for (llvm::StringRef &part : parts) {
    part = part.trim();
    if (part.empty())
      return planError(what + ": '" + text + "' has an empty part");
    llvm::StringRef key = part.split('=').first;
    if (!seen.insert(key).second)
      return planError(what + ": '" + key + "' is given twice");
  }
  return parts;
}

/// "auto[,tp=N][,pp=P][,zero=K]".
static llvm::Error parseAuto(llvm::ArrayRef<llvm::StringRef> constraints,
                             PlanSpec &plan, llvm::StringRef what) {
  plan.automatic = true;
  for (llvm::StringRef part : constraints) {
    auto [key, value] = part.split('=');
    int *field = key == "tp"     ? &plan.fixedTp
                 : key == "pp"   ? &plan.fixedPp
                 : key == "zero" ? &plan.fixedZero
                                 : nullptr;
    if (!field || value.getAsInteger(10, *field) || *field < 0)
      return planError(what + " auto: cannot read '" + part +
                       "' (expected tp=N, pp=P or zero=K)");
  }
  return llvm::Error::success();
}

/// One part of a named plan into `o`; false if it cannot be read.
static bool parseNamedPart(llvm::StringRef part,
                           CleaveApplyPlanPassOptions &o) {
  auto [key, value] = part.split('=');
  if (key == "sp") {
    o.sp = true;
    return part == "sp";
  }
  if (key == "schedule") {
    o.schedule = value.str();
    return !value.empty();
  }
  if (key == "cp-layout") {
    o.cpLayout = value.str();
    return value == "balanced" || value == "contiguous" || value == "auto";
  }
  if (key == "recompute") {
    // One kind, or one per pipeline rank: full/none.
    o.recompute = value.str();
    llvm::SmallVector<llvm::StringRef> kinds;
    value.split(kinds, '/');
    return llvm::all_of(kinds, [](llvm::StringRef kind) {
      return kind == "none" || kind == "selective" || kind == "full";
    });
  }
  int64_t *field = key == "dp"        ? &o.dp
                   : key == "tp"      ? &o.tp
                   : key == "ep"      ? &o.ep
                   : key == "cp"      ? &o.cp
                   : key == "zero"    ? &o.zero
                   : key == "pp"      ? &o.pp
                   : key == "micro"   ? &o.micro
                   : key == "virtual" ? &o.virtualStages
                                      : nullptr;
  return field && !value.getAsInteger(10, *field);
}

/// "1/3/3/1" into `counts`; false if it cannot be read.
static bool parseLayers(llvm::StringRef text, std::vector<int64_t> &counts) {
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, '/');
  for (llvm::StringRef part : parts) {
    int64_t n;
    if (part.getAsInteger(10, n) || n < 0)
      return false;
    counts.push_back(n);
  }
  return !counts.empty();
}

llvm::Expected<PlanSpec>
mlir::cleave::parsePlan(llvm::StringRef text, int world, llvm::StringRef what) {
  if (text.trim().empty())
    return planError(what + ": the plan is empty (expected " + kPlanSyntax +
                     ", or auto)");
  auto parts = splitPlan(text, what);
  if (!parts)
    return parts.takeError();
  PlanSpec plan;
  if (parts->front() == "auto") {
    if (llvm::Error err =
            parseAuto(llvm::ArrayRef(*parts).drop_front(), plan, what))
      return std::move(err);
    return plan;
  }
  CleaveApplyPlanPassOptions &o = plan.named;
  bool dpGiven = false;
  for (llvm::StringRef part : *parts) {
    if (part == "auto")
      return planError(what + ": 'auto' comes first and alone, with at most "
                              "tp=N, pp=P and zero=K after it");
    if (part.starts_with("layers=")) {
      if (!parseLayers(part.drop_front(7), plan.layersPerStage))
        return planError(what + ": cannot read '" + part +
                         "' (expected layers=N/N/..., one count per stage)");
      continue;
    }
    if (!parseNamedPart(part, o))
      return planError(what + ": cannot read '" + part + "' (expected " +
                       kPlanSyntax + ")");
    dpGiven |= part.split('=').first == "dp";
  }
  if (o.virtualStages > 1 && o.schedule == "1f1b")
    o.schedule = "interleaved";
  if (!plan.layersPerStage.empty() &&
      int64_t(plan.layersPerStage.size()) != plan.stages())
    return planError(what + ": layers= gives " +
                     llvm::Twine(plan.layersPerStage.size()) +
                     " stages but the plan has " + llvm::Twine(plan.stages()) +
                     " (pp x virtual)");
  int64_t others = o.tp * o.ep * o.cp * o.pp;
  if (!dpGiven && world > 0 && o.tp > 0 && o.ep > 0 && o.cp > 0 && o.pp > 0 &&
      world % others == 0)
    o.dp = world / others;
  return plan;
}
