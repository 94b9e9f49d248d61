//===- SpeedBench.cpp - How long a full plan search takes -----------------===//
//
// Times the planner on the two reference problems, GPT-3 175B on
// 1,024 A100s and Llama-3 405B on 16,384 H100s (targets: 10 s and 30 s on a
// 2-core machine), plus smaller ones: the plan search alone (searchPlans),
// and the whole of cleave-plan (build the model's program, search, solve
// each stage's integer program, annotate the module). Prints the best of
// --repeat runs and the chosen plan.
//
// Then the same 100-layer module (GPT-3 175B's shape with 100 layers, on
// 1,024 A100s) planned twice, interleaved: with its configuration given
// and without. The planner prices both from the module's ops
// (GraphWorkload.h); the preset's Megatron formulas only remain as the
// oracle, timed in the last part: the plan search alone on the same space,
// formulas vs ops. The target is the graph path within 2x of the
// preset path.
//
// Usage: cleave-planner-speed [--repeat N] [--100-layers-only]
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/CleaveDialect.h"
#include "cleave/Models/ModelZoo.h"
#include "cleave/Planner/AutoShard.h"
#include "cleave/Planner/GraphWorkload.h"
#include "cleave/Support/ClosedPipe.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

using namespace cleave;

namespace {

struct Problem {
  const char *model, *cluster;
  int gpus;
  int64_t globalBatch;
};

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

/// The whole of cleave-plan on a zoo preset (`layers` > 0: with that many
/// layers; `graph`: without naming the configuration, so the costs come
/// from the module's ops); the result, and seconds.
std::pair<cost::Result<planner::AutoShardResult>, double>
planFull(const Problem &p, int64_t layers = 0, bool graph = false) {
  auto t0 = std::chrono::steady_clock::now();
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::cleave::CleaveDialect, mlir::func::FuncDialect>();
  ModelConfig config = *lookupPreset(p.model);
  config.dtype = DType::BF16;
  config.batch = p.globalBatch;
  if (layers > 0)
    config.layers = layers;
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::cleave::buildModel(&ctx, config, error);
  planner::AutoShardOptions o;
  o.cluster = p.cluster;
  o.gpus = p.gpus;
  if (module && graph)
    (*module)->removeAttr(mlir::cleave::CleaveDialect::kModelAttrName);
  else if (layers > 0)
    o.config = config;
  cost::Result<planner::AutoShardResult> r =
      module ? planner::autoShard(*module, o)
             : cost::Result<planner::AutoShardResult>::failure(error);
  return {std::move(r), since(t0)};
}

/// The plan search alone on the same space (cp included on both paths),
/// preset formulas vs the workload derived from the module's ops.
int searchAlone(const Problem &p, int repeat) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::cleave::CleaveDialect, mlir::func::FuncDialect>();
  ModelConfig config = *lookupPreset(p.model);
  config.dtype = DType::BF16;
  config.batch = p.globalBatch;
  config.layers = 100;
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::cleave::buildModel(&ctx, config, error);
  if (!module) {
    std::printf("error: %s\n", error.c_str());
    return 1;
  }
  auto f = module->lookupSymbol<mlir::func::FuncOp>("forward");
  mlir::FailureOr<planner::ForwardView> view =
      planner::analyzeForward(f, error);
  cost::Result<cost::ClusterSpec> cl =
      cost::lookupClusterPreset(p.cluster, p.gpus / 8);
  if (failed(view) || !cl) {
    std::printf("error: %s\n",
                failed(view) ? error.c_str() : cl.error().c_str());
    return 1;
  }
  cost::Result<ModelConfig> derived = planner::deriveModelConfig(*view);
  if (!derived) {
    std::printf("error: %s\n", derived.error().c_str());
    return 1;
  }
  derived->dtype = DType::BF16;
  planner::PlannerOptions so;
  so.globalBatch = p.globalBatch;
  so.gpus = p.gpus;
  so.implementation.dtype = DType::BF16;
  so.implementation.overlapGradReduce = true;
  so.implementation.overlapParamGather = true;
  double best[2] = {1e300, 1e300};
  std::string chosen[2];
  for (int i = 0; i < repeat; ++i)
    for (int graph = 0; graph < 2; ++graph) {
      auto err = std::make_shared<std::string>();
      planner::PlannerOptions o = so;
      if (graph)
        o.workload = planner::graphWorkloadFunction(*view, *derived, *cl, err);
      auto t0 = std::chrono::steady_clock::now();
      cost::Result<planner::SearchResult> r =
          planner::searchPlans(graph ? *derived : config, *cl, o);
      double seconds = since(t0);
      if (!r || !r->best || !err->empty()) {
        std::printf("search (%s): %s\n", graph ? "graph" : "preset",
                    !r              ? r.error().c_str()
                    : !err->empty() ? err->c_str()
                                    : "no plan fits");
        return 1;
      }
      best[graph] = std::min(best[graph], seconds);
      char line[256];
      std::snprintf(line, sizeof line, "%s (%.3f s)",
                    cost::describe(r->best->plan).c_str(), r->best->stepTime);
      chosen[graph] = line;
    }
  std::printf(
      "\nsearch alone, same space (cp included), best of %d, interleaved\n",
      repeat);
  std::printf("  preset path (formulas): %7.2f s  %s\n", best[0],
              chosen[0].c_str());
  std::printf("  graph path (ops):       %7.2f s  %s\n", best[1],
              chosen[1].c_str());
  std::printf("  graph / preset: %.2fx\n", best[1] / best[0]);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  ::cleave::exitQuietlyOnClosedStdoutPosix();
  int repeat = 1;
  bool deepOnly = false;
  for (int a = 1; a < argc; ++a) {
    if (std::string(argv[a]) == "--repeat" && a + 1 < argc)
      repeat = std::max(1, std::atoi(argv[a + 1]));
    deepOnly |= std::string(argv[a]) == "--100-layers-only";
  }
  const Problem problems[] = {
      {"gpt3-175b", "dgx-a100-80gb", 1024, 1536},
      {"llama3-405b", "dgx-h100", 16384, 2048},
      {"llama3-70b", "dgx-h100", 1024, 1024},
      {"llama3-8b", "dgx-h100", 64, 512},
  };
  std::printf("%-12s %-14s %6s %6s  %8s %8s  %8s %7s %9s  %s\n", "model",
              "cluster", "GPUs", "batch", "search s", "full s", "plans",
              "visited", "simulated", "chosen plan (step, MFU)");
  for (const Problem &p : problems) {
    if (deepOnly)
      break;
    double search = 1e300, full = 1e300;
    cost::Result<planner::AutoShardResult> r =
        cost::Result<planner::AutoShardResult>::failure("not run");
    for (int i = 0; i < repeat; ++i) {
      auto [result, seconds] = planFull(p);
      if (!result)
        break;
      full = std::min(full, seconds);
      search = std::min(search, result->search.stats.seconds);
      r = std::move(result);
    }
    if (!r || !r->search.best) {
      std::printf("%-12s error: %s\n", p.model,
                  r ? "no plan fits" : r.error().c_str());
      continue;
    }
    const planner::SearchStats &s = r->search.stats;
    const cost::ParallelPlan &plan = r->search.best->plan;
    std::printf("%-12s %-14s %6d %6lld  %8.2f %8.2f  %8lld %7lld %9lld  "
                "tp%d pp%d dp%d cp%d mbs%lld %s z%d (%.3f s, MFU %.1f%%)\n",
                p.model, p.cluster, p.gpus, (long long)p.globalBatch, search,
                full, (long long)s.candidates, (long long)s.visited,
                (long long)s.simulated, plan.tp, plan.pp, plan.dp, plan.cp,
                (long long)plan.microBatchSize, cost::toString(plan.schedule),
                plan.zeroStage, r->search.best->stepTime,
                100 * r->search.best->mfu);
  }
  // The 100-layer module, preset path vs graph path, interleaved.
  const Problem deep{"gpt3-175b", "dgx-a100-80gb", 1024, 1536};
  double best[2] = {1e300, 1e300};
  std::string chosen[2];
  for (int i = 0; i < std::max(repeat, 3); ++i)
    for (int graph = 0; graph < 2; ++graph) {
      auto [r, seconds] = planFull(deep, 100, graph == 1);
      if (!r || !r->search.best) {
        std::printf("100 layers (%s): %s\n", graph ? "unnamed" : "named",
                    r ? "no plan fits" : r.error().c_str());
        return 1;
      }
      best[graph] = std::min(best[graph], seconds);
      char line[256];
      std::snprintf(line, sizeof line, "%s (%.3f s)",
                    cost::describe(r->search.best->plan).c_str(),
                    r->search.best->stepTime);
      chosen[graph] = line;
    }
  std::printf("\n100-layer gpt3-175b shape, 1024 A100s, batch 1536 (best of "
              "%d, interleaved)\n",
              std::max(repeat, 3));
  std::printf("  named (a preset matches): %7.2f s  %s\n", best[0],
              chosen[0].c_str());
  std::printf("  unnamed:                  %7.2f s  %s\n", best[1],
              chosen[1].c_str());
  std::printf("  unnamed / named: %.2fx (both priced from the ops, cp "
              "searched)\n",
              best[1] / best[0]);
  return searchAlone(deep, std::max(repeat, 3));
}
