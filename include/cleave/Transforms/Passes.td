//===- Passes.td - Cleave passes ---------------------------*- tablegen -*-===//
//
// Every pass: record CleaveFooPass, flag cleave-foo, file Foo.cpp, test
// test/Transforms/foo.mlir, DEBUG_TYPE = the flag.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_PASSES_TD
#define CLEAVE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def CleavePrintShardingRulesPass
    : Pass<"cleave-print-sharding-rules", "::mlir::ModuleOp"> {
  let summary = "Reports the sharding rule of every op and checks it.";
  let description = [{
    For every op that implements `ShardingRuleOpInterface`, checks the rule
    against the op's types (one factor list per dimension, factor sizes
    multiplying to the dimension size, pass-through factors present in every
    result) and reports it as a remark. This is the tool for compiler
    engineers adding an op: it shows the rule propagation and partitioning
    will see.

    ```mlir
    %y = cleave.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
    // remark: sharding rule: ([i, k], [k, j]) -> ([i, j]) {i=8, j=32, k=16} reduction={k}
    ```

    The pass fails if any rule is inconsistent with its op.
  }];
}

#endif // CLEAVE_TRANSFORMS_PASSES_TD
