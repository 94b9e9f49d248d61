//===- CleaveInterfaces.td - Per-op rules as interfaces ----*- tablegen -*-===//
//
// Everything a pass needs to know about one op lives on the op, behind these
// interfaces: passes stay generic and never switch on op names.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_CLEAVEINTERFACES_TD
#define CLEAVE_DIALECT_CLEAVEINTERFACES_TD

include "mlir/IR/OpBase.td"

def Cleave_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    The op's factor-based sharding rule: an einsum-like description of which
    operand and result dimensions share an iteration factor, and what kind
    each factor is (pass-through, reduction, needs-replication). See
    `ShardingRule.h`. Elementwise ops get the rule from their trait through
    the default implementation; every other op defines `getShardingRule`.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/"Returns the op's sharding rule for its current types.",
      /*retTy=*/"::mlir::cleave::ShardingRule",
      /*methodName=*/"getShardingRule",
      /*args=*/(ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        static_assert(ConcreteOp::template hasTrait<::mlir::OpTrait::Elementwise>(),
                      "only elementwise ops may use the default sharding "
                      "rule; other ops must declare getShardingRule");
        return ::mlir::cleave::ShardingRule::getElementwise($_op.getOperation());
      }]>,
    InterfaceMethod<
      /*desc=*/[{Builds the per-device form of the op at the builder's
        insertion point, from the local operands, local result types and the
        mesh axes of each factor in `context`, and appends its results to
        `results`. The default clones the op onto the local types, which is
        right unless an attribute holds a global size or the op needs its
        block's global position (then it overrides this).}],
      /*retTy=*/"::mlir::LogicalResult",
      /*methodName=*/"buildLocalOp",
      /*args=*/(ins "::mlir::OpBuilder &":$builder,
                    "const ::mlir::cleave::LocalOpContext &":$context,
                    "::llvm::SmallVectorImpl<::mlir::Value> &":$results),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::mlir::cleave::buildLocalClone($_op.getOperation(), builder,
                                               context, results);
      }]>
  ];
}

def Cleave_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    What the op does on one device for given local shapes and element sizes
    (`OpShapes`, see `OpWork.h`): its floating-point operations by kind
    (GEMM, attention, vector; a multiply-add counts as two), the bytes it
    reads and writes, whether a fusing code generator merges it with its
    elementwise neighbours, and for GEMMs and attention the problem shape the
    cost model's efficiency curves need. The planner asks for the work of
    each op on the local shapes of a plan; `getFlops` is the FLOP count on
    the op's own types.

    The default is an elementwise op: one vector operation per result
    element, every operand read once, every result written once, fusable.
    Ops with inner loops (matmul, attention, norms), views and copies
    override `getWork`.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{Returns the op's work on one device when its operands and
        results have the shapes and element sizes of `shapes` (one entry per
        operand and result, in order). Attributes are read from the op.}],
      /*retTy=*/"::mlir::cleave::OpWork",
      /*methodName=*/"getWork",
      /*args=*/(ins "const ::mlir::cleave::OpShapes &":$shapes),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::mlir::cleave::elementwiseWork(shapes);
      }]>,
    InterfaceMethod<
      /*desc=*/"Returns the op's floating-point operation count on its own types.",
      /*retTy=*/"double",
      /*methodName=*/"getFlops",
      /*args=*/(ins),
      /*methodBody=*/[{
        return $_op.getWork(
            ::mlir::cleave::OpShapes::of($_op.getOperation())).flops();
      }]>
  ];
}

def Cleave_VJPOpInterface : OpInterface<"VJPOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    The op's gradient rule (vector-Jacobian product): given the gradients of
    its results, build the gradients of its operands with cleave ops. The
    autodiff pass is generic over this interface. Integer operands (ids,
    labels, seeds) get no gradient. Ops without the interface are not
    differentiable: autodiff reports an error when a gradient must flow
    through one.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{Builds operand gradients at the builder's insertion point.
        `resultGrads` has one gradient per result (null when nothing flows
        back through that result); `operandGrads` receives one value per
        operand, null where the operand is not differentiable.}],
      /*retTy=*/"::mlir::LogicalResult",
      /*methodName=*/"buildVJP",
      /*args=*/(ins "::mlir::OpBuilder &":$builder,
                    "::mlir::ValueRange":$resultGrads,
                    "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // CLEAVE_DIALECT_CLEAVEINTERFACES_TD
