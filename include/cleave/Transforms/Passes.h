//===- Passes.h - Cleave passes ---------------------------------*- C++ -*-===//

#ifndef CLEAVE_TRANSFORMS_PASSES_H
#define CLEAVE_TRANSFORMS_PASSES_H

#include "cleave/CostModel/DefaultValues.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::cleave {

#define GEN_PASS_DECL
#include "cleave/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Transforms/Passes.h.inc"

} // namespace mlir::cleave

#endif // CLEAVE_TRANSFORMS_PASSES_H
