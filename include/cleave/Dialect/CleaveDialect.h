//===- CleaveDialect.h - The cleave dialect ---------------------*- C++ -*-===//

#ifndef CLEAVE_DIALECT_CLEAVEDIALECT_H
#define CLEAVE_DIALECT_CLEAVEDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "cleave/Dialect/CleaveDialect.h.inc"
#include "cleave/Dialect/CleaveEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "cleave/Dialect/CleaveAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "cleave/Dialect/CleaveTypes.h.inc"

#endif // CLEAVE_DIALECT_CLEAVEDIALECT_H
