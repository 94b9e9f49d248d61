// RUN: cleave-opt %s --split-input-file --cleave-lower-to-linalg=attention-tile=4 | FileCheck %s
// RUN: cleave-opt %s --split-input-file --cleave-lower-to-linalg | FileCheck %s --check-prefix=DEFAULT
// RUN: cleave-opt %s --split-input-file --cleave-lower-to-linalg=attention-tile=4 | FileCheck %s --check-prefix=NOSS
// RUN: cleave-opt %s --split-input-file --cleave-lower-to-linalg=attention-tile=4 --cse | FileCheck %s --check-prefix=BARRIER
// RUN: cleave-opt %s --split-input-file --cleave-lower-to-linalg=attention-tile=4 --canonicalize --cse | FileCheck %s --check-prefix=ONE

// The tiled (flash) lowering never builds a score tensor over the whole
// sequence: the largest attention temporaries are [B*H, 4, 4] tiles.
// NOSS-NOT: x10x10xf32
// NOSS-NOT: x12x12xf32
// NOSS-NOT: x6x12xf32
// NOSS-NOT: x8x12xf32

// Causal GQA forward over 10 rows, tiles of 4: Q, K, V are padded to 12
// rows; the outer loop runs over the 3 query tiles, two inner ones over the
// key tiles up to the diagonal (first those that need no mask, then the
// diagonal and padded ones), keeping the row max, the row sum and the
// unnormalised output; padded keys and future keys are masked.
// CHECK-LABEL: func.func @causal_gqa
// CHECK: %[[QP:.*]] = tensor.insert_slice %{{.*}} into %{{.*}}[0, 0, 0] [4, 10, 8] [1, 1, 1] : tensor<4x10x8xf32> into tensor<4x12x8xf32>
// CHECK: %[[KP:.*]] = tensor.insert_slice %{{.*}} into %{{.*}}[0, 0, 0] [4, 10, 8] [1, 1, 1] : tensor<4x10x8xf32> into tensor<4x12x8xf32>
// CHECK: %[[VP:.*]] = tensor.insert_slice %{{.*}} into %{{.*}}[0, 0, 0] [4, 10, 8] [1, 1, 1] : tensor<4x10x8xf32> into tensor<4x12x8xf32>
// CHECK: %[[O:.*]] = scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[OUT:.*]] = %{{.*}}) -> (tensor<4x12x8xf32>)
// CHECK: %[[QOFF:.*]] = arith.muli %[[I]]
// CHECK: %[[QT:.*]] = tensor.extract_slice %[[QP]][0, %[[QOFF]], 0] [4, 4, 8] [1, 1, 1]
// CHECK: %[[TILES:.*]] = arith.ceildivui
// CHECK: %[[UB:.*]] = arith.minui %[[TILES]]
// CHECK: %[[VISIBLE:.*]] = arith.divui
// CHECK: %[[BELOW:.*]] = arith.minui %[[UB]], %[[VISIBLE]]
// CHECK: %[[SPLIT:.*]] = arith.minui %[[BELOW]], %{{.*}}
// The key tiles below the diagonal and without padding need no mask.
// CHECK: %[[A:.*]]:3 = scf.for %{{.*}} = %{{.*}} to %[[SPLIT]] step %{{.*}} iter_args({{.*}}) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4x8xf32>)
// CHECK-NOT: arith.cmpi
// CHECK: scf.yield
// CHECK: %[[ST:.*]]:3 = scf.for %[[J:.*]] = %[[SPLIT]] to %[[UB]] step %{{.*}} iter_args(%[[M:.*]] = %[[A]]#0, %[[L:.*]] = %[[A]]#1, %[[ACC:.*]] = %[[A]]#2) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4x8xf32>)
// CHECK: %[[KOFF:.*]] = arith.muli %[[J]]
// CHECK: %[[KT:.*]] = tensor.extract_slice %[[KP]][0, %[[KOFF]], 0] [4, 4, 8]
// CHECK: %[[VT:.*]] = tensor.extract_slice %[[VP]][0, %[[KOFF]], 0] [4, 4, 8]
// CHECK: %[[S:.*]] = linalg.batch_matmul_transpose_b ins(%[[QT]], %[[KT]] : tensor<4x4x8xf32>, tensor<4x4x8xf32>) outs(%{{.*}} : tensor<4x4x4xf32>)
// CHECK: %[[MNEW:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[S]], %[[M]] : tensor<4x4x4xf32>, tensor<4x4xf32>)
// CHECK: arith.cmpi ugt
// CHECK: arith.cmpi uge
// CHECK: arith.ori
// CHECK: arith.select
// CHECK: arith.maximumf
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%[[S]], %[[MNEW]] : tensor<4x4x4xf32>, tensor<4x4xf32>)
// CHECK: math.exp
// CHECK: %[[ROWSUM:.*]] = linalg.generic {{.*}} ins(%[[P]] : tensor<4x4x4xf32>)
// CHECK: %[[LNEW:.*]] = linalg.generic {{.*}} ins(%[[M]], %[[MNEW]], %[[ROWSUM]] : {{.*}}) outs(%[[L]] : tensor<4x4xf32>)
// CHECK: %[[SCALED:.*]] = linalg.generic {{.*}} ins(%[[M]], %[[MNEW]] : {{.*}}) outs(%[[ACC]] : tensor<4x4x8xf32>)
// CHECK: %[[ACCNEW:.*]] = linalg.batch_matmul ins(%[[P]], %[[VT]] : tensor<4x4x4xf32>, tensor<4x4x8xf32>) outs(%[[SCALED]] : tensor<4x4x8xf32>)
// CHECK: %[[MCOPY:.*]] = linalg.copy ins(%[[MNEW]] : tensor<4x4xf32>) outs(%[[M]] : tensor<4x4xf32>)
// CHECK: scf.yield %[[MCOPY]], %[[LNEW]], %[[ACCNEW]]
// CHECK: %[[OT:.*]] = linalg.generic {{.*}} ins(%[[ST]]#2, %[[ST]]#1 : tensor<4x4x8xf32>, tensor<4x4xf32>)
// CHECK: arith.divf
// CHECK: %[[NEXT:.*]] = tensor.insert_slice %[[OT]] into %[[OUT]][0, %[[QOFF]], 0] [4, 4, 8]
// CHECK: scf.yield %[[NEXT]]
// CHECK: tensor.extract_slice %[[O]][0, 0, 0] [4, 10, 8] [1, 1, 1] : tensor<4x12x8xf32> to tensor<4x10x8xf32>
// With the default tile of 128 rows, the 10 rows are one tile (no padding).
// DEFAULT-LABEL: func.func @causal_gqa
// DEFAULT: scf.for
// DEFAULT: linalg.batch_matmul_transpose_b {{.*}} : tensor<4x10x8xf32>, tensor<4x10x8xf32>) outs(%{{.*}} : tensor<4x10x10xf32>)
func.func @causal_gqa(%q: tensor<1x10x4x8xf32>, %k: tensor<1x10x2x8xf32>, %v: tensor<1x10x2x8xf32>) -> tensor<1x10x4x8xf32> {
  %o = cleave.attention %q, %k, %v {causal} : (tensor<1x10x4x8xf32>, tensor<1x10x2x8xf32>, tensor<1x10x2x8xf32>) -> tensor<1x10x4x8xf32>
  return %o : tensor<1x10x4x8xf32>
}

// -----

// Without a mask and with whole tiles, every query tile sees every key tile
// (a constant bound) and no score is masked.
// CHECK-LABEL: func.func @full_tiles
// CHECK-NOT: tensor.insert_slice {{.*}} into %{{.*}}[0, 0, 0]
// CHECK: scf.for
// CHECK-NOT: arith.minui
// CHECK: arith.constant 2 : index
// CHECK-NOT: arith.minui
// CHECK: scf.for
// CHECK-NOT: arith.cmpi
// CHECK: arith.constant 5.000000e-01 : f32
// CHECK-NOT: arith.cmpi
// CHECK: scf.yield
func.func @full_tiles(%q: tensor<1x4x1x4xf32>, %k: tensor<1x8x1x4xf32>) -> tensor<1x4x1x4xf32> {
  %o = cleave.attention %q, %k, %k : (tensor<1x4x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>) -> tensor<1x4x1x4xf32>
  return %o : tensor<1x4x1x4xf32>
}

// -----

// The gradient with a context-parallel query block: the diagonal starts at
// row block * 6. Per query tile: the forward loop again (O and the
// log-sum-exp), D = rowsum(dO * O), then loops over the same key tiles
// that recomputes P from the log-sum-exp and accumulates dQ of the tile and
// dK, dV of the key tile (P^T dO and dS^T Q into slices of the carried
// gradients); dK, dV are summed over the two query heads of the key head.
// CHECK-LABEL: func.func @grad_query_block
// CHECK-SAME: %[[BLK:[^:]*]]: tensor<i64>
// CHECK: %[[B:.*]] = tensor.extract %[[BLK]][] : tensor<i64>
// CHECK: %[[BI:.*]] = arith.index_cast %[[B]]
// CHECK: %[[ROW0:.*]] = arith.muli %[[BI]], %{{.*}} : index
// CHECK: %[[G:.*]]:3 = scf.for %[[I:.*]] = {{.*}} iter_args(%[[DQ:.*]] = %{{.*}}, %[[DK:.*]] = %{{.*}}, %[[DV:.*]] = %{{.*}}) -> (tensor<2x8x4xf32>, tensor<2x12x4xf32>, tensor<2x12x4xf32>)
// CHECK: %[[QOFF:.*]] = arith.muli %[[I]]
// CHECK: %[[QT:.*]] = tensor.extract_slice %{{.*}}[0, %[[QOFF]], 0] [2, 4, 4]
// CHECK: %[[DOT:.*]] = tensor.extract_slice %{{.*}}[0, %[[QOFF]], 0] [2, 4, 4]
// CHECK: arith.addi %[[ROW0]], %[[QOFF]]
// CHECK: %[[FWD0:.*]]:3 = scf.for
// CHECK: scf.yield
// CHECK: %[[FWD:.*]]:3 = scf.for {{.*}} iter_args({{.*}} = %[[FWD0]]#0, {{.*}} = %[[FWD0]]#1, {{.*}} = %[[FWD0]]#2)
// CHECK: scf.yield
// CHECK: %[[LSE:.*]] = linalg.generic {{.*}} ins(%[[FWD]]#0, %[[FWD]]#1 : tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK: math.log
// CHECK: %[[OT:.*]] = linalg.generic {{.*}} ins(%[[FWD]]#2, %[[FWD]]#1
// CHECK: %[[DELTA:.*]] = linalg.generic {{.*}} ins(%[[DOT]], %[[OT]] : tensor<2x4x4xf32>, tensor<2x4x4xf32>)
// CHECK: %[[BWD0:.*]]:3 = scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %[[DK]], %{{.*}} = %[[DV]]) -> (tensor<2x4x4xf32>, tensor<2x12x4xf32>, tensor<2x12x4xf32>)
// CHECK-NOT: arith.cmpi
// CHECK: scf.yield
// CHECK: %[[BWD:.*]]:3 = scf.for %[[J:.*]] = {{.*}} iter_args(%[[DQT:.*]] = %[[BWD0]]#0, %[[DKC:.*]] = %[[BWD0]]#1, %[[DVC:.*]] = %[[BWD0]]#2) -> (tensor<2x4x4xf32>, tensor<2x12x4xf32>, tensor<2x12x4xf32>)
// CHECK: %[[KOFF:.*]] = arith.muli %[[J]]
// CHECK: %[[KT:.*]] = tensor.extract_slice %{{.*}}[0, %[[KOFF]], 0] [2, 4, 4]
// CHECK: %[[VT:.*]] = tensor.extract_slice %{{.*}}[0, %[[KOFF]], 0] [2, 4, 4]
// CHECK: %[[S:.*]] = linalg.batch_matmul_transpose_b ins(%[[QT]], %[[KT]]
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%[[S]], %[[LSE]] : tensor<2x4x4xf32>, tensor<2x4xf32>)
// CHECK: arith.cmpi ugt
// CHECK: %[[DVS:.*]] = tensor.extract_slice %[[DVC]][0, %[[KOFF]], 0] [2, 4, 4]
// CHECK: %[[DVT:.*]] = linalg.batch_matmul_transpose_a ins(%[[P]], %[[DOT]] : {{.*}}) outs(%[[DVS]] : tensor<2x4x4xf32>)
// CHECK: %[[DP:.*]] = linalg.batch_matmul_transpose_b ins(%[[DOT]], %[[VT]]
// CHECK: %[[DS:.*]] = linalg.generic {{.*}} ins(%[[P]], %[[DP]], %[[DELTA]] : tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4xf32>)
// CHECK: %[[DQN:.*]] = linalg.batch_matmul ins(%[[DS]], %[[KT]] : {{.*}}) outs(%[[DQT]] : tensor<2x4x4xf32>)
// CHECK: %[[DKS:.*]] = tensor.extract_slice %[[DKC]][0, %[[KOFF]], 0] [2, 4, 4]
// CHECK: %[[DKT:.*]] = linalg.batch_matmul_transpose_a ins(%[[DS]], %[[QT]] : {{.*}}) outs(%[[DKS]] : tensor<2x4x4xf32>)
// CHECK: %[[DKN:.*]] = tensor.insert_slice %[[DKT]] into %[[DKC]][0, %[[KOFF]], 0] [2, 4, 4]
// CHECK: %[[DVN:.*]] = tensor.insert_slice %[[DVT]] into %[[DVC]][0, %[[KOFF]], 0] [2, 4, 4]
// CHECK: scf.yield %[[DQN]], %[[DKN]], %[[DVN]]
// CHECK: %[[DQN2:.*]] = tensor.insert_slice %[[BWD]]#0 into %[[DQ]][0, %[[QOFF]], 0] [2, 4, 4]
// CHECK: scf.yield %[[DQN2]], %[[BWD]]#1, %[[BWD]]#2
// CHECK: tensor.extract_slice %[[G]]#0[0, 0, 0] [2, 6, 4]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "parallel", "parallel"]} ins(%{{.*}} : tensor<1x1x2x12x4xf32>)
func.func @grad_query_block(%q: tensor<1x6x2x4xf32>, %k: tensor<1x12x1x4xf32>, %v: tensor<1x12x1x4xf32>, %do: tensor<1x6x2x4xf32>, %b: tensor<i64>) -> (tensor<1x6x2x4xf32>, tensor<1x12x1x4xf32>, tensor<1x12x1x4xf32>) {
  %dq, %dk, %dv = cleave.attention_grad %q, %k, %v, %do, %b {causal} : (tensor<1x6x2x4xf32>, tensor<1x12x1x4xf32>, tensor<1x12x1x4xf32>, tensor<1x6x2x4xf32>, tensor<i64>) -> (tensor<1x6x2x4xf32>, tensor<1x12x1x4xf32>, tensor<1x12x1x4xf32>)
  return %dq, %dk, %dv : tensor<1x6x2x4xf32>, tensor<1x12x1x4xf32>, tensor<1x12x1x4xf32>
}

// -----

// An attention recomputed by cleave-remat reads q, k, v through barriers.
// The lowering copies the barriers' inputs to head-major layout, which CSE
// shares with the forward attention (one copy of each, not two, and q, k, v
// in their original layout need not live on to the backward pass), and puts
// the barriers on the copies: the recomputed tile loop stays apart.
// BARRIER-LABEL: func.func @recomputed
// BARRIER: %[[QH:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<1x8x2x4xf32>)
// BARRIER: %[[QE:.*]] = tensor.expand_shape %{{.*}} output_shape [2, 8, 4]
// BARRIER: %[[KE:.*]] = tensor.expand_shape %{{.*}} output_shape [2, 8, 4]
// BARRIER: %[[VE:.*]] = tensor.expand_shape %{{.*}} output_shape [2, 8, 4]
// BARRIER: scf.for
// BARRIER-NOT: ins(%arg0 : tensor<1x8x2x4xf32>)
// BARRIER: cleave.optimization_barrier %[[QE]] : tensor<2x8x4xf32>
// BARRIER-NEXT: cleave.optimization_barrier %[[KE]] : tensor<2x8x4xf32>
// BARRIER-NEXT: cleave.optimization_barrier %[[VE]] : tensor<2x8x4xf32>
// BARRIER-NEXT: scf.for
// BARRIER-NOT: ins(%arg0 : tensor<1x8x2x4xf32>)
// BARRIER: return
func.func @recomputed(%q: tensor<1x8x2x4xf32>, %k: tensor<1x8x2x4xf32>, %v: tensor<1x8x2x4xf32>) -> (tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>) {
  %a = cleave.attention %q, %k, %v {causal} : (tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>) -> tensor<1x8x2x4xf32>
  %bq = cleave.optimization_barrier %q : tensor<1x8x2x4xf32>
  %bk = cleave.optimization_barrier %k : tensor<1x8x2x4xf32>
  %bv = cleave.optimization_barrier %v : tensor<1x8x2x4xf32>
  %r = cleave.attention %bq, %bk, %bv {causal} : (tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>) -> tensor<1x8x2x4xf32>
  return %a, %r : tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>
}

// -----

// One key tile (Skv = the tile) under a context-parallel query block: every
// query sees key 0, so the key loop runs once with constant bounds and folds
// away although the mask depends on the block at run time. The gradient's
// recomputed forward (scores, row statistics, P V) is then the forward's
// (CSE): one Q K^T and one P V for both ops, not two of each.
// ONE-LABEL: func.func @one_key_tile_block
// ONE-NOT: scf.for
// ONE: linalg.batch_matmul_transpose_b
// ONE-NOT: scf.for
// ONE: linalg.batch_matmul ins
// ONE-NOT: scf.for
// ONE: linalg.batch_matmul_transpose_a
// ONE-NOT: linalg.batch_matmul ins
// ONE: linalg.batch_matmul_transpose_b
// ONE-NOT: linalg.batch_matmul_transpose_b
// ONE: linalg.batch_matmul ins
// ONE-NOT: linalg.batch_matmul_transpose_b
// ONE: linalg.batch_matmul_transpose_a
// ONE-NOT: {{scf.for|linalg.batch_matmul}}
// ONE: return
func.func @one_key_tile_block(%q: tensor<1x2x1x4xf32>, %k: tensor<1x4x1x4xf32>, %v: tensor<1x4x1x4xf32>, %do: tensor<1x2x1x4xf32>, %b: tensor<i64>) -> (tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>) {
  %o = cleave.attention %q, %k, %v, %b {balanced = 2 : i64, causal} : (tensor<1x2x1x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>, tensor<i64>) -> tensor<1x2x1x4xf32>
  %dq, %dk, %dv = cleave.attention_grad %q, %k, %v, %do, %b {balanced = 2 : i64, causal} : (tensor<1x2x1x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>, tensor<1x2x1x4xf32>, tensor<i64>) -> (tensor<1x2x1x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>)
  return %o, %dq, %dk, %dv : tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>
}
