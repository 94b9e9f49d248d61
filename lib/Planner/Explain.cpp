//===- Explain.cpp - The planner's report ---------------------------------===//

#include "cleave/Planner/Explain.h"
#include "cleave/CostModel/Report.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <iomanip>
#include <sstream>

namespace cleave::planner {

using nlohmann::json;

namespace {

using cost::formatPercent;
using cost::formatSeconds;

std::string gb(double bytes) { return cost::formatGigabytes(bytes); }

/// "parameters 1.2 GB, gradients 2.4 GB, ...": the parts that are not zero.
std::string memorySummary(const cost::MemoryBreakdown &m) {
  std::string out;
  for (const cost::ReportPart &p : cost::memoryParts(m))
    if (p.value > 0)
      out += (out.empty() ? "" : ", ") + p.label + " " + gb(p.value);
  return out;
}

std::string recomputeOf(const cost::ParallelPlan &p) {
  if (p.recomputePerStage.empty())
    return cost::toString(p.recompute);
  std::string s;
  for (size_t i = 0; i < p.recomputePerStage.size(); ++i)
    s += (i ? "," : "") + std::string(cost::toString(p.recomputePerStage[i]));
  return s + " (per stage)";
}

/// "1, 2 x 62, 1": a list with runs of equal values folded.
std::string runs(const std::vector<int64_t> &v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j < v.size() && v[j] == v[i])
      ++j;
    os << (i ? ", " : "") << v[i];
    if (j - i > 1)
      os << " x " << j - i;
    i = j;
  }
  return os.str();
}

/// Short form of a plan for the ranking table.
std::string brief(const cost::ParallelPlan &p) {
  std::ostringstream os;
  os << "pp" << p.pp << " dp" << p.dp;
  if (p.ep > 1)
    os << " ep" << p.ep;
  os << " cp" << p.cp << " tp" << p.tp << (p.sequenceParallel ? " sp" : "")
     << " mbs" << p.microBatchSize << "x" << p.numMicroBatches << " "
     << cost::toString(p.schedule);
  if (p.schedule == cost::Schedule::Interleaved1F1B)
    os << p.virtualStages;
  os << " z" << p.zeroStage << " "
     << (p.recomputePerStage.empty() ? cost::toString(p.recompute)
                                     : "per-stage");
  if (!p.layersPerChunk.empty())
    os << " balanced";
  return os.str();
}

} // namespace

std::string explainLoss(const Candidate &loser, const Candidate &best,
                        double memoryLimit) {
  std::ostringstream os;
  if (!loser.fits) {
    os << "memory limit: needs " << gb(loser.peakMemory) << " per GPU (stage "
       << loser.peakStage << "), " << gb(loser.peakMemory - memoryLimit)
       << " over the " << gb(memoryLimit) << " limit";
    return os.str();
  }
  double slower = loser.stepTime / best.stepTime - 1;
  os << "+" << formatPercent(slower, slower < 0.001 ? 3 : 1) << " step time";
  auto mine = cost::timeParts(loser.breakdown),
       theirs = cost::timeParts(best.breakdown);
  size_t worst = 0;
  for (size_t i = 1; i < mine.size(); ++i)
    if (mine[i].value - theirs[i].value >
        mine[worst].value - theirs[worst].value)
      worst = i;
  double delta = mine[worst].value - theirs[worst].value;
  if (delta > 0)
    os << ", mostly " << mine[worst].label << " "
       << formatSeconds(mine[worst].value) << " vs "
       << formatSeconds(theirs[worst].value);
  return os.str();
}

std::vector<std::string> explainInfeasible(const ModelConfig &model,
                                           const PlannerOptions &options,
                                           const SearchResult &r) {
  std::vector<std::string> out;
  if (r.stats.meshes == 0) {
    out.push_back("mesh: no factorization of the " + std::to_string(r.gpus) +
                  " GPUs into pp x dp x cp x tp can run " + model.name +
                  " with a global batch of " +
                  std::to_string(options.globalBatch));
    for (const auto &[why, count] : r.stats.rejectedMeshes)
      out.push_back("  " + why + " (" + std::to_string(count) +
                    (count == 1 ? " mesh)" : " meshes)"));
  } else if (r.leastMemory) {
    const LeastMemory &l = *r.leastMemory;
    double need = l.memory.total();
    std::ostringstream os;
    os << "memory: the plan needing the least memory (" << brief(l.plan)
       << ") needs " << gb(need) << " per GPU on stage " << l.stage << " ("
       << memorySummary(l.memory) << "), " << gb(need - r.memoryLimit) << " ("
       << formatPercent(need / r.memoryLimit - 1) << ") over the "
       << cost::describeUsableMemory(l.memory.capacity, options.memoryHeadroom);
    out.push_back(os.str());
  }
  std::vector<std::string> limits;
  if (options.fixedTp)
    limits.push_back("tp fixed at " + std::to_string(options.fixedTp));
  if (options.space.zeroStages.size() == 1)
    limits.push_back("ZeRO stage fixed at " +
                     std::to_string(options.space.zeroStages[0]));
  if (options.fixedPp)
    limits.push_back("pp fixed at " + std::to_string(options.fixedPp));
  else if (options.maxPp)
    limits.push_back("pp at most " + std::to_string(options.maxPp));
  if (options.gpus)
    limits.push_back(std::to_string(options.gpus) + " GPUs");
  if (options.space.maxContextParallel == 1)
    limits.push_back("no context parallelism");
  if (!limits.empty()) {
    std::string s = "constraints in effect: ";
    for (size_t i = 0; i < limits.size(); ++i)
      s += (i ? ", " : "") + limits[i];
    out.push_back(s + " (relaxing them may help)");
  }
  return out;
}

json candidateToJson(const Candidate &c) {
  const cost::ParallelPlan &p = c.plan;
  json j;
  j["plan"] = cost::describe(p);
  j["tp"] = p.tp;
  j["pp"] = p.pp;
  j["dp"] = p.dp;
  j["ep"] = p.ep;
  j["cp"] = p.cp;
  j["sequence_parallel"] = p.sequenceParallel;
  j["micro_batch"] = p.microBatchSize;
  j["num_micro_batches"] = p.numMicroBatches;
  j["schedule"] = cost::toString(p.schedule);
  j["virtual_stages"] = p.virtualStages;
  j["zero"] = p.zeroStage;
  j["recompute"] = cost::toString(p.recompute);
  if (!p.recomputePerStage.empty()) {
    json kinds = json::array();
    for (cost::Recompute r : p.recomputePerStage)
      kinds.push_back(cost::toString(r));
    j["recompute_per_stage"] = kinds;
  }
  if (!p.layersPerChunk.empty())
    j["layers_per_chunk"] = p.layersPerChunk;
  j["step_time_s"] = c.stepTime;
  j["mfu"] = c.mfu;
  j["tokens_per_s"] = c.tokensPerSecond;
  j["peak_memory_bytes"] = c.peakMemory;
  j["peak_memory_stage"] = c.peakStage;
  j["fits"] = c.fits;
  j["time_s"] = cost::partsToJson(cost::timeParts(c.breakdown));
  if (!c.memoryPerStage.empty())
    j["memory_bytes"] =
        cost::memoryToJson(c.memoryPerStage[size_t(c.peakStage)]);
  if (!c.lostBecause.empty())
    j["lost_because"] = c.lostBecause;
  return j;
}

json searchToJson(const SearchResult &r, const ModelConfig &model,
                  const cost::ClusterSpec &cluster,
                  const PlannerOptions &options) {
  json j;
  j["model"] = model.name;
  j["parameters"] = model.numParameters();
  j["cluster"] = cluster.name;
  j["gpus"] = r.gpus;
  j["global_batch"] = options.globalBatch;
  j["memory_limit_bytes"] = r.memoryLimit;
  j["memory_headroom"] = options.memoryHeadroom;
  j["search"] = {{"meshes", r.stats.meshes},
                 {"candidates", r.stats.candidates},
                 {"visited", r.stats.visited},
                 {"memory_checked", r.stats.memoryChecked},
                 {"simulated", r.stats.simulated},
                 {"seconds", r.stats.seconds}};
  j["chosen"] = r.best ? candidateToJson(*r.best) : json(nullptr);
  j["runners_up"] = json::array();
  for (const Candidate &c : r.runnersUp)
    j["runners_up"].push_back(candidateToJson(c));
  j["over_memory"] = json::array();
  for (const Candidate &c : r.overMemory)
    j["over_memory"].push_back(candidateToJson(c));
  j["infeasible"] = r.infeasible;
  if (!r.expertParallel.empty())
    j["expert_parallel"] = r.expertParallel;
  if (r.expertAlternative)
    j["expert_alternative"] = candidateToJson(*r.expertAlternative);
  return j;
}

namespace {

void formatChosen(std::ostream &os, const Candidate &c,
                  const ModelConfig &model) {
  const cost::ParallelPlan &p = c.plan;
  os << "chosen plan\n";
  os << "  mesh         pp=" << p.pp << " dp=" << p.dp;
  if (p.ep > 1)
    os << " (ep=" << p.ep << " of them split the experts)";
  os << " cp=" << p.cp << " tp=" << p.tp
     << (p.sequenceParallel ? " (sequence parallel)" : "") << "\n";
  os << "  batching     micro-batch " << p.microBatchSize << " x "
     << p.numMicroBatches << " per replica, schedule "
     << cost::toString(p.schedule);
  if (p.schedule == cost::Schedule::Interleaved1F1B)
    os << " with " << p.virtualStages << " chunks per stage";
  os << "\n";
  if (p.pp * p.chunks() > 1) {
    std::vector<int64_t> layers;
    for (int k = 0; k < p.pp * p.chunks(); ++k)
      layers.push_back(cost::layersInChunk(model, p, k));
    os << "  layers       " << runs(layers) << " per chunk"
       << (p.layersPerChunk.empty() ? " (even split)"
                                    : " (balanced by dynamic programming)")
       << "\n";
  }
  os << "  memory       ZeRO-" << p.zeroStage << ", recompute "
     << recomputeOf(p) << "\n";
  os << "  step         " << formatSeconds(c.stepTime) << ", ";
  if (c.tokensPerSecond > 0)
    os << std::setprecision(0) << std::fixed << c.tokensPerSecond
       << " tokens/s, ";
  os << "MFU " << formatPercent(c.mfu) << "\n";
  os << "  time         ";
  bool first = true;
  for (const cost::ReportPart &p : cost::timeParts(c.breakdown))
    if (p.value > 0) {
      os << (first ? "" : ", ") << p.label << " "
         << formatPercent(p.value / c.stepTime);
      first = false;
    }
  os << "\n  memory/GPU   " << gb(c.peakMemory) << " on stage " << c.peakStage
     << ": " << memorySummary(c.memoryPerStage[size_t(c.peakStage)]) << "\n";
}

void addRow(cost::TextTable &table, const std::string &rank, const Candidate &c,
            const std::string &why) {
  table.addRow({rank, brief(c.plan), formatSeconds(c.stepTime),
                formatPercent(c.mfu), gb(c.peakMemory), why});
}

} // namespace

std::string formatSearch(const SearchResult &r, const ModelConfig &model,
                         const cost::ClusterSpec &cluster,
                         const PlannerOptions &options) {
  std::ostringstream os;
  os << "model    " << model.name;
  if (model.layers > 0) {
    double params = double(model.numParameters());
    os << " (" << std::setprecision(3)
       << (params >= 1e9 ? params / 1e9 : params / 1e6)
       << (params >= 1e9 ? "B" : "M") << " parameters, " << model.layers
       << " layers, seq " << model.seqLen << ")";
  }
  os << "\n";
  os << "cluster  " << cluster.name << ": " << r.gpus << " x "
     << cluster.gpu.name << " (" << cluster.gpusPerNode << " per node), "
     << cost::describeUsableMemory(cluster.gpu.hbmBytes, options.memoryHeadroom)
     << " per GPU\n";
  os << "batch    " << options.globalBatch << " sequences per step\n";
  os << "search   " << r.stats.candidates << " candidate plans on "
     << r.stats.meshes << " meshes; " << r.stats.visited << " visited, "
     << r.stats.simulated << " simulated in " << std::fixed
     << std::setprecision(2) << r.stats.seconds << " s\n\n";
  if (!r.best) {
    os << "no plan fits:\n";
    for (const std::string &line : r.infeasible)
      os << "  " << line << "\n";
    return os.str();
  }
  formatChosen(os, *r.best, model);
  using Align = cost::TextTable::Align;
  cost::TextTable table({Align::Left, Align::Left, Align::Right, Align::Right,
                         Align::Right, Align::Left});
  table.addRow({"#", "plan", "step", "MFU", "mem/GPU", "why it lost"});
  addRow(table, "1", *r.best, "chosen");
  for (size_t i = 0; i < r.runnersUp.size(); ++i)
    addRow(table, std::to_string(i + 2), r.runnersUp[i],
           r.runnersUp[i].lostBecause);
  for (const Candidate &c : r.overMemory)
    addRow(table, "-", c, c.lostBecause);
  os << "\n";
  table.print(os);
  if (!r.expertParallel.empty())
    os << "\nexpert parallelism: " << r.expertParallel << "\n";
  return os.str();
}

} // namespace cleave::planner
