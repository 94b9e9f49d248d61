//===- DTypeTable.h - The runtime's element types as a table ----*- C++ -*-===//
//
// The entries of DTypes.def as a constexpr table, with lookups by code, by
// MLIR spelling and by tensor-file name. Plain C++17, no LLVM/MLIR: the
// runtime, the compiler (cleave/Conversion/RuntimeDType.h maps MLIR types
// onto it) and the tools all read this one table.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_DTYPETABLE_H
#define CLEAVE_RUNTIME_DTYPETABLE_H

#include "cleave/Runtime/Runtime.h"

#include <cstdint>
#include <string_view>

namespace cleave::rt {

/// One element type of the runtime ABI (a row of DTypes.def).
struct DTypeInfo {
  /// The ABI code (cleave_dtype_t).
  int32_t code;
  /// The MLIR builtin type's spelling: "f32", "bf16", "i64", ...
  std::string_view name;
  /// The safetensors dtype in tensor files: "F32", "BF16", "I64", ...
  std::string_view fileName;
  /// Bytes per element.
  int64_t bytes;
  /// Floating point (true) or signless integer (false).
  bool isFloat;
  /// Bit width.
  unsigned bits;
};

/// Every element type of the ABI, in code order.
inline constexpr DTypeInfo kDTypeTable[] = {
#define CLEAVE_DTYPE(ENUM, CODE, NAME, FILE_NAME, BYTES, IS_FLOAT, BITS)       \
  {CODE, NAME, FILE_NAME, BYTES, IS_FLOAT != 0, BITS},
#include "cleave/Runtime/DTypes.def"
};

constexpr bool dtypeTableInCodeOrder() {
  int32_t next = 0;
  for (const DTypeInfo &info : kDTypeTable)
    if (info.code != next++)
      return false;
  return true;
}
static_assert(dtypeTableInCodeOrder(),
              "DTypes.def lists the codes 0, 1, 2, ... in order");

/// The entry of `code`, or null for an unknown code.
constexpr const DTypeInfo *lookupDType(int32_t code) {
  for (const DTypeInfo &info : kDTypeTable)
    if (info.code == code)
      return &info;
  return nullptr;
}

/// The entry whose MLIR spelling is `name` ("bf16"), or null.
constexpr const DTypeInfo *lookupDTypeByName(std::string_view name) {
  for (const DTypeInfo &info : kDTypeTable)
    if (info.name == name)
      return &info;
  return nullptr;
}

/// The entry whose tensor-file name is `fileName` ("BF16"), or null.
constexpr const DTypeInfo *lookupDTypeByFileName(std::string_view fileName) {
  for (const DTypeInfo &info : kDTypeTable)
    if (info.fileName == fileName)
      return &info;
  return nullptr;
}

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_DTYPETABLE_H
