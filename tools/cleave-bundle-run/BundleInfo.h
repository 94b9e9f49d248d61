//===- BundleInfo.h - What bundle.json says -----------------------*- C++
//-*-===//
//
// The manifest of a bundle (written by cleave-run --emit-bundle,
// lib/Execution/Bundle.cpp) as the runner reads it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TOOLS_BUNDLEINFO_H
#define CLEAVE_TOOLS_BUNDLEINFO_H

#include "llvm/Support/Error.h"
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace cleave::bundle {

struct BundleInfo {
  std::string dir;
  nlohmann::json root;
  std::string backend;
  /// Backend -> absolute path of its compiled step.
  std::map<std::string, std::string> builds;
  int world = 1;
  std::string plan, mesh, chip;
  /// "text", "tokens" or "inputs", and the file (absolute).
  std::string dataKind, dataFile, valFile, paramsFile;
  int tokenBytes = 2;
  int64_t vocab = -1;
  int64_t tokensPerStep = 0;
  std::string dtype;

  /// Reads DIR/bundle.json; errors name the file and the field.
  static llvm::Expected<BundleInfo> read(const std::string &dir);
  /// A path of the bundle made absolute (absolute paths stay).
  std::string resolve(const std::string &relative) const;
  /// The prediction for the GPU named `gpuName` (as the driver names it:
  /// "NVIDIA H100 80GB HBM3"), or null.
  const nlohmann::json *predictionFor(const std::string &gpuName) const;
};

} // namespace cleave::bundle

#endif // CLEAVE_TOOLS_BUNDLEINFO_H
