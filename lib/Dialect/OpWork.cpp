//===- OpWork.cpp - Local shapes and the work they make -------------------===//

#include "cleave/Dialect/OpWork.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::cleave;

double TensorShape::elements() const {
  double n = 1;
  for (int64_t d : dims)
    n *= double(d);
  return n;
}

static TensorShape shapeOf(Type type) {
  TensorShape s;
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return s;
  s.dims.assign(tensor.getShape().begin(), tensor.getShape().end());
  Type elem = tensor.getElementType();
  s.isFloat = isa<FloatType>(elem);
  if (elem.isIntOrFloat())
    s.elementBytes = double((elem.getIntOrFloatBitWidth() + 7) / 8);
  return s;
}

OpShapes OpShapes::of(Operation *op) {
  OpShapes s;
  for (Type t : op->getOperandTypes())
    s.operands.push_back(shapeOf(t));
  for (Type t : op->getResultTypes())
    s.results.push_back(shapeOf(t));
  return s;
}

OpShapes &OpShapes::setFloatBytes(double bytes) {
  for (auto *list : {&operands, &results})
    for (TensorShape &t : *list)
      if (t.isFloat)
        t.elementBytes = bytes;
  return *this;
}

double OpShapes::operandBytes() const {
  double b = 0;
  for (const TensorShape &t : operands)
    b += t.bytes();
  return b;
}

double OpShapes::resultBytes() const {
  double b = 0;
  for (const TensorShape &t : results)
    b += t.bytes();
  return b;
}

OpWork mlir::cleave::streamingWork(const OpShapes &s, double flops,
                                   bool fusable) {
  OpWork w;
  w.kind = WorkKind::Vector;
  w.vectorFlops = flops;
  w.bytesRead = s.operandBytes();
  w.bytesWritten = s.resultBytes();
  w.fusable = fusable;
  return w;
}

OpWork mlir::cleave::elementwiseWork(const OpShapes &s) {
  double n = 0;
  for (const TensorShape &t : s.results)
    n += t.elements();
  return streamingWork(s, n, /*fusable=*/true);
}

OpWork mlir::cleave::noWork() { return OpWork(); }
