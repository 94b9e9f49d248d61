//===- Plan.cpp - Plan validation and names -------------------------------===//

#include "cleave/CostModel/Plan.h"

#include <sstream>

namespace cleave::cost {

DType ParallelPlan::gradDType() const {
  if (gradReduceDType)
    return *gradReduceDType;
  return dtype == DType::F16 ? DType::F16 : DType::F32;
}

ParallelPlan ParallelPlan::forStage(int stage) const {
  ParallelPlan p = *this;
  p.recompute = recomputeOf(stage);
  p.recomputePerStage.clear();
  return p;
}

const char *toString(Schedule s) {
  switch (s) {
  case Schedule::GPipe:
    return "gpipe";
  case Schedule::OneFOneB:
    return "1f1b";
  case Schedule::Interleaved1F1B:
    return "interleaved";
  case Schedule::ZeroBubbleH1:
    return "zb-h1";
  }
  return "?";
}

const char *toString(Recompute r) {
  switch (r) {
  case Recompute::None:
    return "none";
  case Recompute::Selective:
    return "selective";
  case Recompute::Full:
    return "full";
  }
  return "?";
}

const char *toString(AttentionImpl a) {
  return a == AttentionImpl::Flash ? "flash" : "unfused";
}

std::optional<Schedule> parseSchedule(const std::string &name) {
  for (Schedule s : {Schedule::GPipe, Schedule::OneFOneB,
                     Schedule::Interleaved1F1B, Schedule::ZeroBubbleH1})
    if (name == toString(s))
      return s;
  return std::nullopt;
}

std::optional<Recompute> parseRecompute(const std::string &name) {
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
    if (name == toString(r))
      return r;
  return std::nullopt;
}

std::optional<AttentionImpl> parseAttention(const std::string &name) {
  for (AttentionImpl a : {AttentionImpl::Flash, AttentionImpl::Unfused})
    if (name == toString(a))
      return a;
  return std::nullopt;
}

int64_t layersInChunk(const ModelConfig &model, const ParallelPlan &plan,
                      int chunk) {
  if (!plan.layersPerChunk.empty())
    return plan.layersPerChunk[size_t(chunk)];
  int64_t total = int64_t(plan.pp) * plan.chunks();
  int64_t base = model.layers / total, extra = model.layers % total;
  return base + (chunk < extra ? 1 : 0);
}

namespace {

std::string checkSizes(const ParallelPlan &p) {
  for (auto [field, v] :
       {std::pair{"tp", int64_t(p.tp)}, std::pair{"pp", int64_t(p.pp)},
        std::pair{"dp", int64_t(p.dp)}, std::pair{"cp", int64_t(p.cp)},
        std::pair{"ep", int64_t(p.ep)},
        std::pair{"micro_batch", p.microBatchSize},
        std::pair{"micro_batches", p.numMicroBatches},
        std::pair{"virtual_stages", int64_t(p.virtualStages)}})
    if (v < 1)
      return std::string("plan.") + field + ": must be at least 1, got " +
             std::to_string(v);
  if (p.zeroStage < 0 || p.zeroStage > 3)
    return "plan.zero: stage must be 0, 1, 2 or 3, got " +
           std::to_string(p.zeroStage);
  if (p.schedule == Schedule::Interleaved1F1B) {
    if (p.virtualStages < 2)
      return "plan.virtual_stages: the interleaved schedule needs at least "
             "2 model chunks per pipeline rank, got " +
             std::to_string(p.virtualStages);
    if (p.numMicroBatches % p.pp != 0)
      return "plan.micro_batches: the interleaved schedule needs a multiple "
             "of pp (" +
             std::to_string(p.pp) + "), got " +
             std::to_string(p.numMicroBatches);
  } else if (p.virtualStages != 1) {
    return std::string("plan.virtual_stages: ") +
           std::to_string(p.virtualStages) +
           " model chunks need the interleaved schedule, not " +
           toString(p.schedule);
  }
  return "";
}

/// Expert parallelism: a MoE model, ep dividing the experts and dp.
std::string checkExperts(const ParallelPlan &p, const ModelConfig &m) {
  if (p.ep == 1)
    return "";
  if (!m.isMoE())
    return "plan.ep: expert parallelism (ep=" + std::to_string(p.ep) +
           ") needs a mixture of experts, and " + m.name + " has no experts";
  if (m.experts % p.ep != 0)
    return "plan.ep: " + std::to_string(p.ep) + " does not divide the " +
           std::to_string(m.experts) + " experts";
  if (p.dp % p.ep != 0)
    return "plan.ep: " + std::to_string(p.ep) +
           " does not divide dp = " + std::to_string(p.dp) +
           " (the expert-parallel ranks are data-parallel ranks)";
  return "";
}

std::string checkModel(const ParallelPlan &p, const ModelConfig &m) {
  if (m.arch == Architecture::MLP)
    return "model: the cost model covers transformer models (gpt, llama), "
           "not " +
           std::string(toString(m.arch));
  if (m.heads % p.tp != 0)
    return "plan.tp: " + std::to_string(p.tp) + " does not divide the " +
           std::to_string(m.heads) + " attention heads";
  if (m.kvHeads >= p.tp ? m.kvHeads % p.tp != 0 : p.tp % m.kvHeads != 0)
    return "plan.tp: " + std::to_string(p.tp) + " and the model's kv_heads (" +
           std::to_string(m.kvHeads) + ") must divide one another";
  if (m.ffnHidden % p.tp != 0)
    return "plan.tp: " + std::to_string(p.tp) +
           " does not divide ffn_hidden (" + std::to_string(m.ffnHidden) + ")";
  int64_t chunks = int64_t(p.pp) * p.chunks();
  if (p.layersPerChunk.empty() && chunks > m.layers)
    return "plan.pp: " + std::to_string(p.pp) + " stages x " +
           std::to_string(p.chunks()) + " chunks exceed the model's " +
           std::to_string(m.layers) + " layers";
  if (!p.layersPerChunk.empty()) {
    if (int64_t(p.layersPerChunk.size()) != chunks)
      return "plan.layers_per_chunk: " +
             std::to_string(p.layersPerChunk.size()) + " entries for " +
             std::to_string(chunks) + " pipeline chunks (pp x chunks)";
    // The first and last chunk may hold only the embedding or only the
    // output layer and loss (Llama 3's pipeline, Dubey et al. 2024, 3.3.2).
    int64_t sum = 0;
    for (size_t i = 0; i < p.layersPerChunk.size(); ++i) {
      int n = p.layersPerChunk[i];
      bool end = i == 0 || i + 1 == p.layersPerChunk.size();
      if (n < (end && chunks > 1 ? 0 : 1))
        return "plan.layers_per_chunk[" + std::to_string(i) +
               "]: every chunk but the first and the last needs at least one "
               "layer, got " +
               std::to_string(n);
      sum += n;
    }
    if (sum != m.layers)
      return "plan.layers_per_chunk: the chunks hold " + std::to_string(sum) +
             " layers, the model has " + std::to_string(m.layers);
  }
  if (!p.recomputePerStage.empty() &&
      int64_t(p.recomputePerStage.size()) != p.pp)
    return "plan.recompute_per_stage: " +
           std::to_string(p.recomputePerStage.size()) + " entries for " +
           std::to_string(p.pp) + " pipeline stages";
  if (std::string err = checkExperts(p, m); !err.empty())
    return err;
  int64_t cpSplit = p.cp > 1 ? (p.cpBalanced ? 2 : 1) * p.cp : 1;
  if (m.seqLen % cpSplit != 0)
    return "plan.cp: the sequence length " + std::to_string(m.seqLen) +
           (p.cpBalanced
                ? " must be divisible by 2 x cp = " + std::to_string(cpSplit) +
                      " (the load-balanced layout: rank r holds chunks r and "
                      "2cp-1-r)"
                : " must be divisible by cp = " + std::to_string(cpSplit) +
                      " (the contiguous layout)");
  return "";
}

} // namespace

std::string validatePlan(const ParallelPlan &p, const ModelConfig &m,
                         const ClusterSpec &cluster) {
  if (std::string err = checkSizes(p); !err.empty())
    return err;
  if (std::string err = m.validate(); !err.empty())
    return "model: " + err;
  if (std::string err = checkModel(p, m); !err.empty())
    return err;
  if (std::string err = cluster.validate(); !err.empty())
    return err;
  if (p.numGpus() > cluster.numGpus())
    return "plan: tp x pp x dp x cp = " + std::to_string(p.numGpus()) +
           " GPUs, but the cluster has " + std::to_string(cluster.numGpus());
  if (cluster.gpu.peakFlops(p.dtype) <= 0)
    return std::string("plan.dtype: ") + toString(p.dtype) +
           " is not supported by " + cluster.gpu.name + " (no peak rate)";
  return "";
}

std::string describe(const ParallelPlan &p) {
  std::ostringstream os;
  os << "tp=" << p.tp << " pp=" << p.pp << " dp=" << p.dp;
  if (p.ep > 1)
    os << " ep=" << p.ep;
  os << " cp=" << p.cp << (p.cp > 1 && !p.cpBalanced ? " contiguous" : "")
     << (p.sequenceParallel ? " sp" : "") << " mbs=" << p.microBatchSize
     << " m=" << p.numMicroBatches << " " << toString(p.schedule);
  if (p.schedule == Schedule::Interleaved1F1B)
    os << "(v=" << p.virtualStages << ")";
  os << " zero=" << p.zeroStage << " recompute=";
  if (p.recomputePerStage.empty())
    os << toString(p.recompute);
  for (size_t i = 0; i < p.recomputePerStage.size(); ++i)
    os << (i ? "," : "") << toString(p.recomputePerStage[i]);
  os << " " << toString(p.dtype) << " attention=" << toString(p.attention);
  if (!p.layersPerChunk.empty()) {
    os << " layers=";
    for (size_t i = 0; i < p.layersPerChunk.size(); ++i)
      os << (i ? "," : "") << p.layersPerChunk[i];
  }
  return os.str();
}

} // namespace cleave::cost
