//===- CleaveBase.td - Cleave dialect, enums, type constraints -*- tablegen -*-===//
//
// The `cleave` dialect: a training step with global (whole-tensor) semantics,
// device meshes and shardings, and per-device collectives.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_CLEAVEBASE_TD
#define CLEAVE_DIALECT_CLEAVEBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Cleave_Dialect : Dialect {
  let name = "cleave";
  let cppNamespace = "::mlir::cleave";
  let summary = "Distributed deep-learning training steps: model ops, meshes, "
                "shardings and collectives.";
  let description = [{
    The `cleave` dialect expresses one training step of a model.

    * **Model ops** (`cleave.matmul`, `cleave.layer_norm`, `cleave.attention`,
      ...) have *global* semantics: their operands and results are whole
      tensors, as if the program ran on one device. Each model op carries a
      factor-based sharding rule (`ShardingRuleOpInterface`) that tells the
      propagation, search, partitioning and costing passes how its dimensions
      may be split across a device mesh.
    * **Meshes** (`cleave.mesh`) name an N-d grid of devices; every axis
      records the link it runs over (NVLink, InfiniBand, ...).
    * **Shardings** (`#cleave.sharding`) say, per tensor dimension, which mesh
      axes split it and over which axes a value is a pending partial sum. They
      appear on function arguments and results (`cleave.sharding`), on ops
      (`cleave.shardings`, one per result) and in
      `cleave.sharding_constraint`.
    * **Collective ops** (`cleave.all_reduce`, `cleave.all_gather`, ...) have
      *per-device* semantics: they appear after partitioning, operate on each
      device's local tensor and name the mesh axes whose device groups
      communicate.

    Function arguments carry their role as discardable attributes:
    `cleave.param = "name"` (a trainable parameter, with an optional
    `cleave.init = #cleave.init<...>`), `cleave.state = "name"` (optimizer
    state such as `w.exp_avg`) or `cleave.input = "name"` (a data input such
    as token ids, or a scalar such as the learning rate). Results of a
    training step say what they are with `cleave.output = "name"`.

    Tensors are builtin ranked tensors with static shapes.
  }];

  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;

  let extraClassDeclaration = [{
    /// Discardable attribute names used on functions, arguments and ops.
    static constexpr ::llvm::StringLiteral kParamAttrName = "cleave.param";
    static constexpr ::llvm::StringLiteral kInitAttrName = "cleave.init";
    static constexpr ::llvm::StringLiteral kInputAttrName = "cleave.input";
    static constexpr ::llvm::StringLiteral kShardingAttrName = "cleave.sharding";
    static constexpr ::llvm::StringLiteral kShardingsAttrName =
        "cleave.shardings";
    /// On an argument: optimizer state of a parameter ("w.exp_avg").
    static constexpr ::llvm::StringLiteral kStateAttrName = "cleave.state";
    /// On a result: what it is ("w" for the new value of parameter w,
    /// "w.exp_avg", "loss", "grad:w").
    static constexpr ::llvm::StringLiteral kOutputAttrName = "cleave.output";
    /// On a module: the model it was built from (a preset name or "custom").
    static constexpr ::llvm::StringLiteral kModelAttrName = "cleave.model";
    /// On an op of a forward function: its pipeline stage (docs/plans.md).
    static constexpr ::llvm::StringLiteral kStageAttrName = "cleave.stage";
    /// On a module: the plan's non-sharding choices (docs/plans.md).
    static constexpr ::llvm::StringLiteral kPlanAttrName = "cleave.plan";
    /// On a module: the stage functions of a pipelined program.
    static constexpr ::llvm::StringLiteral kPipelineAttrName =
        "cleave.pipeline";
    /// On a partitioned module: the mesh axes of each communicator group id.
    static constexpr ::llvm::StringLiteral kGroupsAttrName = "cleave.groups";
    /// On an argument or result of a per-device function: the sharding of
    /// the global tensor whose block the value holds.
    static constexpr ::llvm::StringLiteral kLayoutAttrName = "cleave.layout";

  private:
    void registerAttributes();
  public:
  }];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Cleave_LinkKind : I32EnumAttr<"LinkKind",
    "the interconnect a mesh axis runs over", [
  I32EnumAttrCase<"NVLink", 0, "nvlink">,
  I32EnumAttrCase<"PCIe", 1, "pcie">,
  I32EnumAttrCase<"InfiniBand", 2, "ib">,
  I32EnumAttrCase<"RoCE", 3, "roce">,
  I32EnumAttrCase<"Ethernet", 4, "ethernet">,
  I32EnumAttrCase<"Host", 5, "host">
]> {
  let cppNamespace = "::mlir::cleave";
  let genSpecializedAttr = 0;
}
def Cleave_LinkKindAttr : EnumAttr<Cleave_Dialect, Cleave_LinkKind, "link"> {
  let assemblyFormat = "`<` $value `>`";
}

def Cleave_ReductionKind : I32EnumAttr<"ReductionKind",
    "how a collective combines the values of a device group", [
  I32EnumAttrCase<"Sum", 0, "sum">,
  I32EnumAttrCase<"Max", 1, "max">,
  I32EnumAttrCase<"Min", 2, "min">,
  I32EnumAttrCase<"Avg", 3, "avg">
]> {
  let cppNamespace = "::mlir::cleave";
  let genSpecializedAttr = 0;
}
def Cleave_ReductionKindAttr
    : EnumAttr<Cleave_Dialect, Cleave_ReductionKind, "reduction">;

def Cleave_LRDecay : I32EnumAttr<"LRDecay",
    "how a learning-rate schedule decays after its warmup", [
  I32EnumAttrCase<"Constant", 0, "constant">,
  I32EnumAttrCase<"Cosine", 1, "cosine">,
  I32EnumAttrCase<"Linear", 2, "linear">
]> {
  let cppNamespace = "::mlir::cleave";
  let genSpecializedAttr = 0;
}
def Cleave_LRDecayAttr : EnumAttr<Cleave_Dialect, Cleave_LRDecay, "lr_decay"> {
  let assemblyFormat = "`<` $value `>`";
}

def Cleave_InitKind : I32EnumAttr<"InitKind",
    "how a parameter is initialized from the run's seed", [
  I32EnumAttrCase<"Zeros", 0, "zeros">,
  I32EnumAttrCase<"Ones", 1, "ones">,
  I32EnumAttrCase<"Normal", 2, "normal">,
  I32EnumAttrCase<"Uniform", 3, "uniform">
]> {
  let cppNamespace = "::mlir::cleave";
  let genSpecializedAttr = 0;
}

def Cleave_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "the formula a GELU uses", [
  I32EnumAttrCase<"None", 0, "none">,
  I32EnumAttrCase<"Tanh", 1, "tanh">
]> {
  let cppNamespace = "::mlir::cleave";
  let genSpecializedAttr = 0;
}
def Cleave_GeluApproximationAttr
    : EnumAttr<Cleave_Dialect, Cleave_GeluApproximation, "gelu_approx"> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

defvar Cleave_FloatElementTypes = [F16, BF16, F32, F64, F8E4M3FN, F8E5M2];

def Cleave_FloatTensor
    : StaticShapeTensorOf<Cleave_FloatElementTypes>;
def Cleave_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def Cleave_AnyTensor : StaticShapeTensorOf<[AnyType]>;
def Cleave_FloatScalar : 0DTensorOf<Cleave_FloatElementTypes>;
def Cleave_F32Scalar : 0DTensorOf<[F32]>;
def Cleave_I64Scalar : 0DTensorOf<[I64]>;

#endif // CLEAVE_DIALECT_CLEAVEBASE_TD
