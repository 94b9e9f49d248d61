//===- BundleInfo.cpp - What bundle.json says -----------------------------===//

#include "BundleInfo.h"
#include <fstream>
#include <sstream>

using namespace cleave::bundle;
using nlohmann::json;

static llvm::Error bundleError(const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<BundleInfo> BundleInfo::read(const std::string &dir) {
  std::string file = dir + "/bundle.json";
  std::ifstream in(file);
  if (!in)
    return bundleError(file + ": cannot read it (is " + dir +
                       " a bundle written by cleave-run --emit-bundle?)");
  std::stringstream text;
  text << in.rdbuf();
  BundleInfo b;
  b.dir = dir;
  try {
    b.root = json::parse(text.str());
    const json &j = b.root;
    if (j.value("format", "") != "cleave-bundle")
      return bundleError(file + ": not a cleave bundle manifest (format)");
    if (j.value("version", 0) != 1)
      return bundleError(file + ": version " +
                         std::to_string(j.value("version", 0)) +
                         " is not the version 1 this runner reads");
    b.backend = j.at("backend").get<std::string>();
    for (auto &[name, path] : j.at("builds").items())
      b.builds[name] = b.resolve(path.get<std::string>());
    b.world = j.at("world").get<int>();
    b.plan = j.value("plan", "");
    b.mesh = j.value("mesh", "");
    b.chip = j.value("chip", "");
    const json &data = j.at("data");
    b.dataKind = data.at("kind").get<std::string>();
    b.dataFile = b.resolve(data.at("file").get<std::string>());
    if (data.contains("val_file"))
      b.valFile = b.resolve(data["val_file"].get<std::string>());
    b.tokenBytes = data.value("token_bytes", 2);
    b.vocab = data.value("vocab", int64_t(-1));
    if (j.contains("params") && j["params"].is_string())
      b.paramsFile = b.resolve(j["params"].get<std::string>());
    b.tokensPerStep = j.value("tokens_per_step", int64_t(0));
    if (j.contains("model"))
      b.dtype = j["model"].value("dtype", "");
  } catch (const json::exception &e) {
    return bundleError(file + ": " + e.what());
  }
  return b;
}

std::string BundleInfo::resolve(const std::string &relative) const {
  if (relative.empty() || relative[0] == '/')
    return relative;
  return dir + "/" + relative;
}

const json *BundleInfo::predictionFor(const std::string &gpuName) const {
  if (!root.contains("predictions"))
    return nullptr;
  const json &p = root["predictions"];
  const char *key = gpuName.find("H200") != std::string::npos   ? "dgx-h200"
                    : gpuName.find("H100") != std::string::npos ? "dgx-h100"
                    : gpuName.find("A100") != std::string::npos
                        ? "dgx-a100-80gb"
                        : nullptr;
  if (!key || !p.contains(key))
    return nullptr;
  return &p[key];
}
