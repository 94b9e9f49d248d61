//===- Passes.h - Cleave lowering passes ------------------------*- C++ -*-===//
//
// The passes only; the pipelines built from them are lib/Pipelines'
// (cleave/Pipelines/Lowering.h).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CONVERSION_PASSES_H
#define CLEAVE_CONVERSION_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::cleave {

#define GEN_PASS_DECL
#include "cleave/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Conversion/Passes.h.inc"

} // namespace mlir::cleave

#endif // CLEAVE_CONVERSION_PASSES_H
