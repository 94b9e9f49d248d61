//===- ShardingRule.cpp - Factor-based sharding rules ---------------------===//

#include "cleave/Dialect/ShardingRule.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::cleave;

StringRef mlir::cleave::stringifyFactorKind(FactorKind kind) {
  switch (kind) {
  case FactorKind::PassThrough:
    return "pass-through";
  case FactorKind::Reduction:
    return "reduction";
  case FactorKind::NeedReplication:
    return "need-replication";
  }
  llvm_unreachable("unknown factor kind");
}

static int64_t rankOf(Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return tensor.getRank();
  return 0;
}

ShardingRule::ShardingRule(ArrayRef<int64_t> operandRanks,
                           ArrayRef<int64_t> resultRanks) {
  for (int64_t rank : operandRanks)
    operands.emplace_back(rank);
  for (int64_t rank : resultRanks)
    results.emplace_back(rank);
}

ShardingRule::ShardingRule(Operation *op) {
  for (Type type : op->getOperandTypes())
    operands.emplace_back(rankOf(type));
  for (Type type : op->getResultTypes())
    results.emplace_back(rankOf(type));
}

int64_t ShardingRule::addFactor(ArrayRef<int64_t> operandDims,
                                ArrayRef<int64_t> resultDims, int64_t size,
                                FactorKind kind) {
  assert(operandDims.size() == operands.size() && "one dim per operand");
  assert(resultDims.size() == results.size() && "one dim per result");
  int64_t factor = factorSizes.size();
  factorSizes.push_back(size);
  factorKinds.push_back(kind);
  for (auto [tensor, dim] : llvm::zip(operands, operandDims))
    if (dim != kNoDim)
      tensor[dim].push_back(factor);
  for (auto [tensor, dim] : llvm::zip(results, resultDims))
    if (dim != kNoDim)
      tensor[dim].push_back(factor);
  return factor;
}

ShardingRule ShardingRule::getElementwise(Operation *op) {
  ShardingRule rule(op);
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  for (int64_t d = 0, e = resultType.getRank(); d < e; ++d) {
    SmallVector<int64_t> operandDims;
    for (Type type : op->getOperandTypes())
      operandDims.push_back(rankOf(type) == e ? d : kNoDim);
    SmallVector<int64_t> resultDims;
    for (Type type : op->getResultTypes())
      resultDims.push_back(rankOf(type) == e ? d : kNoDim);
    rule.addFactor(operandDims, resultDims, resultType.getDimSize(d));
  }
  return rule;
}

LogicalResult ShardingRule::verify(Operation *op) const {
  if (operands.size() != op->getNumOperands() ||
      results.size() != op->getNumResults())
    return op->emitOpError()
           << "sharding rule describes " << operands.size() << " operands and "
           << results.size() << " results";
  auto checkTensor = [&](const TensorFactors &factors, Type type,
                         StringRef what, unsigned index) -> LogicalResult {
    if (static_cast<int64_t>(factors.size()) != rankOf(type))
      return op->emitOpError()
             << "sharding rule gives " << what << " #" << index << " "
             << factors.size() << " dimensions, but its type is " << type;
    auto tensor = dyn_cast<RankedTensorType>(type);
    for (auto [d, dimFactors] : llvm::enumerate(factors)) {
      int64_t product = 1;
      for (int64_t f : dimFactors)
        product *= factorSizes[f];
      if (product != tensor.getDimSize(d))
        return op->emitOpError()
               << "sharding rule factors of " << what << " #" << index
               << " dimension " << d << " multiply to " << product
               << ", but the dimension has size " << tensor.getDimSize(d);
    }
    return success();
  };
  for (auto [i, factors] : llvm::enumerate(operands))
    if (failed(checkTensor(factors, op->getOperand(i).getType(), "operand", i)))
      return failure();
  for (auto [i, factors] : llvm::enumerate(results))
    if (failed(checkTensor(factors, op->getResult(i).getType(), "result", i)))
      return failure();
  for (int64_t f = 0, e = getNumFactors(); f < e; ++f) {
    if (factorKinds[f] != FactorKind::PassThrough)
      continue;
    for (auto [r, factors] : llvm::enumerate(results)) {
      bool found = llvm::any_of(factors, [&](const auto &dimFactors) {
        return llvm::is_contained(dimFactors, f);
      });
      if (!found && factorSizes[f] != 1)
        return op->emitOpError()
               << "sharding rule factor #" << f
               << " is pass-through but does not appear in result #" << r;
    }
  }
  return success();
}

/// Factor names: i, j, k, ... z, then z1, z2, ...
static std::string factorName(int64_t f) {
  static const char letters[] = "ijklmnopqrstuvwxyzabcdefgh";
  if (f < 26)
    return std::string(1, letters[f]);
  return "z" + std::to_string(f - 25);
}

static void printTensor(llvm::raw_ostream &os, const TensorFactors &tensor) {
  os << "[";
  llvm::interleaveComma(tensor, os, [&](const SmallVector<int64_t, 2> &dim) {
    if (dim.empty()) {
      os << "1"; // a size-1 dimension has no factor
      return;
    }
    if (dim.size() == 1) {
      os << factorName(dim[0]);
      return;
    }
    os << "(";
    llvm::interleaveComma(dim, os, [&](int64_t f) { os << factorName(f); });
    os << ")";
  });
  os << "]";
}

std::string ShardingRule::toString() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "(";
  llvm::interleaveComma(operands, os,
                        [&](const TensorFactors &t) { printTensor(os, t); });
  os << ") -> (";
  llvm::interleaveComma(results, os,
                        [&](const TensorFactors &t) { printTensor(os, t); });
  os << ") {";
  for (int64_t f = 0, e = getNumFactors(); f < e; ++f)
    os << (f ? ", " : "") << factorName(f) << "=" << factorSizes[f];
  os << "}";
  for (FactorKind kind : {FactorKind::Reduction, FactorKind::NeedReplication}) {
    SmallVector<std::string> names;
    for (int64_t f = 0, e = getNumFactors(); f < e; ++f)
      if (factorKinds[f] == kind)
        names.push_back(factorName(f));
    if (names.empty())
      continue;
    os << " " << stringifyFactorKind(kind) << "={";
    llvm::interleaveComma(names, os);
    os << "}";
  }
  return s;
}

double mlir::cleave::countResultElements(Operation *op) {
  double n = 0;
  for (Type type : op->getResultTypes())
    if (auto tensor = dyn_cast<RankedTensorType>(type))
      n += static_cast<double>(tensor.getNumElements());
  return n;
}
