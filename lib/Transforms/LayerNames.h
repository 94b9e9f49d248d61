//===- LayerNames.h - Layer numbers in parameter names ----------*- C++ -*-===//
//
// The rule that cleave-pipeline-stages and cleave-remat share: the layer of
// a parameter is the first dot-separated component of its name that is a
// number ("h.3.attn.q.weight", "layers.3.attention.wq.weight",
// "transformer.h.3.mlp.fc.weight").
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_LAYERNAMES_H
#define CLEAVE_LIB_TRANSFORMS_LAYERNAMES_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <optional>

namespace mlir::cleave {

/// The layer number in a parameter name, if any.
inline std::optional<int64_t> layerOfParamName(llvm::StringRef name) {
  llvm::SmallVector<llvm::StringRef> parts;
  name.split(parts, '.');
  for (llvm::StringRef part : parts) {
    int64_t layer;
    if (!part.empty() && llvm::all_of(part, llvm::isDigit) &&
        !part.getAsInteger(10, layer))
      return layer;
  }
  return std::nullopt;
}

} // namespace mlir::cleave

#endif // CLEAVE_LIB_TRANSFORMS_LAYERNAMES_H
