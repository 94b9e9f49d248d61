//===- ModelZoo.h - MLP, GPT and Llama programs from a config ---*- C++ -*-===//

#ifndef CLEAVE_MODELS_MODELZOO_H
#define CLEAVE_MODELS_MODELZOO_H

#include "cleave/ModelConfig/ModelConfig.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir::cleave {

/// Builds a module holding `func.func @forward(params..., inputs...) ->
/// tensor<f32>` (the mean cross-entropy loss) for `config`. Parameters are
/// f32 master weights, cast to the config's compute dtype where used.
/// Inputs: "tokens" and "targets" ([batch, seq] i32) for GPT and Llama,
/// "features" ([batch, hidden] in the compute dtype) and "labels" ([batch]
/// i32) for the MLP, and "seed" (i64 scalar) when dropout > 0.
/// Returns null and sets `error` if the config is invalid. Weights are never
/// materialized, so the largest presets build in milliseconds.
OwningOpRef<ModuleOp> buildModel(MLIRContext *context,
                                 const ::cleave::ModelConfig &config,
                                 std::string &error);

} // namespace mlir::cleave

#endif // CLEAVE_MODELS_MODELZOO_H
