//===- Pictures.cpp - The data only the pictures need ---------------------===//

#include "cleave/CostModel/Collective.h"
#include "cleave/CostModel/Simulator.h"
#include "cleave/Report/Html.h"

namespace cleave::report {

using nlohmann::json;

namespace {

const char *intraLinkName(cost::IntraNodeKind kind) {
  switch (kind) {
  case cost::IntraNodeKind::NVSwitch:
    return "NVLink (NVSwitch)";
  case cost::IntraNodeKind::NVLinkMesh:
    return "NVLink (mesh)";
  case cost::IntraNodeKind::PCIe:
    return "PCIe";
  }
  return "intra-node";
}

json axisToJson(const char *name, int size, int stride, int gpusPerNode) {
  cost::GroupPlacement g = cost::placeGroup(size, stride, gpusPerNode);
  const char *link = size == 1             ? "none"
                     : g.nodes == 1        ? "intra"
                     : g.ranksPerNode == 1 ? "inter"
                                           : "both";
  return {{"axis", name},     {"size", size},
          {"stride", stride}, {"link", link},
          {"nodes", g.nodes}, {"ranks_per_node", g.ranksPerNode}};
}

} // namespace

json meshToJson(const cost::ParallelPlan &p, const cost::ClusterSpec &cl) {
  int g = std::max(cl.gpusPerNode, 1);
  json axes = json::array();
  axes.push_back(axisToJson("pp", p.pp, p.tp * p.cp * p.dp, g));
  axes.push_back(axisToJson("dp", p.dp, p.tp * p.cp, g));
  axes.push_back(axisToJson("cp", p.cp, p.tp, g));
  axes.push_back(axisToJson("tp", p.tp, 1, g));
  int gpus = p.numGpus();
  return {{"gpus", gpus},
          {"gpus_per_node", g},
          {"nodes", (gpus + g - 1) / g},
          {"gpu", cl.gpu.name},
          {"intra_link", intraLinkName(cl.intra.kind)},
          {"inter_link", "InfiniBand"},
          {"rank_order", "rank = ((pp * dp_size + dp) * cp_size + cp) * "
                         "tp_size + tp"},
          {"axes", axes}};
}

json pipelineToJson(const ModelConfig &model, const cost::ParallelPlan &p) {
  int chunks = p.chunks(), total = p.pp * chunks;
  std::vector<json> stages(size_t(p.pp), json::array());
  int64_t next = 0;
  // Chunk k of the model runs on stage k mod pp (interleaved: stage s holds
  // chunks s, s + pp, ...).
  for (int k = 0; k < total; ++k) {
    int64_t n = cost::layersInChunk(model, p, k);
    json c = {{"chunk", k}, {"layers", n}};
    if (n > 0)
      c["first_layer"] = next, c["last_layer"] = next + n - 1;
    if (k == 0)
      c["embedding"] = true;
    if (k == total - 1)
      c["output_layer"] = true;
    next += n;
    stages[size_t(k % p.pp)].push_back(c);
  }
  json out = json::array();
  for (int s = 0; s < p.pp; ++s)
    out.push_back({{"stage", s},
                   {"recompute", cost::toString(p.recomputeOf(s))},
                   {"chunks", stages[size_t(s)]}});
  return {{"stages", out},
          {"layers", model.layers},
          {"chunks_per_stage", chunks},
          {"schedule", cost::toString(p.schedule)},
          {"micro_batches", p.numMicroBatches}};
}

json timelineToJson(const cost::Program &prog,
                    const cost::SimulationResult &res) {
  json ranks = json::array(), tasks = json::array(), streams = json::array();
  for (int s = 0; s < cost::kNumStreams; ++s)
    streams.push_back(cost::streamName(s));
  for (size_t r = 0; r < prog.ranks.size(); ++r) {
    const cost::RankProgram &rp = prog.ranks[r];
    ranks.push_back({{"stage", rp.stage},
                     {"ranks", rp.multiplicity},
                     {"rank", rp.realRank}});
    if (r >= res.timings.size())
      continue;
    for (size_t i = 0; i < rp.tasks.size(); ++i) {
      const cost::Task &t = rp.tasks[i];
      const cost::TaskTiming &ti = res.timings[r][i];
      double begin =
          t.kind == cost::TaskKind::Compute ? ti.start : ti.transferStart;
      tasks.push_back(json::array({int(r), int(t.stream), begin,
                                   std::max(begin, ti.end), cost::taskLabel(t),
                                   cost::toString(t.category), t.microBatch}));
    }
  }
  return {{"step_time_s", res.stepTime},
          {"symmetric", prog.symmetric},
          {"ranks", ranks},
          {"streams", streams},
          {"task_fields",
           {"rank", "stream", "start_s", "end_s", "label", "category",
            "micro_batch"}},
          {"tasks", tasks}};
}

json picturesToJson(const ModelConfig &model, const cost::ClusterSpec &cluster,
                    const cost::ParallelPlan &plan, const cost::Estimate &e) {
  json j = {{"mesh", meshToJson(plan, cluster)},
            {"pipeline", pipelineToJson(model, plan)}};
  if (e.program && !e.simulation.timings.empty())
    j["timeline"] = timelineToJson(*e.program, e.simulation);
  return j;
}

} // namespace cleave::report
