//===- Report.cpp - Estimates as text and JSON ----------------------------===//

#include "cleave/CostModel/Estimate.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

namespace cleave::cost {
namespace {

std::string fmt(const char *format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string seconds(double s) {
  if (s >= 1)
    return fmt("%.3f s", s);
  if (s >= 1e-3)
    return fmt("%.3f ms", s * 1e3);
  return fmt("%.1f us", s * 1e6);
}

std::string gigabytes(double b) { return fmt("%.2f GB", b / 1e9); }

/// (label, seconds) rows of the time breakdown, in display order.
std::vector<std::pair<std::string, double>> timeRows(const TimeBreakdown &b) {
  std::vector<std::pair<std::string, double>> rows = {
      {"forward", b.forward},
      {"backward", b.backward},
      {"weight gradients", b.weightGrad},
      {"recompute", b.recompute},
      {"optimizer", b.optimizer}};
  for (int a = 0; a < kNumAxes; ++a)
    rows.push_back({std::string(toString(Axis(a))) + " comm (exposed)",
                    b.exposedComm[size_t(a)]});
  rows.push_back({"pipeline bubble", b.bubble});
  return rows;
}

std::vector<std::pair<std::string, double>>
memoryRows(const MemoryBreakdown &m) {
  return {{"parameters", m.parameters},
          {"gradients", m.gradients},
          {"optimizer states", m.optimizerStates},
          {"activations", m.activations},
          {"transient", m.transient},
          {"communication buffers", m.communication},
          {"runtime reserved", m.reserved}};
}

} // namespace

std::string formatReport(const Estimate &e, const ModelConfig &model,
                         const ClusterSpec &cl, const ParallelPlan &plan) {
  std::ostringstream os;
  os << "model   " << model.name << " ("
     << fmt("%.2f", model.numParameters() / 1e9) << "B parameters, seq "
     << model.seqLen << ")\n";
  os << "cluster " << cl.name << ": " << cl.nodes << " nodes x "
     << cl.gpusPerNode << " " << cl.gpu.name << "\n";
  os << "plan    " << describe(plan) << "\n";
  os << "        global batch " << plan.globalBatch() << " sequences, "
     << e.numGpus << " GPUs\n\n";
  os << "step time          " << seconds(e.stepTime) << "\n";
  os << "tokens/s           " << fmt("%.0f", e.tokensPerSecond) << "\n";
  os << "TFLOP/s per GPU    " << fmt("%.1f", e.modelTflopsPerGpu) << " model, "
     << fmt("%.1f", e.hardwareTflopsPerGpu) << " hardware\n";
  os << "MFU / HFU          " << fmt("%.1f%%", 100 * e.mfu) << " / "
     << fmt("%.1f%%", 100 * e.hfu) << "  (peak "
     << fmt("%.1f", e.peakFlopsPerGpu / 1e12) << " TFLOP/s "
     << toString(plan.dtype) << ")\n\n";
  os << "time of the critical rank (pipeline stage " << e.criticalStage
     << ")\n";
  for (const auto &[label, t] : timeRows(e.breakdown))
    if (t > 0)
      os << "  " << label
         << std::string(24 - std::min<size_t>(label.size(), 23), ' ')
         << std::string(12 - std::min<size_t>(seconds(t).size(), 12), ' ')
         << seconds(t) << fmt("  %5.1f%%", 100 * t / e.stepTime) << "\n";
  const MemoryBreakdown &m = e.peakMemory();
  os << "\nmemory per GPU (peak: pipeline stage " << e.peakMemoryStage << ")\n";
  for (const auto &[label, b] : memoryRows(m))
    os << "  " << label
       << std::string(24 - std::min<size_t>(label.size(), 23), ' ')
       << fmt("%9.2f GB", b / 1e9) << "\n";
  os << "  total                   " << fmt("%9.2f GB", m.total() / 1e9)
     << " of " << gigabytes(m.capacity) << ": "
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
  j["peak_tflops_per_gpu"] = e.peakFlopsPerGpu / 1e12;
  nlohmann::json time;
  for (const auto &[label, t] : timeRows(e.breakdown))
    time[label] = t;
  j["time_s"] = time;
  j["critical_stage"] = e.criticalStage;
  nlohmann::json stages = nlohmann::json::array();
  for (const MemoryBreakdown &m : e.memoryPerStage) {
    nlohmann::json s;
    for (const auto &[label, b] : memoryRows(m))
      s[label] = b;
    s["total"] = m.total();
    s["capacity"] = m.capacity;
    s["fits"] = m.fits();
    stages.push_back(s);
  }
  j["memory_bytes_per_stage"] = stages;
  j["peak_memory_stage"] = e.peakMemoryStage;
  j["fits"] = e.fits;
  return j.dump(2);
}

} // namespace cleave::cost
