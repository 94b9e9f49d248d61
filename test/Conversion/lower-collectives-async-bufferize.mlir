// RUN: cleave-opt %s --cleave-lower-collectives --one-shot-bufferize="bufferize-function-boundaries" --cse | FileCheck %s

// Between a start and its wait the runtime reads the operand's buffer and
// writes the result buffer. One-shot bufferization sees the operand read at
// the wait too, so an op that overwrites the operand in between does not do
// it in place (it gets a new buffer), and both buffers are used until the
// wait, where -cleave-early-dealloc can free them at the earliest.

cleave.mesh @m(dp = 2 : ib)

// CHECK-LABEL: func.func @overwrite_in_flight
func.func @overwrite_in_flight(%s: f32) -> (tensor<8xf32>, tensor<8xf32>) {
  %c1 = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  // CHECK: %[[X:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8xf32>
  // CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[X]] : memref<8xf32>)
  %x = linalg.fill ins(%c1 : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  // CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8xf32>
  // CHECK: %[[XP:.*]] = memref.extract_aligned_pointer_as_index %[[X]]
  // CHECK: %[[OP:.*]] = memref.extract_aligned_pointer_as_index %[[OUT]]
  // CHECK: %[[H:.*]] = call @cleave_rt_all_reduce_start
  %r = cleave.all_reduce_start %x on @m axes = [dp] : tensor<8xf32> -> !cleave.request<tensor<8xf32>>
  // The overwrite of %x goes to a new buffer, not into %[[X]].
  // CHECK: %[[Y:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8xf32>
  // CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[Y]] : memref<8xf32>)
  %y = linalg.fill ins(%s : f32) outs(%x : tensor<8xf32>) -> tensor<8xf32>
  // CHECK: call @cleave_rt_wait(%[[H]], %[[XP2:.*]], %{{.*}}, %{{.*}})
  // CHECK: return %[[Y]], %[[OUT]]
  %z = cleave.wait %r : !cleave.request<tensor<8xf32>> -> tensor<8xf32>
  return %y, %z : tensor<8xf32>, tensor<8xf32>
}
