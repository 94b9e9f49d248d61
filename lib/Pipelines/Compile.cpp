//===- Compile.cpp - Compile a training step for N ranks ------------------===//

#include "cleave/Pipelines/Compile.h"
#include "cleave/CostModel/Estimate.h"
#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Pipelines/FrontHalf.h"
#include "cleave/Planner/AutoShard.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"
#include <cstdlib>

using namespace mlir;
using namespace mlir::cleave;

DiagnosticCollector::DiagnosticCollector(MLIRContext *ctx)
    : handler(ctx, [this](Diagnostic &diag) {
        llvm::raw_string_ostream os(text);
        os << diag.getLocation() << ": " << diag << "\n";
        for (const Diagnostic &note : diag.getNotes())
          os << "  note: " << note << "\n";
        return success();
      }) {}

static llvm::Error compileError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Runs the front-half stages `options` selects; an error naming `stage`
/// if a pass fails (its diagnostics went to the context's handlers).
static llvm::Error runStages(ModuleOp module, const FrontHalfOptions &options,
                             bool partitionHalf, llvm::StringRef stage) {
  PassManager pm(module.getContext());
  if (partitionHalf)
    buildPartitionPipeline(pm, options);
  else
    buildTrainStepPipeline(pm, options);
  if (failed(pm.run(module)))
    return compileError(stage + " failed");
  return llvm::Error::success();
}

/// Whether any op of @forward carries a pipeline stage already.
static bool hasStages(func::FuncOp forward) {
  return forward
      .walk([](Operation *op) {
        return op->hasAttr(CleaveDialect::kStageAttrName)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Drops every function but @train_step and @eval_step that nothing uses.
static void keepOnlyTrainStep(ModuleOp module) {
  for (auto func : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
    if (func.getSymName() != "train_step" &&
        func.getSymName() != kEvalStepName &&
        SymbolTable::symbolKnownUseEmpty(func, module))
      func.erase();
}

/// The name of argument `i` of `f` (its parameter or input name), or "".
static StringRef argumentName(func::FuncOp f, unsigned i) {
  for (StringRef attr :
       {CleaveDialect::kParamAttrName, CleaveDialect::kInputAttrName})
    if (auto name = f.getArgAttrOfType<StringAttr>(i, attr))
      return name.getValue();
  return "";
}

/// The layout in which the body of `f` uses argument `arg`, if a sharding
/// constraint on the argument itself sets it (ZeRO-3 keeps a parameter
/// split and gathers it before every use but its update).
static ShardingConstraintOp useLayout(BlockArgument arg) {
  for (Operation *user : arg.getUsers())
    if (auto pin = dyn_cast<ShardingConstraintOp>(user))
      return pin;
  return {};
}

/// Gives every argument of `to` the sharding of the argument of `from`
/// that has its name, and the constraint it is used through.
static void copyArgumentShardings(func::FuncOp from, func::FuncOp to) {
  llvm::StringMap<unsigned> byName;
  for (unsigned i = 0, e = from.getNumArguments(); i < e; ++i)
    byName[argumentName(from, i)] = i;
  OpBuilder b = OpBuilder::atBlockBegin(&to.getBody().front());
  for (BlockArgument arg : to.getArguments()) {
    StringRef name = argumentName(to, arg.getArgNumber());
    auto it = byName.find(name);
    if (name.empty() || it == byName.end())
      continue;
    if (Attribute s =
            from.getArgAttr(it->second, CleaveDialect::kShardingAttrName))
      to.setArgAttr(arg.getArgNumber(), CleaveDialect::kShardingAttrName, s);
    if (ShardingConstraintOp pin = useLayout(from.getArgument(it->second))) {
      auto use = cast<ShardingConstraintOp>(b.clone(*pin));
      use->setOperand(0, arg);
      arg.replaceAllUsesExcept(use.getResult(), use);
    }
  }
}

/// @eval_step: a copy of @forward in evaluation mode (every dropout passes
/// its input through, as PyTorch's model.eval()). Partitioned with the
/// module, it gets the plan's shardings as @train_step does.
/// Cloned after the forward function is cut into stages, it runs on the
/// training step's stages and micro-batches (cleave-pipeline schedules it
/// too).
static llvm::Error buildEvalStep(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal())
    return compileError("--val-data: the program has no @forward to "
                        "evaluate");
  if (module.lookupSymbol(kEvalStepName))
    return compileError(llvm::Twine("--val-data: the program already has a "
                                    "function @") +
                        kEvalStepName);
  OpBuilder b(forward);
  b.setInsertionPointAfter(forward);
  auto eval = cast<func::FuncOp>(b.clone(*forward));
  eval.setSymName(kEvalStepName);
  eval.setPublic();
  // The loss is the first result (the trainer reads it there); named, so
  // that cleave-pipeline sums it over micro-batches and stages.
  if (eval.getNumResults() &&
      !eval.getResultAttr(0, CleaveDialect::kOutputAttrName))
    eval.setResultAttr(0, CleaveDialect::kOutputAttrName,
                       b.getStringAttr("loss"));
  // In a module the planner annotated, the arguments take the shardings
  // of the training step's arguments of the same name (parameter or
  // input); a named plan annotates both functions alike.
  if (auto step = module.lookupSymbol<func::FuncOp>("train_step"))
    copyArgumentShardings(step, eval);
  eval.walk([](DropoutOp dropout) {
    dropout.getResult().replaceAllUsesWith(dropout.getInput());
    dropout.erase();
  });
  return llvm::Error::success();
}

/// The training step, cut into stages first for a pipelined plan.
static llvm::Error buildTrainStep(ModuleOp module,
                                  const RankCompileOptions &options) {
  const std::optional<PlanSpec> &plan = options.plan;
  bool pipelined = plan && plan->pipelines();
  FrontHalfOptions stages;
  stages.trainStep = false;
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (pipelined && forward && !hasStages(forward)) {
    stages.stages = plan->stages();
    stages.layersPerStage = plan->layersPerStage;
  }
  if (stages.stages > 1)
    if (llvm::Error err = runStages(module, stages, false,
                                    "splitting the model into pipeline stages"))
      return err;
  if (options.evalStep)
    if (llvm::Error err = buildEvalStep(module))
      return err;
  if (!module.lookupSymbol("train_step")) {
    FrontHalfOptions step;
    step.autodiff = options.autodiff;
    if (llvm::Error err =
            runStages(module, step, false, "building the training step"))
      return err;
  }
  // Training needs only @train_step: the forward function (and anything
  // else) would be partitioned and compiled for nothing. A pipelined plan
  // cannot partition it at all (its micro-batches would stay a mesh axis).
  if (!options.keepOtherFunctions || pipelined)
    keepOnlyTrainStep(module);
  return llvm::Error::success();
}

/// Whether a program on `mesh` runs as a pipeline schedule: stages along a
/// pipeline axis of more than one device, or micro-batches. The planner's
/// mesh always names pp; with pp = 1 its program is SPMD (and buckets its
/// collectives: treated as a pipeline it did not, and ran 7x slower on 4
/// local ranks).
static bool meshPipelines(MeshOp mesh) {
  std::optional<unsigned> pp = mesh.getAxisIndex("pp");
  return (pp && mesh.getShape()[*pp] > 1) ||
         mesh.getAxisIndex("mb").has_value();
}

/// The named plan that runs `p` (a plan of the planner).
static PlanSpec namedPlanOf(const ::cleave::cost::ParallelPlan &p) {
  PlanSpec spec;
  CleaveApplyPlanPassOptions &o = spec.named;
  // The cost model's dp counts the expert-parallel ranks too (Plan.h).
  o.dp = p.dp / p.ep;
  o.ep = p.ep;
  o.tp = p.tp;
  o.cp = p.cp;
  o.sp = p.sequenceParallel;
  o.zero = p.zeroStage;
  o.pp = p.pp;
  o.micro = p.numMicroBatches;
  o.schedule = ::cleave::cost::toString(p.schedule);
  o.virtualStages = p.chunks();
  // Recomputation per pipeline rank: "full/none".
  o.recompute = ::cleave::cost::toString(p.recompute);
  for (auto [i, r] : llvm::enumerate(p.recomputePerStage))
    o.recompute =
        (i ? o.recompute + "/" : std::string()) + ::cleave::cost::toString(r);
  // The planner's layer split (balancing the embedding and the head).
  spec.layersPerStage.assign(p.layersPerChunk.begin(), p.layersPerChunk.end());
  return spec;
}

::cleave::cost::ParallelPlan
mlir::cleave::costPlanOf(const PlanSpec &spec, int64_t globalBatch,
                         ::cleave::DType dtype,
                         const CleaveAutodiffPassOptions *step) {
  ::cleave::cost::ParallelPlan p;
  const CleaveApplyPlanPassOptions &o = spec.named;
  // The named plan's ep is a mesh axis of its own that splits the batch
  // beside dp; the cost model counts it inside dp (Plan.h).
  p.ep = int(std::max<int64_t>(1, o.ep));
  p.dp = int(o.dp) * p.ep;
  p.tp = int(o.tp);
  p.cp = int(o.cp);
  p.cpBalanced = o.cpLayout != "contiguous";
  p.pp = int(o.pp);
  p.sequenceParallel = o.sp;
  p.zeroStage = int(o.zero);
  p.numMicroBatches = std::max<int64_t>(1, o.micro);
  p.microBatchSize =
      std::max<int64_t>(1, globalBatch / (p.dp * p.numMicroBatches));
  if (auto s = ::cleave::cost::parseSchedule(o.schedule))
    p.schedule = *s;
  p.virtualStages = int(o.virtualStages);
  if (auto r = ::cleave::cost::parseRecompute(o.recompute))
    p.recompute = *r;
  p.dtype = dtype;
  if (step) {
    p.clipGradients = step->gradClip > 0;
    p.dynamicLossScaling = step->lossScaling;
  }
  return p;
}

::cleave::cost::ParallelPlan
mlir::cleave::costPlanOf(const PlanSpec &spec, const ::cleave::ModelConfig &m,
                         const CleaveAutodiffPassOptions *step) {
  return costPlanOf(spec, m.batch, m.dtype, step);
}

llvm::Expected<::cleave::cost::ParallelPlan>
mlir::cleave::costPlanOf(const PlanSpec &spec, ModuleOp module,
                         const CleaveAutodiffPassOptions *step) {
  ::cleave::cost::Result<::cleave::planner::ModuleStep> read =
      ::cleave::planner::readModuleStep(module);
  if (!read)
    return compileError(read.error());
  return costPlanOf(spec, read->batch, read->dtype, step);
}

/// The --plan spelling of `plan`, for the log.
static std::string describeNamed(const PlanSpec &plan) {
  const CleaveApplyPlanPassOptions &o = plan.named;
  std::string s = "dp=" + std::to_string(o.dp) + ",tp=" + std::to_string(o.tp);
  if (o.ep > 1)
    s += ",ep=" + std::to_string(o.ep);
  if (o.cp > 1)
    s += ",cp=" + std::to_string(o.cp);
  if (o.cp > 1 && o.cpLayout != "auto")
    s += ",cp-layout=" + o.cpLayout;
  if (o.sp)
    s += ",sp";
  if (o.zero)
    s += ",zero=" + std::to_string(o.zero);
  s += ",pp=" + std::to_string(o.pp) + ",micro=" + std::to_string(o.micro) +
       ",schedule=" + o.schedule;
  if (o.virtualStages > 1)
    s += ",virtual=" + std::to_string(o.virtualStages);
  if (o.recompute != "none")
    s += ",recompute=" + o.recompute;
  for (auto [i, n] : llvm::enumerate(plan.layersPerStage))
    s += (i ? "/" : ",layers=") + std::to_string(n);
  return s;
}

/// The planner's options for `world` processes of this machine.
static ::cleave::planner::AutoShardOptions
localPlannerOptions(const RankCompileOptions &options) {
  ::cleave::planner::AutoShardOptions o;
  o.cluster = "local-cpu";
  o.gpus = options.world;
  o.clipGradients = options.autodiff.gradClip > 0;
  o.dynamicLossScaling = options.autodiff.lossScaling;
  // The program runs with these buckets (0: one collective per tensor,
  // priced as buckets of one parameter).
  o.dpBucketBytes = double(options.bucketBytes);
  if (options.model && options.model->arch != ::cleave::Architecture::MLP)
    o.config = *options.model;
  return o;
}

/// A copy of `module` with its training step built alone (no plan, no
/// evaluation step): what the planner prices.
static llvm::Expected<OwningOpRef<ModuleOp>>
trainStepOfCopy(ModuleOp module, const RankCompileOptions &options) {
  OwningOpRef<ModuleOp> step = module.clone();
  RankCompileOptions stepOnly = options;
  stepOnly.plan.reset();
  stepOnly.evalStep = false;
  if (llvm::Error err = buildTrainStep(*step, stepOnly))
    return std::move(err);
  return std::move(step);
}

/// "N rank(s)".
static std::string ranks(int world) {
  return std::to_string(world) + " rank" + (world == 1 ? "" : "s");
}

/// How the local-cpu cluster was set: measured (CLEAVE_LOCAL_CPU_SPEC) or
/// built in.
static std::string
localClusterName(const ::cleave::cost::ClusterSpec &cluster) {
  const char *spec = std::getenv("CLEAVE_LOCAL_CPU_SPEC");
  return cluster.name + (spec && *spec
                             ? " (measured, " + std::string(spec) + ")"
                             : std::string(" (built-in)"));
}

/// How estimateModulePlan priced a plan, for the prediction's source.
static const char *pricedBy(::cleave::planner::ModulePricing::Source source) {
  using Source = ::cleave::planner::ModulePricing::Source;
  switch (source) {
  case Source::Ops:
    return " priced from the module's ops";
  case Source::Preset:
    return " priced by the preset's formulas";
  case Source::Graph:
    return " priced op by op (graph mode)";
  }
  return "";
}

namespace {
/// A step of the ranks priced on this machine's processes.
struct PricedStep {
  StepPrediction prediction;
  /// The largest peak memory of a rank, in bytes.
  double peakBytes = 0;
  /// A measured shared host's CPU per step, and its collectives' part
  /// (SimulationResult::hostCpuSeconds); 0 when not known.
  double hostCpuSeconds = 0, hostCommCpuSeconds = 0;
};
} // namespace

/// The plan the ranks run, as the cost model names it: `options.plan`, or
/// data parallelism over the ranks for a program without a mesh. An error
/// for the planner's plan (choosePlan predicts it) and a program with its
/// own shardings.
static llvm::Expected<PlanSpec> pricedPlan(ModuleOp program,
                                           const RankCompileOptions &options) {
  if (options.plan && options.plan->automatic)
    return compileError("the planner predicts its own plan");
  if (options.plan)
    return *options.plan;
  if (!program.getOps<MeshOp>().empty())
    return compileError("the program carries its own mesh and shardings; "
                        "the cost model prices a named " +
                        options.planName);
  PlanSpec plan;
  plan.named.dp = options.world;
  return plan;
}

/// The prediction of the ranks' step priced as the planner prices its
/// candidates: the training step of `program` (built on a copy), the plan
/// in the cost model's form read from it, estimateModulePlan on
/// local-cpu. A zoo transformer whose ops cannot price the plan falls back
/// to its preset's formulas (the source says so and why); anything else
/// gets the module path's error.
static llvm::Expected<PricedStep>
priceLocalStep(ModuleOp program, const RankCompileOptions &options) {
  llvm::Expected<PlanSpec> plan = pricedPlan(program, options);
  if (!plan)
    return plan.takeError();
  ::cleave::cost::Result<::cleave::planner::PlanCluster> cluster =
      ::cleave::planner::resolveCluster("local-cpu", options.world);
  if (!cluster)
    return compileError(cluster.error());
  std::string on =
      " on " + localClusterName(cluster->spec) + ", " + ranks(options.world);
  llvm::Expected<OwningOpRef<ModuleOp>> step =
      trainStepOfCopy(program, options);
  if (!step)
    return step.takeError();
  std::string whyNot;
  llvm::Expected<::cleave::cost::ParallelPlan> p =
      costPlanOf(*plan, **step, &options.autodiff);
  if (p) {
    ::cleave::planner::ModulePricing how;
    ::cleave::cost::Result<::cleave::cost::Estimate> e =
        ::cleave::planner::estimateModulePlan(
            **step, localPlannerOptions(options), *p, &how);
    if (e)
      return PricedStep{
          {e->stepTime, e->mfu,
           ::cleave::cost::describe(how.plan) + pricedBy(how.source) + on},
          e->peakMemory().total(),
          e->hostCpuSeconds,
          e->hostCommCpuSeconds};
    whyNot = e.error();
  } else {
    whyNot = llvm::toString(p.takeError());
  }
  if (!options.model || options.model->arch == ::cleave::Architecture::MLP)
    return compileError(whyNot);
  // The preset's formulas, with attention as the CPU lowering runs it.
  ::cleave::cost::ParallelPlan q =
      costPlanOf(*plan, *options.model, &options.autodiff);
  q.attention = ::cleave::cost::AttentionImpl::Unfused;
  ::cleave::cost::Result<::cleave::cost::Estimate> f =
      ::cleave::cost::estimate(*options.model, cluster->spec, q);
  if (!f)
    return compileError(whyNot);
  return PricedStep{{f->stepTime, f->mfu,
                     ::cleave::cost::describe(q) +
                         " priced by the preset's formulas (not from the "
                         "module's ops: " +
                         whyNot + ")" + on},
                    f->peakMemory().total()};
}

/// Reports the cost model's prediction for the plan the ranks run
/// (predict), and makes it the progress line's.
static llvm::Error predictNamed(ModuleOp module,
                                const RankCompileOptions &options) {
  llvm::Expected<PricedStep> priced = priceLocalStep(module, options);
  if (!priced)
    return compileError(options.planName +
                        " prediction: " + llvm::toString(priced.takeError()));
  if (options.plannerPrediction) {
    *options.plannerPrediction = priced->prediction;
    options.plannerPrediction->source =
        "--predict, " + options.plannerPrediction->source;
  }
  if (options.log)
    *options.log << "predicted by the cost model: "
                 << llvm::format("%.2f", priced->prediction.stepSeconds * 1e3)
                 << " ms/step, peak memory "
                 << llvm::format("%.2f", priced->peakBytes / (1 << 20))
                 << " MiB per rank";
  if (options.log && priced->hostCpuSeconds > 0)
    *options.log << ", host CPU "
                 << llvm::format("%.1f", priced->hostCpuSeconds * 1e3)
                 << " ms per step (collectives "
                 << llvm::format("%.1f", priced->hostCommCpuSeconds * 1e3)
                 << ")";
  if (options.log)
    *options.log << "\n";
  return llvm::Error::success();
}

llvm::Error mlir::cleave::compileForRanks(ModuleOp module,
                                          const RankCompileOptions &options) {
  std::optional<PlanSpec> plan = options.plan;
  if (options.predict && !(plan && plan->automatic))
    if (llvm::Error err = predictNamed(module, options))
      return err;
  if (plan && plan->automatic && module.getOps<MeshOp>().empty()) {
    // The planner plans the training step. A plan of dp, tp and ZeRO alone
    // is written into it as shardings; any other runs as its named plan,
    // whose stages are cut from the forward function before differentiation
    // (as for --plan pp=...), so the step is built again.
    llvm::Expected<OwningOpRef<ModuleOp>> planned =
        trainStepOfCopy(module, options);
    if (!planned)
      return planned.takeError();
    llvm::Expected<::cleave::cost::ParallelPlan> best =
        choosePlan(**planned, *plan, options);
    if (!best)
      return best.takeError();
    // The planner's shardings carry dp, tp and ZeRO; what else it chose
    // (stages, micro-batches, recomputation, context parallelism) the named
    // plan's passes execute.
    if (best->pp > 1 || best->numMicroBatches > 1 || best->cp > 1 ||
        best->ep > 1 || best->recompute != ::cleave::cost::Recompute::None) {
      plan = namedPlanOf(*best);
      if (options.log)
        *options.log << "compiled as --plan " << describeNamed(*plan) << "\n";
    } else {
      // The evaluation step is built from the forward function, which the
      // planned module no longer has.
      if (auto forward = module.lookupSymbol<func::FuncOp>("forward");
          forward && options.evalStep)
        OpBuilder::atBlockEnd((*planned)->getBody()).clone(*forward);
      module.getBodyRegion().takeBody((*planned)->getBodyRegion());
    }
  }
  RankCompileOptions built = options;
  built.plan = plan;
  if (llvm::Error err = buildTrainStep(module, built))
    return err;
  bool hasMesh = !module.getOps<MeshOp>().empty();
  bool plannerAnnotated = plan && plan->automatic;
  if (!plan && !hasMesh && options.world > 1) {
    plan.emplace();
    plan->named.dp = options.world;
  }
  if (plan && hasMesh && !plannerAnnotated)
    return compileError(options.planName +
                        ": the program already has a mesh and sharding "
                        "annotations");
  if (!plan && !hasMesh)
    return llvm::Error::success();

  FrontHalfOptions partition;
  partition.trainStep = false;
  partition.verify = false;
  if (plan && !plan->automatic)
    partition.plan = plan->named;
  if (!options.partitionCluster.empty()) {
    bool file = llvm::StringRef(options.partitionCluster).ends_with(".json") ||
                options.partitionCluster.find('/') != std::string::npos;
    (file ? partition.partitionOptions.clusterFile
          : partition.partitionOptions.cluster) = options.partitionCluster;
  }
  // A pipeline is bucketed after cleave-pipeline has built its rank
  // functions (below); bucketing before would reorder the sums over
  // micro-batches that it turns into accumulation.
  bool pipelined = plan ? plan->pipelines() : false;
  for (MeshOp mesh : module.getOps<MeshOp>())
    pipelined |= meshPipelines(mesh);
  partition.bucketBytes = pipelined ? 0 : options.bucketBytes;
  // A pipeline's transfers are split once cleave-pipeline has built them.
  partition.asyncCollectives = !pipelined && options.asyncCollectives;
  if (llvm::Error err =
          runStages(module, partition, true, "partitioning the training step"))
    return err;
  // A mesh with a pipeline axis: run the stages as a schedule.
  auto meshes = module.getOps<MeshOp>();
  FrontHalfOptions schedule;
  schedule.trainStep = schedule.partition = false;
  schedule.pipeline = meshPipelines(*meshes.begin());
  if (module.lookupSymbol(kEvalStepName))
    schedule.pipelineEntries = {"train_step", kEvalStepName.str()};
  schedule.verify = options.verify;
  schedule.bucketBytes = options.bucketBytes;
  schedule.asyncCollectives = options.asyncCollectives;
  if (!schedule.pipeline && !schedule.verify)
    return llvm::Error::success();
  return runStages(module, schedule, true,
                   schedule.pipeline ? "pipelining the training step"
                                     : "verifying the collectives");
}

llvm::Expected<StepPrediction>
mlir::cleave::predictLocalStep(ModuleOp program,
                               const RankCompileOptions &options) {
  llvm::Expected<PricedStep> priced = priceLocalStep(program, options);
  if (!priced)
    return priced.takeError();
  return priced->prediction;
}

llvm::Expected<::cleave::cost::ParallelPlan>
mlir::cleave::choosePlan(ModuleOp module, const PlanSpec &plan,
                         const RankCompileOptions &options) {
  std::string what = options.planName + " auto: ";
  ::cleave::planner::AutoShardOptions o = localPlannerOptions(options);
  o.fixedTp = plan.fixedTp;
  o.fixedPp = plan.fixedPp;
  o.fixedZero = plan.fixedZero;
  ::cleave::cost::Result<::cleave::planner::AutoShardResult> r =
      ::cleave::planner::autoShard(module, o);
  if (!r)
    return compileError(what + r.error());
  if (!r->search.best) {
    std::string why =
        what + "no plan fits " + std::to_string(options.world) + " local ranks";
    for (const std::string &line : r->search.infeasible)
      why += "\n  " + line;
    return compileError(why);
  }
  const ::cleave::planner::Candidate &best = *r->search.best;
  if (options.plannerPrediction)
    *options.plannerPrediction = {
        best.stepTime, best.mfu,
        "the planner's, " + ::cleave::cost::describe(best.plan) + " on " +
            localClusterName(r->cluster.spec) + ", " + ranks(options.world)};
  if (options.log)
    *options.log << "plan (planner, " << options.world
                 << " local ranks): " << ::cleave::cost::describe(best.plan)
                 << "; predicted step "
                 << llvm::format("%.2f", best.stepTime * 1e3) << " ms, "
                 << llvm::format("%.2f", best.peakMemory / 1e9)
                 << " GB per rank\n";
  if (options.log && options.predict)
    *options.log << "predicted by the cost model: "
                 << llvm::format("%.2f", best.stepTime * 1e3)
                 << " ms/step, peak memory "
                 << llvm::format("%.2f", best.peakMemory / (1 << 20))
                 << " MiB per rank\n";
  return best.plan;
}
