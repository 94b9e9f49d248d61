//===- RuntimeDType.h - MLIR element types as runtime codes -----*- C++ -*-===//
//
// The compiler's side of the runtime's element-type table (DTypes.def): the
// runtime code of an MLIR element type. Lowering to runtime calls and the
// host's buffer manifest both ask it, so a type has one code everywhere.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CONVERSION_RUNTIMEDTYPE_H
#define CLEAVE_CONVERSION_RUNTIMEDTYPE_H

#include "cleave/Runtime/DTypeTable.h"
#include "mlir/IR/Types.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace mlir::cleave {

/// The runtime's entry for `type` (a builtin float or signless integer type
/// whose spelling is a row of DTypes.def), or null when the runtime has no
/// code for it.
inline const ::cleave::rt::DTypeInfo *lookupRuntimeDType(Type type) {
  if (!type.isIntOrFloat())
    return nullptr;
  std::string spelling;
  llvm::raw_string_ostream(spelling) << type;
  return ::cleave::rt::lookupDTypeByName(spelling);
}

/// The runtime's element-type code of `type`, if it has one.
inline std::optional<int32_t> runtimeDTypeCode(Type type) {
  if (const ::cleave::rt::DTypeInfo *info = lookupRuntimeDType(type))
    return info->code;
  return std::nullopt;
}

/// The element types the runtime knows, as "f32, f64, ... or i64" for
/// diagnostics.
inline std::string runtimeDTypeNames() {
  std::string names;
  size_t n = std::size(::cleave::rt::kDTypeTable);
  for (size_t i = 0; i < n; ++i)
    names += (i == 0       ? ""
              : i + 1 == n ? " or "
                           : ", ") +
             std::string(::cleave::rt::kDTypeTable[i].name);
  return names;
}

} // namespace mlir::cleave

#endif // CLEAVE_CONVERSION_RUNTIMEDTYPE_H
