// RUN: cleave-opt %s -split-input-file --cleave-lower-collectives | FileCheck %s

// Start/wait pairs become cleave_rt_*_start calls returning a request handle
// and a cleave_rt_wait at the wait. The wait passes the start's operand and
// result buffers again (the same values, so that they, or a copy that
// bufferization makes of a strided operand, stay allocated until the wait)
// and the operand read once more through a second to_memref, so that no op
// writes the operand in place before the wait.

cleave.mesh @m(dp = 2 : ib, pp = 2 : ib)

// CHECK-LABEL: func.func @all_reduce
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>)
func.func @all_reduce(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x16xf32>
  // CHECK: %[[IN:.*]] = bufferization.to_memref %[[X]] read_only {collective_input = 0 : i64}
  // CHECK: %[[H:.*]] = call @cleave_rt_all_reduce_start(%c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c3_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c128_i64{{[_0-9]*}}) : (i64, i32, i32, !llvm.ptr, !llvm.ptr, i64) -> i64
  %r = cleave.all_reduce_start %x on @m axes = [dp] reduction = avg : tensor<8x16xf32> -> !cleave.request<tensor<8x16xf32>>
  // CHECK: %[[NEG:.*]] = cleave.neg %[[X]]
  %n = cleave.neg %x : tensor<8x16xf32>
  // CHECK: memref.extract_aligned_pointer_as_index %[[IN]]
  // CHECK: memref.extract_aligned_pointer_as_index %[[OUT]]
  // CHECK: bufferization.to_memref %[[X]] read_only {collective_input = 1 : i64}
  // CHECK: call @cleave_rt_wait(%[[H]], %{{.*}}, %{{.*}}, %{{.*}}) : (i64, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
  // CHECK: %[[Y:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
  %y = cleave.wait %r : !cleave.request<tensor<8x16xf32>> -> tensor<8x16xf32>
  // CHECK: cleave.add %[[Y]], %[[NEG]]
  %s = cleave.add %y, %n : tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// CHECK: func.func private @cleave_rt_all_reduce_start(i64, i32, i32, !llvm.ptr, !llvm.ptr, i64) -> i64
// CHECK: func.func private @cleave_rt_wait(i64, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32

// -----

cleave.mesh @m(dp = 2 : ib, pp = 2 : ib)

// A gather along dimension 1 gathers the transposed tensor along dimension
// 0 and transposes the result back after the wait.
// CHECK-LABEL: func.func @gather_scatter
func.func @gather_scatter(%x: tensor<8x16xf32>) -> (tensor<8x32xf32>, tensor<4x16xf32>) {
  // CHECK: cleave.transpose %{{.*}} permutation = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  // CHECK: call @cleave_rt_all_gather_start(%c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c128_i64{{[_0-9]*}}) : (i64, i32, !llvm.ptr, !llvm.ptr, i64) -> i64
  %g = cleave.all_gather_start %x on @m axes = [dp] dim = 1 : tensor<8x16xf32> -> !cleave.request<tensor<8x32xf32>>
  // CHECK: call @cleave_rt_reduce_scatter_start(%c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c64_i64{{[_0-9]*}}) : (i64, i32, i32, !llvm.ptr, !llvm.ptr, i64) -> i64
  %s = cleave.reduce_scatter_start %x on @m axes = [dp] dim = 0 : tensor<8x16xf32> -> !cleave.request<tensor<4x16xf32>>
  // CHECK: call @cleave_rt_wait
  // CHECK: %[[G:.*]] = bufferization.to_tensor %{{.*}} : memref<32x8xf32>
  // CHECK: cleave.transpose %[[G]] permutation = [1, 0] : tensor<32x8xf32> -> tensor<8x32xf32>
  %0 = cleave.wait %g : !cleave.request<tensor<8x32xf32>> -> tensor<8x32xf32>
  // CHECK: call @cleave_rt_wait
  // CHECK: bufferization.to_tensor %{{.*}} : memref<4x16xf32>
  %1 = cleave.wait %s : !cleave.request<tensor<4x16xf32>> -> tensor<4x16xf32>
  return %0, %1 : tensor<8x32xf32>, tensor<4x16xf32>
}

// -----

cleave.mesh @m(dp = 2 : ib, pp = 2 : ib)

// A send's wait passes no result buffer; a recv's no operand buffer.
// CHECK-LABEL: func.func @send_recv
func.func @send_recv(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: %[[S:.*]] = call @cleave_rt_send_start(%c0_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %c4_i64{{[_0-9]*}}) : (i64, i64, i32, !llvm.ptr, i64) -> i64
  %s = cleave.send_start %x on @m axes = [pp] to 1 : tensor<4xf32> -> !cleave.request
  // CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  // CHECK: %[[R:.*]] = call @cleave_rt_recv_start(%c0_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %c4_i64{{[_0-9]*}}) : (i64, i64, i32, !llvm.ptr, i64) -> i64
  %r = cleave.recv_start on @m axes = [pp] from 1 : !cleave.request<tensor<4xf32>>
  // CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
  // CHECK: call @cleave_rt_wait(%[[S]], %{{.*}}, %[[NULL]], %{{.*}})
  cleave.wait %s : !cleave.request
  // CHECK: %[[NULL2:.*]] = llvm.mlir.zero : !llvm.ptr
  // CHECK: call @cleave_rt_wait(%[[R]], %[[NULL2]], %{{.*}}, %[[NULL2]])
  // CHECK: bufferization.to_tensor %[[OUT]]
  %y = cleave.wait %r : !cleave.request<tensor<4xf32>> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

cleave.mesh @m(tp = 4 : nvlink)

// all_to_all_start (split 1, concat 0): the split dimension is moved first
// before the start; the exchanged blocks are merged into the rows after the
// wait, as for the blocking all_to_all. The compute between them stays
// between the start and the wait.
// CHECK-LABEL: func.func @all_to_all
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>)
func.func @all_to_all(%x: tensor<8x16xf32>) -> (tensor<32x4xf32>, tensor<8x16xf32>) {
  // CHECK: cleave.transpose %[[X]] permutation = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  // CHECK: %[[H:.*]] = call @cleave_rt_all_to_all_start(%c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c32_i64{{[_0-9]*}}) : (i64, i32, !llvm.ptr, !llvm.ptr, i64) -> i64
  %r = cleave.all_to_all_start %x on @m axes = [tp] split_dim = 1 concat_dim = 0 : tensor<8x16xf32> -> !cleave.request<tensor<32x4xf32>>
  // CHECK: %[[NEG:.*]] = cleave.neg %[[X]]
  %n = cleave.neg %x : tensor<8x16xf32>
  // CHECK: call @cleave_rt_wait(%[[H]], %{{.*}}, %{{.*}}, %{{.*}})
  // CHECK: %[[E:.*]] = bufferization.to_tensor %{{.*}} : memref<16x8xf32>
  // CHECK: %[[BL:.*]] = cleave.reshape %[[E]] : tensor<16x8xf32> to tensor<4x4x8xf32>
  // CHECK: %[[PL:.*]] = cleave.transpose %[[BL]] permutation = [0, 2, 1] : tensor<4x4x8xf32> -> tensor<4x8x4xf32>
  // CHECK: %[[Y:.*]] = cleave.reshape %[[PL]] : tensor<4x8x4xf32> to tensor<32x4xf32>
  %y = cleave.wait %r : !cleave.request<tensor<32x4xf32>> -> tensor<32x4xf32>
  // CHECK: return %[[Y]], %[[NEG]]
  return %y, %n : tensor<32x4xf32>, tensor<8x16xf32>
}

// CHECK: func.func private @cleave_rt_all_to_all_start(i64, i32, !llvm.ptr, !llvm.ptr, i64) -> i64

// -----

cleave.mesh @m(cp = 4 : nvlink)

// collective_permute_start stores its pairs in a stack buffer, as the
// blocking call does (the runtime copies them at the start).
// CHECK-LABEL: func.func @permute
func.func @permute(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x16xf32>
  // CHECK: %[[PAIRS:.*]] = memref.alloca() : memref<8xi64>
  // CHECK-COUNT-8: memref.store %{{.*}}, %[[PAIRS]][%{{.*}}] : memref<8xi64>
  // CHECK: %[[H:.*]] = call @cleave_rt_collective_permute_start(%c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c128_i64{{[_0-9]*}}, %c4_i64{{[_0-9]*}}, %{{.*}}) : (i64, i32, !llvm.ptr, !llvm.ptr, i64, i64, !llvm.ptr) -> i64
  %r = cleave.collective_permute_start %x on @m axes = [cp] pairs = [0 -> 1, 1 -> 2, 2 -> 3, 3 -> 0] : tensor<8x16xf32> -> !cleave.request<tensor<8x16xf32>>
  // CHECK: call @cleave_rt_wait(%[[H]], %{{.*}}, %{{.*}}, %{{.*}})
  // CHECK: bufferization.to_tensor %[[OUT]]
  %y = cleave.wait %r : !cleave.request<tensor<8x16xf32>> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// CHECK: func.func private @cleave_rt_collective_permute_start(i64, i32, !llvm.ptr, !llvm.ptr, i64, i64, !llvm.ptr) -> i64
