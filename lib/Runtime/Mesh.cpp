//===- Mesh.cpp - Device meshes and the groups along their axes -----------===//

#include "Mesh.h"
#include "Error.h"

#include <set>

namespace cleave::rt {

Mesh::Mesh(std::vector<int64_t> shapeIn, std::vector<std::string> namesIn,
           int worldSize)
    : shape(std::move(shapeIn)), names(std::move(namesIn)) {
  require(!shape.empty(), "a mesh needs at least one axis");
  if (names.empty())
    for (size_t i = 0; i < shape.size(); ++i)
      names.push_back(std::to_string(i));
  require(names.size() == shape.size(), "one name per mesh axis is needed");
  std::set<std::string> seen;
  int64_t product = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    require(shape[i] >= 1, "mesh axis ", i, " ('", names[i], "') has size ",
            shape[i]);
    require(!names[i].empty(), "mesh axis ", i, " has an empty name");
    require(seen.insert(names[i]).second, "mesh axis name '", names[i],
            "' is repeated");
    product *= shape[i];
    require(product <= worldSize,
            "the mesh has more devices than the world size ", worldSize);
  }
  require(product == worldSize, "the mesh has ", product,
          " devices but the world size is ", worldSize);
}

std::vector<int64_t> Mesh::coordinates(int rank) const {
  std::vector<int64_t> coords(shape.size());
  int64_t rest = rank;
  for (size_t i = shape.size(); i-- > 0;) {
    coords[i] = rest % shape[i];
    rest /= shape[i];
  }
  return coords;
}

int Mesh::worldRank(const std::vector<int64_t> &coords) const {
  int64_t rank = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    rank = rank * shape[i] + coords[i];
  return int(rank);
}

Mesh::Group Mesh::groupAlong(const std::vector<int64_t> &axes, int rank) const {
  require(defined(), "no mesh is defined (call cleave_rt_define_mesh first)");
  std::vector<bool> used(shape.size(), false);
  Group group;
  group.axesText = "mesh axes [";
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = axes[i];
    require(axis >= 0 && axis < int64_t(shape.size()), "axis ", axis,
            " is not an axis of the ", shape.size(), "-d mesh");
    require(!used[axis], "axis ", axis, " ('", names[axis],
            "') is given twice");
    used[axis] = true;
    group.axesText += (i ? "," : "") + names[axis];
  }
  group.axesText += "]";
  std::vector<int64_t> mine = coordinates(rank);
  // The color: row-major index over the axes not in the group.
  for (size_t i = 0; i < shape.size(); ++i)
    if (!used[i])
      group.color = group.color * shape[i] + mine[i];
  // Members: row-major over `axes` in the order given.
  int64_t size = 1;
  for (int64_t axis : axes)
    size *= shape[axis];
  std::vector<int64_t> coords = mine;
  for (int64_t index = 0; index < size; ++index) {
    int64_t rest = index;
    for (size_t i = axes.size(); i-- > 0;) {
      coords[axes[i]] = rest % shape[axes[i]];
      rest /= shape[axes[i]];
    }
    int member = worldRank(coords);
    if (member == rank)
      group.groupRank = int(index);
    group.members.push_back(member);
  }
  return group;
}

} // namespace cleave::rt
