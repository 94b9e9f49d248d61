// RUN: cleave-opt %s --cleave-print-sharding-rules --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s

// The rule of each kind of op, as propagation and partitioning see it.

func.func @rules(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>,
                 %g: tensor<8xf32>, %ids: tensor<2x4xi32>, %t: tensor<10x8xf32>, %a: tensor<6x4xf32>) {
  // CHECK: remark: sharding rule: ([i, j, l], [k, l]) -> ([i, j, k]) {i=2, j=4, k=16, l=8} reduction={l}
  %0 = cleave.matmul %x, %w {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  // CHECK: remark: sharding rule: ([i, j, l], [i, k, l]) -> ([i, j, k]) {i=2, j=4, k=4, l=8} reduction={l}
  %1 = cleave.matmul %x, %x {transpose_rhs} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  // A weight gradient summed over batch and sequence: both are reductions.
  // CHECK: remark: sharding rule: ([i, l, j], [i, l, k]) -> ([j, k]) {i=2, j=8, k=8, l=4} reduction={i, l}
  %dw = cleave.matmul %x, %x {reduce_batch, transpose_lhs} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  // CHECK: remark: sharding rule: ([i, j, (k, l)]) -> ([i, j, k, l]) {i=2, j=4, k=2, l=4}
  %2 = cleave.reshape %x : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  // CHECK: remark: sharding rule: ([i, j, k, l]) -> ([(i, j), (k, l)]) {i=2, j=4, k=2, l=4}
  %3 = cleave.reshape %2 : tensor<2x4x2x4xf32> to tensor<8x8xf32>
  // CHECK: remark: sharding rule: ([i, j]) -> ([k, l]) {i=6, j=4, k=4, l=6} need-replication={i, j, k, l}
  %4 = cleave.reshape %a : tensor<6x4xf32> to tensor<4x6xf32>
  // CHECK: remark: sharding rule: ([i, j, (l, m), n], [i, k, l, n], [i, k, l, o]) -> ([i, j, (l, m), o]) {i=2, j=8, k=8, l=2, m=2, n=16, o=16} need-replication={k, n}
  %5 = cleave.attention %q, %k, %k {causal} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32>
  // CHECK: remark: sharding rule: ([i, j, (l, m), n], [i, k, l, n], [i, k, l, o], [i, j, (l, m), o]) -> ([i, j, (l, m), n], [i, k, l, n], [i, k, l, o]) {i=2, j=8, k=8, l=2, m=2, n=16, o=16} reduction={j, m, o} need-replication={k, n}
  %6:3 = cleave.attention_grad %q, %k, %k, %5 : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
  // CHECK: remark: sharding rule: ([i, j, k], [k], [i, j, k]) -> ([i, j, k], [k], [k]) {i=2, j=4, k=8} reduction={i, j} need-replication={k}
  %7:3 = cleave.layer_norm_grad %x, %g, %x : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: remark: sharding rule: ([l, k], [i, j]) -> ([i, j, k]) {i=2, j=4, k=8, l=10} reduction={l}
  %8 = cleave.embedding %t, %ids : (tensor<10x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  // CHECK: remark: sharding rule: ([i, j, k], [i, j]) -> ([]) {i=2, j=4, k=16} reduction={i, j} need-replication={k}
  %9 = cleave.cross_entropy %0, %ids : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  // CHECK: remark: sharding rule: ([k]) -> ([i, j, k]) {i=2, j=4, k=8}
  %10 = cleave.broadcast %g dims = [2] : tensor<8xf32> -> tensor<2x4x8xf32>
  // CHECK: remark: sharding rule: ([i, j, k]) -> ([i, j, l]) {i=2, j=4, k=8, l=4} need-replication={k, l}
  %11 = cleave.slice %x offsets = [0, 0, 2] sizes = [2, 4, 4] strides = [1, 1, 1] : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
  // CHECK: remark: sharding rule: ([i, k, j], [i, l, j]) -> ([i, m, j]) {i=2, j=8, k=4, l=4, m=8} need-replication={k, l, m}
  %12 = cleave.concat %x, %x dim = 1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x8x8xf32>
  // CHECK: remark: sharding rule: ([i, j, k]) -> ([k]) {i=2, j=4, k=8} reduction={i, j}
  %13 = cleave.reduce_sum %x dims = [0, 1] : tensor<2x4x8xf32> -> tensor<8xf32>
  // CHECK: remark: sharding rule: ([i, j, k]) -> ([i, j, k]) {i=2, j=4, k=8} need-replication={k}
  %14 = cleave.softmax %x dim = 2 : tensor<2x4x8xf32>
  // CHECK: remark: sharding rule: ([i, j], [i, j, k]) -> ([l, k]) {i=2, j=4, k=8, l=10} reduction={i, j}
  %15 = cleave.embedding_grad %ids, %8 : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<10x8xf32>
  // CHECK: remark: sharding rule: ([j, k, i]) -> ([i, j, k]) {i=8, j=2, k=4}
  %16 = cleave.transpose %x permutation = [2, 0, 1] : tensor<2x4x8xf32> -> tensor<8x2x4xf32>
  return
}

// Mixture of experts: the expert factor (k below) is pass-through from the
// router's one-hot to the expert buffer, so splitting it moves the buffer.
func.func @moe_rules(%logits: tensor<2x8x4xf32>, %x: tensor<2x8x16xf32>, %out: tensor<4x2x4x16xf32>, %dloss: tensor<f32>) {
  // CHECK: remark: sharding rule: ([i, j, k]) -> ([i, j, k, l], [i, j, k, l]) {i=2, j=8, k=4, l=4} need-replication={j, k, l}
  %0:2 = cleave.moe_router %logits {top_k = 2 : i64, capacity_factor = 1.0 : f64} : (tensor<2x8x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>)
  // CHECK: remark: sharding rule: ([i, j, k], [i, j, k, l], [i, j, k, l]) -> ([i, j, k]) {i=2, j=8, k=4, l=4} need-replication={j, k, l}
  %1 = cleave.moe_router_grad %logits, %0#1, %0#0 {top_k = 2 : i64} : (tensor<2x8x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4xf32>
  // CHECK: remark: sharding rule: ([i, j, m], [i, j, k, l]) -> ([k, i, l, m]) {i=2, j=8, k=4, l=4, m=16} reduction={j}
  %2 = cleave.moe_dispatch %x, %0#1 : (tensor<2x8x16xf32>, tensor<2x8x4x4xf32>) -> tensor<4x2x4x16xf32>
  // CHECK: remark: sharding rule: ([i, j, k, l], [k, i, l, m]) -> ([i, j, m]) {i=2, j=8, k=4, l=4, m=16} reduction={k, l}
  %3 = cleave.moe_combine %0#0, %out : (tensor<2x8x4x4xf32>, tensor<4x2x4x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: remark: sharding rule: ([i, j, m], [k, i, l, m]) -> ([i, j, k, l]) {i=2, j=8, k=4, l=4, m=16} reduction={m}
  %4 = cleave.moe_weights_grad %x, %out : (tensor<2x8x16xf32>, tensor<4x2x4x16xf32>) -> tensor<2x8x4x4xf32>
  // CHECK: remark: sharding rule: ([i, j, k]) -> ([]) {i=2, j=8, k=4} reduction={i} need-replication={j, k}
  %5 = cleave.moe_aux_loss %logits {top_k = 2 : i64} : (tensor<2x8x4xf32>) -> tensor<f32>
  // CHECK: remark: sharding rule: ([i, j, k], []) -> ([i, j, k]) {i=2, j=8, k=4} need-replication={j, k}
  %6 = cleave.moe_aux_loss_grad %logits, %dloss {top_k = 2 : i64} : (tensor<2x8x4xf32>, tensor<f32>) -> tensor<2x8x4xf32>
  return
}
