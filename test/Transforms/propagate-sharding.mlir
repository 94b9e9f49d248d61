// RUN: cleave-opt %s -split-input-file --cleave-propagate-sharding -verify-diagnostics | FileCheck %s

// Shardings completed from partial annotations through each op's factor
// rule; every op records `cleave.shardings`, every argument and result
// `cleave.sharding`.

// Forward through elementwise ops: the batch split of the argument reaches
// every op and the function result.
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @forward_elementwise
// CHECK-SAME: %{{[^:]+}}: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>}
// CHECK-SAME: %{{[^:]+}}: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>}
// CHECK-SAME: -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>})
func.func @forward_elementwise(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>},
                               %y: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: cleave.add {{.*}} {cleave.shardings = [#cleave.sharding<@m, [dp, _]>]}
  %0 = cleave.add %x, %y : tensor<8x16xf32>
  // CHECK: cleave.exp {{.*}} {cleave.shardings = [#cleave.sharding<@m, [dp, _]>]}
  %1 = cleave.exp %0 : tensor<8x16xf32>
  // CHECK: cleave.mul {{.*}} {cleave.shardings = [#cleave.sharding<@m, [dp, _]>]}
  %2 = cleave.mul %1, %y : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}

// -----

// Backward: a constraint on the last value reaches the arguments.
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @backward_elementwise
// CHECK-SAME: %{{[^:]+}}: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>}
// CHECK-SAME: %{{[^:]+}}: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>}
// CHECK-SAME: -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>})
func.func @backward_elementwise(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: cleave.sub {{.*}} {cleave.shardings = [#cleave.sharding<@m, [_, tp]>]}
  %0 = cleave.sub %x, %y : tensor<8x16xf32>
  // CHECK: cleave.tanh {{.*}} {cleave.shardings = [#cleave.sharding<@m, [_, tp]>]}
  %1 = cleave.tanh %0 : tensor<8x16xf32>
  // CHECK: cleave.sharding_constraint %{{.*}} <@m, [_, tp]> : tensor<8x16xf32>
  %2 = cleave.sharding_constraint %1 <@m, [_, tp]> : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}

// -----

// Both directions at once, and a 2-d split: the argument splits rows over
// dp, the constraint columns over tp; the op between them gets both.
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @both_directions
// CHECK-SAME: %{{[^:]+}}: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>}
func.func @both_directions(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>}) -> tensor<8x16xf32> {
  // CHECK: cleave.relu {{.*}} {cleave.shardings = [#cleave.sharding<@m, [dp, _]>]}
  %0 = cleave.relu %x : tensor<8x16xf32>
  // CHECK: cleave.sharding_constraint %{{.*}} <@m, [dp, tp]>
  %1 = cleave.sharding_constraint %0 <@m, [dp, tp]> : tensor<8x16xf32>
  // CHECK: cleave.neg {{.*}} {cleave.shardings = [#cleave.sharding<@m, [dp, tp]>]}
  %2 = cleave.neg %1 : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}

// -----

// Megatron's MLP: the column-parallel weight splits the hidden features,
// the activation passes through split, the row-parallel weight contracts
// the split dimension and leaves a partial sum over tp. The function
// result drops the pending sum (the partitioner reduces it).
cleave.mesh @m(tp = 2 : nvlink)

// CHECK-LABEL: func.func @mlp_column_row
// CHECK-SAME: %{{[^:]+}}: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _]>}
// CHECK-SAME: %{{[^:]+}}: tensor<16x32xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>}
// CHECK-SAME: %{{[^:]+}}: tensor<32x16xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>}
// CHECK-SAME: -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _]>})
func.func @mlp_column_row(%x: tensor<8x16xf32>,
                          %w1: tensor<16x32xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>},
                          %w2: tensor<32x16xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>}) -> tensor<8x16xf32> {
  // CHECK: cleave.matmul {{.*}} {cleave.shardings = [#cleave.sharding<@m, [_, tp]>]}
  %h = cleave.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  // CHECK: cleave.gelu {{.*}} {cleave.shardings = [#cleave.sharding<@m, [_, tp]>]}
  %a = cleave.gelu %h : tensor<8x32xf32>
  // CHECK: cleave.matmul {{.*}} {cleave.shardings = [#cleave.sharding<@m, [_, _], partial = [tp]>]}
  %y = cleave.matmul %a, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// A transposed weight (nn.Linear's [out, in] layout): the split of its
// first dimension is the output features.
cleave.mesh @m(tp = 4 : nvlink)

// CHECK-LABEL: func.func @matmul_transpose_rhs
// CHECK-SAME: %{{[^:]+}}: tensor<2x4x8xf32> {cleave.sharding = #cleave.sharding<@m, [_, _, _]>}
func.func @matmul_transpose_rhs(%x: tensor<2x4x8xf32>,
                                %w: tensor<16x8xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>}) -> tensor<2x4x16xf32> {
  // CHECK: cleave.matmul {{.*}} {cleave.shardings = [#cleave.sharding<@m, [_, _, tp]>], transpose_rhs}
  %y = cleave.matmul %x, %w {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// Reductions: reducing a split dimension leaves a pending sum over its
// axis; reducing another keeps the split.
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @reductions
// CHECK-SAME: -> (tensor<16xf32> {cleave.sharding = #cleave.sharding<@m, [tp]>}, tensor<8xf32> {cleave.sharding = #cleave.sharding<@m, [dp]>}, tensor<f32> {cleave.sharding = #cleave.sharding<@m, []>})
func.func @reductions(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, tp]>}) -> (tensor<16xf32>, tensor<8xf32>, tensor<f32>) {
  // CHECK: cleave.reduce_sum {{.*}} {cleave.shardings = [#cleave.sharding<@m, [tp], partial = [dp]>]}
  %0 = cleave.reduce_sum %x dims = [0] : tensor<8x16xf32> -> tensor<16xf32>
  // CHECK: cleave.reduce_sum {{.*}} {cleave.shardings = [#cleave.sharding<@m, [dp], partial = [tp]>]}
  %1 = cleave.reduce_sum %x dims = [1] : tensor<8x16xf32> -> tensor<8xf32>
  // CHECK: cleave.reduce_sum {{.*}} {cleave.shardings = [#cleave.sharding<@m, [], partial = [dp, tp]>]}
  %2 = cleave.reduce_sum %x dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %0, %1, %2 : tensor<16xf32>, tensor<8xf32>, tensor<f32>
}

// -----

// Softmax must not split its dimension: the split of the other one passes,
// the split of the softmax dimension stops there.
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @softmax_needs_replication
func.func @softmax_needs_replication(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, tp]>}) -> tensor<8x16xf32> {
  // CHECK: cleave.softmax {{.*}} {cleave.shardings = [#cleave.sharding<@m, [dp, _]>]}
  %0 = cleave.softmax %x dim = 1 : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Reshape and transpose carry splits through merged, split and permuted
// dimensions.
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @reshape_transpose
func.func @reshape_transpose(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, tp]>}) -> tensor<4x2x8xf32> {
  // 16 = 2 x 8: tp splits the major factor completely.
  // CHECK: cleave.reshape {{.*}} {cleave.shardings = [#cleave.sharding<@m, [dp, tp, _]>]}
  %0 = cleave.reshape %x : tensor<8x16xf32> to tensor<8x2x8xf32>
  // CHECK: cleave.transpose {{.*}} {cleave.shardings = [#cleave.sharding<@m, [tp, dp, _]>]}
  %1 = cleave.transpose %0 permutation = [1, 0, 2] : tensor<8x2x8xf32> -> tensor<2x8x8xf32>
  // Merging [tp] x [dp] into one dimension splits it over (tp, dp).
  // CHECK: cleave.reshape {{.*}} {cleave.shardings = [#cleave.sharding<@m, [(tp, dp), _]>]}
  %2 = cleave.reshape %1 : tensor<2x8x8xf32> to tensor<16x8xf32>
  // CHECK: cleave.reshape {{.*}} {cleave.shardings = [#cleave.sharding<@m, [(tp, dp), _, _]>]}
  %3 = cleave.reshape %2 : tensor<16x8xf32> to tensor<4x4x8xf32>
  // CHECK: cleave.transpose {{.*}} {cleave.shardings = [#cleave.sharding<@m, [(tp, dp), _, _]>]}
  %4 = cleave.transpose %3 permutation = [0, 2, 1] : tensor<4x4x8xf32> -> tensor<4x8x4xf32>
  %5 = cleave.reshape %4 : tensor<4x8x4xf32> to tensor<4x2x16xf32>
  %6 = cleave.slice %5 offsets = [0, 0, 0] sizes = [4, 2, 8] strides = [1, 1, 1] : tensor<4x2x16xf32> -> tensor<4x2x8xf32>
  return %6 : tensor<4x2x8xf32>
}

// -----

// Compound dimensions: the reshape merges (k, l) into one dimension. A
// split of the minor factor alone would give each device a strided set of
// columns, so the operand stays whole (the partitioner slices after the
// reshape); splits of both factors, major first, give one block.
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @reshape_minor_factor
// CHECK-SAME: %{{[^:]+}}: tensor<2x4x8xf32> {cleave.sharding = #cleave.sharding<@m, [_, _, _]>}
// CHECK-SAME: %{{[^:]+}}: tensor<2x4x8xf32> {cleave.sharding = #cleave.sharding<@m, [_, _, (dp, tp)]>}
func.func @reshape_minor_factor(%x: tensor<2x4x8xf32>, %y: tensor<2x4x8xf32>) -> (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) {
  // CHECK: cleave.reshape {{.*}} {cleave.shardings = [#cleave.sharding<@m, [_, _, _, tp]>]}
  %0 = cleave.reshape %x : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %1 = cleave.sharding_constraint %0 <@m, [_, _, _, tp]> : tensor<2x4x2x4xf32>
  // CHECK: cleave.reshape {{.*}} {cleave.shardings = [#cleave.sharding<@m, [_, _, dp, tp]>]}
  %2 = cleave.reshape %y : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %3 = cleave.sharding_constraint %2 <@m, [_, _, dp, tp]> : tensor<2x4x2x4xf32>
  return %1, %3 : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
}

// -----

// Grouped-query attention: the query heads are (kv head, group) with the kv
// head major. Splitting the query heads over tp splits the kv heads (the
// major factor, 2, complete), so keys and values follow; over (dp, tp) the
// kv heads take dp and the groups tp.
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @gqa_heads
// CHECK-SAME: %{{[^:]+}}: tensor<2x8x4x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _, tp, _]>}
// CHECK-SAME: %{{[^:]+}}: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _, tp, _]>}
// CHECK-SAME: %{{[^:]+}}: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _, tp, _]>}
func.func @gqa_heads(%q: tensor<2x8x4x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _, tp, _]>},
                     %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32> {
  // CHECK: cleave.attention {{.*}}cleave.shardings = [#cleave.sharding<@m, [dp, _, tp, _]>]
  %0 = cleave.attention %q, %k, %v {causal} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// CHECK-LABEL: func.func @gqa_heads_two_axes
// CHECK-SAME: %{{[^:]+}}: tensor<2x8x4x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _, (dp, tp), _]>}
// CHECK-SAME: %{{[^:]+}}: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _, dp, _]>}
// CHECK-SAME: %{{[^:]+}}: tensor<2x8x2x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _, dp, _]>}
func.func @gqa_heads_two_axes(%q: tensor<2x8x4x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _, (dp, tp), _]>},
                              %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32> {
  // CHECK: cleave.attention {{.*}}cleave.shardings = [#cleave.sharding<@m, [_, _, (dp, tp), _]>]
  %0 = cleave.attention %q, %k, %v {causal} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// The group factor is split only under complete kv heads: the keys split
// their 4 kv heads over a alone (incomplete), so the query's proposal to
// split the group over c is dropped (it would interleave heads); the
// attention follows the keys.
cleave.mesh @m(a = 2 : ib, b = 2 : ib, c = 2 : nvlink)

// CHECK-LABEL: func.func @gqa_minor_under_incomplete_major
// CHECK-SAME: %{{[^:]+}}: tensor<2x8x4x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _, a, _]>}
// CHECK-SAME: -> (tensor<2x8x8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _, a, _]>})
func.func @gqa_minor_under_incomplete_major(
    %q0: tensor<2x8x8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _, (a, b, c), _]>},
    %k: tensor<2x8x4x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _, a, _]>},
    %v: tensor<2x8x4x16xf32>) -> tensor<2x8x8x16xf32> {
  // CHECK: cleave.exp {{.*}} {cleave.shardings = [#cleave.sharding<@m, [_, _, (a, b, c), _]>]}
  %q = cleave.exp %q0 : tensor<2x8x8x16xf32>
  // CHECK: cleave.attention {{.*}}cleave.shardings = [#cleave.sharding<@m, [_, _, a, _]>]
  %0 = cleave.attention %q, %k, %v {causal} : (tensor<2x8x8x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x8x16xf32>
  return %0 : tensor<2x8x8x16xf32>
}

// -----

// Multi-query attention (one kv head): the major factor has size 1, so the
// query heads split over the group alone and keys stay whole.
cleave.mesh @m(tp = 2 : nvlink)

// CHECK-LABEL: func.func @mqa_heads
// CHECK-SAME: %{{[^:]+}}: tensor<2x8x1x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _, _, _]>}
func.func @mqa_heads(%q: tensor<2x8x4x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, _, tp, _]>},
                     %k: tensor<2x8x1x16xf32>, %v: tensor<2x8x1x16xf32>) -> tensor<2x8x4x16xf32> {
  // CHECK: cleave.attention {{.*}}cleave.shardings = [#cleave.sharding<@m, [_, _, tp, _]>]
  %0 = cleave.attention %q, %k, %v {causal} : (tensor<2x8x4x16xf32>, tensor<2x8x1x16xf32>, tensor<2x8x1x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Conflict policy: two user annotations that split one dimension
// differently get a warning naming both (with a note at each); the first
// operand wins.
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @disagree
// CHECK-SAME: -> (tensor<16x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>})
// expected-note @below {{annotation of operand #0 is here}}
func.func @disagree(%a: tensor<16x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>},
                    // expected-note @below {{annotation of operand #1 is here}}
                    %b: tensor<16x16xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>}) -> tensor<16x16xf32> {
  // expected-warning @below {{sharding annotations disagree: operand #1 splits a dimension of size 16 over [tp], but operand #0 already splits it (or uses the axes) as [dp]; the op follows operand #0 and operand #1 is resharded}}
  %y = cleave.add %a, %b : tensor<16x16xf32>
  // CHECK: cleave.add {{.*}} {cleave.shardings = [#cleave.sharding<@m, [dp, _]>]}
  return %y : tensor<16x16xf32>
}

// One axis on two dimensions.
// CHECK-LABEL: func.func @axis_twice
// CHECK: cleave.add {{.*}} {cleave.shardings = [#cleave.sharding<@m, [dp, _]>]}
// expected-note @below {{annotation of operand #0 is here}}
func.func @axis_twice(%a: tensor<16x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>},
                      // expected-note @below {{annotation of operand #1 is here}}
                      %b: tensor<16x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, dp]>}) -> tensor<16x16xf32> {
  // expected-warning @below {{operand #1 splits a dimension of size 16 over [dp], but operand #0 already splits it (or uses the axes) as [dp]}}
  %y = cleave.add %a, %b : tensor<16x16xf32>
  return %y : tensor<16x16xf32>
}

// A constraint is a user annotation: it wins over a propagated sharding
// without a warning.
// CHECK-LABEL: func.func @constraint_over_propagated
// CHECK: cleave.exp {{.*}} {cleave.shardings = [#cleave.sharding<@m, [dp, _]>]}
// CHECK: cleave.add {{.*}} {cleave.shardings = [#cleave.sharding<@m, [tp, _]>]}
func.func @constraint_over_propagated(%a: tensor<16x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>}) -> tensor<16x16xf32> {
  %e = cleave.exp %a : tensor<16x16xf32>
  %c = cleave.sharding_constraint %e <@m, [tp, _]> : tensor<16x16xf32>
  %y = cleave.add %e, %c : tensor<16x16xf32>
  return %y : tensor<16x16xf32>
}

// -----

// Refinement: the optimizer state splits its parameter's dimension further
// (ZeRO); the finer user split wins, whichever comes first, without a
// warning. A new parameter value keeps its argument's sharding.
cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @refine
// CHECK-SAME: -> (tensor<16x16xf32> {cleave.output = "w", cleave.sharding = #cleave.sharding<@m, [tp, _]>}, tensor<16x16xf32> {cleave.output = "w.exp_avg", cleave.sharding = #cleave.sharding<@m, [(tp, dp), _]>})
func.func @refine(%p: tensor<16x16xf32> {cleave.param = "w", cleave.sharding = #cleave.sharding<@m, [tp, _]>},
                  %s: tensor<16x16xf32> {cleave.state = "w.exp_avg", cleave.sharding = #cleave.sharding<@m, [(tp, dp), _]>})
    -> (tensor<16x16xf32> {cleave.output = "w"}, tensor<16x16xf32> {cleave.output = "w.exp_avg"}) {
  // CHECK: cleave.add {{.*}} {cleave.shardings = [#cleave.sharding<@m, [(tp, dp), _]>]}
  %y = cleave.add %p, %s : tensor<16x16xf32>
  // CHECK: cleave.mul {{.*}} {cleave.shardings = [#cleave.sharding<@m, [(tp, dp), _]>]}
  %z = cleave.mul %y, %s : tensor<16x16xf32>
  return %y, %z : tensor<16x16xf32>, tensor<16x16xf32>
}

// CHECK-LABEL: func.func @refine_coarser_second
// CHECK: cleave.add {{.*}} {cleave.shardings = [#cleave.sharding<@m, [(tp, dp), _]>]}
func.func @refine_coarser_second(%s: tensor<16x16xf32> {cleave.sharding = #cleave.sharding<@m, [(tp, dp), _]>},
                                 %p: tensor<16x16xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>}) -> tensor<16x16xf32> {
  %y = cleave.add %p, %s : tensor<16x16xf32>
  return %y : tensor<16x16xf32>
}

// -----

// A proposal whose minor axes another factor already holds keeps its free
// major axes: the rows arrive split over (cp, tp) (propagated, as after a
// sequence-parallel norm) and meet a weight whose output features hold tp
// (a user annotation, which proposes first), so the rows keep cp instead of
// nothing and the product is split [cp] x [tp].
cleave.mesh @m(cp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @minor_axis_taken
// CHECK: cleave.matmul {{.*}}cleave.shardings = [#cleave.sharding<@m, [_, cp, tp]>]
func.func @minor_axis_taken(%x0: tensor<2x8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, (cp, tp), _]>},
                            %w: tensor<32x16xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _]>}) -> tensor<2x8x32xf32> {
  %x = cleave.exp %x0 : tensor<2x8x16xf32>
  %0 = cleave.matmul %x, %w {transpose_rhs} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  return %0 : tensor<2x8x32xf32>
}

// -----

// A later proposal splits what a propagated sharding leaves whole: the
// relu first gets the argument's [dp, _], then the add's annotated operand
// also splits its columns over cp, so the relu runs on [dp, cp] blocks (the
// key and value gradients of attention under dp x cp keep their sequence
// block this way). The user's annotation of %x is not changed.
cleave.mesh @m(dp = 2 : ib, cp = 2 : ib)

// CHECK-LABEL: func.func @split_further
// CHECK-SAME: %{{[^:]+}}: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>}
// The sum of the relu over both dimensions, first pending over dp, becomes
// pending over dp and cp with it (a bias gradient under dp x cp), rather
// than gathering its operand over cp.
func.func @split_further(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, _]>},
                         %y: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [dp, cp]>}) -> (tensor<8x16xf32>, tensor<f32>) {
  // CHECK: cleave.relu {{.*}} {cleave.shardings = [#cleave.sharding<@m, [dp, cp]>]}
  %0 = cleave.relu %x : tensor<8x16xf32>
  // CHECK: cleave.reduce_sum {{.*}} {cleave.shardings = [#cleave.sharding<@m, [], partial = [dp, cp]>]}
  %s = cleave.reduce_sum %0 dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  // CHECK: cleave.add {{.*}} {cleave.shardings = [#cleave.sharding<@m, [dp, cp]>]}
  %1 = cleave.add %0, %y : tensor<8x16xf32>
  return %1, %s : tensor<8x16xf32>, tensor<f32>
}
