//===- ConstantsJson.cpp - Cost constants from and to JSON ----------------===//

#include "cleave/CostModel/Constants.h"

#include <nlohmann/json.hpp>

namespace cleave::cost {
namespace {

struct NumberField {
  const char *name;
  double CostConstants::*member;
};

const NumberField kNumbers[] = {
    {"kernel_overhead", &CostConstants::kernelOverhead},
    {"gemm_k_half", &CostConstants::gemmKHalf},
    {"flash_forward_ratio", &CostConstants::flashForwardRatio},
    {"flash_backward_ratio", &CostConstants::flashBackwardRatio},
    {"intra_node_bus_efficiency", &CostConstants::intraNodeBusEfficiency},
    {"inter_node_bus_efficiency", &CostConstants::interNodeBusEfficiency},
    {"nvls_efficiency", &CostConstants::nvlsEfficiency},
    {"overlap_slowdown", &CostConstants::overlapSlowdown},
    {"tp_overlap_exposed", &CostConstants::tpOverlapExposed},
    {"adam_bytes_per_param", &CostConstants::adamBytesPerParam},
    {"dp_bucket_params", &CostConstants::dpBucketParams},
    {"runtime_reserved_bytes", &CostConstants::runtimeReservedBytes},
    {"nccl_channels", &CostConstants::ncclChannels},
    {"moe_dropless_imbalance", &CostConstants::moeDroplessImbalance},
};

struct BoolField {
  const char *name;
  bool CostConstants::*member;
};

const BoolField kBools[] = {
    {"ring_rail_aggregation", &CostConstants::ringRailAggregation},
    {"p2p_synchronize", &CostConstants::p2pSynchronize},
};

} // namespace

Result<CostConstants> constantsFromJson(const std::string &text) {
  using nlohmann::json;
  json j = json::parse(text, nullptr, false, true);
  if (j.is_discarded() || !j.is_object())
    return Result<CostConstants>::failure(
        "constants: expected a JSON object of constant names to values");
  CostConstants c;
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::string key = "constants." + it.key();
    bool known = false;
    for (const NumberField &f : kNumbers) {
      if (it.key() != f.name)
        continue;
      known = true;
      if (!it->is_number() || it->get<double>() < 0)
        return Result<CostConstants>::failure(
            key + ": expected a number >= 0, got " + it->dump());
      c.*f.member = it->get<double>();
    }
    for (const BoolField &f : kBools) {
      if (it.key() != f.name)
        continue;
      known = true;
      if (!it->is_boolean())
        return Result<CostConstants>::failure(
            key + ": expected true or false, got " + it->dump());
      c.*f.member = it->get<bool>();
    }
    if (!known)
      return Result<CostConstants>::failure(key + ": unknown constant");
  }
  return c;
}

std::string constantsToJson(const CostConstants &c) {
  nlohmann::json j;
  for (const NumberField &f : kNumbers)
    j[f.name] = c.*f.member;
  for (const BoolField &f : kBools)
    j[f.name] = c.*f.member;
  return j.dump(2);
}

} // namespace cleave::cost
