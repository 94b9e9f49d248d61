// RUN: cleave-opt %s --cleave-cuda-map-to-gpu --canonicalize --cse --cleave-cuda-dedup-kernels | FileCheck %s
// RUN: cleave-opt %s --cleave-cuda-map-to-gpu --canonicalize --cse --cleave-cuda-dedup-kernels | FileCheck %s --check-prefix=GONE

// Two layers' identical additions (other buffers of the same types) launch
// one kernel; a multiplication, and an addition of another shape, keep
// their own. The second addition's kernel (k1) is gone, and so is the
// fifth's (k4).
// GONE-NOT: layers_k1_ew
// GONE-NOT: layers_k4_ew
// CHECK-LABEL: func.func @layers
// CHECK: gpu.launch_func @cleave_kernels::@[[ADD:layers_k0_ew]] {{.*}} args(%arg0 : memref<64x256xf32>, %arg1 : memref<64x256xf32>)
// CHECK: gpu.launch_func @cleave_kernels::@[[ADD]] {{.*}} args(%arg1 : memref<64x256xf32>, %arg2 : memref<64x256xf32>)
// CHECK: gpu.launch_func @cleave_kernels::@[[MUL:layers_k2_ew]] {{.*}} args(%arg2 : memref<64x256xf32>, %arg0 : memref<64x256xf32>)
// CHECK: gpu.launch_func @cleave_kernels::@[[ADD2:layers_k3_ew]] {{.*}} args(%arg3 : memref<128xf32>, %arg4 : memref<128xf32>)
// CHECK: gpu.launch_func @cleave_kernels::@[[ADD]] {{.*}} args(%arg2 : memref<64x256xf32>, %arg0 : memref<64x256xf32>)
// CHECK: gpu.module @cleave_kernels
// CHECK: gpu.func @[[ADD]](
// CHECK: arith.addf
// CHECK: gpu.func @[[MUL]](
// CHECK: arith.mulf
// CHECK: gpu.func @[[ADD2]](
// CHECK: arith.addf
// CHECK-NOT: gpu.func
#id = affine_map<(d0, d1) -> (d0, d1)>
#id1 = affine_map<(d0) -> (d0)>
func.func @layers(%a: memref<64x256xf32>, %b: memref<64x256xf32>, %c: memref<64x256xf32>, %d: memref<128xf32>, %e: memref<128xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<64x256xf32>) outs(%b : memref<64x256xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : memref<64x256xf32>) outs(%c : memref<64x256xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<64x256xf32>) outs(%a : memref<64x256xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.mulf %x, %y : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%d : memref<128xf32>) outs(%e : memref<128xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<64x256xf32>) outs(%a : memref<64x256xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  return
}
