//===- Directives.h - Custom assembly directives of cleave ops --*- C++ -*-===//
//
// Private to lib/Dialect: declared here because every op-definition shard
// (CleaveOpsShard*.cpp) calls them from generated parsers and printers.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_DIALECT_DIRECTIVES_H
#define CLEAVE_LIB_DIALECT_DIRECTIVES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

namespace mlir::cleave {

/// `dp = 2 : ib, tp = 4 : nvlink`
ParseResult parseMeshAxes(OpAsmParser &parser, ArrayAttr &axisNames,
                          DenseI64ArrayAttr &shape, ArrayAttr &links);
void printMeshAxes(OpAsmPrinter &printer, Operation *op, ArrayAttr axisNames,
                   DenseI64ArrayAttr shape, ArrayAttr links);

/// `[dp, tp]`
ParseResult parseAxisList(OpAsmParser &parser, ArrayAttr &axes);
void printAxisList(OpAsmPrinter &printer, Operation *op, ArrayAttr axes);

/// `[0 -> 1, 1 -> 0]`, stored flat as [src0, dst0, src1, dst1, ...].
ParseResult parsePermutePairs(OpAsmParser &parser, DenseI64ArrayAttr &pairs);
void printPermutePairs(OpAsmPrinter &printer, Operation *op,
                       DenseI64ArrayAttr pairs);

/// Optional `reduction = max`; absent means sum.
ParseResult parseReduction(OpAsmParser &parser, Attribute &reduction);
void printReduction(OpAsmPrinter &printer, Operation *op, Attribute reduction);

} // namespace mlir::cleave

#endif // CLEAVE_LIB_DIALECT_DIRECTIVES_H
