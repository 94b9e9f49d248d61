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

def CleaveEstimatePass : Pass<"cleave-estimate", "::mlir::ModuleOp"> {
  let summary = "Estimates the time of each function on a cluster.";
  let description = [{
    A bridge from IR to the cost model (`lib/CostModel`): for every function,
    sums the FLOPs of its ops (`CostOpInterface`) and the bytes of their
    operand and result tensors, prices each op with the roofline of the
    cluster's GPU, prices every collective (all_reduce, all_gather,
    reduce_scatter, all_to_all, send/recv, collective_permute) with the
    NCCL-like collective model on the group its mesh axes form (axes on
    `nvlink`, `pcie` or `host` links inside a node, `ib`, `roce` or
    `ethernet` axes across nodes), and reports the totals as a remark.

    On a global-view module the FLOPs are those of the whole computation on
    one GPU; on a per-device module (local shapes plus collectives) they
    are one device's. The pass knows no op by name: FLOPs come from the
    interface, bytes from types, and the collective kind from the op's
    mnemonic through the cost model.

    ```mlir
    cleave.mesh @world(dp = 4 : ib, tp = 8 : nvlink)
    func.func @step(%x: tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16> {
      %y = cleave.all_reduce %x on @world axes = [tp] : tensor<1024x1024xbf16>
      return %y : tensor<1024x1024xbf16>
    }
    // remark: cleave-estimate on dgx-h100: 0 FLOP, 0 bytes moved by compute,
    //   compute 0.000 us, communication 14.440 us (tp 14.440 us), total 14.440 us
    ```

    Options select the cluster: a preset and a node count (default: enough
    nodes of 8 GPUs for the largest mesh), or a JSON cluster file.
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", /*default=*/"\"dgx-h100\"",
           "Cluster preset (dgx-a100-40gb, dgx-a100-80gb, dgx-h100, "
           "dgx-h200)">,
    Option<"clusterFile", "cluster-file", "std::string", /*default=*/"\"\"",
           "JSON cluster spec; overrides `cluster`">,
    Option<"nodes", "nodes", "int", /*default=*/"0",
           "Nodes of the preset cluster (0: enough for the largest mesh)">
  ];
}

#endif // CLEAVE_TRANSFORMS_PASSES_TD
