//===- MeshCost.h - Mesh axes priced on a cluster's links -------*- C++ -*-===//
//
// The bridge between a cleave.mesh and the cost model (lib/CostModel): the
// communicator group a set of mesh axes forms (axes on `nvlink`, `pcie` or
// `host` links stay inside a node, `ib`, `roce` and `ethernet` axes cross
// nodes), the cluster a pass prices on (a JSON file, or a preset with enough
// nodes for the module's meshes) and the time of one resharding step. Used
// by cleave-estimate and by cleave-partition, which picks the resharding
// sequence of least time.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_MESHCOST_H
#define CLEAVE_TRANSFORMS_MESHCOST_H

#include "cleave/CostModel/Collective.h"
#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Sharding/Reshard.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::cleave {

/// Whether a mesh axis on `link` keeps its group inside a node.
bool isIntraNodeLink(LinkKind link);

/// Where the members of a group over `axes` of `mesh` sit: the sizes of
/// intra-node axes multiply the members per node, the others the nodes.
::cleave::cost::GroupPlacement placeAxes(MeshOp mesh,
                                         llvm::ArrayRef<llvm::StringRef> axes);

/// The cluster to price `module` on: the JSON cluster `file` if given, else
/// the `preset` with `nodes` nodes (0: enough nodes of the preset's GPUs
/// for every mesh, and at least as many as the mesh's axes across nodes
/// span); `local-cpu`: one process of this machine per device of the
/// largest mesh (planner::resolveCluster, measured when
/// CLEAVE_LOCAL_CPU_SPEC names a spec). Errors name the preset or the
/// file's field.
::cleave::cost::Result<::cleave::cost::ClusterSpec>
clusterForModule(ModuleOp module, const std::string &preset,
                 const std::string &file, int nodes);

/// Seconds that `step` takes on `cluster` (the collective model on the
/// group its axes form; 0 for a local slice).
double reshardStepTime(const ReshardStep &step, MeshOp mesh,
                       const ::cleave::cost::ClusterSpec &cluster);

} // namespace mlir::cleave

#endif // CLEAVE_TRANSFORMS_MESHCOST_H
