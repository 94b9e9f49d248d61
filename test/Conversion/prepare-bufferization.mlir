// RUN: cleave-opt %s --split-input-file --cleave-prepare-bufferization | FileCheck %s
// RUN: cleave-opt %s --split-input-file --cleave-prepare-bufferization=unshare-empties=false | FileCheck %s --check-prefix=SHARED

// The arguments of a public function are read-only for the compiled code;
// arguments that are not tensors get no attribute.
// CHECK-LABEL: func.func @read_only_arguments
// CHECK-SAME: (%{{.*}}: tensor<4xf32> {bufferization.writable = false}, %{{.*}}: tensor<2x2xbf16> {bufferization.writable = false}, %{{.*}}: index)
func.func @read_only_arguments(%x: tensor<4xf32>, %y: tensor<2x2xbf16>, %n: index) -> tensor<4xf32> {
  %c = arith.constant dense<1.0> : tensor<4xf32>
  %0 = arith.addf %x, %c : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Private functions and declarations are not entry points: no host passes
// them buffers, so their boundaries are left to one-shot bufferization.
// CHECK-LABEL: func.func private @helper
// CHECK-SAME: (%{{.*}}: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK-NOT: bufferization.writable
// CHECK-NOT: linalg.copy
// CHECK: return %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>
func.func private @helper(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  return %x, %x : tensor<4xf32>, tensor<4xf32>
}
// CHECK-LABEL: func.func private @external
// CHECK-SAME: (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NOT: bufferization.writable
func.func private @external(tensor<4xf32>) -> tensor<4xf32>

// -----

// A value returned twice (the gradient of both operands of an addition)
// gets a copy for its second result, so that each result bufferizes into
// its own out-parameter; the first result stays the value itself.
// CHECK-LABEL: func.func @duplicate_results
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32> {bufferization.writable = false})
// CHECK: %[[G:.*]] = arith.addf %[[X]], %[[X]] : tensor<4xf32>
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[C1:.*]] = linalg.copy ins(%[[G]] : tensor<4xf32>) outs(%[[E1]] : tensor<4xf32>) -> tensor<4xf32>
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[C2:.*]] = linalg.copy ins(%[[G]] : tensor<4xf32>) outs(%[[E2]] : tensor<4xf32>) -> tensor<4xf32>
// CHECK: return %[[G]], %[[C1]], %[[C2]] : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
func.func @duplicate_results(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %g = arith.addf %x, %x : tensor<4xf32>
  return %g, %g, %g : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A returned argument is copied even the first time (it must not alias the
// caller's input buffer); distinct results and non-tensor results are not.
// CHECK-LABEL: func.func @returned_argument
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32> {bufferization.writable = false}, %[[N:.*]]: i64)
// CHECK: %[[Y:.*]] = arith.negf %[[X]] : tensor<2x3xf32>
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK: %[[C:.*]] = linalg.copy ins(%[[X]] : tensor<2x3xf32>) outs(%[[E]] : tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NOT: linalg.copy
// CHECK: return %[[C]], %[[Y]], %[[N]], %[[N]] : tensor<2x3xf32>, tensor<2x3xf32>, i64, i64
func.func @returned_argument(%x: tensor<2x3xf32>, %n: i64) -> (tensor<2x3xf32>, tensor<2x3xf32>, i64, i64) {
  %y = arith.negf %x : tensor<2x3xf32>
  return %x, %y, %n, %n : tensor<2x3xf32>, tensor<2x3xf32>, i64, i64
}

// -----

// A fill shared by three GEMMs (as CSE leaves the zeros they accumulate
// into) becomes one fill per user, into its own tensor.empty, right before
// it: none stays where the shared one was, so no buffer is filled before
// its user needs it.
// CHECK-LABEL: func.func @shared_fill
// CHECK-SAME: (%[[A:.*]]: tensor<4x4xf32> {bufferization.writable = false})
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[E0:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT: %[[F0:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E0]] : tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[M0:.*]] = linalg.matmul ins(%[[A]], %[[A]] : tensor<4x4xf32>, tensor<4x4xf32>) outs(%[[F0]] : tensor<4x4xf32>)
// CHECK-NEXT: %[[E1:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT: %[[F1:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E1]] : tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[M1:.*]] = linalg.matmul ins(%[[M0]], %[[A]] : tensor<4x4xf32>, tensor<4x4xf32>) outs(%[[F1]] : tensor<4x4xf32>)
// CHECK-NEXT: %[[E2:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT: %[[F2:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E2]] : tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[M2:.*]] = linalg.matmul ins(%[[M1]], %[[A]] : tensor<4x4xf32>, tensor<4x4xf32>) outs(%[[F2]] : tensor<4x4xf32>)
// CHECK-NEXT: return %[[M2]]
func.func @shared_fill(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = linalg.matmul ins(%a, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = linalg.matmul ins(%0, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = linalg.matmul ins(%1, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %2 : tensor<4x4xf32>
}

// -----

// Fills are unshared in private functions too (a pipeline's pass functions,
// @train_step_b0, hold the layers' compute), while their arguments get no
// writable attribute.
// CHECK-LABEL: func.func private @shared_fill_in_pass
// CHECK-SAME: (%[[A:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK: %[[E0:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT: %[[F0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E0]] : tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[M0:.*]] = linalg.matmul ins(%[[A]], %[[A]] : tensor<4x4xf32>, tensor<4x4xf32>) outs(%[[F0]] : tensor<4x4xf32>)
// CHECK-NEXT: %[[E1:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT: %[[F1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E1]] : tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: linalg.matmul ins(%[[M0]], %[[A]] : tensor<4x4xf32>, tensor<4x4xf32>) outs(%[[F1]] : tensor<4x4xf32>)
func.func private @shared_fill_in_pass(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = linalg.matmul ins(%a, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = linalg.matmul ins(%0, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}

// -----

// A fill with one user stays as it is.
// CHECK-LABEL: func.func @single_use_fill
// CHECK-SAME: (%[[A:.*]]: tensor<4x4xf32> {bufferization.writable = false}, %[[INIT:.*]]: tensor<4x4xf32> {bufferization.writable = false})
// CHECK: %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[INIT]] : tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK: %[[M:.*]] = linalg.matmul ins(%[[A]], %[[A]] : tensor<4x4xf32>, tensor<4x4xf32>) outs(%[[F]] : tensor<4x4xf32>)
// CHECK-NOT: linalg.fill
// CHECK: return %[[M]]
func.func @single_use_fill(%a: tensor<4x4xf32>, %init: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = linalg.matmul ins(%a, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// A slice that bufferizes to a view with an offset or strides (the members
// of a bucketed collective are slices of one buffer) is copied where it
// crosses a function boundary, a call or a return, private functions too:
// boundaries have identity layouts, which a cast cannot reach. A leading
// block of whole rows is already one, and is passed as it is.
// CHECK-LABEL: func.func private @stage
// CHECK: %[[S:.*]] = tensor.extract_slice %{{.*}}[1] [1] [1] : tensor<4xf32> to tensor<1xf32>
// CHECK: %[[E:.*]] = tensor.empty() : tensor<1xf32>
// CHECK: %[[C:.*]] = linalg.copy ins(%[[S]] : tensor<1xf32>) outs(%[[E]] : tensor<1xf32>)
// CHECK: return %[[C]]
func.func private @stage(%x: tensor<f32>, %b: tensor<4xf32>) -> tensor<1xf32> {
  %s = tensor.extract_slice %b[1] [1] [1] : tensor<4xf32> to tensor<1xf32>
  return %s : tensor<1xf32>
}
// CHECK-LABEL: func.func @bucket_members
// CHECK: %[[S1:.*]] = tensor.extract_slice %{{.*}}[1] [1] [1] : tensor<4xf32> to tensor<1xf32>
// CHECK: %[[R1:.*]] = tensor.collapse_shape %[[S1]] [] : tensor<1xf32> into tensor<f32>
// CHECK: %[[S0:.*]] = tensor.extract_slice %{{.*}}[0, 0] [1, 4] [1, 1] : tensor<2x4xf32> to tensor<1x4xf32>
// CHECK: %[[R0:.*]] = tensor.collapse_shape %[[S0]] {{\[}}[0, 1]] : tensor<1x4xf32> into tensor<4xf32>
// CHECK: %[[E:.*]] = tensor.empty() : tensor<f32>
// CHECK: %[[C:.*]] = linalg.copy ins(%[[R1]] : tensor<f32>) outs(%[[E]] : tensor<f32>)
// CHECK: call @stage(%[[C]], %[[R0]])
func.func @bucket_members(%b: tensor<4xf32>, %m: tensor<2x4xf32>) -> tensor<1xf32> {
  %s1 = tensor.extract_slice %b[1] [1] [1] : tensor<4xf32> to tensor<1xf32>
  %r1 = tensor.collapse_shape %s1 [] : tensor<1xf32> into tensor<f32>
  %s0 = tensor.extract_slice %m[0, 0] [1, 4] [1, 1] : tensor<2x4xf32> to tensor<1x4xf32>
  %r0 = tensor.collapse_shape %s0 [[0, 1]] : tensor<1x4xf32> into tensor<4xf32>
  %y = call @stage(%r1, %r0) : (tensor<f32>, tensor<4xf32>) -> tensor<1xf32>
  return %y : tensor<1xf32>
}

// -----

// One tensor.empty that CSE shares between an op early in the function, a
// later one and a loop becomes an empty right before each op (the loop's
// body keeps sharing the one before the loop): bufferization would
// otherwise write every user's result into one buffer, alive from the first
// user to the last.
// CHECK-LABEL: func.func @shared_empty
// CHECK-SAME: (%[[A:.*]]: tensor<4xf32> {bufferization.writable = false}
// CHECK-NOT: tensor.empty
// CHECK: %[[E0:.*]] = tensor.empty() : tensor<4xf32>
// CHECK-NEXT: %[[X:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<4xf32>) outs(%[[E0]] : tensor<4xf32>)
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<4xf32>
// CHECK-NEXT: %[[Y:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4xf32>) outs(%[[E1]] : tensor<4xf32>)
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<4xf32>
// CHECK-NEXT: scf.for
// CHECK-NOT: tensor.empty
// CHECK: linalg.generic {{.*}} outs(%[[E2]] : tensor<4xf32>)
// CHECK-NOT: tensor.empty
// CHECK: linalg.generic {{.*}} outs(%[[E2]] : tensor<4xf32>)
// Unless told not to (the CUDA pipeline).
// SHARED-LABEL: func.func @shared_empty
// SHARED: %[[E:.*]] = tensor.empty() : tensor<4xf32>
// SHARED-NOT: tensor.empty
// SHARED-COUNT-4: outs(%[[E]] : tensor<4xf32>)
// SHARED-NOT: tensor.empty
#id = affine_map<(d0) -> (d0)>
func.func @shared_empty(%a: tensor<4xf32>, %n: index) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.negf %in : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.negf %in : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %y) -> (tensor<4xf32>) {
    %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%acc : tensor<4xf32>) outs(%e : tensor<4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %r = arith.negf %in : f32
      linalg.yield %r : f32
    } -> tensor<4xf32>
    %u = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%t : tensor<4xf32>) outs(%e : tensor<4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %r = arith.negf %in : f32
      linalg.yield %r : f32
    } -> tensor<4xf32>
    scf.yield %u : tensor<4xf32>
  }
  return %z : tensor<4xf32>
}
