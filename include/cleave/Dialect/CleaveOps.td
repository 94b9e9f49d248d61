//===- CleaveOps.td - Cleave operations --------------------*- tablegen -*-===//
//
// All ops of the dialect. They are grouped in the files included below; this
// file holds the base classes they share.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_CLEAVEOPS_TD
#define CLEAVE_DIALECT_CLEAVEOPS_TD

include "cleave/Dialect/CleaveBase.td"
include "cleave/Dialect/CleaveAttrs.td"
include "cleave/Dialect/CleaveTypes.td"
include "cleave/Dialect/CleaveInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

/// Every op of the dialect derives from this class.
class Cleave_Op<string mnemonic, list<Trait> traits = []>
    : Op<Cleave_Dialect, mnemonic, traits>;

/// A model op with global semantics. It defines its sharding rule; its work
/// (CostOpInterface) is an elementwise op's unless `costMethods` lists
/// "getWork"; its per-device form is a clone on local types unless
/// `shardingMethods` lists "buildLocalOp".
class Cleave_ModelOp<string mnemonic, list<Trait> traits = [],
                     list<string> costMethods = [],
                     list<string> shardingMethods = []>
    : Cleave_Op<mnemonic, traits # [
        DeclareOpInterfaceMethods<Cleave_ShardingRuleOpInterface,
                                  !listconcat(["getShardingRule"], shardingMethods)>,
        DeclareOpInterfaceMethods<Cleave_CostOpInterface, costMethods>]>;

/// An elementwise model op: sharding rule from the trait, one FLOP per element.
class Cleave_ElementwiseOp<string mnemonic, list<Trait> traits = []>
    : Cleave_Op<mnemonic, traits # [Pure, Elementwise,
        Cleave_ShardingRuleOpInterface, Cleave_CostOpInterface]>;

/// Marks an op as differentiable: it implements VJPOpInterface::buildVJP.
defvar Cleave_Differentiable =
    DeclareOpInterfaceMethods<Cleave_VJPOpInterface, ["buildVJP"]>;

/// Marks a per-token op that Megatron sequence parallelism runs on a slice of
/// the sequence: the normalizations and dropouts between the tensor-parallel
/// regions, which every tensor-parallel rank would otherwise repeat on the
/// whole sequence. Its first operand is `[batch, sequence, ...]` and its
/// sharding rule lets both pass through. `cleave-apply-plan` with `sp` pins
/// that operand to split its sequence over `tp` (docs/plans.md); a new op
/// with this trait joins the plan with no change to the pass.
def Cleave_SequenceParallel : NativeOpTrait<"SequenceParallel"> {
  let cppNamespace = "::mlir::cleave";
}

class Cleave_UnaryOp<string mnemonic, list<Trait> traits = []>
    : Cleave_ElementwiseOp<mnemonic, traits # [SameOperandsAndResultType,
                                               Cleave_Differentiable]> {
  let arguments = (ins Cleave_FloatTensor:$input);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

class Cleave_BinaryOp<string mnemonic, list<Trait> traits = []>
    : Cleave_ElementwiseOp<mnemonic, traits # [SameOperandsAndResultType]> {
  let arguments = (ins Cleave_FloatTensor:$lhs, Cleave_FloatTensor:$rhs);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

/// A differentiable binary elementwise op.
class Cleave_ArithOp<string mnemonic, list<Trait> traits = []>
    : Cleave_BinaryOp<mnemonic, traits # [Cleave_Differentiable]>;

/// A resource that orders every communication of a program: collectives and
/// point-to-point ops read and write it, so no pass reorders, merges or drops
/// them.
def Cleave_CommResource : Resource<"::mlir::cleave::CommResource">;

include "cleave/Dialect/CleaveMeshOps.td"
include "cleave/Dialect/CleaveMathOps.td"
include "cleave/Dialect/CleaveShapeOps.td"
include "cleave/Dialect/CleaveNNOps.td"
include "cleave/Dialect/CleaveMoEOps.td"
include "cleave/Dialect/CleaveOptimizerOps.td"
include "cleave/Dialect/CleaveCollectiveOps.td"

#endif // CLEAVE_DIALECT_CLEAVEOPS_TD
