//===- Defaults.h - What the planning tools assume when not told -*- C++
//-*-===//
//
// The defaults that cleave-plan, cleave-estimate, the cleave-auto-shard and
// cleave-estimate passes and the libraries share, and the words their
// `--help` uses for the options they have in common. Header only, no
// dependencies. The pass options in Transforms/Passes.td take their
// defaults from DefaultValues.h (macros only, so that Passes.h declares no
// namespace) and repeat these words (test/Tools/help-words.mlir checks that
// every tool's `--help` agrees).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_DEFAULTS_H
#define CLEAVE_COSTMODEL_DEFAULTS_H

#include "cleave/CostModel/DefaultValues.h"

namespace cleave::cost {

inline constexpr const char kDefaultCluster[] = CLEAVE_DEFAULT_CLUSTER;
inline constexpr double kDefaultMemoryHeadroom = CLEAVE_DEFAULT_MEMORY_HEADROOM;

/// `--help` words for the options the tools share.
namespace help {
inline constexpr const char kClusterPresets[] =
    "Cluster preset (" CLEAVE_CLUSTER_PRESETS ")";
inline constexpr const char kClusterForPlanning[] =
    "Cluster preset (" CLEAVE_CLUSTER_PRESETS
    "), local-cpu, or a JSON cluster file (default: " CLEAVE_DEFAULT_CLUSTER
    ")";
inline constexpr const char kClusterForEstimate[] =
    "Cluster preset (" CLEAVE_CLUSTER_PRESETS
    ") (default: " CLEAVE_DEFAULT_CLUSTER ")";
inline constexpr const char kHeadroom[] =
    "Fraction of device memory kept free (default: " CLEAVE_DEFAULTS_TEXT(
        CLEAVE_DEFAULT_MEMORY_HEADROOM) ")";
} // namespace help

} // namespace cleave::cost

#endif // CLEAVE_COSTMODEL_DEFAULTS_H
