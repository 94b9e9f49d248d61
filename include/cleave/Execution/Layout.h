//===- Layout.h - Blocks of global tensors on a device mesh -----*- C++ -*-===//
//
// A per-device program's parameters, state and inputs are blocks of global
// tensors (BufferSpec::layout). Hosts keep the global view: they initialize,
// load, feed and save whole tensors and move each device's block in or out
// with these helpers.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_EXECUTION_LAYOUT_H
#define CLEAVE_EXECUTION_LAYOUT_H

#include "cleave/Execution/Manifest.h"
#include <vector>

namespace mlir::cleave {

/// Where a device's block sits in the global tensor.
struct Block {
  std::vector<int64_t> offsets, sizes;
};

/// The block of `buffer`'s global tensor that `rank` holds.
Block blockOf(const BufferSpec &buffer, const MeshSpec &mesh, int64_t rank);

/// Copies `block` between a row-major global tensor of `globalShape` and a
/// dense block buffer: into the block if `intoBlock`, else back.
void copyBlock(const void *global, const std::vector<int64_t> &globalShape,
               void *block, const Block &where, int64_t elementBytes,
               bool intoBlock);

/// Copies the part of global tensor region `from` (a dense row-major block
/// at `src`) that lies in region `to` (dense at `dst`). Returns the number
/// of elements copied (0 if the regions do not meet).
int64_t copyOverlap(const void *src, const Block &from, void *dst,
                    const Block &to, int64_t elementBytes);

/// copyOverlap for a piece of `from`'s data: the bytes [begin, begin +
/// bytes) of the dense row-major block, at `piece`. Copies those of them
/// that lie in region `to` (dense at `dst`); returns how many bytes. The
/// pieces of a whole block, in any order and cut anywhere, copy what
/// copyOverlap copies.
int64_t copyOverlapPiece(const void *piece, int64_t begin, int64_t bytes,
                         const Block &from, void *dst, const Block &to,
                         int64_t elementBytes);

} // namespace mlir::cleave

#endif // CLEAVE_EXECUTION_LAYOUT_H
