//===- Registration.h - Cleave's named pipelines for cleave-opt -*- C++ -*-===//

#ifndef CLEAVE_PIPELINES_REGISTRATION_H
#define CLEAVE_PIPELINES_REGISTRATION_H

namespace mlir::cleave {

/// Registers the named pipelines: `cleave-distribute` (the front half,
/// FrontHalf.h), `cleave-lower-to-cpu` and `cleave-lower-to-cuda` (the back
/// half, Lowering.h).
void registerCleavePipelines();

} // namespace mlir::cleave

#endif // CLEAVE_PIPELINES_REGISTRATION_H
