//===- ClusterJson.cpp - Cluster specs from and to JSON -------------------===//
//
// The file format is documented in docs/cost-model.md. Human units in the
// file (GB, TB/s, Gb/s for NICs as vendors quote them, microseconds); SI
// units inside. Every error names the field by its path from "cluster".
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Cluster.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

using nlohmann::json;

namespace cleave::cost {
namespace {

enum class Check { Positive, NonNegative, Fraction, AtLeastOne };

const char *describe(Check check) {
  switch (check) {
  case Check::Positive:
    return "a positive number";
  case Check::NonNegative:
    return "a number >= 0";
  case Check::Fraction:
    return "a number in (0, 1]";
  case Check::AtLeastOne:
    return "a number >= 1";
  }
  return "a number";
}

bool passes(Check check, double v) {
  switch (check) {
  case Check::Positive:
    return v > 0;
  case Check::NonNegative:
    return v >= 0;
  case Check::Fraction:
    return v > 0 && v <= 1;
  case Check::AtLeastOne:
    return v >= 1;
  }
  return false;
}

/// Reads the fields of one JSON object, remembering the first error. When
/// `required` is false (the file names a base preset), absent fields keep
/// the value they already have.
class ObjectReader {
public:
  ObjectReader(const json &object, std::string path, bool required,
               std::string &error)
      : object(object), path(std::move(path)), required(required),
        error(error) {
    if (error.empty() && !object.is_object())
      fail("", "expected an object, got " + object.dump());
  }

  /// Fails if the object has a key not in `known`.
  void onlyKeys(std::initializer_list<const char *> known) {
    if (!error.empty())
      return;
    for (auto it = object.begin(); it != object.end(); ++it) {
      bool ok = false;
      std::string list;
      for (const char *k : known) {
        ok |= it.key() == k;
        list += (list.empty() ? "" : ", ") + std::string(k);
      }
      if (!ok)
        return fail(it.key(), "unknown field (known fields: " + list + ")");
    }
  }

  void number(const char *key, double &out, double scale, Check check) {
    const json *v = find(key);
    if (!v)
      return;
    if (!v->is_number() || !passes(check, v->get<double>()))
      return fail(key, std::string("expected ") + describe(check) + ", got " +
                           v->dump());
    out = v->get<double>() * scale;
  }

  void integer(const char *key, int &out, Check check) {
    const json *v = find(key);
    if (!v)
      return;
    if (!v->is_number_integer() || !passes(check, v->get<double>()))
      return fail(key, std::string("expected ") +
                           (check == Check::Positive ? "a positive integer"
                                                     : "an integer >= 0") +
                           ", got " + v->dump());
    out = v->get<int>();
  }

  void boolean(const char *key, bool &out) {
    const json *v = find(key);
    if (!v)
      return;
    if (!v->is_boolean())
      return fail(key, "expected true or false, got " + v->dump());
    out = v->get<bool>();
  }

  void string(const char *key, std::string &out) {
    const json *v = find(key);
    if (!v)
      return;
    if (!v->is_string())
      return fail(key, "expected a string, got " + v->dump());
    out = v->get<std::string>();
  }

  /// The child object `key`, or nullptr if absent (an error if required).
  const json *child(const char *key) { return find(key); }
  std::string childPath(const char *key) const { return path + "." + key; }
  void fail(const std::string &key, const std::string &message) {
    if (error.empty())
      error = (key.empty() ? path : path + "." + key) + ": " + message;
  }

private:
  const json *find(const char *key) {
    if (!error.empty())
      return nullptr;
    auto it = object.find(key);
    if (it == object.end()) {
      if (required)
        fail(key, "missing (required unless \"base\" names a preset)");
      return nullptr;
    }
    return &*it;
  }

  const json &object;
  std::string path;
  bool required;
  std::string &error;
};

void readGpu(const json &j, GpuSpec &gpu, bool required, std::string &err) {
  ObjectReader r(j, "cluster.gpu", required, err);
  r.onlyKeys({"name", "peak_tflops", "hbm_gb", "hbm_tb_per_s", "sm_count",
              "gemm_efficiency", "gemm_efficiency_fp8", "memory_efficiency",
              "runtime_reserved_gb", "communicator_buffer_mb"});
  r.string("name", gpu.name);
  if (const json *peaks = r.child("peak_tflops")) {
    // Individual dtypes are optional (0 = unsupported); bf16 is checked by
    // ClusterSpec::validate.
    ObjectReader p(*peaks, r.childPath("peak_tflops"), false, err);
    p.onlyKeys({"fp32", "tf32", "bf16", "fp16", "fp8"});
    p.number("fp32", gpu.peakF32, 1e12, Check::NonNegative);
    p.number("tf32", gpu.peakTF32, 1e12, Check::NonNegative);
    p.number("bf16", gpu.peakBF16, 1e12, Check::NonNegative);
    p.number("fp16", gpu.peakF16, 1e12, Check::NonNegative);
    p.number("fp8", gpu.peakF8, 1e12, Check::NonNegative);
  }
  r.number("hbm_gb", gpu.hbmBytes, 1e9, Check::Positive);
  r.number("hbm_tb_per_s", gpu.hbmBandwidth, 1e12, Check::Positive);
  r.integer("sm_count", gpu.smCount, Check::Positive);
  r.number("gemm_efficiency", gpu.gemmEfficiency, 1, Check::Fraction);
  if (j.is_object() && j.contains("gemm_efficiency_fp8"))
    r.number("gemm_efficiency_fp8", gpu.gemmEfficiencyF8, 1, Check::Fraction);
  r.number("memory_efficiency", gpu.memoryEfficiency, 1, Check::Fraction);
  auto optional = [&](const char *key, std::optional<double> &out,
                      double scale) {
    if (!j.is_object() || !j.contains(key))
      return;
    double value = 0;
    r.number(key, value, scale, Check::NonNegative);
    out = value;
  };
  optional("runtime_reserved_gb", gpu.runtimeReservedBytes, 1e9);
  optional("communicator_buffer_mb", gpu.communicatorBufferBytes, 1e6);
}

void readIntra(const json &j, IntraNodeLink &link, bool required,
               std::string &err) {
  ObjectReader r(j, "cluster.intra_node", required, err);
  r.onlyKeys({"kind", "gb_per_s", "latency_us", "nvls"});
  std::string kind = toString(link.kind);
  r.string("kind", kind);
  if (kind == "nvswitch")
    link.kind = IntraNodeKind::NVSwitch;
  else if (kind == "nvlink-mesh")
    link.kind = IntraNodeKind::NVLinkMesh;
  else if (kind == "pcie")
    link.kind = IntraNodeKind::PCIe;
  else
    r.fail("kind", "expected \"nvswitch\", \"nvlink-mesh\" or \"pcie\", "
                   "got \"" +
                       kind + "\"");
  r.number("gb_per_s", link.bandwidth, 1e9, Check::Positive);
  r.number("latency_us", link.latency, 1e-6, Check::Positive);
  r.boolean("nvls", link.nvls);
}

void readFabric(const json &j, Fabric &f, bool required, std::string &err) {
  ObjectReader r(j, "cluster.inter_node", required, err);
  r.onlyKeys({"nics_per_node", "nic_gbit_per_s", "latency_us", "rail_optimized",
              "sharp", "pod_nodes", "oversubscription"});
  r.integer("nics_per_node", f.nicsPerNode, Check::Positive);
  r.number("nic_gbit_per_s", f.nicBandwidth, 1e9 / 8, Check::Positive);
  r.number("latency_us", f.latency, 1e-6, Check::Positive);
  r.boolean("rail_optimized", f.railOptimized);
  r.boolean("sharp", f.sharp);
  // Optional in every file.
  ObjectReader opt(j, "cluster.inter_node", false, err);
  opt.integer("pod_nodes", f.podNodes, Check::NonNegative);
  opt.number("oversubscription", f.oversubscription, 1, Check::AtLeastOne);
}

/// "measured": {"compute_capacity", "cpu_cores", "gemm": [{"m", "n", "k",
/// "gflops"}], "collectives": [{"op", "group_size", "points": [[bytes, us],
/// ...], "cpu_us": [us, ...]}]}: what cleave-measure-local-cpu measured
/// (docs/cost-model.md).
void readMeasured(const json &j, ClusterSpec &c, std::string &err) {
  ObjectReader r(j, "cluster.measured", false, err);
  r.onlyKeys({"compute_capacity", "cpu_cores", "gemm", "collectives"});
  r.number("compute_capacity", c.hostComputeCapacity, 1, Check::AtLeastOne);
  r.integer("cpu_cores", c.hostCores, Check::Positive);
  auto list = [&](const char *key) -> const json * {
    const json *v = r.child(key);
    if (v && !v->is_array()) {
      r.fail(key, "expected a list, got " + v->dump());
      return nullptr;
    }
    return v;
  };
  if (const json *gemms = list("gemm")) {
    for (size_t i = 0; i < gemms->size() && err.empty(); ++i) {
      ObjectReader g((*gemms)[i],
                     r.childPath("gemm") + "[" + std::to_string(i) + "]", true,
                     err);
      g.onlyKeys({"m", "n", "k", "gflops"});
      for (const char *key : {"m", "n", "k", "gflops"})
        if ((*gemms)[i].is_object() && !(*gemms)[i].contains(key))
          g.fail(key, "missing");
      MeasuredGemm m;
      g.number("m", m.m, 1, Check::Positive);
      g.number("n", m.n, 1, Check::Positive);
      g.number("k", m.k, 1, Check::Positive);
      g.number("gflops", m.flopsPerSecond, 1e9, Check::Positive);
      c.gpu.measuredGemms.push_back(m);
    }
  }
  const json *collectives = list("collectives");
  if (!collectives)
    return;
  for (size_t i = 0; i < collectives->size() && err.empty(); ++i) {
    std::string path =
        r.childPath("collectives") + "[" + std::to_string(i) + "]";
    ObjectReader o((*collectives)[i], path, true, err);
    o.onlyKeys({"op", "group_size", "points", "cpu_us"});
    for (const char *key : {"op", "group_size"})
      if ((*collectives)[i].is_object() && !(*collectives)[i].contains(key))
        o.fail(key, "missing");
    MeasuredCollective m;
    o.string("op", m.op);
    o.integer("group_size", m.groupSize, Check::Positive);
    if (!err.empty())
      return;
    if (m.op != "all_reduce" && m.op != "all_gather" &&
        m.op != "reduce_scatter" && m.op != "send_recv")
      return o.fail("op", "expected \"all_reduce\", \"all_gather\", "
                          "\"reduce_scatter\" or \"send_recv\", got \"" +
                              m.op + "\"");
    auto found = (*collectives)[i].find("points");
    if (found == (*collectives)[i].end() || !found->is_array())
      return o.fail("points", "expected a list of [bytes, us] points");
    const json &points = *found;
    for (size_t p = 0; p < points.size(); ++p) {
      const json &pt = points[p];
      bool ok =
          pt.is_array() && pt.size() == 2 && pt[0].is_number() &&
          pt[1].is_number() && pt[0].get<double>() > 0 &&
          pt[1].get<double>() > 0 &&
          (m.points.empty() || pt[0].get<double>() > m.points.back().first);
      if (!ok)
        return o.fail("points[" + std::to_string(p) + "]",
                      "expected [bytes, us], both positive, bytes ascending, "
                      "got " +
                          pt.dump());
      m.points.push_back({pt[0].get<double>(), pt[1].get<double>() * 1e-6});
    }
    if (m.points.empty())
      return o.fail("points", "expected at least one [bytes, us] point");
    if (auto cpu = (*collectives)[i].find("cpu_us");
        cpu != (*collectives)[i].end()) {
      bool ok = cpu->is_array() && cpu->size() == m.points.size();
      for (size_t p = 0; ok && p < cpu->size(); ++p)
        ok = (*cpu)[p].is_number() && (*cpu)[p].get<double>() >= 0;
      if (!ok)
        return o.fail("cpu_us", "expected one CPU time per point (" +
                                    std::to_string(m.points.size()) +
                                    " non-negative numbers, us), got " +
                                    cpu->dump());
      for (const json &us : *cpu)
        m.cpuSeconds.push_back(us.get<double>() * 1e-6);
    }
    c.measuredCollectives.push_back(m);
  }
}

Result<ClusterSpec> fromJson(const json &root) {
  std::string err;
  ClusterSpec c;
  bool required = true;
  if (root.is_object() && root.contains("base")) {
    const json &base = root["base"];
    if (!base.is_string())
      return Result<ClusterSpec>::failure(
          "cluster.base: expected a preset name, got " + base.dump());
    Result<ClusterSpec> preset = lookupClusterPreset(base, 1);
    if (!preset)
      return Result<ClusterSpec>::failure("cluster.base: " + preset.error());
    c = *preset;
    required = false;
  }
  ObjectReader r(root, "cluster", required, err);
  r.onlyKeys({"name", "base", "nodes", "gpus_per_node", "gpu", "intra_node",
              "inter_node", "measured"});
  ObjectReader always(root, "cluster", true, err);
  always.integer("nodes", c.nodes, Check::Positive);
  r.string("name", c.name);
  r.integer("gpus_per_node", c.gpusPerNode, Check::Positive);
  if (const json *g = r.child("gpu"))
    readGpu(*g, c.gpu, required, err);
  if (const json *i = r.child("intra_node"))
    readIntra(*i, c.intra, required, err);
  if (const json *f = r.child("inter_node"))
    readFabric(*f, c.inter, required, err);
  if (err.empty() && root.contains("measured"))
    readMeasured(root["measured"], c, err);
  if (err.empty())
    err = c.validate();
  if (!err.empty())
    return Result<ClusterSpec>::failure(err);
  return c;
}

} // namespace

Result<ClusterSpec> clusterFromJson(const std::string &text) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false,
                          /*ignore_comments=*/true);
  if (root.is_discarded())
    return Result<ClusterSpec>::failure(
        "cluster: not valid JSON (check brackets, commas and quotes)");
  return fromJson(root);
}

Result<ClusterSpec> loadClusterFile(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return Result<ClusterSpec>::failure(path + ": cannot open the file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  Result<ClusterSpec> c = clusterFromJson(buffer.str());
  if (!c)
    return Result<ClusterSpec>::failure(path + ": " + c.error());
  return c;
}

std::string clusterToJson(const ClusterSpec &c) {
  const GpuSpec &g = c.gpu;
  json j;
  j["name"] = c.name;
  j["nodes"] = c.nodes;
  j["gpus_per_node"] = c.gpusPerNode;
  j["gpu"] = {{"name", g.name},
              {"peak_tflops",
               {{"fp32", g.peakF32 / 1e12},
                {"tf32", g.peakTF32 / 1e12},
                {"bf16", g.peakBF16 / 1e12},
                {"fp16", g.peakF16 / 1e12},
                {"fp8", g.peakF8 / 1e12}}},
              {"hbm_gb", g.hbmBytes / 1e9},
              {"hbm_tb_per_s", g.hbmBandwidth / 1e12},
              {"sm_count", g.smCount},
              {"gemm_efficiency", g.gemmEfficiency},
              {"memory_efficiency", g.memoryEfficiency}};
  if (g.gemmEfficiencyF8 > 0)
    j["gpu"]["gemm_efficiency_fp8"] = g.gemmEfficiencyF8;
  if (g.runtimeReservedBytes)
    j["gpu"]["runtime_reserved_gb"] = *g.runtimeReservedBytes / 1e9;
  if (g.communicatorBufferBytes)
    j["gpu"]["communicator_buffer_mb"] = *g.communicatorBufferBytes / 1e6;
  j["intra_node"] = {{"kind", toString(c.intra.kind)},
                     {"gb_per_s", c.intra.bandwidth / 1e9},
                     {"latency_us", c.intra.latency * 1e6},
                     {"nvls", c.intra.nvls}};
  j["inter_node"] = {{"nics_per_node", c.inter.nicsPerNode},
                     {"nic_gbit_per_s", c.inter.nicBandwidth * 8 / 1e9},
                     {"latency_us", c.inter.latency * 1e6},
                     {"rail_optimized", c.inter.railOptimized},
                     {"sharp", c.inter.sharp},
                     {"pod_nodes", c.inter.podNodes},
                     {"oversubscription", c.inter.oversubscription}};
  if (c.hostComputeCapacity > 0)
    j["measured"]["compute_capacity"] = c.hostComputeCapacity;
  if (c.hostCores > 0)
    j["measured"]["cpu_cores"] = c.hostCores;
  for (const MeasuredGemm &m : g.measuredGemms)
    j["measured"]["gemm"].push_back({{"m", m.m},
                                     {"n", m.n},
                                     {"k", m.k},
                                     {"gflops", m.flopsPerSecond / 1e9}});
  for (const MeasuredCollective &m : c.measuredCollectives) {
    json points = json::array();
    for (auto [bytes, seconds] : m.points)
      points.push_back({bytes, seconds * 1e6});
    json table = {
        {"op", m.op}, {"group_size", m.groupSize}, {"points", points}};
    if (!m.cpuSeconds.empty()) {
      table["cpu_us"] = json::array();
      for (double seconds : m.cpuSeconds)
        table["cpu_us"].push_back(seconds * 1e6);
    }
    j["measured"]["collectives"].push_back(std::move(table));
  }
  return j.dump(2);
}

} // namespace cleave::cost
