// The example models in examples/ parse, verify and round-trip.
// RUN: cleave-opt %cleave_src/examples/mlp.mlir | cleave-opt | FileCheck %s --check-prefix=MLP
// RUN: cleave-opt %cleave_src/examples/gpt_block.mlir | cleave-opt | FileCheck %s --check-prefix=GPT
// RUN: cleave-opt %cleave_src/examples/gpt_block.mlir --cleave-print-sharding-rules -o /dev/null 2>&1 | FileCheck %s --check-prefix=RULES

// MLP: cleave.mesh @cpu(dp = 2 : host, tp = 2 : host)
// MLP-LABEL: func.func @loss
// MLP: cleave.cross_entropy

// GPT-LABEL: func.func @block
// GPT: cleave.attention %{{.*}} {causal}
// GPT-COUNT-2: cleave.dropout

// RULES: remark: sharding rule: ([i, j, l, m], [i, k, l, m], [i, k, l, n]) -> ([i, j, l, n]) {i=4, j=32, k=32, l=4, m=32, n=32} need-replication={k, m}
