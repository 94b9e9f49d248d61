//===- AutoShard.h - Plan a module and write the plan into it ---*- C++ -*-===//
//
// The planner's entry point for IR (the cleave-auto-shard pass and the
// cleave-plan tool call it): resolve the cluster, analyze the function to
// plan, search the plan, choose every op's sharding per pipeline stage with
// the intra-op ILP, and write the plan as docs/plans.md specifies - the
// `cleave.mesh`, `cleave.sharding` argument and result attributes,
// `cleave.sharding_constraint` ops where a value must change layout, the
// `cleave.plan` module attribute and a `cleave.stage` on every op.
//
// Two ways to price plans:
// - transformer mode, when the module's model is known (a zoo preset, by
//   its `cleave.model` attribute or the `model` option): the plan search of
//   Search.h over the calibrated cost model (pipelines, schedules, ZeRO,
//   recomputation, context parallelism), then the ILP per stage. A module
//   no preset matches that has repeated layers, a token embedding and
//   attention gets the same search with its workload derived from its own
//   ops (GraphWorkload.h; no context parallelism there yet);
// - graph mode, for any other program: every data x tensor parallel mesh
//   and ZeRO stage, each priced by its ILP (per-op roofline compute and
//   collective costs from the ops' sharding rules) plus the data-parallel
//   gradient reduction and the optimizer. No pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_AUTOSHARD_H
#define CLEAVE_PLANNER_AUTOSHARD_H

#include "cleave/CostModel/Estimate.h"
#include "cleave/Planner/Ilp.h"
#include "cleave/Planner/Search.h"
#include "cleave/Planner/ShardingGraph.h"
#include "mlir/IR/BuiltinOps.h"

#include <memory>
#include <nlohmann/json.hpp>

namespace cleave::planner {

/// A cluster for planning, and whether its devices are processes of one
/// machine (mesh links `host`).
struct PlanCluster {
  cost::ClusterSpec spec;
  bool host = false;
};

/// `name` is a preset (dgx-a100-40gb, dgx-a100-80gb, dgx-h100, dgx-h200:
/// `gpus` / 8 nodes), `local-cpu` (`gpus` processes on this machine, with
/// its measured GEMM and loopback-collective speeds), or a path to a JSON
/// cluster file (docs/cost-model.md). `gpus` 0: one node (presets), 4
/// processes (local-cpu), the file's size (JSON).
cost::Result<PlanCluster> resolveCluster(const std::string &name, int gpus);

struct AutoShardOptions {
  std::string cluster = cost::kDefaultCluster;
  /// Devices to plan for; 0: see resolveCluster.
  int gpus = 0;
  /// Sequences per step; 0: the module's batch (the first data input's
  /// leading dimension). Must equal it when given.
  int64_t globalBatch = 0;
  int fixedTp = 0;
  /// Fix the pipeline-parallel size; 0: search.
  int fixedPp = 0;
  /// Whether the step clips gradients by their global norm (priced as one
  /// scalar all-reduce over all ranks).
  bool clipGradients = true;
  /// Whether the step scales the loss dynamically (fp16; see
  /// cost::ParallelPlan::dynamicLossScaling).
  bool dynamicLossScaling = false;
  /// Fix the ZeRO stage (0-3); -1: search.
  int fixedZero = -1;
  /// Largest pipeline size; -1: the layer count.
  int maxPp = -1;
  double memoryHeadroom = cost::kDefaultMemoryHeadroom;
  /// Largest micro-batch count (0: any).
  int64_t maxMicroBatches = 0;
  /// The model preset for the cost model; empty: the module's `cleave.model`
  /// if it names a preset, else graph mode.
  std::string model;
  /// The configuration the module was built from, when the caller knows it
  /// (cleave-run builds zoo models with overrides); takes precedence over
  /// `model`. Must match the module's parameter count.
  std::optional<ModelConfig> config;
  /// Function to annotate; empty: @train_step if present, else @forward,
  /// else the only function.
  std::string function;
  int topK = 5;
  double ilpTimeLimit = 60;
  /// Bytes per data-parallel gradient bucket the program will run with
  /// (cleave-run --bucket-mb); the cost model prices one collective per
  /// bucket. Unset: the cost constants' dp_bucket_params.
  std::optional<double> dpBucketBytes;
  std::function<void(const SearchProgress &)> progress;
};

/// The intra-op solution of one pipeline stage class.
struct StageSolution {
  /// Pipeline stages this solution is for.
  std::vector<int> stages;
  int64_t layers = 0;
  bool first = false, last = false;
  double memoryLimit = 0;
  IlpSolution ilp;
  /// The memory row could not be met: solved without it.
  bool memoryRelaxed = false;
};

struct AutoShardResult {
  /// The cost constants the search used when the options changed them
  /// (searchOptions.constants points here).
  std::shared_ptr<const cost::CostConstants> constants;
  bool transformerMode = false;
  /// The plan search priced the module's own ops (GraphWorkload.h), with
  /// `model` read from the module: every module with repeated blocks.
  bool graphDerived = false;
  /// The module also matches a zoo preset (`model.name`); its formulas
  /// are not used for planning (they are the graph path's test oracle).
  bool presetMatched = false;
  ModelConfig model;
  PlanCluster cluster;
  PlannerOptions searchOptions;
  SearchResult search;
  /// The chosen plan's mesh axes of the intra-op plan (dp, cp, tp).
  std::vector<MeshAxis> axes;
  std::vector<StageSolution> stages;
  /// One line per parameter group and per resharding point.
  std::vector<std::string> shardingSummary;
  /// The same as rows for the report page: {"kind": "parameter", "name",
  /// "shape", "layout", "layers"} and {"kind": "reshard", "from", "to",
  /// "operand", "from_layout", "to_layout", "forward", "backward",
  /// "layers"} (forward and backward collectives, "" for none).
  nlohmann::json shardingTable = nlohmann::json::array();
  double seconds = 0;

  /// The readable report and its JSON form.
  std::string report() const;
  nlohmann::json toJson() const;
};

/// Plans `module` and annotates it. Errors say what is wrong (bad option,
/// no loss, a module that already carries a plan, nothing fits - with the
/// failing constraint).
cost::Result<AutoShardResult> autoShard(mlir::ModuleOp module,
                                        const AutoShardOptions &options);

/// autoShard's plan search alone, at `gpus` devices of `options.cluster`
/// (the best plan only; no intra-op solution; `module` is not changed),
/// priced as autoShard prices `module`: from its own ops when it has
/// repeated blocks, by a preset's formulas, or in graph mode. The scale
/// study of a module no preset describes (cleave-plan --scale). `module`
/// must not carry a plan yet.
cost::Result<SearchResult>
searchAtSize(mlir::ModuleOp module, const AutoShardOptions &options, int gpus);

/// How estimateModulePlan priced a plan.
struct ModulePricing {
  enum class Source {
    /// The workload and activation memory from the module's ops (repeated
    /// blocks: GraphWorkload.h).
    Ops,
    /// The preset's formulas (a mixture-of-experts preset under expert
    /// parallelism, or a preset module without repeated blocks).
    Preset,
    /// Graph mode: each op's roofline and resharding by the intra-op ILP
    /// of the plan's mesh (a module without repeated blocks nor preset).
    Graph,
  };
  Source source = Source::Ops;
  /// The plan as priced: with the search's implementation choices
  /// (overlap, clipping, precision, attention).
  cost::ParallelPlan plan;
};

/// Prices `plan` for `module` as autoShard prices its candidates: the
/// cluster, buckets and implementation choices (overlap, clipping,
/// precision) of `options`, the workload and activation memory from the
/// module's ops when it has repeated blocks, else its preset's formulas,
/// else graph mode (a dp x tp mesh and a ZeRO stage only). The prediction
/// for a plan named by hand, beside the planner's. Does not change the
/// module. Fails naming the plan field or the op it cannot price;
/// `pricing`, if given, says how it was priced.
cost::Result<cost::Estimate>
estimateModulePlan(mlir::ModuleOp module, const AutoShardOptions &options,
                   cost::ParallelPlan plan, ModulePricing *pricing = nullptr);

/// What the planner reads from the function it plans, without pricing it.
struct ModuleStep {
  std::string function;
  /// The data input the batch is read from.
  std::string input;
  /// Sequences (samples) per step: the leading dimension of the first
  /// data input (cleave.input).
  int64_t batch = 0;
  /// The float type that carries most of the FLOPs.
  DType dtype = DType::F32;
};

/// Reads `module`'s function `function` (empty: as AutoShardOptions'
/// `function`) as the planner does. Fails naming what is missing (no
/// loss, an op without a sharding rule, no data input).
cost::Result<ModuleStep> readModuleStep(mlir::ModuleOp module,
                                        const std::string &function = "");

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_AUTOSHARD_H
