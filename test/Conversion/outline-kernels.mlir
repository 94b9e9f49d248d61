// RUN: cleave-opt %s --split-input-file --cleave-outline-kernels | FileCheck %s

// Each top-level loop nest becomes a private, never-inlined function of
// the values it uses; constants (loop bounds) are rebuilt inside it, so
// they stay constants for LLVM. Kernels are numbered per function, in
// order, and precede it.
// CHECK-LABEL: func.func private @step_kernel0
// CHECK-SAME: (%[[X:.*]]: memref<8x16xf32>, %[[Y:.*]]: memref<8x16xf32>)
// CHECK-SAME: attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : index
// CHECK: scf.for %[[I:.*]] = %[[C0]] to %[[C8]] step %[[C1]] {
// CHECK: scf.for %[[J:.*]] = %[[C0]] to %[[C16]] step %[[C1]] {
// CHECK: %[[V:.*]] = memref.load %[[X]][%[[I]], %[[J]]] : memref<8x16xf32>
// CHECK: %[[E:.*]] = math.exp %[[V]] : f32
// CHECK: memref.store %[[E]], %[[Y]][%[[I]], %[[J]]] : memref<8x16xf32>
// CHECK: return
// CHECK-LABEL: func.func private @step_kernel1
// CHECK-SAME: (%[[Y:.*]]: memref<8x16xf32>, %[[S:.*]]: f32, %[[Z:.*]]: memref<8x16xf32>)
// CHECK-SAME: attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
// CHECK: scf.for
// CHECK: scf.for
// CHECK: %[[V:.*]] = memref.load %[[Y]]
// CHECK: %[[M:.*]] = arith.mulf %[[V]], %[[S]] : f32
// CHECK: memref.store %[[M]], %[[Z]]
// CHECK: return
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[X:.*]]: memref<8x16xf32>, %[[Y:.*]]: memref<8x16xf32>, %[[Z:.*]]: memref<8x16xf32>, %[[S:.*]]: f32)
// CHECK-NEXT: %{{.*}} = arith.constant
// CHECK-NEXT: %{{.*}} = arith.constant
// CHECK-NEXT: %{{.*}} = arith.constant
// CHECK-NEXT: %{{.*}} = arith.constant
// CHECK-NEXT: call @step_kernel0(%[[X]], %[[Y]]) : (memref<8x16xf32>, memref<8x16xf32>) -> ()
// CHECK-NEXT: call @step_kernel1(%[[Y]], %[[S]], %[[Z]]) : (memref<8x16xf32>, f32, memref<8x16xf32>) -> ()
// CHECK-NEXT: return
func.func @step(%x: memref<8x16xf32>, %y: memref<8x16xf32>, %z: memref<8x16xf32>, %s: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c16 step %c1 {
      %v = memref.load %x[%i, %j] : memref<8x16xf32>
      %e = math.exp %v : f32
      memref.store %e, %y[%i, %j] : memref<8x16xf32>
    }
  }
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c16 step %c1 {
      %v = memref.load %y[%i, %j] : memref<8x16xf32>
      %m = arith.mulf %v, %s : f32
      memref.store %m, %z[%i, %j] : memref<8x16xf32>
    }
  }
  return
}

// -----

// Nests that the bare-pointer convention cannot pass stay in place: a
// strided view, a dynamic shape, a tensor; so do ops with results (a loop
// carrying a value) and ops without regions. The nest after them is still
// outlined, as the function's first kernel.
// CHECK-LABEL: func.func private @mixed_kernel0
// CHECK-SAME: (%{{.*}}: f32, %{{.*}}: memref<4xf32>)
// CHECK-NOT: func.func private @mixed_kernel1
// CHECK-LABEL: func.func @mixed
// CHECK-SAME: (%[[A:.*]]: memref<4x8xf32>, %[[D:.*]]: memref<?xf32>, %[[T:.*]]: tensor<4xf32>, %[[B:.*]]: memref<4xf32>)
// CHECK: %[[VIEW:.*]] = memref.subview %[[A]][0, 0] [4, 1] [1, 1]
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %[[VIEW]]
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %[[D]]
// CHECK: scf.for
// CHECK: tensor.extract %[[T]]
// CHECK: %[[SUM:.*]] = scf.for {{.*}} iter_args
// CHECK: memref.load %[[B]]
// CHECK: scf.yield
// CHECK: call @mixed_kernel0(%[[SUM]], %[[B]]) : (f32, memref<4xf32>) -> ()
// CHECK-NEXT: return
func.func @mixed(%a: memref<4x8xf32>, %d: memref<?xf32>, %t: tensor<4xf32>, %b: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %view = memref.subview %a[0, 0] [4, 1] [1, 1] : memref<4x8xf32> to memref<4xf32, strided<[8]>>
  scf.for %i = %c0 to %c4 step %c1 {
    memref.store %zero, %view[%i] : memref<4xf32, strided<[8]>>
  }
  %n = memref.dim %d, %c0 : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    memref.store %zero, %d[%i] : memref<?xf32>
  }
  scf.for %i = %c0 to %c4 step %c1 {
    %v = tensor.extract %t[%i] : tensor<4xf32>
    memref.store %v, %b[%i] : memref<4xf32>
  }
  %sum = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
    %v = memref.load %b[%i] : memref<4xf32>
    %s = arith.addf %acc, %v : f32
    scf.yield %s : f32
  }
  scf.for %i = %c0 to %c4 step %c1 {
    memref.store %sum, %b[%i] : memref<4xf32>
  }
  return
}

// -----

// Declarations are left alone; private functions with bodies are outlined
// too (the kernels of a pipeline stage's helpers).
// CHECK: func.func private @cleave_rt_gemm(memref<4xf32>)
// CHECK-LABEL: func.func private @helper_kernel0
// CHECK-LABEL: func.func private @helper(
// CHECK: call @helper_kernel0
func.func private @cleave_rt_gemm(memref<4xf32>)
func.func private @helper(%b: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c4 step %c1 {
    memref.store %one, %b[%i] : memref<4xf32>
  }
  return
}
