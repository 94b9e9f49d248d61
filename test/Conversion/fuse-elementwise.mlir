// RUN: cleave-opt %s --split-input-file --cleave-fuse-elementwise | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A chain of elementwise generics whose producers each have one user
// becomes one generic computing the whole chain.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[Y:.*]]: tensor<4x8xf32>)
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-SAME: ins(%[[X]], %[[Y]] : tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[E:.*]] = math.exp %[[A]] : f32
// CHECK: %[[M:.*]] = arith.mulf %[[E]], %[[B]] : f32
// CHECK: %[[N:.*]] = arith.negf %[[M]] : f32
// CHECK: linalg.yield %[[N]] : f32
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
func.func @chain(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e0 = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%0, %y : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%1 : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// An elementwise producer fuses into a reduction (softmax's exp into its
// row sum); the fill that initializes the reduction stays separate.
// CHECK-LABEL: func.func @into_reduction
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[F:.*]] = linalg.fill
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%[[X]] : tensor<4x8xf32>) outs(%[[F]] : tensor<4xf32>)
// CHECK: math.exp
// CHECK: arith.addf
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
func.func @into_reduction(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %e0 = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %1 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%0 : tensor<4x8xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A producer with two users is not fused into either: it would be
// computed twice (a transformer's residual stream in every layer).
// CHECK-LABEL: func.func @shared_producer
// CHECK: %[[P:.*]] = linalg.generic
// CHECK: math.exp
// CHECK: %[[U1:.*]] = linalg.generic
// CHECK-SAME: ins(%[[P]] : tensor<4x8xf32>)
// CHECK-NOT: math.exp
// CHECK: arith.negf
// CHECK: %[[U2:.*]] = linalg.generic
// CHECK-SAME: ins(%[[P]] : tensor<4x8xf32>)
// CHECK-NOT: math.exp
// CHECK: math.sqrt
// CHECK: return %[[U1]], %[[U2]]
func.func @shared_producer(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%0 : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%0 : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.sqrt %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %1, %2 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// GEMMs stay named ops (the runtime's BLAS call after bufferization), with
// their zero fill: neither an elementwise producer of an operand nor the
// bias addition that consumes the product is fused with them.
// CHECK-LABEL: func.func @gemm
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x16xf32>, %[[BIAS:.*]]: tensor<4x16xf32>)
// CHECK: %[[G:.*]] = linalg.generic
// CHECK-SAME: ins(%[[X]] : tensor<4x8xf32>)
// CHECK: math.tanh
// CHECK: %[[F:.*]] = linalg.fill
// CHECK: %[[MM:.*]] = linalg.matmul ins(%[[G]], %[[W]] : tensor<4x8xf32>, tensor<8x16xf32>) outs(%[[F]] : tensor<4x16xf32>)
// CHECK: %[[Y:.*]] = linalg.generic
// CHECK-SAME: ins(%[[MM]], %[[BIAS]] : tensor<4x16xf32>, tensor<4x16xf32>)
// CHECK: arith.addf
// CHECK: return %[[Y]]
func.func @gemm(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %bias: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %e0 = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %1 = linalg.matmul ins(%0, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%1, %bias : tensor<4x16xf32>, tensor<4x16xf32>) outs(%e1 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %2 : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>

// Named elementwise and data-movement ops (linalg.transpose, linalg.copy)
// are not generics: they are neither fused into their consumers nor
// absorb their producers.
// CHECK-LABEL: func.func @named_ops
// CHECK: %[[G:.*]] = linalg.generic
// CHECK: %[[T:.*]] = linalg.transpose ins(%[[G]] : tensor<4x8xf32>)
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[T]] : tensor<8x4xf32>)
func.func @named_ops(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %e0 = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<8x4xf32>
  %1 = linalg.transpose ins(%0 : tensor<4x8xf32>) outs(%e1 : tensor<8x4xf32>) permutation = [1, 0]
  %2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%1 : tensor<8x4xf32>) outs(%e1 : tensor<8x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  return %2 : tensor<8x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A fill or a splat constant read by a generic becomes a scalar in its
// body (upstream's cleanups that come with elementwise fusion).
// CHECK-LABEL: func.func @fill_input
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[V:.*]]: f32)
// CHECK-NOT: linalg.fill
// CHECK: %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NOT: linalg.fill
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[X]] : tensor<4x8xf32>)
// CHECK: ^bb0(%[[A:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[S:.*]] = arith.addf %[[A]], %[[V]] : f32
// CHECK: %[[M:.*]] = arith.mulf %[[S]], %[[TWO]] : f32
// CHECK: linalg.yield %[[M]]
func.func @fill_input(%x: tensor<4x8xf32>, %v: f32) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%v : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %two = arith.constant dense<2.0> : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %f, %two : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %m = arith.mulf %s, %c : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>

// A producer that reads its own output (an in-place update, as the flash
// attention lowering writes for its running row sums) is not fused: the
// fused op would lose the value the producer reads.
// CHECK-LABEL: func.func @reads_own_output
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>, %[[ACC:.*]]: tensor<4xf32>)
// CHECK: %[[U:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4xf32>) outs(%[[ACC]] : tensor<4xf32>)
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} ins(%[[U]] : tensor<4xf32>)
// CHECK: math.exp
func.func @reads_own_output(%x: tensor<4xf32>, %acc: tensor<4xf32>) -> tensor<4xf32> {
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%0 : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
