//===- OpUtils.h - Helpers shared by op verifiers and rules -----*- C++ -*-===//
//
// Private to lib/Dialect.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_DIALECT_OPUTILS_H
#define CLEAVE_LIB_DIALECT_OPUTILS_H

#include "cleave/Dialect/ShardingRule.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include <string>

namespace mlir::cleave {

/// "[8, 128, 768]"
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// Emits `message` at `loc` (if any) and returns failure: the error path of
/// inferReturnTypes, which has no op to attach to.
LogicalResult inferError(std::optional<Location> loc,
                         const llvm::Twine &message);

/// Checks that `dims` is strictly increasing and inside [0, rank).
LogicalResult verifyDimList(std::optional<Location> loc, llvm::StringRef op,
                            llvm::StringRef attr, llvm::ArrayRef<int64_t> dims,
                            int64_t rank);

/// Adds one pass-through factor per dimension `d` in [first, last) of every
/// listed tensor: tensors are given by the dim that corresponds to `first`
/// (or ShardingRule::kNoDim), and walk forward together.
void addAlignedFactors(ShardingRule &rule, llvm::ArrayRef<int64_t> operandStart,
                       llvm::ArrayRef<int64_t> resultStart,
                       llvm::ArrayRef<int64_t> sizes,
                       FactorKind kind = FactorKind::PassThrough);

/// Product of `shape[begin, end)`.
int64_t productOf(llvm::ArrayRef<int64_t> shape);

} // namespace mlir::cleave

#endif // CLEAVE_LIB_DIALECT_OPUTILS_H
