// RUN: cleave-opt %s --split-input-file --cleave-cuda-map-to-gpu --verify-diagnostics
// RUN: not cleave-opt %s --split-input-file --cleave-cuda-map-to-gpu=block-size=48 2>&1 | FileCheck %s --check-prefix=BLOCK

// BLOCK: error: block-size 48 is not a multiple of 32 in [32, 1024]

// A host read of a buffer that a kernel writes cannot be moved into a later
// kernel: the value would change in between.
func.func @host_read(%x: memref<f32>, %y: memref<8xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%x : memref<f32>)
  // expected-error @below {{host code would access device memory here}}
  %v = memref.load %x[] : memref<f32>
  linalg.fill ins(%v : f32) outs(%y : memref<8xf32>)
  return
}

// -----

// Kernel arguments need static shapes (bare pointers).
func.func @dynamic(%x: memref<?xf32>, %y: memref<?xf32>) {
  // expected-error @below {{GPU kernels need static loop ranges}}
  linalg.copy ins(%x : memref<?xf32>) outs(%y : memref<?xf32>)
  return
}

// -----

// A buffer written again after a host read cannot be read by a later
// kernel in its place: the second write would come first.
func.func @written_after_read(%y: memref<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %x = memref.alloc() : memref<f32>
  linalg.fill ins(%zero : f32) outs(%x : memref<f32>)
  // expected-error @below {{host code would access device memory here}}
  %v = memref.load %x[] : memref<f32>
  linalg.fill ins(%one : f32) outs(%x : memref<f32>)
  linalg.fill ins(%v : f32) outs(%y : memref<8xf32>)
  memref.dealloc %x : memref<f32>
  return
}

// -----

// A host loop over generics with dynamic ranges does not become one kernel;
// its generics are reported as before.
func.func @dynamic_loop(%x: memref<4x?xf32>, %y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %n = memref.dim %y, %c0 : memref<?xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    %row = memref.subview %x[%i, 0] [1, %n] [1, 1] : memref<4x?xf32> to memref<?xf32, strided<[1], offset: ?>>
    // expected-error @below {{GPU kernels need static loop ranges}}
    linalg.copy ins(%row : memref<?xf32, strided<[1], offset: ?>>) outs(%y : memref<?xf32>)
  }
  return
}
