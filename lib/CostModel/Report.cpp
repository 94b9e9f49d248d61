//===- Report.cpp - Estimates as text and JSON ----------------------------===//

#include "cleave/CostModel/Report.h"
#include "cleave/CostModel/Estimate.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <sstream>

namespace cleave::cost {

std::string formatSeconds(double s) {
  if (s >= 1)
    return absl::StrFormat("%.3f s", s);
  if (s >= 1e-3)
    return absl::StrFormat("%.2f ms", s * 1e3);
  return absl::StrFormat("%.1f us", s * 1e6);
}

std::string formatGigabytes(double bytes, int digits) {
  return absl::StrFormat("%.*f GB", digits, bytes / 1e9);
}

std::string formatPercent(double fraction, int digits) {
  return absl::StrFormat("%.*f%%", digits, 100 * fraction);
}

std::vector<ReportPart> timeParts(const TimeBreakdown &b) {
  std::vector<ReportPart> parts = {
      {"forward", "forward", b.forward},
      {"backward", "backward", b.backward},
      {"weight_gradients", "weight gradients", b.weightGrad},
      {"recompute", "recompute", b.recompute},
      {"optimizer", "optimizer", b.optimizer}};
  for (int a = 0; a < kNumAxes; ++a) {
    std::string axis = toString(Axis(a));
    parts.push_back(
        {"exposed_" + axis + "_communication",
         "exposed " + absl::AsciiStrToUpper(axis) + " communication",
         b.exposedComm[size_t(a)]});
  }
  parts.push_back({"pipeline_bubble", "pipeline bubble", b.bubble});
  // Only a shared host's steps have it (a measured local CPU cluster).
  if (b.hostCpu > 0)
    parts.push_back(
        {"host_cpu_wait", "waiting for the host's cores", b.hostCpu});
  return parts;
}

std::vector<ReportPart> memoryParts(const MemoryBreakdown &m) {
  std::vector<ReportPart> parts = {
      {"parameters", "parameters", m.parameters},
      {"gradients", "gradients", m.gradients},
      {"optimizer_states", "optimizer states", m.optimizerStates},
      {"activations", "activations", m.activations},
      {"transient", "transient", m.transient},
      {"communication_buffers", "communication buffers", m.communication},
      {"runtime_reserved", "runtime reserved", m.reserved}};
  // Only steps that do not update in place have it.
  if (m.stateUpdate > 0)
    parts.push_back(
        {"state_update", "new parameters and optimizer state", m.stateUpdate});
  return parts;
}

nlohmann::json partsToJson(const std::vector<ReportPart> &parts) {
  nlohmann::json j = nlohmann::json::object();
  for (const ReportPart &p : parts)
    j[p.key] = p.value;
  return j;
}

nlohmann::json memoryToJson(const MemoryBreakdown &m) {
  nlohmann::json j = partsToJson(memoryParts(m));
  j["total"] = m.total();
  j["capacity"] = m.capacity;
  j["headroom"] = m.headroom;
  j["usable"] = m.usable();
  j["fits"] = m.fits();
  return j;
}

std::string describeUsableMemory(double capacity, double headroom) {
  return absl::StrFormat("%s usable of %s (%s headroom)",
                         formatGigabytes(capacity * (1 - headroom)),
                         formatGigabytes(capacity), formatPercent(headroom, 0));
}

TextTable::TextTable(std::vector<Align> columns, int indent, int gap)
    : columns(std::move(columns)), indent(indent), gap(gap) {}

void TextTable::addRow(std::vector<std::string> cells) {
  cells.resize(columns.size());
  rows.push_back(std::move(cells));
}

void TextTable::print(std::ostream &os) const {
  std::vector<size_t> width(columns.size(), 0);
  for (const auto &row : rows)
    for (size_t c = 0; c < row.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  for (const auto &row : rows) {
    std::string line(size_t(indent), ' ');
    for (size_t c = 0; c < row.size(); ++c) {
      std::string pad(width[c] - row[c].size(), ' ');
      if (c > 0)
        line += std::string(size_t(gap), ' ');
      line += columns[c] == Align::Left ? row[c] + pad : pad + row[c];
    }
    line.erase(line.find_last_not_of(' ') + 1);
    os << line << "\n";
  }
}

std::string formatReport(const Estimate &e, const ModelConfig &model,
                         const ClusterSpec &cl, const ParallelPlan &plan) {
  std::ostringstream os;
  os << absl::StrFormat("model   %s (%.2fB parameters, seq %d)\n", model.name,
                        model.numParameters() / 1e9, model.seqLen);
  os << absl::StrFormat("cluster %s: %d nodes x %d %s\n", cl.name, cl.nodes,
                        cl.gpusPerNode, cl.gpu.name);
  os << "plan    " << describe(plan) << "\n";
  os << absl::StrFormat("        global batch %d sequences, %d GPUs\n\n",
                        plan.globalBatch(), e.numGpus);
  os << "step time          " << formatSeconds(e.stepTime) << "\n";
  os << absl::StrFormat("tokens/s           %.0f\n", e.tokensPerSecond);
  os << absl::StrFormat("TFLOP/s per GPU    %.1f model, %.1f hardware\n",
                        e.modelTflopsPerGpu, e.hardwareTflopsPerGpu);
  os << absl::StrFormat("MFU / HFU          %s / %s  (peak %.1f TFLOP/s %s)\n",
                        formatPercent(e.mfu), formatPercent(e.hfu),
                        e.peakFlopsPerGpu / 1e12, toString(plan.dtype));
  if (plan.dtype == DType::F8E4M3)
    os << absl::StrFormat("MFU (bf16 peak)    %s  (peak %.1f TFLOP/s bf16)\n",
                          formatPercent(e.mfuBf16Peak),
                          cl.gpu.peakFlops(DType::BF16) / 1e12);
  os << "\n";
  os << "time of the critical rank (pipeline stage " << e.criticalStage
     << ")\n";
  TextTable time({TextTable::Align::Left, TextTable::Align::Right,
                  TextTable::Align::Right});
  for (const ReportPart &p : timeParts(e.breakdown))
    if (p.value > 0)
      time.addRow({p.label, formatSeconds(p.value),
                   formatPercent(p.value / e.stepTime)});
  time.print(os);
  const MemoryBreakdown &m = e.peakMemory();
  os << "\nmemory per GPU (peak: pipeline stage " << e.peakMemoryStage << ")\n";
  TextTable memory({TextTable::Align::Left, TextTable::Align::Right});
  for (const ReportPart &p : memoryParts(m))
    memory.addRow({p.label, formatGigabytes(p.value, 2)});
  memory.addRow({"total", formatGigabytes(m.total(), 2)});
  memory.print(os);
  os << "  " << describeUsableMemory(m.capacity, m.headroom) << ": "
     << (e.fits ? "fits" : "DOES NOT FIT") << "\n";
  return os.str();
}

std::string estimateToJson(const Estimate &e, const ModelConfig &model,
                           const ClusterSpec &cl, const ParallelPlan &plan) {
  nlohmann::json j;
  j["model"] = model.name;
  j["cluster"] = cl.name;
  j["plan"] = describe(plan);
  j["gpus"] = e.numGpus;
  j["global_batch"] = plan.globalBatch();
  j["step_time_s"] = e.stepTime;
  j["tokens_per_s"] = e.tokensPerSecond;
  j["model_tflops_per_gpu"] = e.modelTflopsPerGpu;
  j["hardware_tflops_per_gpu"] = e.hardwareTflopsPerGpu;
  j["mfu"] = e.mfu;
  j["hfu"] = e.hfu;
  j["mfu_bf16_peak"] = e.mfuBf16Peak;
  j["peak_tflops_per_gpu"] = e.peakFlopsPerGpu / 1e12;
  j["time_s"] = partsToJson(timeParts(e.breakdown));
  j["critical_stage"] = e.criticalStage;
  nlohmann::json stages = nlohmann::json::array();
  for (const MemoryBreakdown &m : e.memoryPerStage)
    stages.push_back(memoryToJson(m));
  j["memory_bytes_per_stage"] = stages;
  j["peak_memory_stage"] = e.peakMemoryStage;
  j["fits"] = e.fits;
  return j.dump(2);
}

} // namespace cleave::cost
