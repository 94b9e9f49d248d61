// RUN: cleave-opt %s --cleave-early-dealloc | FileCheck %s

// A buffer is freed right after its last use, a view's use included.
// CHECK-LABEL: func.func @chain
// CHECK: %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: linalg.fill ins(%{{.*}} : f32) outs(%[[A]] : memref<4xf32>)
// CHECK-NEXT: %[[V:.*]] = memref.expand_shape %[[A]]
// CHECK-NEXT: linalg.copy ins(%[[V]] : memref<2x2xf32>) outs(%arg0 : memref<2x2xf32>)
// CHECK-NEXT: memref.dealloc %[[A]] : memref<4xf32>
// CHECK-NEXT: %[[B:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: linalg.fill ins(%{{.*}} : f32) outs(%[[B]] : memref<4xf32>)
// CHECK-NEXT: memref.dealloc %[[B]] : memref<4xf32>
// CHECK-NEXT: return
func.func @chain(%out: memref<2x2xf32>) {
  %c = arith.constant 1.0 : f32
  %a = memref.alloc() : memref<4xf32>
  linalg.fill ins(%c : f32) outs(%a : memref<4xf32>)
  %v = memref.expand_shape %a [[0, 1]] output_shape [2, 2] : memref<4xf32> into memref<2x2xf32>
  linalg.copy ins(%v : memref<2x2xf32>) outs(%out : memref<2x2xf32>)
  %b = memref.alloc() : memref<4xf32>
  linalg.fill ins(%c : f32) outs(%b : memref<4xf32>)
  memref.dealloc %a : memref<4xf32>
  memref.dealloc %b : memref<4xf32>
  return
}

// A pointer taken from the buffer keeps it alive until the call that
// reads it.
// CHECK-LABEL: func.func @pointer
// CHECK: %[[P:.*]] = memref.extract_aligned_pointer_as_index
// CHECK: call @consume(%[[P]])
// CHECK-NEXT: memref.dealloc
// CHECK-NEXT: return
func.func private @consume(index)
func.func @pointer() {
  %a = memref.alloc() : memref<4xf32>
  %p = memref.extract_aligned_pointer_as_index %a : memref<4xf32> -> index
  %c = arith.constant 1.0 : f32
  linalg.fill ins(%c : f32) outs(%a : memref<4xf32>)
  call @consume(%p) : (index) -> ()
  memref.dealloc %a : memref<4xf32>
  return
}

// A use in a nested region counts as a use by the op holding it; a buffer
// allocated in another block keeps its deallocation.
// CHECK-LABEL: func.func @nested
// CHECK: scf.for
// CHECK: memref.load %[[N:.*]][
// CHECK: }
// CHECK-NEXT: memref.dealloc %[[N]]
func.func @nested(%n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<4xf32>
  linalg.fill ins(%z : f32) outs(%a : memref<4xf32>)
  %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> (f32) {
    %x = memref.load %a[%c0] : memref<4xf32>
    %y = arith.addf %acc, %x : f32
    scf.yield %y : f32
  }
  %t = arith.addf %s, %s : f32
  memref.dealloc %a : memref<4xf32>
  return %t : f32
}
