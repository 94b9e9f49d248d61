//===- Manifest.h - What a compiled function expects ------------*- C++ -*-===//
//
// The ABI of a compiled function, read from its tensor-level signature
// before lowering: every buffer the entry point `cleave_entry_<f>(void **)`
// takes, in order (arguments, then results as out-parameters), with its role,
// name, shape, element type and, for parameters, how to initialize it. Hosts
// (cleave-run, front-ends) allocate and fill buffers from it; AOT objects
// embed it as JSON.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_EXECUTION_MANIFEST_H
#define CLEAVE_EXECUTION_MANIFEST_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::cleave {

/// The forward-only step that computes a validation loss
/// (RankCompileOptions::evalStep).
inline constexpr llvm::StringLiteral kEvalStepName = "eval_step";

struct BufferSpec {
  enum class Role { Param, State, Input, Output };
  Role role = Role::Input;
  std::string name;
  std::vector<int64_t> shape;
  /// A cleave_dtype_t code (Runtime.h).
  int32_t dtype = 0;
  /// For parameters: a cleave_init_t code and its scale.
  int32_t init = 0;
  double initScale = 0.0;
  /// For per-device programs: per dimension, the mesh axes (indices into
  /// MeshSpec::axes, major first) splitting the global tensor whose block
  /// this buffer holds. Empty, or all dimensions empty: the whole tensor.
  std::vector<std::vector<int64_t>> layout;
  /// For integer inputs that index something (class labels, embedding
  /// ids): every value must be in [0, idLimit), or equal `ignoreIndex`
  /// where every use ignores it (cross_entropy's ignore_index). 0: no limit.
  int64_t idLimit = 0;
  std::optional<int64_t> ignoreIndex;

  /// Elements and bytes of this (per-device) buffer.
  int64_t numElements() const;
  int64_t numBytes() const;
  /// True if the buffer holds a block of a larger tensor.
  bool isSplit() const;
};

/// The device mesh of a per-device program: axis names and sizes, ranks
/// laid out row-major (last axis fastest).
struct MeshSpec {
  std::vector<std::string> axes;
  std::vector<int64_t> shape;

  int64_t numDevices() const;
  /// The coordinates of `rank` on every axis.
  std::vector<int64_t> coordinates(int64_t rank) const;
  /// "dp=2, tp=2".
  std::string toString() const;
};

struct FunctionSpec {
  std::string name;
  std::vector<BufferSpec> buffers;

  /// Index of the first buffer with `role` and `name`, or -1.
  int64_t find(BufferSpec::Role role, llvm::StringRef name) const;
};

/// A pipelined program (cleave-pipeline): a device runs the stage function
/// of its coordinate on the pipeline axis.
struct PipelineSpec {
  /// Index of the pipeline axis in MeshSpec::axes.
  int64_t axis = 0;
  /// The training step's stage functions, by coordinate.
  std::vector<std::string> stages;
  /// Further pipelined steps (e.g. the evaluation step): their stage
  /// functions, by coordinate.
  std::map<std::string, std::vector<std::string>> entries;

  /// The stage functions of `step`, or null if `step` is not pipelined.
  const std::vector<std::string> *stagesOf(llvm::StringRef step) const;
};

struct ProgramManifest {
  std::vector<FunctionSpec> functions;
  /// Set for per-device programs (after cleave-partition).
  std::optional<MeshSpec> mesh;
  /// The communicator groups generated code uses: for each group id, the
  /// mesh axes (indices, major first) it spans.
  std::vector<std::vector<int64_t>> groups;
  /// Set for pipelined programs.
  std::optional<PipelineSpec> pipeline;

  const FunctionSpec *lookup(llvm::StringRef name) const;
  /// The name of the function `rank` runs for the step `step`: the stage
  /// function of its pipeline coordinate in a pipelined program, else
  /// `step` itself.
  std::string entryFor(llvm::StringRef step, int64_t rank) const;
  /// The functions of every pipeline stage, or of `step` alone.
  std::vector<const FunctionSpec *> stepFunctions(llvm::StringRef step) const;
  /// The manifest as JSON text (nlohmann-json, as everywhere in Cleave).
  std::string toJSON() const;
  /// Parses a manifest; errors name the field.
  static llvm::Expected<ProgramManifest> fromJSON(llvm::StringRef text);
};

llvm::StringRef stringifyRole(BufferSpec::Role role);

/// Reads the manifest of every public function with a body in `module`
/// (tensor level, before lowering). Fails with a diagnostic on a signature
/// the host cannot drive (dynamic shapes, unsupported element types).
FailureOr<ProgramManifest> extractManifest(ModuleOp module);

/// Reads the `cleave.pipeline` attribute of `module` (if any) into
/// `manifest.pipeline`; fails naming the problem when its axis is not a
/// mesh axis or a stage function is missing or not public.
LogicalResult extractPipeline(ModuleOp module, ProgramManifest &manifest);

/// Reads the `cleave.groups` attribute that cleave-lower-collectives leaves
/// on `module` into `manifest.groups`.
LogicalResult extractGroups(ModuleOp module, ProgramManifest &manifest);

/// The global shape of a buffer of a per-device program.
std::vector<int64_t> globalShape(const BufferSpec &buffer,
                                 const MeshSpec &mesh);

} // namespace mlir::cleave

#endif // CLEAVE_EXECUTION_MANIFEST_H
