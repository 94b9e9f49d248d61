// RUN: cleave-opt %s --split-input-file --cleave-cuda-map-to-gpu --canonicalize --cse | FileCheck %s

// An elementwise op over a contiguous f32 buffer: consecutive threads take
// consecutive groups of 4 elements (128-bit loads and stores), 256 threads a
// block, 64 * 256 / 4 / 256 = 16 blocks, no bounds check needed.
// CHECK-LABEL: func.func @elementwise
// CHECK: gpu.launch_func @cleave_kernels::@elementwise_k0_ew blocks in (%[[C16:.*]], %[[C1:.*]], %[[C1]]) threads in (%[[C256:.*]], %[[C1]], %[[C1]]) args(%arg0 : memref<64x256xf32>, %arg1 : memref<64x256xf32>)
// CHECK: gpu.module @cleave_kernels
// CHECK: gpu.func @elementwise_k0_ew(%[[X:.*]]: memref<64x256xf32>, %[[Y:.*]]: memref<64x256xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// CHECK-DAG: %[[BID:.*]] = gpu.block_id x
// CHECK-DAG: %[[TID:.*]] = gpu.thread_id x
// CHECK-NOT: scf.if
// CHECK: %[[V:.*]] = vector.load %[[X]][%{{.*}}, %{{.*}}] : memref<64x256xf32>, vector<4xf32>
// CHECK-COUNT-4: math.exp
// CHECK: %[[R:.*]] = vector.from_elements
// CHECK: vector.store %[[R]], %[[Y]][%{{.*}}, %{{.*}}] : memref<64x256xf32>, vector<4xf32>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @elementwise(%x: memref<64x256xf32>, %y: memref<64x256xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<64x256xf32>) outs(%y : memref<64x256xf32>) {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// bf16 data: 8 lanes make 128 bits; a size that does not divide the block
// gets a bounds check; a broadcast bias is read once per thread.
// CHECK-LABEL: gpu.func @bias_k0_ew
// CHECK: %[[IN:.*]] = arith.cmpi ult, %{{.*}}, %c12
// CHECK: scf.if %[[IN]]
// CHECK: vector.load %{{.*}} : memref<3x32xbf16>, vector<8xbf16>
// CHECK: memref.load %{{.*}}[%c0] : memref<1xf32>
// CHECK: vector.store %{{.*}} : memref<3x32xbf16>, vector<8xbf16>
#id = affine_map<(d0, d1) -> (d0, d1)>
#bcast = affine_map<(d0, d1) -> (0)>
func.func @bias(%x: memref<3x32xbf16>, %b: memref<1xf32>, %y: memref<3x32xbf16>) {
  linalg.generic {indexing_maps = [#id, #bcast, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : memref<3x32xbf16>, memref<1xf32>) outs(%y : memref<3x32xbf16>) {
  ^bb0(%in: bf16, %bias: f32, %out: bf16):
    %w = arith.extf %in : bf16 to f32
    %s = arith.addf %w, %bias : f32
    %n = arith.truncf %s : f32 to bf16
    linalg.yield %n : bf16
  }
  return
}

// -----

// A reduction over the contiguous dimension (softmax's row max): one block
// per row, threads stride over the row 4 elements at a time, a block-wide
// all_reduce, thread 0 folds the initial value in.
// CHECK-LABEL: func.func @row_max
// CHECK: gpu.launch_func @cleave_kernels::@row_max_k0_block_reduce blocks in (%c128, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK: gpu.func @row_max_k0_block_reduce
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: %[[NEG:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[START:.*]] = arith.muli %{{.*}}, %c4 : index
// CHECK: %[[PART:.*]] = scf.for %{{.*}} = %[[START]] to %c1024 step %c1024 iter_args(%{{.*}} = %[[NEG]])
// CHECK: vector.load {{.*}} vector<4xf32>
// CHECK-COUNT-4: arith.maximumf
// CHECK: %[[ALL:.*]] = gpu.all_reduce maximumf %[[PART]] uniform
// CHECK: scf.if
// CHECK: %[[INIT:.*]] = memref.load
// CHECK: arith.maximumf %[[INIT]], %[[ALL]]
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @row_max(%x: memref<128x1024xf32>, %m: memref<128xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<128x1024xf32>) outs(%m : memref<128xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %acc, %in : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A reduction over rows (a bias gradient): one thread per output column
// (4 columns each, summed in order) would make 192 threads, so the rows are
// split: 64 slices of 64 rows give 48 blocks of partial sums, then one
// thread per 4 columns sums the 64 partials into the initial values.
// CHECK-LABEL: func.func @column_sum
// CHECK: %[[PART:.*]] = memref.alloc() {alignment = 64 : i64} : memref<64x768xf32>
// CHECK: gpu.launch_func @cleave_kernels::@column_sum_k0_thread_reduce blocks in (%c48, %c1, %c1) threads in (%c256, %c1, %c1) args(%arg0 : memref<4096x768xf32>, %[[PART]] : memref<64x768xf32>)
// CHECK: gpu.launch_func @cleave_kernels::@column_sum_k1_thread_reduce blocks in (%c1, %c1, %c1) threads in (%c192, %c1, %c1) args(%arg1 : memref<768xf32>, %[[PART]] : memref<64x768xf32>)
// CHECK: memref.dealloc %[[PART]]
// CHECK: gpu.func @column_sum_k0_thread_reduce
// CHECK: %[[ROWS:.*]] = memref.expand_shape %{{.*}} {{\[\[}}0, 1], [2]] output_shape [64, 64, 768]
// CHECK: scf.for %[[ROW:.*]] = %c0 to %c64 step %c1 iter_args
// CHECK: vector.load %[[ROWS]][%{{.*}}, %[[ROW]], %{{.*}}] : memref<64x64x768xf32>, vector<4xf32>
// CHECK-COUNT-4: arith.addf
// CHECK: vector.store %{{.*}} : memref<64x768xf32>, vector<4xf32>
// CHECK: gpu.func @column_sum_k1_thread_reduce
// CHECK-SAME: known_block_size = array<i32: 192, 1, 1>
// CHECK: %[[INIT:.*]] = vector.load %{{.*}} : memref<768xf32>, vector<4xf32>
// CHECK: scf.for %{{.*}} = %c0 to %c64 step %c1 iter_args
// CHECK: vector.store %{{.*}} : memref<768xf32>, vector<4xf32>
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d1)>
func.func @column_sum(%x: memref<4096x768xf32>, %s: memref<768xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<4096x768xf32>) outs(%s : memref<768xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %acc, %in : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A transpose: the output is walked contiguously (coalesced stores), the
// input is gathered one element per lane.
// CHECK-LABEL: gpu.func @transpose_k0_ew
// CHECK-COUNT-4: memref.load %{{.*}} : memref<64x32xf32>
// CHECK: vector.store %{{.*}} : memref<32x64xf32>, vector<4xf32>
func.func @transpose(%x: memref<64x32xf32>, %y: memref<32x64xf32>) {
  linalg.transpose ins(%x : memref<64x32xf32>) outs(%y : memref<32x64xf32>) permutation = [1, 0]
  return
}

// -----

// Scalars computed on the host from read-only buffers (AdamW's bias
// correction from the step counter) are recomputed in the kernel; views are
// rebuilt there too, so kernel arguments are whole buffers.
// CHECK-LABEL: func.func @scalars
// CHECK-NOT: memref.load
// CHECK-NOT: memref.collapse_shape
// CHECK: gpu.launch_func @cleave_kernels::@scalars_k0_ew {{.*}} args(%arg0 : memref<f32>, %arg1 : memref<4x8xf32>, %arg2 : memref<32xf32>)
// CHECK: gpu.func @scalars_k0_ew(%[[STEP:.*]]: memref<f32>, %[[X:.*]]: memref<4x8xf32>, %[[Y:.*]]: memref<32xf32>)
// CHECK: %[[S:.*]] = memref.load %[[STEP]][] : memref<f32>
// CHECK: math.powf %{{.*}}, %[[S]]
// CHECK: memref.collapse_shape %[[X]]
#id = affine_map<(d0) -> (d0)>
func.func @scalars(%step: memref<f32>, %x: memref<4x8xf32>, %y: memref<32xf32>) {
  %half = arith.constant 0.5 : f32
  %s = memref.load %step[] : memref<f32>
  %p = math.powf %half, %s : f32
  %flat = memref.collapse_shape %x [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%flat : memref<32xf32>) outs(%y : memref<32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.mulf %in, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A fill and a copy become kernels too; host code keeps only launches.
// CHECK-LABEL: func.func @fill_copy
// CHECK-NOT: linalg
// CHECK-NOT: memref.copy
// CHECK: gpu.launch_func @cleave_kernels::@fill_copy_k0_ew
// CHECK-NOT: linalg
// CHECK: gpu.launch_func @cleave_kernels::@fill_copy_k1_ew
// CHECK-NEXT: return
func.func @fill_copy(%x: memref<16xf32>, %y: memref<16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%x : memref<16xf32>)
  memref.copy %x, %y : memref<16xf32> to memref<16xf32>
  return
}

// -----

// The fill that initializes a reduction is folded into the reduction's
// kernel: one launch, and the output is written but never read.
// CHECK-LABEL: func.func @fill_then_sum
// CHECK: gpu.launch_func @cleave_kernels::@fill_then_sum_k0_block_reduce
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.func @fill_then_sum_k0_block_reduce
// CHECK-NOT: memref.load %{{.*}} : memref<16xf32>
// CHECK: %[[SUM:.*]] = gpu.all_reduce add
// CHECK: %[[R:.*]] = arith.addf %[[SUM]], %cst
// CHECK: memref.store %[[R]], %{{.*}} : memref<16xf32>
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @fill_then_sum(%x: memref<16x512xf32>, %s: memref<16xf32>) {
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%s : memref<16xf32>)
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<16x512xf32>) outs(%s : memref<16xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %acc, %in : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A scatter whose indices a copy kernel wrote first (the sequence-parallel
// slice of the tokens): written only before it is read, the index buffer is
// read by the kernel itself. The host loop over the rows, whose body adds a
// row into the table row its index selects and copies the sum back, runs
// inside one kernel with a thread per column: each thread adds the rows in
// the loop's order (deterministic, no atomics), one launch in all.
// CHECK-LABEL: func.func @scatter_by_copied_indices
// CHECK-NOT: scf.for
// CHECK-NOT: memref.load
// CHECK: gpu.launch_func @cleave_kernels::@scatter_by_copied_indices_k1_ew
// CHECK-NOT: scf.for
// CHECK: gpu.launch_func @cleave_kernels::@scatter_by_copied_indices_k0_loop blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%{{.*}} : memref<4xi32>, %{{.*}} : memref<4x16xf32>, %{{.*}} : memref<10x16xf32>, %{{.*}} : memref<16xf32>)
// CHECK-NOT: scf.for
// CHECK: return
// CHECK: gpu.func @scatter_by_copied_indices_k0_loop(%[[IDS:.*]]: memref<4xi32>, %[[G:.*]]: memref<4x16xf32>, %[[TABLE:.*]]: memref<10x16xf32>, %[[TMP:.*]]: memref<16xf32>)
// CHECK: %[[COL:.*]] = arith.addi
// CHECK: scf.if
// CHECK: scf.for %[[I:.*]] = %c0 to %c4 step %c1 {
// CHECK: %[[T:.*]] = memref.load %[[IDS]][%[[I]]] : memref<4xi32>
// CHECK: %[[ROW:.*]] = arith.index_cast %[[T]]
// CHECK: %[[SRC:.*]] = memref.subview %[[G]][%[[I]], 0] [1, 16] [1, 1]
// CHECK: %[[DST:.*]] = memref.subview %[[TABLE]][%[[ROW]], 0] [1, 16] [1, 1]
// CHECK: %[[A:.*]] = memref.load %[[DST]][%[[COL]]]
// CHECK: %[[B:.*]] = memref.load %[[SRC]][%[[COL]]]
// CHECK: %[[S:.*]] = arith.addf %[[A]], %[[B]] : f32
// CHECK: memref.store %[[S]], %[[TMP]][%[[COL]]] : memref<16xf32>
// CHECK: %[[C:.*]] = memref.load %[[TMP]][%[[COL]]] : memref<16xf32>
// CHECK: memref.store %[[C]], %[[DST]][%[[COL]]]
// CHECK-NEXT: }
#id = affine_map<(d0) -> (d0)>
func.func @scatter_by_copied_indices(%tokens: memref<8xi32>, %g: memref<4x16xf32>, %table: memref<10x16xf32>, %tmp: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %slice = memref.subview %tokens[4] [4] [1] : memref<8xi32> to memref<4xi32, strided<[1], offset: 4>>
  %ids = memref.alloc() : memref<4xi32>
  memref.copy %slice, %ids : memref<4xi32, strided<[1], offset: 4>> to memref<4xi32>
  scf.for %i = %c0 to %c4 step %c1 {
    %t = memref.load %ids[%i] : memref<4xi32>
    %row = arith.index_cast %t : i32 to index
    %src = memref.subview %g[%i, 0] [1, 16] [1, 1] : memref<4x16xf32> to memref<16xf32, strided<[1], offset: ?>>
    %dst = memref.subview %table[%row, 0] [1, 16] [1, 1] : memref<10x16xf32> to memref<16xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
        ins(%dst, %src : memref<16xf32, strided<[1], offset: ?>>, memref<16xf32, strided<[1], offset: ?>>)
        outs(%tmp : memref<16xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %s = arith.addf %a, %b : f32
      linalg.yield %s : f32
    }
    memref.copy %tmp, %dst : memref<16xf32> to memref<16xf32, strided<[1], offset: ?>>
  }
  memref.dealloc %ids : memref<4xi32>
  return
}

// -----

// A scatter into one vocabulary block of the table (ids outside it are
// skipped by a branch): the branch goes into the kernel's loop; 300 columns
// need two blocks, the second guarded.
// CHECK-LABEL: func.func @scatter_into_block
// CHECK-NOT: scf.for
// CHECK-NOT: scf.if
// CHECK: gpu.launch_func @cleave_kernels::@scatter_into_block_k0_loop blocks in (%c2, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK-NOT: scf.for
// CHECK: return
// CHECK: gpu.func @scatter_into_block_k0_loop(
// CHECK: arith.cmpi ult, %{{.*}}, %c300
// CHECK: scf.for
// CHECK: memref.load %{{.*}} : memref<6xi32>
// CHECK: scf.if
// CHECK: arith.addf
// CHECK: memref.store
#id = affine_map<(d0) -> (d0)>
func.func @scatter_into_block(%ids: memref<6xi32>, %g: memref<6x300xf32>, %table: memref<5x300xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  scf.for %i = %c0 to %c6 step %c1 {
    %t = memref.load %ids[%i] : memref<6xi32>
    %id = arith.index_cast %t : i32 to index
    %row = arith.subi %id, %c5 : index
    %lo = arith.cmpi sge, %row, %c0 : index
    %hi = arith.cmpi slt, %row, %c5 : index
    %inside = arith.andi %lo, %hi : i1
    scf.if %inside {
      %src = memref.subview %g[%i, 0] [1, 300] [1, 1] : memref<6x300xf32> to memref<300xf32, strided<[1], offset: ?>>
      %dst = memref.subview %table[%row, 0] [1, 300] [1, 1] : memref<5x300xf32> to memref<300xf32, strided<[1], offset: ?>>
      linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
          ins(%src : memref<300xf32, strided<[1], offset: ?>>)
          outs(%dst : memref<300xf32, strided<[1], offset: ?>>) {
      ^bb0(%b: f32, %a: f32):
        %s = arith.addf %a, %b : f32
        linalg.yield %s : f32
      }
    }
  }
  return
}

// -----

// Loops that do not run inside one kernel keep their host loop, with a
// launch per generic and iteration: here the loop index moves the elements
// each thread writes (thread p of iteration i writes what thread p + 1 of
// iteration i + 1 reads), ...
// CHECK-LABEL: func.func @shifting_window
// CHECK: scf.for
// CHECK: gpu.launch_func @cleave_kernels::@shifting_window_k0_ew
#id = affine_map<(d0) -> (d0)>
func.func @shifting_window(%x: memref<20xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %j = arith.addi %i, %c1 : index
    %src = memref.subview %x[%i] [16] [1] : memref<20xf32> to memref<16xf32, strided<[1], offset: ?>>
    %dst = memref.subview %x[%j] [16] [1] : memref<20xf32> to memref<16xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%src : memref<16xf32, strided<[1], offset: ?>>)
        outs(%dst : memref<16xf32, strided<[1], offset: ?>>) {
    ^bb0(%a: f32, %o: f32):
      linalg.yield %a : f32
    }
  }
  return
}

// -----

// ... here a thread reads its neighbour's element of a buffer the loop
// writes (a static shift) ...
// CHECK-LABEL: func.func @neighbour_read
// CHECK: scf.for
// CHECK: gpu.launch_func @cleave_kernels::@neighbour_read_k0_ew
#id = affine_map<(d0) -> (d0)>
func.func @neighbour_read(%x: memref<17xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %src = memref.subview %x[1] [16] [1] : memref<17xf32> to memref<16xf32, strided<[1], offset: 1>>
    %dst = memref.subview %x[0] [16] [1] : memref<17xf32> to memref<16xf32, strided<[1]>>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%src : memref<16xf32, strided<[1], offset: 1>>)
        outs(%dst : memref<16xf32, strided<[1]>>) {
    ^bb0(%a: f32, %o: f32):
      %s = arith.addf %a, %o : f32
      linalg.yield %s : f32
    }
  }
  return
}

// -----

// ... here the loop writes a buffer whose aliases are unknown (not an
// argument or an allocation) ...
// CHECK-LABEL: func.func @unknown_origin
// CHECK: scf.for
// CHECK: gpu.launch_func @cleave_kernels::@unknown_origin_k0_ew
memref.global "private" @acc : memref<16xf32> = dense<0.0>
#id = affine_map<(d0) -> (d0)>
func.func @unknown_origin(%x: memref<4x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %acc = memref.get_global @acc : memref<16xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    %row = memref.subview %x[%i, 0] [1, 16] [1, 1] : memref<4x16xf32> to memref<16xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%row : memref<16xf32, strided<[1], offset: ?>>) outs(%acc : memref<16xf32>) {
    ^bb0(%a: f32, %o: f32):
      %s = arith.addf %a, %o : f32
      linalg.yield %s : f32
    }
  }
  return
}

// -----

// ... and here the body reduces (threads would need each other's sums).
// CHECK-LABEL: func.func @reduction_in_loop
// CHECK: scf.for
// CHECK: gpu.launch_func @cleave_kernels::@reduction_in_loop_k0_
#sum_in = affine_map<(d0) -> (d0)>
#sum_out = affine_map<(d0) -> ()>
func.func @reduction_in_loop(%x: memref<4x16xf32>, %s: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %row = memref.subview %x[%i, 0] [1, 16] [1, 1] : memref<4x16xf32> to memref<16xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [#sum_in, #sum_out], iterator_types = ["reduction"]}
        ins(%row : memref<16xf32, strided<[1], offset: ?>>) outs(%s : memref<f32>) {
    ^bb0(%a: f32, %acc: f32):
      %r = arith.addf %acc, %a : f32
      linalg.yield %r : f32
    }
  }
  return
}
