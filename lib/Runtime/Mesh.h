//===- Mesh.h - Device meshes and the groups along their axes ---*- C++ -*-===//
//
// Internal to libCleaveRuntime. Pure arithmetic, no communication: which
// world ranks form this rank's group along some mesh axes, and its index.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_MESH_H
#define CLEAVE_LIB_RUNTIME_MESH_H

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::rt {

/// A device mesh: world ranks laid out row-major over `shape`.
class Mesh {
public:
  Mesh() = default;
  /// Checks and builds a mesh; throws RuntimeError naming the problem.
  /// `names` may be empty (axes are then called "0", "1", ...).
  Mesh(std::vector<int64_t> shape, std::vector<std::string> names,
       int worldSize);

  bool defined() const { return !shape.empty(); }
  int64_t rank() const { return int64_t(shape.size()); }

  /// The coordinates of world rank `rank`.
  std::vector<int64_t> coordinates(int rank) const;
  /// The world rank at `coords`.
  int worldRank(const std::vector<int64_t> &coords) const;

  /// This rank's group along `axes` (major first).
  struct Group {
    std::vector<int> members; ///< World ranks in group-rank order.
    int groupRank = 0;        ///< Index of `rank` in `members`.
    int64_t color = 0;        ///< Which of the parallel groups this is.
    std::string axesText;     ///< "mesh axes [dp,tp]".
  };
  /// Throws RuntimeError for bad axes (out of range, repeated).
  Group groupAlong(const std::vector<int64_t> &axes, int rank) const;

  std::vector<int64_t> shape;
  std::vector<std::string> names;
};

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_MESH_H
