// RUN: cleave-opt %s -split-input-file --cleave-lower-collectives -verify-diagnostics | FileCheck %s

// Per-device communication ops become runtime calls on buffers. Arguments
// of every call: communicator group id (one per distinct list of axes, in
// order of first use, listed in the module attribute `cleave.groups`),
// dtype code (f32 0, bf16 2), reduction code (sum 0, max 1, avg 3), input
// and output pointers, element count. Constants are named by value, so
// `%c128_i64` is a count of 128.

// CHECK: module attributes {cleave.groups = {{\[}}["tp"], ["dp"], ["dp", "tp"]]}
cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)

// CHECK-LABEL: func.func @collectives
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>, %[[H:.*]]: tensor<8x16xbf16>)
func.func @collectives(%x: tensor<8x16xf32>, %h: tensor<8x16xbf16>)
    -> (tensor<8x16xf32>, tensor<32x16xf32>, tensor<2x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xbf16>) {
  // The input is read through to_memref, the result written into a fresh
  // aligned buffer and handed back with to_tensor.
  // CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x16xf32>
  // CHECK: %[[IN:.*]] = bufferization.to_memref %[[X]] read_only {collective_input = {{[0-9]+}} : i64} : memref<8x16xf32>
  // CHECK: call @cleave_rt_all_reduce(%c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c128_i64{{[_0-9]*}}) : (i64, i32, i32, !llvm.ptr, !llvm.ptr, i64) -> ()
  // CHECK: %[[AR:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<8x16xf32>
  %0 = cleave.all_reduce %x on @m axes = [tp] : tensor<8x16xf32>
  // A gather sends its input count (128) and receives 4 times as much.
  // CHECK: memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
  // CHECK: bufferization.to_memref %[[AR]] read_only {collective_input = {{[0-9]+}} : i64} : memref<8x16xf32>
  // CHECK: call @cleave_rt_all_gather(%c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c128_i64{{[_0-9]*}}) : (i64, i32, !llvm.ptr, !llvm.ptr, i64) -> ()
  %1 = cleave.all_gather %0 on @m axes = [tp] dim = 0 : tensor<8x16xf32> -> tensor<32x16xf32>
  // A scatter passes the count it receives (32); reduction max.
  // CHECK: memref.alloc() {alignment = 64 : i64} : memref<2x16xf32>
  // CHECK: call @cleave_rt_reduce_scatter(%c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c32_i64{{[_0-9]*}})
  %2 = cleave.reduce_scatter %x on @m axes = [tp] dim = 0 reduction = max : tensor<8x16xf32> -> tensor<2x16xf32>
  // An all-to-all passes the block size (128 / 2 devices on dp), group 1.
  // CHECK: call @cleave_rt_all_to_all(%c1_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c64_i64{{[_0-9]*}})
  %3 = cleave.all_to_all %x on @m axes = [dp] split_dim = 0 concat_dim = 0 : tensor<8x16xf32> -> tensor<8x16xf32>
  // A permutation stores its (source, target) pairs in a stack buffer.
  // CHECK: %[[PAIRS:.*]] = memref.alloca() : memref<8xi64>
  // CHECK-COUNT-8: memref.store %{{.*}}, %[[PAIRS]][%{{.*}}] : memref<8xi64>
  // CHECK: memref.extract_aligned_pointer_as_index %[[PAIRS]]
  // CHECK: call @cleave_rt_collective_permute(%c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c128_i64{{[_0-9]*}}, %c4_i64{{[_0-9]*}}, %{{.*}}) : (i64, i32, !llvm.ptr, !llvm.ptr, i64, i64, !llvm.ptr) -> ()
  %4 = cleave.collective_permute %x on @m axes = [tp] pairs = [0 -> 1, 1 -> 2, 2 -> 3, 3 -> 0] : tensor<8x16xf32>
  // Two axes are a third group; bf16 and avg.
  // CHECK: call @cleave_rt_all_reduce(%c2_i64{{[_0-9]*}}, %c2_i32{{[_0-9]*}}, %c3_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c128_i64{{[_0-9]*}})
  %5 = cleave.all_reduce %h on @m axes = [dp, tp] reduction = avg : tensor<8x16xbf16>
  // CHECK-NOT: cleave.all_
  // CHECK-NOT: cleave.reduce_scatter
  // CHECK-NOT: cleave.collective_permute
  // CHECK: return
  return %0, %1, %2, %3, %4, %5 : tensor<8x16xf32>, tensor<32x16xf32>, tensor<2x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xbf16>
}
// Each runtime function is declared once.
// CHECK-DAG: func.func private @cleave_rt_all_reduce(i64, i32, i32, !llvm.ptr, !llvm.ptr, i64)
// CHECK-DAG: func.func private @cleave_rt_all_gather(i64, i32, !llvm.ptr, !llvm.ptr, i64)
// CHECK-DAG: func.func private @cleave_rt_reduce_scatter(i64, i32, i32, !llvm.ptr, !llvm.ptr, i64)
// CHECK-DAG: func.func private @cleave_rt_all_to_all(i64, i32, !llvm.ptr, !llvm.ptr, i64)
// CHECK-DAG: func.func private @cleave_rt_collective_permute(i64, i32, !llvm.ptr, !llvm.ptr, i64, i64, !llvm.ptr)

// -----

// Gathers, scatters and all-to-alls along a non-leading dimension become
// the same exchange on the leading dimension between transposes (the
// runtime moves contiguous blocks); leading dimensions of size 1 need none.

// CHECK: module attributes {cleave.groups = {{\[}}["tp"]]}
cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)

// CHECK-LABEL: func.func @non_leading
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>, %[[Y:.*]]: tensor<1x4x16xf32>)
func.func @non_leading(%x: tensor<8x16xf32>, %y: tensor<1x4x16xf32>)
    -> (tensor<8x64xf32>, tensor<8x4xf32>, tensor<32x4xf32>, tensor<1x16x16xf32>) {
  // CHECK: %[[T0:.*]] = cleave.transpose %[[X]] permutation = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  // CHECK: %[[B0:.*]] = memref.alloc() {{.*}} : memref<64x8xf32>
  // CHECK: bufferization.to_memref %[[T0]] read_only {collective_input = {{[0-9]+}} : i64} : memref<16x8xf32>
  // CHECK: call @cleave_rt_all_gather(%c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c128_i64{{[_0-9]*}})
  // CHECK: %[[G:.*]] = bufferization.to_tensor %[[B0]] {{.*}} : memref<64x8xf32>
  // CHECK: %[[R0:.*]] = cleave.transpose %[[G]] permutation = [1, 0] : tensor<64x8xf32> -> tensor<8x64xf32>
  %0 = cleave.all_gather %x on @m axes = [tp] dim = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  // CHECK: %[[T1:.*]] = cleave.transpose %[[X]] permutation = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  // CHECK: %[[B1:.*]] = memref.alloc() {{.*}} : memref<4x8xf32>
  // CHECK: bufferization.to_memref %[[T1]] read_only {collective_input = {{[0-9]+}} : i64} : memref<16x8xf32>
  // CHECK: call @cleave_rt_reduce_scatter(%c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c32_i64{{[_0-9]*}})
  // CHECK: %[[S:.*]] = bufferization.to_tensor %[[B1]] {{.*}} : memref<4x8xf32>
  // CHECK: %[[R1:.*]] = cleave.transpose %[[S]] permutation = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %1 = cleave.reduce_scatter %x on @m axes = [tp] dim = 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  // all_to_all (split 1, concat 0): the split dimension first, exchange
  // blocks of 32, then [sender, column, row] -> [sender, row, column]
  // merges the senders' blocks into the rows.
  // CHECK: %[[T2:.*]] = cleave.transpose %[[X]] permutation = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  // CHECK: bufferization.to_memref %[[T2]] read_only {collective_input = {{[0-9]+}} : i64} : memref<16x8xf32>
  // CHECK: call @cleave_rt_all_to_all(%c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c32_i64{{[_0-9]*}})
  // CHECK: %[[E:.*]] = bufferization.to_tensor %{{.*}} : memref<16x8xf32>
  // CHECK: %[[BL:.*]] = cleave.reshape %[[E]] : tensor<16x8xf32> to tensor<4x4x8xf32>
  // CHECK: %[[PL:.*]] = cleave.transpose %[[BL]] permutation = [0, 2, 1] : tensor<4x4x8xf32> -> tensor<4x8x4xf32>
  // CHECK: %[[R2:.*]] = cleave.reshape %[[PL]] : tensor<4x8x4xf32> to tensor<32x4xf32>
  %2 = cleave.all_to_all %x on @m axes = [tp] split_dim = 1 concat_dim = 0 : tensor<8x16xf32> -> tensor<32x4xf32>
  // CHECK-NOT: cleave.transpose
  // CHECK: bufferization.to_memref %[[Y]] read_only {collective_input = {{[0-9]+}} : i64} : memref<1x4x16xf32>
  // CHECK: call @cleave_rt_all_gather(%c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c64_i64{{[_0-9]*}})
  // CHECK: %[[R3:.*]] = bufferization.to_tensor %{{.*}} : memref<1x16x16xf32>
  %3 = cleave.all_gather %y on @m axes = [tp] dim = 1 : tensor<1x4x16xf32> -> tensor<1x16x16xf32>
  // CHECK: return %[[R0]], %[[R1]], %[[R2]], %[[R3]]
  return %0, %1, %2, %3 : tensor<8x64xf32>, tensor<8x4xf32>, tensor<32x4xf32>, tensor<1x16x16xf32>
}

// -----

// all_to_all (split 0, concat 1): exchange row blocks, then put the
// senders' blocks next to the columns.
cleave.mesh @m(tp = 4 : nvlink)

// CHECK-LABEL: func.func @all_to_all_rows_to_columns
// CHECK: call @cleave_rt_all_to_all(%c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c32_i64{{[_0-9]*}})
// CHECK: %[[E:.*]] = bufferization.to_tensor %{{.*}} : memref<8x16xf32>
// CHECK: %[[BL:.*]] = cleave.reshape %[[E]] : tensor<8x16xf32> to tensor<4x2x16xf32>
// CHECK: %[[PL:.*]] = cleave.transpose %[[BL]] permutation = [1, 0, 2] : tensor<4x2x16xf32> -> tensor<2x4x16xf32>
// CHECK: %[[R:.*]] = cleave.reshape %[[PL]] : tensor<2x4x16xf32> to tensor<2x64xf32>
// CHECK: return %[[R]]
func.func @all_to_all_rows_to_columns(%x: tensor<8x16xf32>) -> tensor<2x64xf32> {
  %0 = cleave.all_to_all %x on @m axes = [tp] split_dim = 0 concat_dim = 1 : tensor<8x16xf32> -> tensor<2x64xf32>
  return %0 : tensor<2x64xf32>
}

// -----

// Position-dependent local ops: axis_index is the device's rank in the
// group, shard a slice at that rank's offset; no communication.

// CHECK: module attributes {cleave.groups = {{\[}}["dp", "tp"], ["tp"]]}
cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)

// CHECK-LABEL: func.func @local
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>)
func.func @local(%x: tensor<8x16xf32>) -> (tensor<8x4xf32>, tensor<i64>) {
  // CHECK: %[[RK:.*]] = call @cleave_rt_group_rank(%c0_i64{{[_0-9]*}}) : (i64) -> i64
  // CHECK: %[[I:.*]] = tensor.from_elements %[[RK]] : tensor<i64>
  %i = cleave.axis_index on @m axes = [dp, tp] : tensor<i64>
  // CHECK: %[[RT:.*]] = call @cleave_rt_group_rank(%c1_i64{{[_0-9]*}}) : (i64) -> i64
  // CHECK: %[[RTI:.*]] = arith.index_cast %[[RT]] : i64 to index
  // CHECK: %[[OFF:.*]] = arith.muli %[[RTI]], %c4 : index
  // CHECK: %[[SL:.*]] = tensor.extract_slice %[[X]][0, %[[OFF]]] [8, 4] [1, 1] : tensor<8x16xf32> to tensor<8x4xf32>
  %0 = cleave.shard %x on @m axes = [tp] dim = 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  // CHECK: return %[[SL]], %[[I]]
  return %0, %i : tensor<8x4xf32>, tensor<i64>
}
// CHECK: func.func private @cleave_rt_group_rank(i64) -> i64

// -----

// Every cleave.axis_index of one list of axes is one runtime call at the top
// of its function (the index does not change within a step), so that the
// code it feeds can be shared by CSE; another list of axes gets its own.
cleave.mesh @m(cp = 2 : nvlink, tp = 2 : nvlink)

// CHECK: module attributes {cleave.groups = {{\[}}["cp"], ["tp"]]}
// CHECK-LABEL: func.func @shared_index
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[RC:.*]] = call @cleave_rt_group_rank(%[[C0]]) : (i64) -> i64
// CHECK-NEXT: %[[C:.*]] = tensor.from_elements %[[RC]] : tensor<i64>
// CHECK-NEXT: %[[C1:.*]] = arith.constant 1 : i64
// CHECK-NEXT: %[[RT:.*]] = call @cleave_rt_group_rank(%[[C1]]) : (i64) -> i64
// CHECK-NEXT: %[[T:.*]] = tensor.from_elements %[[RT]] : tensor<i64>
// CHECK-NOT: cleave_rt_group_rank
// CHECK: scf.yield %[[T]]
// CHECK: scf.yield %[[C]]
// CHECK: return %[[C]], %{{.*}}, %[[C]]
func.func @shared_index(%x: i1) -> (tensor<i64>, tensor<i64>, tensor<i64>) {
  %a = cleave.axis_index on @m axes = [cp] : tensor<i64>
  %r = scf.if %x -> tensor<i64> {
    %t = cleave.axis_index on @m axes = [tp] : tensor<i64>
    scf.yield %t : tensor<i64>
  } else {
    scf.yield %a : tensor<i64>
  }
  %b = cleave.axis_index on @m axes = [cp] : tensor<i64>
  return %a, %r, %b : tensor<i64>, tensor<i64>, tensor<i64>
}

// -----

// Point-to-point: send names the peer (group rank 1), recv fills a buffer.

// CHECK: module attributes {cleave.groups = {{\[}}["pp"]]}
cleave.mesh @m(pp = 2 : ib, tp = 2 : nvlink)

// CHECK-LABEL: func.func @p2p
func.func @p2p(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: call @cleave_rt_send(%c0_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %c8_i64{{[_0-9]*}}) : (i64, i64, i32, !llvm.ptr, i64) -> ()
  cleave.send %x on @m axes = [pp] to 1 : tensor<8xf32>
  // CHECK: %[[B:.*]] = memref.alloc() {{.*}} : memref<8xf32>
  // CHECK: call @cleave_rt_recv(%c0_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %c8_i64{{[_0-9]*}})
  // CHECK: %[[R:.*]] = bufferization.to_tensor %[[B]]
  %r = cleave.recv on @m axes = [pp] from 0 : tensor<8xf32>
  // CHECK: return %[[R]]
  return %r : tensor<8xf32>
}

// -----

// A program without communication gets no groups attribute.
// CHECK-NOT: cleave.groups
// CHECK-LABEL: func.func @nothing
func.func @nothing(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

// Element types without a runtime code are errors at the op.
cleave.mesh @m(tp = 2 : nvlink)

func.func @bad_dtype(%x: tensor<8xi8>) -> tensor<8xi8> {
  // expected-error @below {{element type 'i8' has no runtime code}}
  %0 = cleave.all_reduce %x on @m axes = [tp] : tensor<8xi8>
  return %0 : tensor<8xi8>
}
