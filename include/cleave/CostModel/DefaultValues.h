//===- DefaultValues.h - The shared defaults as macros ----------*- C++ -*-===//
//
// The values behind Defaults.h as preprocessor macros: Transforms/Passes.td
// names them as pass-option defaults, and Passes.h includes this header,
// which declares nothing else (no namespace, no dependency).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_DEFAULTVALUES_H
#define CLEAVE_COSTMODEL_DEFAULTVALUES_H

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

#endif // CLEAVE_COSTMODEL_DEFAULTVALUES_H
