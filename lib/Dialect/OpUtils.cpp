//===- OpUtils.cpp - Helpers shared by op verifiers and rules -------------===//

#include "OpUtils.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::cleave;

std::string mlir::cleave::formatShape(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(shape, os);
  os << "]";
  return s;
}

LogicalResult mlir::cleave::inferError(std::optional<Location> loc,
                                       const Twine &message) {
  return emitOptionalError(loc, message);
}

LogicalResult mlir::cleave::verifyDimList(std::optional<Location> loc,
                                          StringRef op, StringRef attr,
                                          ArrayRef<int64_t> dims,
                                          int64_t rank) {
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d < 0 || d >= rank)
      return inferError(loc, "'cleave." + op + "' op " + attr + "[" + Twine(i) +
                                 "] = " + Twine(d) +
                                 " is out of range for an operand of rank " +
                                 Twine(rank));
    if (i > 0 && dims[i - 1] >= d)
      return inferError(loc, "'cleave." + op + "' op " + attr +
                                 " must be strictly increasing, got " +
                                 formatShape(dims));
  }
  return success();
}

void mlir::cleave::addAlignedFactors(ShardingRule &rule,
                                     ArrayRef<int64_t> operandStart,
                                     ArrayRef<int64_t> resultStart,
                                     ArrayRef<int64_t> sizes, FactorKind kind) {
  auto shift = [](ArrayRef<int64_t> start, int64_t by) {
    SmallVector<int64_t> dims;
    for (int64_t s : start)
      dims.push_back(s == ShardingRule::kNoDim ? s : s + by);
    return dims;
  };
  for (auto [i, size] : llvm::enumerate(sizes))
    rule.addFactor(shift(operandStart, i), shift(resultStart, i), size, kind);
}

int64_t mlir::cleave::productOf(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}
