//===- MeshCost.cpp - Mesh axes priced on a cluster's links ---------------===//

#include "cleave/Transforms/MeshCost.h"
#include "cleave/CostModel/Constants.h"
#include "cleave/Planner/AutoShard.h"

using namespace mlir;
using namespace mlir::cleave;
namespace cost = ::cleave::cost;

bool mlir::cleave::isIntraNodeLink(LinkKind link) {
  return link == LinkKind::NVLink || link == LinkKind::PCIe ||
         link == LinkKind::Host;
}

cost::GroupPlacement mlir::cleave::placeAxes(MeshOp mesh,
                                             ArrayRef<StringRef> axes) {
  cost::GroupPlacement g;
  for (StringRef name : axes) {
    int64_t size = mesh.getAxisSize(name);
    (isIntraNodeLink(mesh.getAxisLink(name)) ? g.ranksPerNode : g.nodes) *=
        int(size);
  }
  g.size = g.ranksPerNode * g.nodes;
  g.span = g.nodes;
  return g;
}

cost::Result<cost::ClusterSpec>
mlir::cleave::clusterForModule(ModuleOp module, const std::string &preset,
                               const std::string &file, int nodes) {
  if (!file.empty())
    return cost::loadClusterFile(file);
  if (preset == "local-cpu") {
    // This machine's processes, one per device of the largest mesh (a
    // pipelined plan's micro-batch axis "mb" is no devices).
    int64_t devices = 1;
    module.walk([&](MeshOp mesh) {
      int64_t n = mesh.getNumDevices();
      if (std::optional<unsigned> mb = mesh.getAxisIndex("mb"))
        n /= std::max<int64_t>(1, mesh.getShape()[*mb]);
      devices = std::max(devices, n);
    });
    auto pc = ::cleave::planner::resolveCluster(preset, int(devices));
    if (!pc)
      return cost::Result<cost::ClusterSpec>::failure(pc.error());
    return pc->spec;
  }
  if (nodes > 0)
    return cost::lookupClusterPreset(preset, nodes);
  // A first lookup learns the preset's GPUs per node.
  cost::Result<cost::ClusterSpec> one = cost::lookupClusterPreset(preset, 1);
  if (!one)
    return one;
  int64_t perNode = std::max(1, one->gpusPerNode), need = 1;
  module.walk([&](MeshOp mesh) {
    int64_t across = 1;
    for (Attribute name : mesh.getAxisNames()) {
      StringRef axis = cast<StringAttr>(name).getValue();
      if (!isIntraNodeLink(mesh.getAxisLink(axis)))
        across *= mesh.getAxisSize(axis);
    }
    need = std::max(
        {need, across, (mesh.getNumDevices() + perNode - 1) / perNode});
  });
  return cost::lookupClusterPreset(preset, int(need));
}

double mlir::cleave::reshardStepTime(const ReshardStep &step, MeshOp mesh,
                                     const cost::ClusterSpec &cluster) {
  std::optional<cost::CollectiveKind> kind;
  switch (step.kind) {
  case ReshardStep::Kind::AllReduce:
    kind = cost::CollectiveKind::AllReduce;
    break;
  case ReshardStep::Kind::ReduceScatter:
    kind = cost::CollectiveKind::ReduceScatter;
    break;
  case ReshardStep::Kind::AllGather:
    kind = cost::CollectiveKind::AllGather;
    break;
  case ReshardStep::Kind::AllToAll:
    kind = cost::CollectiveKind::AllToAll;
    break;
  case ReshardStep::Kind::Shard:
    return 0;
  }
  return cost::collectiveCost(*kind, double(step.bufferBytes),
                              placeAxes(mesh, step.axes), cluster,
                              cost::defaultConstants())
      .time;
}
