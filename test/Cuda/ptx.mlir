// The PTX of the kernels: 128-bit global loads and stores where the data
// allows, the block size known to ptxas, block reductions with warp
// shuffles. Without cleave-cuda-align-vector-access the vector accesses
// would be split into 32-bit ones.
// REQUIRES: ptxas
// RUN: cleave-opt %s --pass-pipeline="builtin.module(cleave-cuda-map-to-gpu,nvvm-attach-target{chip=sm_90 O=3},gpu.module(lower-affine,convert-scf-to-cf,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1},canonicalize,cse,reconcile-unrealized-casts),cleave-cuda-align-vector-access,gpu-module-to-binary{format=isa})" | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline="builtin.module(cleave-cuda-map-to-gpu,nvvm-attach-target{chip=sm_90 O=3},gpu.module(lower-affine,convert-scf-to-cf,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1},canonicalize,cse,reconcile-unrealized-casts),gpu-module-to-binary{format=isa})" | FileCheck %s --check-prefix=UNALIGNED

// CHECK: gpu.binary @cleave_kernels
// CHECK-SAME: .target sm_90
// CHECK-SAME: .entry scale_k0_ew(
// CHECK-SAME: .maxntid 256, 1, 1
// CHECK-SAME: ld.global.v4.f32
// CHECK-SAME: st.global.v4.f32
// CHECK-SAME: .entry rows_k1_block_reduce(
// CHECK-SAME: ld.global.v4.f32
// CHECK-SAME: shfl.sync.bfly.b32
// UNALIGNED-NOT: ld.global.v4.f32

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @scale(%x: memref<64x1024xf32>, %y: memref<64x1024xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<64x1024xf32>) outs(%y : memref<64x1024xf32>) {
  ^bb0(%in: f32, %out: f32):
    %c = arith.constant 0.5 : f32
    %r = arith.mulf %in, %c : f32
    linalg.yield %r : f32
  }
  return
}
func.func @rows(%x: memref<64x1024xf32>, %s: memref<64xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x1024xf32>) outs(%s : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %acc, %in : f32
    linalg.yield %r : f32
  }
  return
}
