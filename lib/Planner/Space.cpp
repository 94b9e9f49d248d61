//===- Space.cpp - Enumerating candidate plans ----------------------------===//

#include "Space.h"

#include "cleave/Planner/StagePartition.h"

#include <algorithm>
#include <cmath>

namespace cleave::planner::detail {

using cost::ParallelPlan;
using cost::Recompute;
using cost::Schedule;

namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      out.push_back(d);
      if (d * d != n)
        out.push_back(n / d);
    }
  std::sort(out.begin(), out.end());
  return out;
}

std::string str(int64_t v) { return std::to_string(v); }

} // namespace

Space::Space(const ModelConfig &model, const cost::ClusterSpec &cluster,
             const PlannerOptions &options)
    : model(model), cluster(cluster), options(options),
      constants(options.constants ? *options.constants
                                  : cost::defaultConstants()) {
  gpus = options.gpus > 0 ? options.gpus : cluster.numGpus();
  memoryLimit = cluster.gpu.hbmBytes * (1 - options.memoryHeadroom);
}

std::string Space::validateOptions() const {
  const PlannerOptions &o = options;
  const SearchSpace &s = o.space;
  if (std::string e = model.validate(); !e.empty())
    return "model: " + e;
  if (model.arch == Architecture::MLP)
    return "model: the plan search covers transformer models (gpt, llama), "
           "not mlp";
  if (std::string e = cluster.validate(); !e.empty())
    return e;
  if (o.globalBatch < 1)
    return "options.global_batch: must be at least 1, got " +
           str(o.globalBatch);
  if (o.gpus < 0 || o.gpus > cluster.numGpus())
    return "options.gpus: " + str(o.gpus) + " is not between 1 and the " +
           str(cluster.numGpus()) + " GPUs of the cluster";
  if (o.fixedTp < 0 || (o.fixedTp > 0 && gpus % o.fixedTp != 0))
    return "options.tp: " + str(o.fixedTp) + " does not divide the " +
           str(gpus) + " GPUs";
  if (o.maxPp < 0)
    return "options.max_pp: must be at least 0, got " + str(o.maxPp);
  if (!(o.memoryHeadroom >= 0 && o.memoryHeadroom < 1))
    return "options.memory_headroom: must be in [0, 1), got " +
           std::to_string(o.memoryHeadroom);
  if (o.topK < 1)
    return "options.top: must be at least 1, got " + str(o.topK);
  if (s.schedules.empty() || s.recomputes.empty() || s.zeroStages.empty())
    return "options.space: schedules, recomputes and zero stages must not be "
           "empty";
  for (int z : s.zeroStages)
    if (z < 0 || z > 3)
      return "options.space.zero: stage must be 0-3, got " + str(z);
  if (s.maxMicroBatchSize < 1 || s.maxVirtualStages < 1 ||
      s.maxContextParallel < 1)
    return "options.space: the largest micro-batch, virtual-stage count and "
           "context-parallel size must be at least 1";
  if (s.minExpertParallel < 1 || s.maxExpertParallel < s.minExpertParallel)
    return "options.space: the expert-parallel range [" +
           str(s.minExpertParallel) + ", " + str(s.maxExpertParallel) +
           "] is empty or below 1";
  return "";
}

ParallelPlan Space::basePlan(const Mesh &m) const {
  ParallelPlan p = options.implementation;
  p.tp = m.tp;
  p.cp = m.cp;
  p.dp = m.dp;
  p.ep = m.ep;
  p.pp = m.pp;
  p.sequenceParallel = false;
  p.microBatchSize = 1;
  p.numMicroBatches = options.globalBatch / m.dp;
  p.schedule = Schedule::OneFOneB;
  p.virtualStages = 1;
  p.zeroStage = 0;
  p.recompute = Recompute::None;
  p.recomputePerStage.clear();
  p.layersPerChunk.clear();
  return p;
}

void Space::enumerate() {
  int maxPp = options.maxPp > 0 ? options.maxPp : int(model.layers);
  auto reject = [&](const std::string &why) { ++stats.rejectedMeshes[why]; };
  for (int64_t tp : divisors(gpus)) {
    bool inNode = tp <= cluster.gpusPerNode && cluster.gpusPerNode % tp == 0;
    if (options.fixedTp ? tp != options.fixedTp : !inNode)
      continue;
    for (int64_t cp : divisors(gpus / tp)) {
      if (cp > options.space.maxContextParallel)
        continue;
      for (int64_t pp : divisors(gpus / (tp * cp))) {
        Mesh m{int(tp), int(cp), int(gpus / (tp * cp * pp)), int(pp)};
        if (options.fixedPp && pp != options.fixedPp) {
          reject("pp=" + str(pp) + " is not the fixed pipeline size " +
                 str(options.fixedPp));
          continue;
        }
        if (!options.fixedPp && pp > maxPp) {
          reject("pp=" + str(pp) + " is above the largest pipeline size " +
                 str(maxPp));
          continue;
        }
        if (options.globalBatch % m.dp != 0) {
          reject("dp=" + str(m.dp) + " does not divide the global batch of " +
                 str(options.globalBatch));
          continue;
        }
        for (int ep : expertSizes(m.dp)) {
          m.ep = ep;
          if (std::string e = cost::validatePlan(basePlan(m), model, cluster);
              !e.empty()) {
            reject(e);
            continue;
          }
          meshes.push_back(m);
          enumerateMesh(int32_t(meshes.size() - 1));
        }
      }
    }
  }
  stats.meshes = int64_t(meshes.size());
  stats.candidates = int64_t(candidates.size());
  stats.workloads = int64_t(workloads.size());
}

std::vector<int> Space::expertSizes(int dp) const {
  const SearchSpace &s = options.space;
  std::vector<int> out;
  // Expert parallelism: divisors of dp that divide the experts (the
  // validation names the others), within the space's range.
  for (int64_t ep : divisors(dp)) {
    if (ep > s.maxExpertParallel || ep < s.minExpertParallel)
      continue;
    if (ep > 1 && (!model.isMoE() || model.experts % ep != 0))
      continue;
    out.push_back(int(ep));
  }
  return out;
}

void Space::enumerateMesh(int32_t index) {
  const Mesh &mesh = meshes[size_t(index)];
  const SearchSpace &s = options.space;
  int64_t perReplica = options.globalBatch / mesh.dp;
  std::vector<bool> spOptions = {false};
  if (mesh.tp > 1 && s.sequenceParallel)
    spOptions.push_back(true);
  std::vector<RecomputeMode> modes;
  for (Recompute r : s.recomputes)
    modes.push_back(RecomputeMode(int(r)));
  if (mesh.pp > 1 && s.recomputePerStage)
    modes.push_back(RecomputeMode::PerStage);
  std::vector<int> zeros = s.zeroStages;
  // cleave-apply-plan's dp excludes the expert-parallel ranks.
  if (s.zeroOverDpOnly && mesh.dp / mesh.ep == 1)
    zeros.erase(
        std::remove_if(zeros.begin(), zeros.end(), [](int z) { return z > 0; }),
        zeros.end());
  if (zeros.empty())
    return; // the fixed ZeRO stage needs dp > 1
  if (mesh.dp * mesh.cp == 1)
    zeros = {zeros.front()}; // nothing to shard over: every stage is alike
  for (int64_t mbs : divisors(perReplica)) {
    if (mbs > s.maxMicroBatchSize)
      break;
    int64_t m = perReplica / mbs;
    if (s.maxMicroBatches > 0 && m > s.maxMicroBatches)
      continue;
    std::vector<std::pair<Schedule, int>> schedules;
    if (mesh.pp == 1)
      schedules.push_back({Schedule::OneFOneB, 1});
    for (Schedule sc : mesh.pp > 1 ? s.schedules : std::vector<Schedule>{}) {
      if (sc != Schedule::Interleaved1F1B) {
        schedules.push_back({sc, 1});
        continue;
      }
      for (int v = 2; v <= s.maxVirtualStages; ++v)
        if (m % mesh.pp == 0 && int64_t(mesh.pp) * v <= model.layers)
          schedules.push_back({sc, v});
    }
    for (auto [sched, v] : schedules)
      for (bool sp : spOptions)
        for (bool balanced : {false, true}) {
          if (balanced && !(s.balancedStages && mesh.pp * v > 1))
            continue;
          for (RecomputeMode rc : modes)
            for (int zero : zeros) {
              Candidate c;
              c.mesh = index;
              c.microBatch = mbs;
              c.schedule = sched;
              c.virtualStages = int8_t(v);
              c.zero = int8_t(zero);
              c.recompute = rc;
              c.sequenceParallel = sp;
              c.balanced = balanced;
              addCandidate(std::move(c));
            }
        }
  }
}

void Space::addCandidate(Candidate c) {
  ParallelPlan plan = materialize(c);
  const cost::Workload &w = cachedWorkload(plan);
  // Balanced partitions and per-stage recomputation are worked out when a
  // candidate is first visited; until then: the average stage (balanced), or
  // the plan without recomputation (per stage), both lower bounds.
  c.exact = !c.balanced && c.recompute != RecomputeMode::PerStage;
  c.bound = c.balanced ? averageBound(model, plan, w)
                       : lowerBound(model, cluster, plan, w, constants);
  candidates.push_back(std::move(c));
}

ParallelPlan Space::materialize(const Candidate &c) const {
  ParallelPlan p = basePlan(meshes[size_t(c.mesh)]);
  p.microBatchSize = c.microBatch;
  p.numMicroBatches = options.globalBatch / (p.dp * c.microBatch);
  p.schedule = c.schedule;
  p.virtualStages = c.virtualStages;
  p.zeroStage = c.zero;
  p.sequenceParallel = c.sequenceParallel;
  if (c.recompute == RecomputeMode::PerStage)
    p.recomputePerStage = c.stageRecompute;
  else
    p.recompute = Recompute(int(c.recompute));
  p.layersPerChunk = c.layers;
  return p;
}

cost::Workload Space::build(const ParallelPlan &plan) const {
  if (options.workload)
    return options.workload(plan);
  return cost::buildWorkload(model, cluster, plan, constants);
}

const cost::Workload &Space::cachedWorkload(const ParallelPlan &plan) {
  WorkloadKey key{plan.tp,
                  plan.cp,
                  plan.sequenceParallel,
                  plan.microBatchSize,
                  int(plan.recompute),
                  plan.schedule == Schedule::ZeroBubbleH1,
                  plan.pp > 1,
                  plan.ep};
  auto it = workloads.find(key);
  if (it == workloads.end()) {
    ParallelPlan uniform = plan;
    uniform.recomputePerStage.clear();
    uniform.layersPerChunk.clear();
    it = workloads.emplace(key, build(uniform)).first;
  }
  return it->second;
}

const cost::Workload &Space::workloadOf(const Candidate &c,
                                        const ParallelPlan &plan) {
  if (c.recompute != RecomputeMode::PerStage)
    return cachedWorkload(plan);
  std::string key = cost::describe(plan);
  auto it = exactWorkloads.find(key);
  if (it == exactWorkloads.end())
    it = exactWorkloads.emplace(key, build(plan)).first;
  return it->second;
}

std::vector<int> Space::balancedLayers(const ParallelPlan &plan,
                                       const cost::Workload &w) {
  int chunks = plan.pp * plan.chunks();
  double layer = w.layerForward.total() + w.layerBackward.total() +
                 w.layerWeightGrad.total() +
                 w.layerRecomputeOf[size_t(plan.recompute)].total();
  double first = w.embeddingForward.total() + w.embeddingBackward.total();
  double last =
      w.headForward.total() + w.headBackward.total() + w.headWeightGrad.total();
  return balancedPartition(std::vector<double>(size_t(model.layers), layer),
                           first, last, chunks);
}

std::vector<cost::MemoryBreakdown>
Space::memoryOf(const ParallelPlan &plan, const cost::Workload &w) const {
  return cost::memoryPerStage(model, cluster, plan, w, constants);
}

double Space::peakMemory(const ParallelPlan &plan, const cost::Workload &w) {
  std::vector<cost::MemoryBreakdown> mem = memoryOf(plan, w);
  ++stats.memoryChecked;
  size_t worst = 0;
  for (size_t s = 1; s < mem.size(); ++s)
    if (mem[s].total() > mem[worst].total())
      worst = s;
  if (!smallest || mem[worst].total() < smallest->memory.total())
    smallest = LeastMemory{plan, mem[worst], int(worst)};
  return mem[worst].total();
}

void Space::noteMemory(const planner::Candidate &c) {
  const cost::MemoryBreakdown &m = c.memoryPerStage[size_t(c.peakStage)];
  if (!smallest || m.total() < smallest->memory.total())
    smallest = LeastMemory{c.plan, m, c.peakStage};
}

std::vector<Recompute> Space::lightestFitting(const ParallelPlan &plan) {
  std::vector<Recompute> kinds = options.space.recomputes;
  std::sort(kinds.begin(), kinds.end(),
            [](Recompute a, Recompute b) { return int(a) < int(b); });
  std::vector<Recompute> chosen(size_t(plan.pp));
  std::vector<bool> done(size_t(plan.pp), false);
  for (Recompute kind : kinds) {
    ParallelPlan uniform = plan;
    uniform.recompute = kind;
    uniform.recomputePerStage.clear();
    std::vector<cost::MemoryBreakdown> mem =
        memoryOf(uniform, cachedWorkload(uniform));
    ++stats.memoryChecked;
    for (int s = 0; s < plan.pp; ++s)
      if (!done[size_t(s)] && mem[size_t(s)].total() <= memoryLimit) {
        chosen[size_t(s)] = kind;
        done[size_t(s)] = true;
      }
  }
  if (std::find(done.begin(), done.end(), false) != done.end())
    return {};
  return chosen;
}

void Space::refine(Candidate &c) {
  ParallelPlan plan = materialize(c);
  if (c.balanced) {
    std::vector<int> layers = balancedLayers(plan, cachedWorkload(plan));
    std::vector<int> even;
    for (int k = 0; k < plan.pp * plan.chunks(); ++k)
      even.push_back(int(cost::layersInChunk(model, plan, k)));
    if (layers.empty() || layers == even) {
      c.dropped = true; // the even candidate covers it
      return;
    }
    c.layers = layers;
    plan.layersPerChunk = layers;
  }
  if (c.recompute == RecomputeMode::PerStage) {
    std::vector<Recompute> kinds = lightestFitting(plan);
    bool uniform =
        !kinds.empty() && std::count(kinds.begin(), kinds.end(), kinds[0]) ==
                              int64_t(kinds.size());
    if (kinds.empty() || uniform) {
      c.dropped = true; // nothing fits, or a uniform candidate covers it
      return;
    }
    c.stageRecompute = kinds;
    plan.recomputePerStage = kinds;
  }
  c.bound = lowerBound(model, cluster, plan, cachedWorkload(plan), constants);
  c.exact = true;
}

cost::Result<planner::Candidate> Space::evaluate(const Candidate &c) {
  ParallelPlan plan = materialize(c);
  if (std::string e = cost::validatePlan(plan, model, cluster); !e.empty())
    return cost::Result<planner::Candidate>::failure(
        "internal error: the planner made an invalid plan (" +
        cost::describe(plan) + "): " + e);
  cost::EstimateOptions eo;
  eo.constants = &constants;
  cost::Result<cost::Estimate> e =
      cost::estimateWithWorkload(model, cluster, plan, workloadOf(c, plan), eo);
  if (!e)
    return cost::Result<planner::Candidate>::failure(e.error());
  ++stats.simulated;
  planner::Candidate out;
  out.plan = plan;
  out.stepTime = e->stepTime;
  out.mfu = e->mfu;
  out.tokensPerSecond = e->tokensPerSecond;
  out.breakdown = e->breakdown;
  out.memoryPerStage = e->memoryPerStage;
  out.peakStage = e->peakMemoryStage;
  out.peakMemory = e->peakMemory().total();
  out.fits = out.peakMemory <= memoryLimit;
  return out;
}

bool ranksBefore(const planner::Candidate &a, size_t orderA,
                 const planner::Candidate &b, size_t orderB) {
  if (a.stepTime != b.stepTime)
    return a.stepTime < b.stepTime;
  if (a.peakMemory != b.peakMemory)
    return a.peakMemory < b.peakMemory;
  return orderA < orderB;
}

} // namespace cleave::planner::detail
