// RUN: cleave-opt %s -split-input-file --cleave-propagate-sharding --cleave-partition | FileCheck %s

// Ops whose per-device form depends on the block a device holds: the
// partitioner asks for the block index with `cleave.axis_index` or scales
// by the global count.

// A vocabulary-parallel embedding: each device looks up the ids that fall
// into its block of the table (offset by its index on tp) and the partial
// lookups sum to the embedding.
cleave.mesh @m(tp = 2 : nvlink)

// CHECK-LABEL: func.func @embedding_vocab_parallel
// CHECK-SAME: %[[T:.*]]: tensor<5x8xf32> {cleave.layout = #cleave.sharding<@m, [tp, _]>}
// CHECK-SAME: %[[IDS:.*]]: tensor<2x4xi32> {cleave.layout = #cleave.sharding<@m, [_, _]>}
// CHECK: %[[I:.*]] = cleave.axis_index on @m axes = [tp] : tensor<i64>
// CHECK: %[[E:.*]] = cleave.embedding %[[T]], %[[IDS]], %[[I]] : (tensor<5x8xf32>, tensor<2x4xi32>, tensor<i64>) -> tensor<2x4x8xf32>
// CHECK: %[[R:.*]] = cleave.all_reduce %[[E]] on @m axes = [tp] : tensor<2x4x8xf32>
// CHECK: return %[[R]]
func.func @embedding_vocab_parallel(%table: tensor<10x8xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>},
                                    %ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  %e = cleave.embedding %table, %ids : (tensor<10x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  return %e : tensor<2x4x8xf32>
}

// -----

// The gradient of a vocabulary-parallel table: each device scatters the
// rows of its block (no communication, the ids and output gradient are
// whole).
cleave.mesh @m(tp = 2 : nvlink)

// CHECK-LABEL: func.func @embedding_grad_vocab_parallel
// CHECK-SAME: -> (tensor<5x8xf32> {cleave.layout = #cleave.sharding<@m, [tp, _]>})
// CHECK: %[[I:.*]] = cleave.axis_index on @m axes = [tp] : tensor<i64>
// CHECK: %[[G:.*]] = cleave.embedding_grad %{{.*}}, %{{.*}}, %[[I]] : (tensor<2x4xi32>, tensor<2x4x8xf32>, tensor<i64>) -> tensor<5x8xf32>
// CHECK-NOT: cleave.all_
// CHECK: return %[[G]]
func.func @embedding_grad_vocab_parallel(%ids: tensor<2x4xi32>, %dy: tensor<2x4x8xf32>)
    -> (tensor<10x8xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>}) {
  %g = cleave.embedding_grad %ids, %dy : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<10x8xf32>
  return %g : tensor<10x8xf32>
}

// -----

// An embedding whose table is split by features needs no index.
cleave.mesh @m(tp = 2 : nvlink)

// CHECK-LABEL: func.func @embedding_feature_split
// CHECK-NOT: cleave.axis_index
// CHECK: cleave.embedding %{{.*}}, %{{.*}} : (tensor<10x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4xf32>
func.func @embedding_feature_split(%table: tensor<10x8xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>},
                                   %ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  %e = cleave.embedding %table, %ids : (tensor<10x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  return %e : tensor<2x4x8xf32>
}

// -----

// Dropout on a block draws the random numbers of the global positions of
// the block: one block index per dimension (a constant 0 for whole ones)
// and the global shape.
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @dropout_block
// CHECK-SAME: %[[X:.*]]: tensor<4x8xf32> {cleave.layout = #cleave.sharding<@m, [dp, tp]>}
// CHECK-DAG: %[[I0:.*]] = cleave.axis_index on @m axes = [dp] : tensor<i64>
// CHECK-DAG: %[[I1:.*]] = cleave.axis_index on @m axes = [tp] : tensor<i64>
// CHECK: cleave.dropout %[[X]], %{{.*}}, %[[I0]], %[[I1]] {global_shape = array<i64: 8, 16>, rate = 1.000000e-01 : f64, stream = 3 : i64} : (tensor<4x8xf32>, tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<4x8xf32>
func.func @dropout_block(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, tp]>},
                         %seed: tensor<i64>) -> tensor<8x16xf32> {
  %y = cleave.dropout %x, %seed {rate = 0.1 : f64, stream = 3 : i64} : (tensor<8x16xf32>, tensor<i64>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// A replicated dropout stays the global op.
cleave.mesh @m(dp = 2 : ib)

// CHECK-LABEL: func.func @dropout_replicated
// CHECK-NOT: cleave.axis_index
// CHECK: cleave.dropout %{{.*}}, %{{.*}} {rate = 1.000000e-01 : f64, stream = 3 : i64} : (tensor<8x16xf32>, tensor<i64>) -> tensor<8x16xf32>
func.func @dropout_replicated(%x: tensor<8x16xf32>, %seed: tensor<i64>) -> tensor<8x16xf32> {
  %y = cleave.dropout %x, %seed {rate = 0.1 : f64, stream = 3 : i64} : (tensor<8x16xf32>, tensor<i64>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Cross-entropy over a batch split over dp: each device's mean is scaled by
// 1/2 (its share of the global mean) and the shares are summed.
cleave.mesh @m(dp = 2 : ib)

// CHECK-LABEL: func.func @cross_entropy_batch_split
// CHECK-SAME: %[[L:.*]]: tensor<2x4x16xf32> {cleave.layout = #cleave.sharding<@m, [dp, _, _]>}
// CHECK-SAME: %[[Y:.*]]: tensor<2x4xi32> {cleave.layout = #cleave.sharding<@m, [dp, _]>}
// CHECK-SAME: -> (tensor<f32> {cleave.layout = #cleave.sharding<@m, []>})
// CHECK: %[[CE:.*]] = cleave.cross_entropy %[[L]], %[[Y]] : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
// CHECK: %[[H:.*]] = cleave.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[S:.*]] = cleave.mul %[[CE]], %[[H]] : tensor<f32>
// CHECK: %[[R:.*]] = cleave.all_reduce %[[S]] on @m axes = [dp] : tensor<f32>
// CHECK: return %[[R]]
func.func @cross_entropy_batch_split(%logits: tensor<4x4x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _, _]>},
                                     %labels: tensor<4x4xi32>) -> tensor<f32> {
  %l = cleave.cross_entropy %logits, %labels : (tensor<4x4x16xf32>, tensor<4x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// With ignore_index the mean is over the labels that are not ignored, in the
// whole batch: each device divides its rows' sum by the global count (its
// label_count all-reduced over the axes splitting the rows), so the shares
// sum to the global mean; the gradient uses the same count.
cleave.mesh @m(dp = 2 : ib)

// CHECK-LABEL: func.func @cross_entropy_ignore_index_batch_split
// CHECK-SAME: %[[L:.*]]: tensor<2x4x16xf32> {cleave.layout = #cleave.sharding<@m, [dp, _, _]>}
// CHECK-SAME: %[[Y:.*]]: tensor<2x4xi32> {cleave.layout = #cleave.sharding<@m, [dp, _]>}
// CHECK: %[[N:.*]] = cleave.label_count %[[Y]] {ignore_index = -1 : i64} : (tensor<2x4xi32>) -> tensor<f32>
// CHECK: %[[NN:.*]] = cleave.all_reduce %[[N]] on @m axes = [dp] : tensor<f32>
// CHECK: %[[CE:.*]] = cleave.cross_entropy %[[L]], %[[Y]], %[[NN]] {ignore_index = -1 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<f32>
// CHECK-NOT: cleave.mul
// CHECK: %[[G:.*]] = cleave.label_count %[[Y]] {ignore_index = -1 : i64}
// CHECK: %[[GG:.*]] = cleave.all_reduce %[[G]] on @m axes = [dp] : tensor<f32>
// CHECK: %[[D:.*]] = cleave.cross_entropy_grad %[[L]], %[[Y]], %{{.*}}, %[[GG]] {ignore_index = -1 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>, tensor<f32>) -> tensor<2x4x16xf32>
// CHECK-NOT: cleave.mul
// CHECK: %[[R:.*]] = cleave.all_reduce %[[CE]] on @m axes = [dp] : tensor<f32>
// CHECK: return %[[R]], %[[D]]
func.func @cross_entropy_ignore_index_batch_split(%logits: tensor<4x4x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _, _]>},
                                                  %labels: tensor<4x4xi32>, %dloss: tensor<f32>) -> (tensor<f32>, tensor<4x4x16xf32>) {
  %l = cleave.cross_entropy %logits, %labels {ignore_index = -1 : i64} : (tensor<4x4x16xf32>, tensor<4x4xi32>) -> tensor<f32>
  %d = cleave.cross_entropy_grad %logits, %labels, %dloss {ignore_index = -1 : i64} : (tensor<4x4x16xf32>, tensor<4x4xi32>, tensor<f32>) -> tensor<4x4x16xf32>
  return %l, %d : tensor<f32>, tensor<4x4x16xf32>
}

// -----

// The class dimension of cross-entropy is never split: logits split over
// the vocabulary are gathered first.
cleave.mesh @m(tp = 2 : nvlink)

// CHECK-LABEL: func.func @cross_entropy_vocab_gathered
// CHECK: %[[G:.*]] = cleave.all_gather %{{.*}} on @m axes = [tp] dim = 2 : tensor<2x4x8xf32> -> tensor<2x4x16xf32>
// CHECK: cleave.cross_entropy %[[G]], %{{.*}} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
// CHECK-NOT: cleave.all_reduce
func.func @cross_entropy_vocab_gathered(%logits: tensor<2x4x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _, tp]>},
                                        %labels: tensor<2x4xi32>) -> tensor<f32> {
  %l = cleave.cross_entropy %logits, %labels : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A mean over a split dimension: the local mean is scaled by the device's
// share and summed.
cleave.mesh @m(dp = 4 : ib)

// CHECK-LABEL: func.func @reduce_mean_split
// CHECK: %[[M:.*]] = cleave.reduce_mean %{{.*}} dims = [0] : tensor<2x16xf32> -> tensor<16xf32>
// CHECK: %[[Q:.*]] = cleave.constant dense<2.500000e-01> : tensor<16xf32>
// CHECK: %[[S:.*]] = cleave.mul %[[M]], %[[Q]] : tensor<16xf32>
// CHECK: cleave.all_reduce %[[S]] on @m axes = [dp] : tensor<16xf32>
func.func @reduce_mean_split(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>}) -> tensor<16xf32> {
  %m = cleave.reduce_mean %x dims = [0] : tensor<8x16xf32> -> tensor<16xf32>
  return %m : tensor<16xf32>
}

// -----

// Context parallelism: a causal attention whose queries are split over cp
// keeps its block of queries, all-gathers the keys and values over cp and
// masks by global positions (its query block index); the rotary embedding
// of a block rotates by global positions too.
cleave.mesh @m(cp = 2 : ib)

// CHECK-LABEL: func.func @attention_query_block
// CHECK-SAME: %[[Q:[^:]+]]: tensor<2x4x2x16xf32> {cleave.layout = #cleave.sharding<@m, [_, cp, _, _]>}
// CHECK-SAME: %[[K:[^:]+]]: tensor<2x4x2x16xf32> {cleave.layout = #cleave.sharding<@m, [_, cp, _, _]>}
// CHECK-SAME: %[[V:[^:]+]]: tensor<2x4x2x16xf32> {cleave.layout = #cleave.sharding<@m, [_, cp, _, _]>}
// CHECK: %[[B0:.*]] = cleave.axis_index on @m axes = [cp] : tensor<i64>
// CHECK: %[[RQ:.*]] = cleave.rotary %[[Q]] block %[[B0]] : tensor<i64> : tensor<2x4x2x16xf32>
// CHECK: %[[B1:.*]] = cleave.axis_index on @m axes = [cp] : tensor<i64>
// CHECK: %[[RK:.*]] = cleave.rotary %[[K]] block %[[B1]] : tensor<i64> : tensor<2x4x2x16xf32>
// CHECK: %[[KF:.*]] = cleave.all_gather %[[RK]] on @m axes = [cp] dim = 1 : tensor<2x4x2x16xf32> -> tensor<2x8x2x16xf32>
// CHECK: %[[VF:.*]] = cleave.all_gather %[[V]] on @m axes = [cp] dim = 1 : tensor<2x4x2x16xf32> -> tensor<2x8x2x16xf32>
// CHECK: %[[B2:.*]] = cleave.axis_index on @m axes = [cp] : tensor<i64>
// CHECK: cleave.attention %[[RQ]], %[[KF]], %[[VF]], %[[B2]] {causal} : (tensor<2x4x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<i64>) -> tensor<2x4x2x16xf32>
func.func @attention_query_block(
    %q: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, cp, _, _]>},
    %k: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, cp, _, _]>},
    %v: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, cp, _, _]>}) -> tensor<2x8x2x16xf32> {
  %rq = cleave.rotary %q : tensor<2x8x2x16xf32>
  %rk = cleave.rotary %k : tensor<2x8x2x16xf32>
  %o = cleave.attention %rq, %rk, %v {causal} : (tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x2x16xf32>
  return %o : tensor<2x8x2x16xf32>
}

// -----

// Its gradient: dq stays a block of queries; dk and dv are each device's
// partial sums over its queries, reduce-scattered into the sequence split.
cleave.mesh @m(cp = 2 : ib)

// CHECK-LABEL: func.func @attention_grad_query_block
// CHECK: %[[B:.*]] = cleave.axis_index on @m axes = [cp] : tensor<i64>
// CHECK: %{{.*}}, %[[DK:.*]], %[[DV:.*]] = cleave.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[B]] {causal} : (tensor<2x4x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x4x2x16xf32>, tensor<i64>) -> (tensor<2x4x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
// CHECK-DAG: cleave.reduce_scatter %[[DK]] on @m axes = [cp] dim = 1 : tensor<2x8x2x16xf32> -> tensor<2x4x2x16xf32>
// CHECK-DAG: cleave.reduce_scatter %[[DV]] on @m axes = [cp] dim = 1 : tensor<2x8x2x16xf32> -> tensor<2x4x2x16xf32>
func.func @attention_grad_query_block(
    %q: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, cp, _, _]>},
    %k: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, cp, _, _]>},
    %v: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, cp, _, _]>},
    %do: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, cp, _, _]>})
    -> (tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, cp, _, _]>},
        tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, cp, _, _]>},
        tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, cp, _, _]>}) {
  %g:3 = cleave.attention_grad %q, %k, %v, %do {causal} : (tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
  return %g#0, %g#1, %g#2 : tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>
}

// -----

// Non-causal attention does not depend on positions: the plain op.
cleave.mesh @m(cp = 2 : ib)

// CHECK-LABEL: func.func @attention_not_causal
// CHECK-NOT: cleave.axis_index
// CHECK: cleave.attention %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x4x2x16xf32>
func.func @attention_not_causal(
    %q: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, cp, _, _]>},
    %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>) -> tensor<2x8x2x16xf32> {
  %o = cleave.attention %q, %k, %v : (tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x2x16xf32>
  return %o : tensor<2x8x2x16xf32>
}
