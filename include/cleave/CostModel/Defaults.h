//===- Defaults.h - What the planning tools assume when not told -*- C++
//-*-===//
//
// The defaults that cleave-plan, cleave-estimate, the cleave-auto-shard and
// cleave-estimate passes and the libraries share, and the words their
// `--help` uses for the options they have in common. Header only, no
// dependencies: Transforms/Passes.h includes it for the pass options, whose
// descriptions in Passes.td repeat these words (test/Tools/help-words.test
// checks that every tool's `--help` agrees).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_DEFAULTS_H
#define CLEAVE_COSTMODEL_DEFAULTS_H

/// The cluster preset planned and estimated for when none is named.
#define CLEAVE_DEFAULT_CLUSTER "dgx-a100-80gb"
/// The fraction of each device's memory that plans leave free; every report
/// states the headroom it used. None by default: the memory model already
/// counts the CUDA context, workspaces and allocator slack as "runtime
/// reserved" (CostConstants::runtimeReservedBytes), and the published runs
/// of bench/costmodel fit without more.
#define CLEAVE_DEFAULT_MEMORY_HEADROOM 0
/// The cluster presets (Cluster.cpp defines them).
#define CLEAVE_CLUSTER_PRESETS                                                 \
  "dgx-a100-40gb, dgx-a100-80gb, dgx-h100, dgx-h200"

#define CLEAVE_DEFAULTS_TEXT(x) CLEAVE_DEFAULTS_TEXT_(x)
#define CLEAVE_DEFAULTS_TEXT_(x) #x

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
