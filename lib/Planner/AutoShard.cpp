//===- AutoShard.cpp - Plan a module and write the plan into it -----------===//

#include "cleave/Planner/AutoShard.h"

#include "Annotate.h"
#include "IntraOp.h"
#include "Strategies.h"
#include "cleave/Planner/GraphWorkload.h"

#include <chrono>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::planner {

namespace {

using R = cost::Result<AutoShardResult>;

func::FuncOp pickFunction(ModuleOp module, const std::string &name,
                          std::string &error) {
  if (!name.empty()) {
    auto f = module.lookupSymbol<func::FuncOp>(name);
    if (!f)
      error = "function: the module has no function @" + name;
    return f;
  }
  for (StringRef n : {"train_step", "forward"})
    if (auto f = module.lookupSymbol<func::FuncOp>(n))
      return f;
  auto funcs = module.getOps<func::FuncOp>();
  if (std::distance(funcs.begin(), funcs.end()) == 1)
    return *funcs.begin();
  error = "function: the module has no @train_step or @forward; name the "
          "function to plan";
  return {};
}

/// The leading dimension of the first data input (0 if none).
int64_t moduleBatch(const ForwardView &v, std::string &input) {
  func::FuncOp f = v.func;
  for (BlockArgument a : f.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(a.getType());
    if (v.isInput(a) && t && t.getRank() >= 1) {
      if (auto n = f.getArgAttrOfType<StringAttr>(
              a.getArgNumber(), CleaveDialect::kInputAttrName))
        input = n.getValue().str();
      return t.getDimSize(0);
    }
  }
  return 0;
}

/// The float type that carries most of the FLOPs.
DType computeType(const ForwardView &v) {
  std::map<int, double> flops;
  for (Operation *op : v.ops) {
    auto c = dyn_cast<CostOpInterface>(op);
    auto t = op->getNumResults()
                 ? dyn_cast<RankedTensorType>(op->getResult(0).getType())
                 : RankedTensorType();
    if (!c || !t || !isa<FloatType>(t.getElementType()))
      continue;
    Type e = t.getElementType();
    DType d = e.isBF16()                       ? DType::BF16
              : e.isF16()                      ? DType::F16
              : e.getIntOrFloatBitWidth() == 8 ? DType::F8E4M3
                                               : DType::F32;
    flops[int(d)] += c.getFlops();
  }
  DType best = DType::F32;
  double most = -1;
  for (auto [d, f] : flops)
    if (f > most) {
      most = f;
      best = DType(d);
    }
  return best;
}

/// A preset built with another sequence length or vocabulary (cleave-run
/// sizes the vocabulary to its corpus): the sequence length of the token
/// input, and the vocabulary that accounts for the parameter count (the
/// count is affine in it).
void fitToModule(ModelConfig &m, const ForwardView &v, int64_t params) {
  func::FuncOp f = v.func;
  for (BlockArgument a : f.getArguments()) {
    if (v.isTokenInput(a)) {
      m.seqLen = cast<RankedTensorType>(a.getType()).getDimSize(1);
      break;
    }
  }
  ModelConfig larger = m;
  ++larger.vocab;
  int64_t perWord = larger.numParameters() - m.numParameters();
  int64_t extra = params - m.numParameters();
  if (perWord > 0 && extra % perWord == 0 && m.vocab + extra / perWord > 0)
    m.vocab += extra / perWord;
}

/// The cost model's description of the module, if it is a known
/// transformer: the `config` option, the `model` option, else the module's
/// preset name.
std::optional<ModelConfig> modelOf(ModuleOp module, const ForwardView &v,
                                   const AutoShardOptions &o,
                                   std::string &error) {
  std::string preset = o.config ? o.config->name : o.model;
  std::string name = o.config ? o.config->name : o.model;
  if (preset.empty())
    if (auto a =
            module->getAttrOfType<StringAttr>(CleaveDialect::kModelAttrName))
      preset = a.getValue().str();
  std::optional<ModelConfig> m = o.config ? o.config : lookupPreset(preset);
  if (!m || m->arch == Architecture::MLP) {
    if (!name.empty())
      error = "model: '" + name + "' is not a transformer preset " +
              "(cleave-models --list shows them)";
    return std::nullopt;
  }
  int64_t params = 0;
  func::FuncOp f = v.func;
  for (BlockArgument a : f.getArguments())
    if (v.isParam(a))
      params += cast<RankedTensorType>(a.getType()).getNumElements();
  fitToModule(*m, v, params);
  if (params != m->numParameters()) {
    if (!name.empty())
      error = "model: the module has " + std::to_string(params) +
              " parameters, preset '" + name + "' has " +
              std::to_string(m->numParameters());
    return std::nullopt;
  }
  return m;
}

std::array<LinkKind, 4> linksOf(const cost::ParallelPlan &p,
                                const PlanCluster &pc) {
  std::array<LinkKind, 4> out;
  cost::Axis axes[] = {cost::Axis::PP, cost::Axis::DP, cost::Axis::CP,
                       cost::Axis::TP};
  for (size_t i = 0; i < 4; ++i) {
    bool across = cost::axisGroup(axes[i], p, pc.spec).nodes > 1;
    out[i] = pc.host  ? LinkKind::Host
             : across ? LinkKind::InfiniBand
             : pc.spec.intra.kind == cost::IntraNodeKind::PCIe
                 ? LinkKind::PCIe
                 : LinkKind::NVLink;
  }
  return out;
}

PlannerOptions searchOptions(const AutoShardOptions &o, const PlanCluster &pc,
                             int64_t batch, DType dtype) {
  PlannerOptions so;
  so.globalBatch = batch;
  so.gpus = o.gpus;
  so.fixedTp = o.fixedTp;
  if (o.fixedZero >= 0)
    so.space.zeroStages = {o.fixedZero};
  so.maxPp = std::max(0, o.maxPp);
  so.fixedPp = o.fixedPp;
  so.implementation.clipGradients = o.clipGradients;
  so.implementation.dynamicLossScaling = o.dynamicLossScaling;
  // Plans for this machine's processes are run: only what cleave-run
  // executes.
  so.space.zeroOverDpOnly = pc.host;
  // cleave-run's dense GShard MoE layer on this machine measured slower
  // under ep than under dp alone (tiny-moe on 4 ranks: ep=4 40-43 ms,
  // dp=2,ep=2 39-42 ms, dp=4 21-22 ms per step), a cost the formulas do
  // not see: the plans for this machine's processes keep ep = 1 (a named
  // plan may still use it).
  if (pc.host)
    so.space.maxExpertParallel = 1;
  so.memoryHeadroom = o.memoryHeadroom;
  so.topK = o.topK;
  so.progress = o.progress;
  so.space.maxMicroBatches = o.maxMicroBatches;
  so.implementation.dtype = dtype;
  // Bucketed gradient reduction and parameter gathers overlap the passes
  // on GPU clusters (Megatron-Core, DeepSpeed, FSDP); the CPU runtime
  // reduces after the backward pass.
  so.implementation.overlapGradReduce = !pc.host;
  so.implementation.overlapParamGather = !pc.host;
  // Cleave's step returns the new parameters and optimizer state.
  so.implementation.inPlaceUpdate = !pc.host;
  so.implementation.regatherForBackward = !pc.host;
  so.implementation.accumulateGradsInPlace = !pc.host;
  return so;
}

} // namespace

std::vector<std::string> summarize(const ShardingGraph &g,
                                   const std::vector<StageSolution> &stages,
                                   nlohmann::json *table);

namespace {

/// The function to plan and what the planner reads from it.
struct Problem {
  PlanCluster cluster;
  func::FuncOp func;
  ForwardView view;
  int64_t batch = 0;
  DType dtype = DType::F32;
};

/// The function to plan, its view, global batch and compute type (no
/// cluster yet); `input` gets the name of the input the batch is read from.
cost::Result<Problem> readProblem(ModuleOp module, const std::string &function,
                                  std::string &input) {
  using P = cost::Result<Problem>;
  std::string error;
  Problem p;
  p.func = pickFunction(module, function, error);
  if (!p.func)
    return P::failure(error);
  FailureOr<ForwardView> view = analyzeForward(p.func, error);
  if (failed(view))
    return P::failure(error);
  p.view = std::move(*view);
  p.batch = moduleBatch(p.view, input);
  if (p.batch <= 0)
    return P::failure("function @" + p.func.getSymName().str() +
                      " has no data input (cleave.input) with a batch "
                      "dimension");
  p.dtype = computeType(p.view);
  return p;
}

cost::Result<Problem> prepare(ModuleOp module, const AutoShardOptions &o) {
  using P = cost::Result<Problem>;
  cost::Result<PlanCluster> pc = resolveCluster(o.cluster, o.gpus);
  if (!pc)
    return P::failure(pc.error());
  std::string input;
  cost::Result<Problem> p = readProblem(module, o.function, input);
  if (!p)
    return p;
  p->cluster = *pc;
  if (o.globalBatch && o.globalBatch != p->batch)
    return P::failure("global batch: " + std::to_string(o.globalBatch) +
                      " differs from the module's batch of " +
                      std::to_string(p->batch) + " (input '" + input +
                      "'); the module is one global step");
  return p;
}

/// The mean number of elements of a parameter tensor of `module` (the
/// arguments marked cleave.param of its first function that has any); 1
/// without parameters.
double meanParameterElements(ModuleOp module) {
  for (auto func : module.getOps<func::FuncOp>()) {
    double elements = 0, tensors = 0;
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
      if (func.getArgAttr(i, "cleave.param"))
        if (auto t = dyn_cast<RankedTensorType>(type);
            t && t.hasStaticShape()) {
          elements += double(t.getNumElements());
          tensors += 1;
        }
    if (tensors > 0)
      return elements / tensors;
  }
  return 1;
}

/// The cost constants with the program's gradient buckets, when the
/// options name them; null: the defaults.
std::shared_ptr<const cost::CostConstants>
bucketConstants(const AutoShardOptions &o, ModuleOp module) {
  if (!o.dpBucketBytes)
    return nullptr;
  auto constants =
      std::make_shared<cost::CostConstants>(cost::defaultConstants());
  // Gradients are reduced in f32 on the CPU (4 bytes per parameter).
  // Without buckets (0 bytes) the program reduces one tensor per
  // collective: as many collectives as the module has parameter tensors.
  constants->dpBucketParams = *o.dpBucketBytes > 0
                                  ? std::max(1.0, *o.dpBucketBytes / 4.0)
                                  : meanParameterElements(module);
  return constants;
}

/// The model read from the module's ops, if it has repeated blocks. Every
/// such module is priced from its own ops, whether or not a preset matches
/// (the preset formulas are the graph path's test oracle,
/// GraphWorkloadTest, and still draw cleave-plan's timeline and --scale
/// study).
std::optional<ModelConfig> derivedModel(const ForwardView &view) {
  if (view.count > 0)
    if (cost::Result<ModelConfig> d = deriveModelConfig(view))
      return *d;
  return std::nullopt;
}

/// The model derived from the module's ops when they price it, or none: a
/// mixture-of-experts preset is priced by the preset formulas, which know
/// expert parallelism, the experts' load and the all-to-alls (the op-derived
/// items do not split the experts over ep), except on this machine's
/// processes (`host`) without ep: there the search does not try ep and the
/// ops keep pricing the executor's dense GShard layer (docs/moe.md).
std::optional<ModelConfig>
pricedFromOps(const ForwardView &view, const std::optional<ModelConfig> &model,
              bool host, int ep) {
  if (model && model->isMoE() && (!host || ep > 1))
    return std::nullopt;
  return derivedModel(view);
}

/// Transformer mode: the plan search on the cost model, then the ILP of
/// each stage of the chosen plan.
cost::Result<bool> planTransformer(const Problem &p, const AutoShardOptions &o,
                                   AutoShardResult &res,
                                   std::shared_ptr<ShardingGraph> &graph,
                                   std::vector<int> &chunks) {
  res.transformerMode = true;
  cost::Result<SearchResult> s =
      searchPlans(res.model, p.cluster.spec, res.searchOptions);
  if (!s)
    return cost::Result<bool>::failure(s.error());
  res.search = *s;
  if (!res.search.best)
    return true;
  const cost::ParallelPlan &plan = res.search.best->plan;
  GraphOptions go;
  go.dtype = p.dtype;
  go.parameterUses = double(plan.numMicroBatches);
  graph = std::make_shared<ShardingGraph>(
      buildShardingGraph(p.view, detail::meshAxes(plan, p.cluster.spec),
                         p.cluster.spec, go, cost::defaultConstants()));
  chunks = detail::chunkOfInstances(p.view, res.model, plan);
  res.stages = detail::solveStages(
      *graph, *res.search.best, res.search.memoryLimit, chunks, o.ilpTimeLimit);
  return true;
}

/// How autoShard prices a module: the problem, the search options, and the
/// model that sizes the search space and the memory model. A module with
/// repeated blocks is priced from its own ops (`derived`), whether or not a
/// preset matches (the preset formulas are the graph path's test oracle,
/// GraphWorkloadTest, and still draw cleave-plan's timeline and a preset's
/// --scale study); a transformer preset without them by its formulas; any
/// other module in graph mode (`transformer` false).
struct Pricing {
  Problem problem;
  PlannerOptions options;
  std::shared_ptr<const cost::CostConstants> constants;
  ModelConfig model;
  bool transformer = false, derived = false, presetMatched = false;
};

cost::Result<Pricing> price(ModuleOp module, const AutoShardOptions &o) {
  using P = cost::Result<Pricing>;
  cost::Result<Problem> p = prepare(module, o);
  if (!p)
    return P::failure(p.error());
  Pricing pr;
  pr.problem = *p;
  pr.options = searchOptions(o, p->cluster, p->batch, p->dtype);
  if ((pr.constants = bucketConstants(o, module)))
    pr.options.constants = pr.constants.get();
  std::string error;
  std::optional<ModelConfig> model = modelOf(module, p->view, o, error);
  if (!error.empty())
    return P::failure(error);
  std::optional<ModelConfig> derived =
      pricedFromOps(p->view, model, p->cluster.host, 1);
  if (derived || model) {
    // A matching preset's configuration (fitted to the module) still sizes
    // the search space and the memory model; the time comes from the ops.
    pr.model = model ? *model : *derived;
    pr.model.dtype = p->dtype;
    pr.transformer = true;
    pr.derived = derived.has_value();
    pr.presetMatched = derived && model;
  } else {
    pr.model.name = p->func.getSymName().str();
  }
  return pr;
}

} // namespace

cost::Result<SearchResult>
searchAtSize(ModuleOp module, const AutoShardOptions &options, int gpus) {
  using S = cost::Result<SearchResult>;
  AutoShardOptions o = options;
  o.gpus = gpus;
  o.topK = 1;
  o.progress = nullptr;
  cost::Result<Pricing> pr = price(module, o);
  if (!pr)
    return S::failure(pr.error());
  const Problem &p = pr->problem;
  if (!pr->transformer) {
    cost::Result<detail::GraphModeResult> g = detail::searchGraphMode(
        p.view, p.cluster, pr->options, p.dtype, o.ilpTimeLimit);
    if (!g)
      return S::failure(g.error());
    return g->search;
  }
  auto graphError = std::make_shared<std::string>();
  if (pr->derived)
    pr->options.workload =
        graphWorkloadFunction(p.view, pr->model, p.cluster.spec, graphError);
  S s = searchPlans(pr->model, p.cluster.spec, pr->options);
  if (!graphError->empty())
    return S::failure(*graphError);
  return s;
}

cost::Result<AutoShardResult> autoShard(ModuleOp module,
                                        const AutoShardOptions &o) {
  auto start = std::chrono::steady_clock::now();
  cost::Result<Pricing> pr = price(module, o);
  if (!pr)
    return R::failure(pr.error());
  const Problem *p = &pr->problem;
  AutoShardResult res;
  res.cluster = p->cluster;
  res.searchOptions = pr->options;
  res.constants = pr->constants;
  res.model = pr->model;
  res.graphDerived = pr->derived;
  res.presetMatched = pr->presetMatched;
  std::string error;
  std::shared_ptr<ShardingGraph> graph;
  std::vector<int> chunks;
  if (pr->derived) {
    auto graphError = std::make_shared<std::string>();
    res.searchOptions.workload =
        graphWorkloadFunction(p->view, res.model, p->cluster.spec, graphError);
    cost::Result<bool> done = planTransformer(*p, o, res, graph, chunks);
    res.searchOptions.workload = nullptr;
    if (!graphError->empty())
      return R::failure(*graphError);
    if (!done)
      return R::failure(done.error());
  } else if (pr->transformer) {
    cost::Result<bool> done = planTransformer(*p, o, res, graph, chunks);
    if (!done)
      return R::failure(done.error());
  } else {
    cost::Result<detail::GraphModeResult> g = detail::searchGraphMode(
        p->view, p->cluster, res.searchOptions, p->dtype, o.ilpTimeLimit);
    if (!g)
      return R::failure(g.error());
    res.search = g->search;
    graph = g->graph;
    res.stages = g->stages;
    chunks.assign(size_t(p->view.count), 0);
  }
  if (res.search.best) {
    detail::PlanAnnotation a;
    a.plan = res.search.best->plan;
    a.graph = graph.get();
    a.chunkOfInstance = chunks;
    a.choice.resize(size_t(a.plan.pp));
    for (const StageSolution &s : res.stages)
      for (int stage : s.stages)
        a.choice[size_t(stage)] = s.ilp.choice;
    a.links = linksOf(a.plan, p->cluster);
    if (failed(detail::annotateModule(module, a, error)))
      return R::failure(error);
    res.axes = graph->axes;
    res.shardingSummary = summarize(*graph, res.stages, &res.shardingTable);
  }
  res.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return res;
}

namespace {

/// Why graph mode cannot price `p` ("" if it can): it prices a data x
/// tensor parallel mesh and a ZeRO stage, one micro-batch, nothing else.
std::string graphModeLimit(const cost::ParallelPlan &p, int64_t batch,
                           int gpus) {
  auto field = [](const char *name, int64_t value, const char *what) {
    return std::string("plan.") + name + " = " + std::to_string(value) +
           ": graph mode prices no " + what;
  };
  if (p.pp > 1)
    return field("pp", p.pp, "pipeline");
  if (p.numMicroBatches > 1)
    return field("micro", p.numMicroBatches, "micro-batches");
  if (p.cp > 1)
    return field("cp", p.cp, "context parallelism");
  if (p.ep > 1)
    return field("ep", p.ep, "expert parallelism");
  if (p.sequenceParallel)
    return "plan.sp: graph mode prices no sequence parallelism";
  if (p.recompute != cost::Recompute::None || !p.recomputePerStage.empty())
    return "plan.recompute: graph mode prices no recomputation";
  if (p.dp * p.tp != gpus)
    return "plan: dp x tp = " + std::to_string(p.dp * p.tp) + ", not the " +
           std::to_string(gpus) + " devices";
  if (batch % p.dp)
    return "plan.dp: " + std::to_string(p.dp) +
           " does not divide the batch "
           "of " +
           std::to_string(batch);
  return "";
}

/// Graph mode's price of `plan` for a module without repeated blocks, as
/// an estimate.
cost::Result<cost::Estimate> estimateGraphMode(const Problem &p,
                                               const AutoShardOptions &o,
                                               const PlannerOptions &so,
                                               const cost::ParallelPlan &plan) {
  using E = cost::Result<cost::Estimate>;
  const cost::ClusterSpec &cl = p.cluster.spec;
  int gpus = o.gpus ? o.gpus : cl.numGpus();
  if (std::string why = graphModeLimit(plan, p.batch, gpus); !why.empty())
    return E::failure(why + " (function @" +
                      func::FuncOp(p.func).getSymName().str() +
                      " has no repeated block and matches no transformer "
                      "preset: graph mode prices it op by op)");
  Candidate c = detail::priceGraphMode(p.view, p.cluster, so, p.dtype, plan,
                                       o.ilpTimeLimit);
  cost::Estimate e;
  e.numGpus = gpus;
  e.peakFlopsPerGpu = cl.gpu.peakFlops(p.dtype);
  e.stepTime = c.stepTime;
  e.mfu = e.hfu = e.mfuBf16Peak = c.mfu;
  e.modelFlops = e.hardwareFlops =
      c.mfu * c.stepTime * double(gpus) * e.peakFlopsPerGpu;
  e.modelTflopsPerGpu = e.hardwareTflopsPerGpu =
      c.mfu * e.peakFlopsPerGpu / 1e12;
  e.breakdown = c.breakdown;
  e.memoryPerStage = c.memoryPerStage;
  e.fits = c.fits;
  return e;
}

} // namespace

cost::Result<cost::Estimate> estimateModulePlan(ModuleOp module,
                                                const AutoShardOptions &o,
                                                cost::ParallelPlan plan,
                                                ModulePricing *pricing) {
  using E = cost::Result<cost::Estimate>;
  cost::Result<Problem> p = prepare(module, o);
  if (!p)
    return E::failure(p.error());
  std::string error;
  std::optional<ModelConfig> model = modelOf(module, p->view, o, error);
  if (!error.empty())
    return E::failure(error);
  std::optional<ModelConfig> derived =
      pricedFromOps(p->view, model, p->cluster.host, plan.ep);
  // The implementation choices the search gives every candidate.
  PlannerOptions so = searchOptions(o, p->cluster, p->batch, p->dtype);
  const cost::ParallelPlan &impl = so.implementation;
  plan.attention = impl.attention;
  plan.gradReduceDType = impl.gradReduceDType;
  plan.overlapGradReduce = impl.overlapGradReduce;
  plan.overlapParamGather = impl.overlapParamGather;
  plan.overlapTpComm = impl.overlapTpComm;
  plan.scatterGatherP2p = impl.scatterGatherP2p;
  plan.clipGradients = impl.clipGradients;
  plan.dynamicLossScaling = impl.dynamicLossScaling;
  plan.inPlaceUpdate = impl.inPlaceUpdate;
  plan.regatherForBackward = impl.regatherForBackward;
  plan.accumulateGradsInPlace = impl.accumulateGradsInPlace;
  plan.dtype = p->dtype;
  if (pricing) {
    pricing->plan = plan;
    pricing->source = derived ? ModulePricing::Source::Ops
                      : model ? ModulePricing::Source::Preset
                              : ModulePricing::Source::Graph;
  }
  if (!model && !derived)
    return estimateGraphMode(*p, o, so, plan);
  ModelConfig m = model ? *model : *derived;
  m.dtype = p->dtype;
  const cost::ClusterSpec &cl = p->cluster.spec;
  if (std::string bad = cost::validatePlan(plan, m, cl); !bad.empty())
    return E::failure(bad);
  std::shared_ptr<const cost::CostConstants> constants =
      bucketConstants(o, module);
  cost::EstimateOptions eo;
  eo.constants = constants ? constants.get() : &cost::defaultConstants();
  eo.memoryHeadroom = o.memoryHeadroom;
  if (!derived)
    return cost::estimate(m, cl, plan, eo);
  cost::Result<cost::Workload> w =
      buildGraphWorkload(p->view, m, cl, plan, *eo.constants);
  if (!w)
    return E::failure(w.error());
  return cost::estimateWithWorkload(m, cl, plan, *w, eo);
}

cost::Result<ModuleStep> readModuleStep(ModuleOp module,
                                        const std::string &function) {
  std::string input;
  cost::Result<Problem> p = readProblem(module, function, input);
  if (!p)
    return cost::Result<ModuleStep>::failure(p.error());
  return ModuleStep{p->func.getSymName().str(), input, p->batch, p->dtype};
}

} // namespace cleave::planner
