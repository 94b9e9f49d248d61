// RUN: cleave-opt %s --split-input-file --cleave-lower-to-linalg=attention-tile=0 --verify-diagnostics | FileCheck %s

// Elementwise ops become generics computing in f32; bf16 is widened on read
// and narrowed on write.
// CHECK-LABEL: func.func @gelu_bf16
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK: ^bb0(%[[IN:.*]]: bf16, %{{.*}}: bf16):
// CHECK: %[[X:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK: math.tanh
// CHECK: %[[R:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK: linalg.yield %[[R]] : bf16
func.func @gelu_bf16(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %0 = cleave.gelu %x : tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// Matmuls with a shared weight become one 2-D GEMM over all rows.
// CHECK-LABEL: func.func @linear
// CHECK: %[[A:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1, 2]] : tensor<2x4x8xf32> into tensor<64xf32>
// CHECK: %[[A2:.*]] = tensor.expand_shape %[[A]] {{\[\[}}0, 1]] output_shape [8, 8] : tensor<64xf32> into tensor<8x8xf32>
// CHECK: %[[C:.*]] = linalg.fill
// CHECK: linalg.matmul_transpose_b ins(%[[A2]], %{{.*}} : tensor<8x8xf32>, tensor<16x8xf32>) outs(%[[C]] : tensor<8x16xf32>)
func.func @linear(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>) -> tensor<2x4x16xf32> {
  %0 = cleave.matmul %x, %w {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// -----

// Attention: head-major copies, two batched GEMMs, a masked softmax.
// CHECK-LABEL: func.func @attention
// CHECK: linalg.batch_matmul_transpose_b {{.*}} : tensor<8x4x16xf32>, tensor<8x4x16xf32>) outs(%{{.*}} : tensor<8x4x4xf32>)
// CHECK: arith.cmpi ugt
// CHECK: arith.select
// CHECK: math.exp
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<8x4x4xf32>, tensor<8x4x16xf32>)
func.func @attention(%q: tensor<2x4x4x16xf32>, %k: tensor<2x4x2x16xf32>) -> tensor<2x4x4x16xf32> {
  %0 = cleave.attention %q, %k, %k {causal} : (tensor<2x4x4x16xf32>, tensor<2x4x2x16xf32>, tensor<2x4x2x16xf32>) -> tensor<2x4x4x16xf32>
  return %0 : tensor<2x4x4x16xf32>
}

// -----

// Dropout draws from Philox-4x32-10 keyed by the seed.
// CHECK-LABEL: func.func @dropout
// CHECK: tensor.extract %{{.*}}[] : tensor<i64>
// CHECK: linalg.generic
// CHECK-COUNT-20: arith.mului_extended
// CHECK: arith.cmpf oge
func.func @dropout(%x: tensor<16xf32>, %seed: tensor<i64>) -> tensor<16xf32> {
  %0 = cleave.dropout %x, %seed {rate = 0.25 : f64, stream = 1 : i64} : (tensor<16xf32>, tensor<i64>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// Collectives are left for the communication lowering.
cleave.mesh @m(dp = 2 : host)
// CHECK-LABEL: func.func @collective
// CHECK: cleave.all_reduce
func.func @collective(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = cleave.all_reduce %x on @m axes = [dp] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A binary op: one parallel generic over identity maps.
// CHECK-DAG: #[[$ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[Y:.*]]: tensor<4x8xf32>)
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK: %[[R:.*]] = linalg.generic {indexing_maps = [#[[$ID2]], #[[$ID2]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[Y]] : tensor<4x8xf32>, tensor<4x8xf32>) outs(%[[E]] : tensor<4x8xf32>)
// CHECK: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[D:.*]] = arith.subf %[[A]], %[[B]] : f32
// CHECK: linalg.yield %[[D]] : f32
// CHECK: return %[[R]]
func.func @binary(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = cleave.sub %x, %y : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// f64 computes in f64: no widening; silu is x * 1 / (1 + exp(-x)).
// CHECK-LABEL: func.func @silu_f64
// CHECK: linalg.generic
// CHECK: ^bb0(%[[A:.*]]: f64, %{{.*}}: f64):
// CHECK-NOT: arith.extf
// CHECK: %[[N:.*]] = arith.negf %[[A]] : f64
// CHECK: %[[EX:.*]] = math.exp %[[N]] : f64
// CHECK: %[[D:.*]] = arith.addf %{{.*}}, %[[EX]] : f64
// CHECK: %[[S:.*]] = arith.divf %{{.*}}, %[[D]] : f64
// CHECK: %[[R:.*]] = arith.mulf %[[A]], %[[S]] : f64
// CHECK: linalg.yield %[[R]] : f64
func.func @silu_f64(%x: tensor<4xf64>) -> tensor<4xf64> {
  %0 = cleave.silu %x : tensor<4xf64>
  return %0 : tensor<4xf64>
}

// -----

// relu_grad passes the gradient where the input is positive; exact GELU
// uses erf; a cast is a generic that narrows.
// CHECK-LABEL: func.func @relu_grad_gelu_cast
// CHECK: ^bb0(%[[X:.*]]: f32, %[[G:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[POS:.*]] = arith.cmpf ogt, %[[X]], %[[ZERO]] : f32
// CHECK: %[[SEL:.*]] = arith.select %[[POS]], %[[G]], %{{.*}} : f32
// CHECK: linalg.yield %[[SEL]]
// CHECK: ^bb0(%[[Y:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[INV:.*]] = arith.constant 0.707106769 : f32
// CHECK: %[[SC:.*]] = arith.mulf %[[Y]], %[[INV]] : f32
// CHECK: math.erf %[[SC]] : f32
// CHECK-NOT: math.tanh
// CHECK: linalg.generic
// CHECK-SAME: outs(%{{.*}} : tensor<4xbf16>)
// CHECK: ^bb0(%[[Z:.*]]: f32, %{{.*}}: bf16):
// CHECK: %[[T:.*]] = arith.truncf %[[Z]] : f32 to bf16
// CHECK: linalg.yield %[[T]] : bf16
func.func @relu_grad_gelu_cast(%x: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xbf16> {
  %0 = cleave.relu_grad %x, %g : tensor<4xf32>
  %1 = cleave.gelu %0 {approximate = #cleave.gelu_approx<none>} : tensor<4xf32>
  %2 = cleave.cast %1 : tensor<4xf32> to tensor<4xbf16>
  return %2 : tensor<4xbf16>
}

// -----

// Constants become arith constants; on one device a sharding constraint
// is the identity.
cleave.mesh @m(dp = 2 : host)
// CHECK-LABEL: func.func @constant_and_constraint
// CHECK-SAME: (%[[X:.*]]: tensor<2xf32>)
// CHECK: %[[C:.*]] = arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NOT: cleave.
// CHECK: return %[[C]], %[[X]]
func.func @constant_and_constraint(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %c = cleave.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = cleave.sharding_constraint %x <@m, [dp]> : tensor<2xf32>
  return %c, %0 : tensor<2xf32>, tensor<2xf32>
}

// -----

// Reductions: a fill of the neutral element, a generic with the reduced
// dimensions as reduction iterators (sums reassociable, so they
// vectorize), then the result in the op's type (a mean scales by 1/count;
// bf16 accumulates in f32 and is narrowed last).
// CHECK-DAG: #[[$IN:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[$LAST:.*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-DAG: #[[$D0D2:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$D0D1:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$NONE:.*]] = affine_map<(d0, d1, d2) -> ()>
// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[B:.*]]: tensor<2x4x8xbf16>)
// CHECK: %[[Z0:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[F0:.*]] = linalg.fill ins(%[[Z0]] : f32) outs(%{{.*}} : tensor<8xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[$IN]], #[[$LAST]]], iterator_types = ["reduction", "reduction", "parallel"]} ins(%[[X]] : tensor<2x4x8xf32>) outs(%[[F0]] : tensor<8xf32>)
// CHECK: arith.addf %{{.*}}, %{{.*}} fastmath<reassoc> : f32
// CHECK: linalg.generic {indexing_maps = [#[[$IN]], #[[$D0D2]]], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK: arith.addf
// CHECK: %[[QUARTER:.*]] = arith.constant 2.500000e-01 : f32
// CHECK: arith.mulf %{{.*}}, %[[QUARTER]] : f32
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[FM:.*]] = linalg.fill ins(%[[NEGINF]] : f32) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[$IN]], #[[$D0D1]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<2x4x8xf32>) outs(%[[FM]] : tensor<2x4xf32>)
// CHECK: arith.maximumf
// CHECK: linalg.generic {indexing_maps = [#[[$IN]], #[[$NONE]]], iterator_types = ["reduction", "reduction", "reduction"]} ins(%[[X]] : tensor<2x4x8xf32>) outs(%{{.*}} : tensor<f32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[B]] : tensor<2x4x8xbf16>) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: outs(%{{.*}} : tensor<2x4xbf16>)
// CHECK: %[[EIGHTH:.*]] = arith.constant 1.250000e-01 : f32
// CHECK: %[[M:.*]] = arith.mulf %{{.*}}, %[[EIGHTH]] : f32
// CHECK: arith.truncf %[[M]] : f32 to bf16
func.func @reductions(%x: tensor<2x4x8xf32>, %b: tensor<2x4x8xbf16>) -> (tensor<8xf32>, tensor<2x8xf32>, tensor<2x4xf32>, tensor<f32>, tensor<2x4xbf16>) {
  %0 = cleave.reduce_sum %x dims = [0, 1] : tensor<2x4x8xf32> -> tensor<8xf32>
  %1 = cleave.reduce_mean %x dims = [1] : tensor<2x4x8xf32> -> tensor<2x8xf32>
  %2 = cleave.reduce_max %x dims = [2] : tensor<2x4x8xf32> -> tensor<2x4xf32>
  %3 = cleave.reduce_sum %x dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  %4 = cleave.reduce_mean %b dims = [2] : tensor<2x4x8xbf16> -> tensor<2x4xbf16>
  return %0, %1, %2, %3, %4 : tensor<8xf32>, tensor<2x8xf32>, tensor<2x4xf32>, tensor<f32>, tensor<2x4xbf16>
}

// -----

// Data movement: reshape through a flat view, transpose as a named op,
// broadcast as a generic reading the kept dimensions, slices and concat
// as tensor slices, pad as a fill plus a strided insertion.
// CHECK-DAG: #[[$BC:.*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-DAG: #[[$ID3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @shapes
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x12xf32>, %[[B:.*]]: tensor<12xf32>)
// CHECK: %[[FLAT:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1, 2]] : tensor<2x4x12xf32> into tensor<96xf32>
// CHECK: %[[R:.*]] = tensor.expand_shape %[[FLAT]] {{\[\[}}0, 1, 2, 3]] output_shape [2, 4, 3, 4] : tensor<96xf32> into tensor<2x4x3x4xf32>
// CHECK: %[[TE:.*]] = tensor.empty() : tensor<2x3x4x4xf32>
// CHECK: %[[T:.*]] = linalg.transpose ins(%[[R]] : tensor<2x4x3x4xf32>) outs(%[[TE]] : tensor<2x3x4x4xf32>) permutation = [0, 2, 1, 3]
// CHECK: %[[BC:.*]] = linalg.generic {indexing_maps = [#[[$BC]], #[[$ID3]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[B]] : tensor<12xf32>) outs(%{{.*}} : tensor<2x4x12xf32>)
// CHECK: %[[S:.*]] = tensor.extract_slice %[[BC]][0, 0, 2] [2, 4, 5] [1, 1, 2] : tensor<2x4x12xf32> to tensor<2x4x5xf32>
// CHECK: %[[CE:.*]] = tensor.empty() : tensor<2x4x3x8xf32>
// CHECK: %[[C0:.*]] = tensor.insert_slice %[[R]] into %[[CE]][0, 0, 0, 0] [2, 4, 3, 4] [1, 1, 1, 1]
// CHECK: %[[C1:.*]] = tensor.insert_slice %[[R]] into %[[C0]][0, 0, 0, 4] [2, 4, 3, 4] [1, 1, 1, 1]
// CHECK: %[[PZ:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[PF:.*]] = linalg.fill ins(%[[PZ]] : f32) outs(%{{.*}} : tensor<2x7x10xf32>)
// CHECK: %[[P:.*]] = tensor.insert_slice %[[S]] into %[[PF]][0, 1, 0] [2, 4, 5] [1, 1, 2] : tensor<2x4x5xf32> into tensor<2x7x10xf32>
// CHECK: %[[PV:.*]] = arith.constant -1.000000e+00 : f32
// CHECK: %[[PF2:.*]] = linalg.fill ins(%[[PV]] : f32) outs(%{{.*}} : tensor<14xf32>)
// CHECK: %[[P2:.*]] = tensor.insert_slice %[[B]] into %[[PF2]][1] [12] [1] : tensor<12xf32> into tensor<14xf32>
// CHECK: return %[[R]], %[[T]], %[[BC]], %[[S]], %[[C1]], %[[P]], %[[P2]]
func.func @shapes(%x: tensor<2x4x12xf32>, %b: tensor<12xf32>) -> (tensor<2x4x3x4xf32>, tensor<2x3x4x4xf32>, tensor<2x4x12xf32>, tensor<2x4x5xf32>, tensor<2x4x3x8xf32>, tensor<2x7x10xf32>, tensor<14xf32>) {
  %0 = cleave.reshape %x : tensor<2x4x12xf32> to tensor<2x4x3x4xf32>
  %1 = cleave.transpose %0 permutation = [0, 2, 1, 3] : tensor<2x4x3x4xf32> -> tensor<2x3x4x4xf32>
  %2 = cleave.broadcast %b dims = [2] : tensor<12xf32> -> tensor<2x4x12xf32>
  %3 = cleave.slice %2 offsets = [0, 0, 2] sizes = [2, 4, 5] strides = [1, 1, 2] : tensor<2x4x12xf32> -> tensor<2x4x5xf32>
  %4 = cleave.concat %0, %0 dim = 3 : (tensor<2x4x3x4xf32>, tensor<2x4x3x4xf32>) -> tensor<2x4x3x8xf32>
  %5 = cleave.pad %3 low = [0, 1, 0] high = [0, 2, 1] interior = [0, 0, 1] : tensor<2x4x5xf32> -> tensor<2x7x10xf32>
  %6 = cleave.pad %b low = [1] high = [1] interior = [0] {value = -1.0 : f64} : tensor<12xf32> -> tensor<14xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2x4x3x4xf32>, tensor<2x3x4x4xf32>, tensor<2x4x12xf32>, tensor<2x4x5xf32>, tensor<2x4x3x8xf32>, tensor<2x7x10xf32>, tensor<14xf32>
}

// -----

// Matmuls: the named op matching the transposes (both transposed: A is
// transposed explicitly); a shared weight after a transposed batched
// operand; rank-4 operands batched over their leading dimensions; bf16
// GEMMs keep bf16 operands and result.
// CHECK-LABEL: func.func @matmuls
// CHECK-SAME: (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8x16xf32>, %[[AT:.*]]: tensor<8x4xf32>, %[[BT:.*]]: tensor<16x8xf32>, %[[X3:.*]]: tensor<2x8x4xf32>, %[[Y3:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<8x16xf32>, %[[Q:.*]]: tensor<2x3x4x8xbf16>, %[[K:.*]]: tensor<2x3x8x5xbf16>)
// CHECK: %[[F0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK: %[[M0:.*]] = linalg.matmul ins(%[[A]], %[[B]] : tensor<4x8xf32>, tensor<8x16xf32>) outs(%[[F0]] : tensor<4x16xf32>)
// CHECK: %[[M1:.*]] = linalg.matmul_transpose_a ins(%[[AT]], %[[B]] : tensor<8x4xf32>, tensor<8x16xf32>)
// CHECK: %[[ATT:.*]] = linalg.transpose ins(%[[AT]] : tensor<8x4xf32>) outs(%{{.*}} : tensor<4x8xf32>) permutation = [1, 0]
// CHECK: %[[M2:.*]] = linalg.matmul_transpose_b ins(%[[ATT]], %[[BT]] : tensor<4x8xf32>, tensor<16x8xf32>)
// CHECK: %[[M3:.*]] = linalg.batch_matmul_transpose_a ins(%[[X3]], %[[Y3]] : tensor<2x8x4xf32>, tensor<2x8x16xf32>) outs(%{{.*}} : tensor<2x4x16xf32>)
// CHECK: %[[X3T:.*]] = linalg.transpose ins(%[[X3]] : tensor<2x8x4xf32>) outs(%{{.*}} : tensor<2x4x8xf32>) permutation = [0, 2, 1]
// CHECK: %[[X3F:.*]] = tensor.collapse_shape %[[X3T]]
// CHECK: %[[X3R:.*]] = tensor.expand_shape %[[X3F]] {{\[\[}}0, 1]] output_shape [8, 8] : tensor<64xf32> into tensor<8x8xf32>
// CHECK: %[[M4:.*]] = linalg.matmul ins(%[[X3R]], %[[W]] : tensor<8x8xf32>, tensor<8x16xf32>) outs(%{{.*}} : tensor<8x16xf32>)
// CHECK: %[[M4F:.*]] = tensor.collapse_shape %[[M4]]
// CHECK: %[[M4R:.*]] = tensor.expand_shape %[[M4F]] {{\[\[}}0, 1, 2]] output_shape [2, 4, 16]
// CHECK: %[[QF:.*]] = tensor.collapse_shape %[[Q]]
// CHECK: %[[QR:.*]] = tensor.expand_shape %[[QF]] {{\[\[}}0, 1, 2]] output_shape [6, 4, 8] : tensor<192xbf16> into tensor<6x4x8xbf16>
// CHECK: %[[KF:.*]] = tensor.collapse_shape %[[K]]
// CHECK: %[[KR:.*]] = tensor.expand_shape %[[KF]] {{\[\[}}0, 1, 2]] output_shape [6, 8, 5] : tensor<240xbf16> into tensor<6x8x5xbf16>
// CHECK: %[[BZ:.*]] = arith.constant 0.000000e+00 : bf16
// CHECK: %[[BF:.*]] = linalg.fill ins(%[[BZ]] : bf16) outs(%{{.*}} : tensor<6x4x5xbf16>)
// CHECK: %[[M5:.*]] = linalg.batch_matmul ins(%[[QR]], %[[KR]] : tensor<6x4x8xbf16>, tensor<6x8x5xbf16>) outs(%[[BF]] : tensor<6x4x5xbf16>)
// CHECK: %[[M5F:.*]] = tensor.collapse_shape %[[M5]]
// CHECK: %[[M5R:.*]] = tensor.expand_shape %[[M5F]] {{\[\[}}0, 1, 2, 3]] output_shape [2, 3, 4, 5]
// CHECK: return %[[M0]], %[[M1]], %[[M2]], %[[M3]], %[[M4R]], %[[M5R]]
func.func @matmuls(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %at: tensor<8x4xf32>, %bt: tensor<16x8xf32>,
                   %x3: tensor<2x8x4xf32>, %y3: tensor<2x8x16xf32>, %w: tensor<8x16xf32>,
                   %q: tensor<2x3x4x8xbf16>, %k: tensor<2x3x8x5xbf16>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x3x4x5xbf16>) {
  %0 = cleave.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = cleave.matmul %at, %b {transpose_lhs} : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %2 = cleave.matmul %at, %bt {transpose_lhs, transpose_rhs} : (tensor<8x4xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %3 = cleave.matmul %x3, %y3 {transpose_lhs} : (tensor<2x8x4xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
  %4 = cleave.matmul %x3, %w {transpose_lhs} : (tensor<2x8x4xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %5 = cleave.matmul %q, %k : (tensor<2x3x4x8xbf16>, tensor<2x3x8x5xbf16>) -> tensor<2x3x4x5xbf16>
  return %0, %1, %2, %3, %4, %5 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x3x4x5xbf16>
}

// -----

// Softmax along the last dimension: row max, exp(x - max), row sum, divide;
// along dimension 0 the statistics are per column. bf16 is read widened,
// exp is kept in f32 and only the result is narrowed.
// CHECK-DAG: #[[$FULL:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ROW:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[$COL:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @softmax_rows
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[MI:.*]] = linalg.fill ins(%[[NEGINF]] : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[MAX:.*]] = linalg.generic {indexing_maps = [#[[$FULL]], #[[$ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<4x8xf32>) outs(%[[MI]] : tensor<4xf32>)
// CHECK: arith.maximumf
// CHECK: %[[EXP:.*]] = linalg.generic {indexing_maps = [#[[$FULL]], #[[$ROW]], #[[$FULL]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[MAX]] : tensor<4x8xf32>, tensor<4xf32>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK: ^bb0(%[[A:.*]]: f32, %[[M:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[SUB:.*]] = arith.subf %[[A]], %[[M]] : f32
// CHECK: math.exp %[[SUB]] : f32
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[$FULL]], #[[$ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[EXP]] : tensor<4x8xf32>)
// CHECK: arith.addf
// CHECK: %[[Y:.*]] = linalg.generic {indexing_maps = [#[[$FULL]], #[[$ROW]], #[[$FULL]]], iterator_types = ["parallel", "parallel"]} ins(%[[EXP]], %[[SUM]] : tensor<4x8xf32>, tensor<4xf32>)
// CHECK: arith.divf
// CHECK: return %[[Y]]
func.func @softmax_rows(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = cleave.softmax %x dim = 1 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
// CHECK-LABEL: func.func @softmax_columns_bf16
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xbf16>)
// CHECK: %[[MAX:.*]] = linalg.generic {indexing_maps = [#[[$FULL]], #[[$COL]]], iterator_types = ["reduction", "parallel"]} ins(%[[X]] : tensor<4x8xbf16>) outs(%{{.*}} : tensor<8xf32>)
// CHECK: %[[EXP:.*]] = linalg.generic {indexing_maps = [#[[$FULL]], #[[$COL]], #[[$FULL]]], {{.*}} ins(%[[X]], %[[MAX]] : tensor<4x8xbf16>, tensor<8xf32>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%[[EXP]] : tensor<4x8xf32>) outs(%{{.*}} : tensor<8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[EXP]], %[[SUM]] : tensor<4x8xf32>, tensor<8xf32>) outs(%{{.*}} : tensor<4x8xbf16>)
// CHECK: %[[Q:.*]] = arith.divf
// CHECK: arith.truncf %[[Q]] : f32 to bf16
func.func @softmax_columns_bf16(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %0 = cleave.softmax %x dim = 0 : tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}
// dx = y (dy - sum(y dy)).
// CHECK-LABEL: func.func @softmax_grad
// CHECK-SAME: (%[[Y:.*]]: tensor<4x8xf32>, %[[DY:.*]]: tensor<4x8xf32>)
// CHECK: %[[DOT:.*]] = linalg.generic {indexing_maps = [#[[$FULL]], #[[$FULL]], #[[$ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[Y]], %[[DY]] : tensor<4x8xf32>, tensor<4x8xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK: %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK: arith.addf %[[ACC]], %[[P]] fastmath<reassoc> : f32
// CHECK: linalg.generic {indexing_maps = [#[[$FULL]], #[[$FULL]], #[[$ROW]], #[[$FULL]]], iterator_types = ["parallel", "parallel"]} ins(%[[Y]], %[[DY]], %[[DOT]] : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>)
// CHECK: ^bb0(%[[Y1:.*]]: f32, %[[DY1:.*]]: f32, %[[D:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[DIFF:.*]] = arith.subf %[[DY1]], %[[D]] : f32
// CHECK: %[[R:.*]] = arith.mulf %[[Y1]], %[[DIFF]] : f32
// CHECK: linalg.yield %[[R]]
func.func @softmax_grad(%y: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = cleave.softmax_grad %y, %dy dim = 1 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Layer norm: the row mean, the row mean of squared deviations, rstd =
// 1 / sqrt(var + eps), then one generic reading x, the row statistics
// and gamma, beta along the last dimension. RMS norm skips the mean.
// CHECK-DAG: #[[$X:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[$ROWS:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$VEC:.*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[$X]], #[[$ROWS]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<2x4x8xf32>)
// CHECK: %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<2x4xf32>)
// CHECK: arith.constant 1.250000e-01 : f32
// CHECK: %[[SQ:.*]] = linalg.generic {indexing_maps = [#[[$X]], #[[$ROWS]], #[[$ROWS]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]], %[[MEAN]] : tensor<2x4x8xf32>, tensor<2x4xf32>)
// CHECK: %[[DEV:.*]] = arith.subf
// CHECK: arith.mulf %[[DEV]], %[[DEV]] : f32
// CHECK: %[[RSTD:.*]] = linalg.generic {{.*}} ins(%[[SQ]] : tensor<2x4xf32>)
// CHECK: %[[VAR:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: %[[EPS:.*]] = arith.constant 9.99999974E-6 : f32
// CHECK: %[[VE:.*]] = arith.addf %[[VAR]], %[[EPS]] : f32
// CHECK: %[[SD:.*]] = math.sqrt %[[VE]] : f32
// CHECK: arith.divf %{{.*}}, %[[SD]] : f32
// CHECK: %[[Y:.*]] = linalg.generic {indexing_maps = [#[[$X]], #[[$ROWS]], #[[$ROWS]], #[[$VEC]], #[[$VEC]], #[[$X]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[X]], %[[MEAN]], %[[RSTD]], %[[G]], %[[B]] : tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK: ^bb0(%[[XI:.*]]: f32, %[[MI:.*]]: f32, %[[RI:.*]]: f32, %[[GI:.*]]: f32, %[[BI:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[C:.*]] = arith.subf %[[XI]], %[[MI]] : f32
// CHECK: %[[XH:.*]] = arith.mulf %[[C]], %[[RI]] : f32
// CHECK: %[[SC:.*]] = arith.mulf %[[XH]], %[[GI]] : f32
// CHECK: %[[O:.*]] = arith.addf %[[SC]], %[[BI]] : f32
// CHECK: linalg.yield %[[O]]
// CHECK: return %[[Y]]
func.func @layer_norm(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %0 = cleave.layer_norm %x, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %0 : tensor<2x4x8xf32>
}
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<8xf32>)
// CHECK: %[[SQ:.*]] = linalg.generic {indexing_maps = [#[[$X]], #[[$ROWS]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<2x4x8xf32>)
// CHECK: ^bb0(%[[A:.*]]: f32, %{{.*}}: f32):
// CHECK: arith.mulf %[[A]], %[[A]] : f32
// CHECK: %[[RSTD:.*]] = linalg.generic {{.*}} ins(%[[SQ]] : tensor<2x4xf32>)
// CHECK: math.sqrt
// CHECK: %[[Y:.*]] = linalg.generic {indexing_maps = [#[[$X]], #[[$ROWS]], #[[$VEC]], #[[$X]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[X]], %[[RSTD]], %[[G]] : tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<8xf32>)
// CHECK: ^bb0(%[[XI:.*]]: f32, %[[RI:.*]]: f32, %[[GI:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[N:.*]] = arith.mulf %[[XI]], %[[RI]] : f32
// CHECK: arith.mulf %[[N]], %[[GI]] : f32
// CHECK: return %[[Y]]
func.func @rms_norm(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %0 = cleave.rms_norm %x, %g : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %0 : tensor<2x4x8xf32>
}

// -----

// Norm gradients recompute the row statistics, then reduce dgamma (and
// dbeta) over the rows and the two row sums of dx over the columns:
// dx = rstd (dy gamma - xhat mean(dy gamma xhat) - mean(dy gamma)).
// CHECK-DAG: #[[$X:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[$ROWS:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$VEC:.*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-LABEL: func.func @layer_norm_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[DY:.*]]: tensor<2x4x8xf32>)
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<2x4x8xf32>)
// CHECK: %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<2x4xf32>)
// CHECK: %[[SQ:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[MEAN]] : tensor<2x4x8xf32>, tensor<2x4xf32>)
// CHECK: %[[RSTD:.*]] = linalg.generic {{.*}} ins(%[[SQ]] : tensor<2x4xf32>)
// CHECK: math.sqrt
// CHECK: %[[DG:.*]] = linalg.generic {indexing_maps = [#[[$X]], #[[$X]], #[[$ROWS]], #[[$ROWS]], #[[$VEC]]], iterator_types = ["reduction", "reduction", "parallel"]} ins(%[[DY]], %[[X]], %[[MEAN]], %[[RSTD]] : {{.*}}) outs(%{{.*}} : tensor<8xf32>)
// CHECK: %[[SD:.*]] = linalg.generic {indexing_maps = [#[[$X]], #[[$VEC]], #[[$ROWS]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[DY]], %[[G]] : tensor<2x4x8xf32>, tensor<8xf32>)
// CHECK: %[[SDX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[DY]], %[[G]], %[[X]], %[[MEAN]], %[[RSTD]] : {{.*}}) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK: %[[DX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[DY]], %[[G]], %[[X]], %[[MEAN]], %[[RSTD]], %[[SD]], %[[SDX]] : {{.*}}) outs(%{{.*}} : tensor<2x4x8xf32>)
// CHECK: ^bb0(%[[DYI:.*]]: f32, %[[GI:.*]]: f32, %[[XI:.*]]: f32, %[[MI:.*]]: f32, %[[RI:.*]]: f32, %[[SDI:.*]]: f32, %[[SDXI:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[DXH:.*]] = arith.mulf %[[DYI]], %[[GI]] : f32
// CHECK: %[[C:.*]] = arith.subf %[[XI]], %[[MI]] : f32
// CHECK: %[[XH:.*]] = arith.mulf %[[C]], %[[RI]] : f32
// CHECK: %[[H1:.*]] = arith.mulf %[[SDXI]], %{{.*}} : f32
// CHECK: %[[T1:.*]] = arith.mulf %[[XH]], %[[H1]] : f32
// CHECK: %[[R1:.*]] = arith.subf %[[DXH]], %[[T1]] : f32
// CHECK: %[[H2:.*]] = arith.mulf %[[SDI]], %{{.*}} : f32
// CHECK: %[[R2:.*]] = arith.subf %[[R1]], %[[H2]] : f32
// CHECK: %[[R:.*]] = arith.mulf %[[RI]], %[[R2]] : f32
// CHECK: linalg.yield %[[R]]
// CHECK: %[[DGC:.*]] = linalg.generic {{.*}} ins(%[[DG]] : tensor<8xf32>) outs(%{{.*}} : tensor<8xf32>)
// CHECK: %[[DB:.*]] = linalg.generic {indexing_maps = [#[[$X]], #[[$VEC]]], iterator_types = ["reduction", "reduction", "parallel"]} ins(%[[DY]] : tensor<2x4x8xf32>)
// CHECK: %[[DBC:.*]] = linalg.generic {{.*}} ins(%[[DB]] : tensor<8xf32>) outs(%{{.*}} : tensor<8xf32>)
// CHECK: return %[[DX]], %[[DGC]], %[[DBC]]
func.func @layer_norm_grad(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %dy: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %0:3 = cleave.layer_norm_grad %x, %g, %dy : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %0#0, %0#1, %0#2 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
}
// RMS norm's gradient has no mean term and no dbeta.
// CHECK-LABEL: func.func @rms_norm_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[DY:.*]]: tensor<2x4x8xf32>)
// CHECK: %[[SQ:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<2x4x8xf32>)
// CHECK: %[[RSTD:.*]] = linalg.generic {{.*}} ins(%[[SQ]] : tensor<2x4xf32>)
// CHECK: %[[DG:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "reduction", "parallel"]} ins(%[[DY]], %[[X]], %[[RSTD]], %[[RSTD]] : {{.*}}) outs(%{{.*}} : tensor<8xf32>)
// CHECK: ^bb0(%[[DYI:.*]]: f32, %[[XI:.*]]: f32, %{{.*}}: f32, %[[RI:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK: %[[XH:.*]] = arith.mulf %[[XI]], %[[RI]] : f32
// CHECK: %[[P:.*]] = arith.mulf %[[DYI]], %[[XH]] : f32
// CHECK: arith.addf %[[ACC]], %[[P]] fastmath<reassoc> : f32
// CHECK: %[[DX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK: ^bb0(%[[DYI:.*]]: f32, %[[GI:.*]]: f32, %[[XI:.*]]: f32, %{{.*}}: f32, %[[RI:.*]]: f32, %{{.*}}: f32, %[[SDXI:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[DXH:.*]] = arith.mulf %[[DYI]], %[[GI]] : f32
// CHECK: %[[XH:.*]] = arith.mulf %[[XI]], %[[RI]] : f32
// CHECK: %[[H:.*]] = arith.mulf %[[SDXI]], %{{.*}} : f32
// CHECK: %[[T:.*]] = arith.mulf %[[XH]], %[[H]] : f32
// CHECK: %[[D:.*]] = arith.subf %[[DXH]], %[[T]] : f32
// CHECK: %[[R:.*]] = arith.mulf %[[RI]], %[[D]] : f32
// CHECK: linalg.yield %[[R]]
// CHECK: %[[DGC:.*]] = linalg.generic {{.*}} ins(%[[DG]] : tensor<8xf32>)
// CHECK: return %[[DX]], %[[DGC]] :
func.func @rms_norm_grad(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %dy: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>) {
  %0:2 = cleave.rms_norm_grad %x, %g, %dy : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  return %0#0, %0#1 : tensor<2x4x8xf32>, tensor<8xf32>
}

// -----

// Embedding: a generic over the output reading the id of each position
// (clamped into the table) and gathering the table row. With a vocabulary
// block, ids are shifted by block * rows and ids outside the block read 0.
// CHECK-DAG: #[[$IDS:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @embedding
// CHECK-SAME: (%[[T:.*]]: tensor<10x8xf32>, %[[IDS:.*]]: tensor<2x4xi32>)
// CHECK: linalg.generic {indexing_maps = [#[[$IDS]], #[[$OUT]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[IDS]] : tensor<2x4xi32>) outs(%{{.*}} : tensor<2x4x8xf32>)
// CHECK: ^bb0(%[[ID:.*]]: i32, %{{.*}}: f32):
// CHECK: %[[I:.*]] = arith.index_cast %[[ID]] : i32 to index
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C9:.*]] = arith.constant 9 : index
// CHECK: %[[LO:.*]] = arith.maxsi %[[I]], %[[C0]] : index
// CHECK: %[[ROW:.*]] = arith.minsi %[[LO]], %[[C9]] : index
// CHECK: %[[COL:.*]] = linalg.index 2 : index
// CHECK: %[[V:.*]] = tensor.extract %[[T]][%[[ROW]], %[[COL]]] : tensor<10x8xf32>
// CHECK: linalg.yield %[[V]] : f32
func.func @embedding(%table: tensor<10x8xf32>, %ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  %0 = cleave.embedding %table, %ids : (tensor<10x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  return %0 : tensor<2x4x8xf32>
}
// CHECK-LABEL: func.func @embedding_block
// CHECK-SAME: (%[[T:.*]]: tensor<5x8xbf16>, %[[IDS:.*]]: tensor<2x4xi64>, %[[BLK:.*]]: tensor<i64>)
// CHECK: %[[B:.*]] = tensor.extract %[[BLK]][] : tensor<i64>
// CHECK: %[[ROWS:.*]] = arith.constant 5 : i64
// CHECK: %[[START:.*]] = arith.muli %[[B]], %[[ROWS]] : i64
// CHECK: linalg.generic
// CHECK: ^bb0(%[[ID:.*]]: i64, %{{.*}}: bf16):
// CHECK: %[[REL:.*]] = arith.subi %[[ID]], %[[START]] : i64
// CHECK: %[[GE:.*]] = arith.cmpi sge, %[[REL]], %{{.*}} : i64
// CHECK: %[[LT:.*]] = arith.cmpi slt, %[[REL]], %{{.*}} : i64
// CHECK: %[[IN:.*]] = arith.andi %[[GE]], %[[LT]] : i1
// CHECK: %[[I:.*]] = arith.index_cast %[[REL]] : i64 to index
// CHECK: %[[V:.*]] = tensor.extract %[[T]][%{{.*}}, %{{.*}}] : tensor<5x8xbf16>
// CHECK: %[[W:.*]] = arith.extf %[[V]] : bf16 to f32
// CHECK: %[[S:.*]] = arith.select %[[IN]], %[[W]], %{{.*}} : f32
// CHECK: %[[R:.*]] = arith.truncf %[[S]] : f32 to bf16
// CHECK: linalg.yield %[[R]] : bf16
func.func @embedding_block(%table: tensor<5x8xbf16>, %ids: tensor<2x4xi64>, %blk: tensor<i64>) -> tensor<2x4x8xbf16> {
  %0 = cleave.embedding %table, %ids, %blk : (tensor<5x8xbf16>, tensor<2x4xi64>, tensor<i64>) -> tensor<2x4x8xbf16>
  return %0 : tensor<2x4x8xbf16>
}

// -----

// The embedding gradient scatter-adds gradient rows into a zeroed f32
// table, one token at a time; with a block, tokens of other blocks are
// skipped, and the table is narrowed to bf16 last.
// CHECK-LABEL: func.func @embedding_grad
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x4xi32>, %[[G:.*]]: tensor<2x4x8xf32>)
// CHECK: %[[FLATIDS:.*]] = tensor.collapse_shape %[[IDS]] {{\[\[}}0, 1]] : tensor<2x4xi32> into tensor<8xi32>
// CHECK: %[[GF:.*]] = tensor.collapse_shape %[[G]]
// CHECK: %[[ROWS:.*]] = tensor.expand_shape %[[GF]] {{\[\[}}0, 1]] output_shape [8, 8] : tensor<64xf32> into tensor<8x8xf32>
// CHECK: %[[ZERO:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<10x8xf32>)
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[R:.*]] = scf.for %[[I:.*]] = %[[C0]] to %[[C8]] step %[[C1]] iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (tensor<10x8xf32>) {
// CHECK: %[[ID:.*]] = tensor.extract %[[FLATIDS]][%[[I]]] : tensor<8xi32>
// CHECK: %[[IDX:.*]] = arith.index_cast %[[ID]] : i32 to index
// CHECK: %[[ROW:.*]] = arith.minsi
// CHECK: %[[GR:.*]] = tensor.extract_slice %[[ROWS]][%[[I]], 0] [1, 8] [1, 1] : tensor<8x8xf32> to tensor<8xf32>
// CHECK: %[[AR:.*]] = tensor.extract_slice %[[ACC]][%[[ROW]], 0] [1, 8] [1, 1] : tensor<10x8xf32> to tensor<8xf32>
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[AR]], %[[GR]] : tensor<8xf32>, tensor<8xf32>)
// CHECK: arith.addf
// CHECK: %[[UPD:.*]] = tensor.insert_slice %[[SUM]] into %[[ACC]][%[[ROW]], 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<10x8xf32>
// CHECK: scf.yield %[[UPD]] : tensor<10x8xf32>
// CHECK: return %[[R]]
func.func @embedding_grad(%ids: tensor<2x4xi32>, %g: tensor<2x4x8xf32>) -> tensor<10x8xf32> {
  %0 = cleave.embedding_grad %ids, %g : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<10x8xf32>
  return %0 : tensor<10x8xf32>
}
// CHECK-LABEL: func.func @embedding_grad_block
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x4xi32>, %[[G:.*]]: tensor<2x4x8xbf16>, %[[BLK:.*]]: tensor<i64>)
// CHECK: %[[ZERO:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<5x8xf32>)
// CHECK: %[[B:.*]] = tensor.extract %[[BLK]][] : tensor<i64>
// CHECK: %[[START:.*]] = arith.muli %[[B]], %{{.*}} : i64
// CHECK: %[[R:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (tensor<5x8xf32>) {
// CHECK: %[[WIDE:.*]] = arith.extsi %{{.*}} : i32 to i64
// CHECK: %[[REL:.*]] = arith.subi %[[WIDE]], %[[START]] : i64
// CHECK: %[[IN:.*]] = arith.andi
// CHECK: %[[NEW:.*]] = scf.if %[[IN]] -> (tensor<5x8xf32>) {
// CHECK: tensor.insert_slice
// CHECK: } else {
// CHECK: scf.yield %[[ACC]] : tensor<5x8xf32>
// CHECK: }
// CHECK: scf.yield %[[NEW]] : tensor<5x8xf32>
// CHECK: %[[NARROW:.*]] = linalg.generic {{.*}} ins(%[[R]] : tensor<5x8xf32>) outs(%{{.*}} : tensor<5x8xbf16>)
// CHECK: arith.truncf
// CHECK: return %[[NARROW]]
func.func @embedding_grad_block(%ids: tensor<2x4xi32>, %g: tensor<2x4x8xbf16>, %blk: tensor<i64>) -> tensor<5x8xbf16> {
  %0 = cleave.embedding_grad %ids, %g, %blk : (tensor<2x4xi32>, tensor<2x4x8xbf16>, tensor<i64>) -> tensor<5x8xbf16>
  return %0 : tensor<5x8xbf16>
}

// -----

// Rotary embedding: one generic over [B, S, H, D]; position s is the
// iteration index of dimension 1, pair i and partner element come from the
// index of dimension 3 (halves by default, neighbours when interleaved);
// angle = s / theta^(2i / D); the inverse rotation negates the sine.
// CHECK-LABEL: func.func @rotary_halves
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x4x16xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[X]] : tensor<2x8x4x16xf32>)
// CHECK: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[S:.*]] = linalg.index 1 : index
// CHECK: %[[D:.*]] = linalg.index 3 : index
// CHECK: %[[FIRST:.*]] = arith.cmpi ult, %[[D]], %{{.*}} : index
// CHECK: %[[PAIR:.*]] = arith.select %[[FIRST]], %[[D]], %{{.*}} : index
// CHECK: %[[PARTNER:.*]] = arith.select %[[FIRST]], %{{.*}}, %{{.*}} : index
// CHECK: %[[THETA:.*]] = arith.constant 1.000000e+04 : f32
// CHECK: %[[POW:.*]] = math.powf %[[THETA]], %{{.*}} : f32
// CHECK: %[[INV:.*]] = arith.divf %{{.*}}, %[[POW]] : f32
// CHECK: %[[ANGLE:.*]] = arith.mulf %{{.*}}, %[[INV]] : f32
// CHECK: %[[COS:.*]] = math.cos %[[ANGLE]] : f32
// CHECK: %[[SIN:.*]] = math.sin %[[ANGLE]] : f32
// CHECK: %[[B:.*]] = linalg.index 0 : index
// CHECK: %[[H:.*]] = linalg.index 2 : index
// CHECK: %[[OTHER:.*]] = tensor.extract %[[X]][%[[B]], %[[S]], %[[H]], %[[PARTNER]]] : tensor<2x8x4x16xf32>
// CHECK: %[[TERM:.*]] = arith.mulf %[[OTHER]], %[[SIN]] : f32
// CHECK: %[[NEG:.*]] = arith.negf %[[TERM]] : f32
// CHECK: %[[SIGNED:.*]] = arith.select %[[FIRST]], %[[NEG]], %[[TERM]] : f32
// CHECK: %[[XC:.*]] = arith.mulf %[[IN]], %[[COS]] : f32
// CHECK: %[[R:.*]] = arith.addf %[[XC]], %[[SIGNED]] : f32
// CHECK: linalg.yield %[[R]] : f32
func.func @rotary_halves(%x: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  %0 = cleave.rotary %x : tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}
// CHECK-LABEL: func.func @rotary_interleaved_inverse
// CHECK: ^bb0(%{{.*}}: bf16, %{{.*}}: bf16):
// CHECK: %[[D:.*]] = linalg.index 3 : index
// CHECK: %[[PAIR:.*]] = arith.divui %[[D]], %{{.*}} : index
// CHECK: %[[REM:.*]] = arith.remui %[[D]], %{{.*}} : index
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[REM]], %{{.*}} : index
// CHECK: arith.constant 5.000000e+05 : f32
// CHECK: %[[SIN:.*]] = math.sin
// CHECK: %[[NSIN:.*]] = arith.negf %[[SIN]] : f32
// CHECK: %[[OTHER:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.mulf %[[OTHER]], %[[NSIN]] : f32
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @rotary_interleaved_inverse(%x: tensor<2x8x4x16xbf16>) -> tensor<2x8x4x16xbf16> {
  %0 = cleave.rotary %x {theta = 500000.0 : f64, interleaved, inverse} : tensor<2x8x4x16xbf16>
  return %0 : tensor<2x8x4x16xbf16>
}

// -----

// Grouped-query attention (4 query heads, 2 key/value heads, no mask,
// Skv != S, Dv != D): the key and value copies repeat each head for its
// two query heads; the default scale is 1/sqrt(16); no causal select.
// CHECK-DAG: #[[$HEADS:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d3, d1, d4)>
// CHECK-LABEL: func.func @gqa_attention
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x4x16xf32>, %[[K:.*]]: tensor<2x6x2x16xf32>, %[[V:.*]]: tensor<2x6x2x8xf32>)
// CHECK: %[[QH:.*]] = linalg.generic {indexing_maps = [#[[$HEADS]], {{.*}}]{{.*}} ins(%[[Q]] : tensor<2x4x4x16xf32>) outs(%{{.*}} : tensor<2x4x1x4x16xf32>)
// CHECK: %[[QF:.*]] = tensor.collapse_shape %[[QH]]
// CHECK: %[[Q3:.*]] = tensor.expand_shape %[[QF]] {{.*}} output_shape [8, 4, 16]
// CHECK: %[[KH:.*]] = linalg.generic {indexing_maps = [#[[$HEADS]], {{.*}}]{{.*}} ins(%[[K]] : tensor<2x6x2x16xf32>) outs(%{{.*}} : tensor<2x2x2x6x16xf32>)
// CHECK: %[[KF:.*]] = tensor.collapse_shape %[[KH]]
// CHECK: %[[K3:.*]] = tensor.expand_shape %[[KF]] {{.*}} output_shape [8, 6, 16]
// CHECK: %[[VH:.*]] = linalg.generic {indexing_maps = [#[[$HEADS]], {{.*}}]{{.*}} ins(%[[V]] : tensor<2x6x2x8xf32>) outs(%{{.*}} : tensor<2x2x2x6x8xf32>)
// CHECK: %[[VF:.*]] = tensor.collapse_shape %[[VH]]
// CHECK: %[[V3:.*]] = tensor.expand_shape %[[VF]] {{.*}} output_shape [8, 6, 8]
// CHECK: %[[S:.*]] = linalg.batch_matmul_transpose_b ins(%[[Q3]], %[[K3]] : tensor<8x4x16xf32>, tensor<8x6x16xf32>) outs(%{{.*}} : tensor<8x4x6xf32>)
// CHECK-NOT: arith.cmpi
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<8x4x6xf32>) outs(%{{.*}} : tensor<8x4xf32>)
// CHECK: arith.constant 2.500000e-01 : f32
// CHECK: %[[E:.*]] = linalg.generic {{.*}} ins(%[[S]], %[[MAX]] : tensor<8x4x6xf32>, tensor<8x4xf32>)
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[E]] : tensor<8x4x6xf32>)
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%[[E]], %[[SUM]] : tensor<8x4x6xf32>, tensor<8x4xf32>)
// CHECK: arith.divf
// CHECK-NOT: arith.cmpi
// CHECK: %[[O:.*]] = linalg.batch_matmul ins(%[[P]], %[[V3]] : tensor<8x4x6xf32>, tensor<8x6x8xf32>) outs(%{{.*}} : tensor<8x4x8xf32>)
// CHECK: %[[OF:.*]] = tensor.collapse_shape %[[O]]
// CHECK: %[[O4:.*]] = tensor.expand_shape %[[OF]] {{.*}} output_shape [2, 4, 4, 8]
// CHECK: %[[R:.*]] = linalg.transpose ins(%[[O4]] : tensor<2x4x4x8xf32>) outs(%{{.*}} : tensor<2x4x4x8xf32>) permutation = [0, 2, 1, 3]
// CHECK: return %[[R]]
func.func @gqa_attention(%q: tensor<2x4x4x16xf32>, %k: tensor<2x6x2x16xf32>, %v: tensor<2x6x2x8xf32>) -> tensor<2x4x4x8xf32> {
  %0 = cleave.attention %q, %k, %v : (tensor<2x4x4x16xf32>, tensor<2x6x2x16xf32>, tensor<2x6x2x8xf32>) -> tensor<2x4x4x8xf32>
  return %0 : tensor<2x4x4x8xf32>
}

// -----

// The attention gradient recomputes P (with the given scale and the causal
// mask), then dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dP P)) scale,
// dQ = dS K, dK = dS^T Q, and sums dK, dV over the two query heads of
// each key/value head.
// CHECK-LABEL: func.func @attention_grad
// CHECK: %[[S:.*]] = linalg.batch_matmul_transpose_b ins(%[[Q3:.*]], %[[K3:.*]] : tensor<8x4x16xf32>, tensor<8x4x16xf32>)
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<8x4x4xf32>) outs(%{{.*}} : tensor<8x4xf32>)
// CHECK: arith.constant 5.000000e-01 : f32
// CHECK: %[[J:.*]] = linalg.index 2 : index
// CHECK: %[[FUTURE:.*]] = arith.cmpi ugt, %[[J]], %{{.*}} : index
// CHECK: arith.select %[[FUTURE]], %{{.*}}, %{{.*}} : f32
// CHECK: %[[E:.*]] = linalg.generic {{.*}} ins(%[[S]], %[[MAX]] : tensor<8x4x4xf32>, tensor<8x4xf32>)
// CHECK: arith.cmpi ugt
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[E]] : tensor<8x4x4xf32>)
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%[[E]], %[[SUM]] : tensor<8x4x4xf32>, tensor<8x4xf32>)
// CHECK: arith.divf
// CHECK: %[[DV:.*]] = linalg.batch_matmul_transpose_a ins(%[[P]], %[[DO:.*]] : tensor<8x4x4xf32>, tensor<8x4x16xf32>)
// CHECK: %[[DP:.*]] = linalg.batch_matmul_transpose_b ins(%[[DO]], %[[V3:.*]] : tensor<8x4x16xf32>, tensor<8x4x16xf32>)
// CHECK: %[[DOT:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[DP]], %[[P]] : tensor<8x4x4xf32>, tensor<8x4x4xf32>)
// CHECK: %[[DS:.*]] = linalg.generic {{.*}} ins(%[[P]], %[[DP]], %[[DOT]] : tensor<8x4x4xf32>, tensor<8x4x4xf32>, tensor<8x4xf32>)
// CHECK: ^bb0(%[[PI:.*]]: f32, %[[DPI:.*]]: f32, %[[DOTI:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[DIFF:.*]] = arith.subf %[[DPI]], %[[DOTI]] : f32
// CHECK: %[[PROD:.*]] = arith.mulf %[[PI]], %[[DIFF]] : f32
// CHECK: %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK: arith.mulf %[[PROD]], %[[HALF]] : f32
// CHECK: %[[DQ:.*]] = linalg.batch_matmul ins(%[[DS]], %[[K3]] : tensor<8x4x4xf32>, tensor<8x4x16xf32>)
// CHECK: %[[DK:.*]] = linalg.batch_matmul_transpose_a ins(%[[DS]], %[[Q3]] : tensor<8x4x4xf32>, tensor<8x4x16xf32>)
// CHECK: %[[DQT:.*]] = linalg.transpose ins(%{{.*}} : tensor<2x4x4x16xf32>) outs(%{{.*}} : tensor<2x4x4x16xf32>) permutation = [0, 2, 1, 3]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "parallel", "parallel"]} ins(%{{.*}} : tensor<2x2x2x4x16xf32>) outs(%{{.*}} : tensor<2x2x4x16xf32>)
// CHECK: %[[DKT:.*]] = linalg.transpose ins(%{{.*}} : tensor<2x2x4x16xf32>) outs(%{{.*}} : tensor<2x4x2x16xf32>) permutation = [0, 2, 1, 3]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "parallel", "parallel"]} ins(%{{.*}} : tensor<2x2x2x4x16xf32>) outs(%{{.*}} : tensor<2x2x4x16xf32>)
// CHECK: %[[DVT:.*]] = linalg.transpose ins(%{{.*}} : tensor<2x2x4x16xf32>) outs(%{{.*}} : tensor<2x4x2x16xf32>) permutation = [0, 2, 1, 3]
// CHECK: return %[[DQT]], %[[DKT]], %[[DVT]]
func.func @attention_grad(%q: tensor<2x4x4x16xf32>, %k: tensor<2x4x2x16xf32>, %v: tensor<2x4x2x16xf32>, %g: tensor<2x4x4x16xf32>) -> (tensor<2x4x4x16xf32>, tensor<2x4x2x16xf32>, tensor<2x4x2x16xf32>) {
  %0:3 = cleave.attention_grad %q, %k, %v, %g {causal, scale = 0.5 : f64} : (tensor<2x4x4x16xf32>, tensor<2x4x2x16xf32>, tensor<2x4x2x16xf32>, tensor<2x4x4x16xf32>) -> (tensor<2x4x4x16xf32>, tensor<2x4x2x16xf32>, tensor<2x4x2x16xf32>)
  return %0#0, %0#1, %0#2 : tensor<2x4x4x16xf32>, tensor<2x4x2x16xf32>, tensor<2x4x2x16xf32>
}

// -----

// Cross-entropy over [N, V] rows (leading dimensions flattened): the
// row-wise log-sum-exp (max, sum of exp(x - max), log + max), the logit
// of each label (clamped into the vocabulary), and the mean of their
// differences.
// CHECK-LABEL: func.func @cross_entropy
// CHECK-SAME: (%[[L:.*]]: tensor<2x4x16xf32>, %[[T:.*]]: tensor<2x4xi32>)
// CHECK: %[[LF:.*]] = tensor.collapse_shape %[[L]]
// CHECK: %[[L2:.*]] = tensor.expand_shape %[[LF]] {{\[\[}}0, 1]] output_shape [8, 16] : tensor<128xf32> into tensor<8x16xf32>
// CHECK: %[[T1:.*]] = tensor.collapse_shape %[[T]] {{\[\[}}0, 1]] : tensor<2x4xi32> into tensor<8xi32>
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[L2]] : tensor<8x16xf32>)
// CHECK: arith.maximumf
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[L2]], %[[MAX]] : tensor<8x16xf32>, tensor<8xf32>)
// CHECK: math.exp
// CHECK: %[[LSE:.*]] = linalg.generic {{.*}} ins(%[[SUM]], %[[MAX]] : tensor<8xf32>, tensor<8xf32>)
// CHECK: ^bb0(%[[SI:.*]]: f32, %[[MI:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[LOG:.*]] = math.log %[[SI]] : f32
// CHECK: arith.addf %[[LOG]], %[[MI]] : f32
// CHECK: %[[PICK:.*]] = linalg.generic {{.*}} ins(%[[T1]] : tensor<8xi32>) outs(%{{.*}} : tensor<8xf32>)
// CHECK: ^bb0(%[[LABEL:.*]]: i32, %{{.*}}: f32):
// CHECK: %[[IDX:.*]] = arith.index_cast %[[LABEL]] : i32 to index
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C15:.*]] = arith.constant 15 : index
// CHECK: %[[LO:.*]] = arith.maxsi %[[IDX]], %[[C0]] : index
// CHECK: %[[COL:.*]] = arith.minsi %[[LO]], %[[C15]] : index
// CHECK: %[[ROW:.*]] = linalg.index 0 : index
// CHECK: %[[X:.*]] = tensor.extract %[[L2]][%[[ROW]], %[[COL]]] : tensor<8x16xf32>
// CHECK: linalg.yield %[[X]] : f32
// CHECK: %[[TOTAL:.*]] = linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[LSE]], %[[PICK]], %[[T1]] : tensor<8xf32>, tensor<8xf32>, tensor<8xi32>) outs(%{{.*}} : tensor<f32>)
// CHECK: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %{{.*}}: i32, %[[ACC:.*]]: f32):
// CHECK: %[[NLL:.*]] = arith.subf %[[A]], %[[B]] : f32
// CHECK: arith.addf %[[ACC]], %[[NLL]] fastmath<reassoc> : f32
// CHECK: %[[LOSS:.*]] = linalg.generic {{.*}} ins(%[[TOTAL]] : tensor<f32>) outs(%{{.*}} : tensor<f32>)
// CHECK: %[[INVN:.*]] = arith.constant 1.250000e-01 : f32
// CHECK: arith.mulf %{{.*}}, %[[INVN]] : f32
// CHECK: return %[[LOSS]]
func.func @cross_entropy(%l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %0 = cleave.cross_entropy %l, %t : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Its gradient: (softmax - onehot(label)) * dloss / N per element, in f32,
// narrowed to the logits' bf16; the scalar dloss is read through an empty
// map.
// CHECK-DAG: #[[$FULL:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ROW:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[$SCALAR:.*]] = affine_map<(d0, d1) -> ()>
// CHECK-LABEL: func.func @cross_entropy_grad
// CHECK-SAME: (%[[L:.*]]: tensor<2x4x16xbf16>, %[[T:.*]]: tensor<2x4xi64>, %[[G:.*]]: tensor<f32>)
// CHECK: %[[T1:.*]] = tensor.collapse_shape %[[T]] {{\[\[}}0, 1]] : tensor<2x4xi64> into tensor<8xi64>
// CHECK: %[[LSE:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<8xf32>, tensor<8xf32>) outs(%{{.*}} : tensor<8xf32>)
// CHECK: math.log
// CHECK: %[[DL:.*]] = linalg.generic {indexing_maps = [#[[$FULL]], #[[$ROW]], #[[$ROW]], #[[$SCALAR]], #[[$FULL]]], iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %[[LSE]], %[[T1]], %[[G]] : tensor<8x16xbf16>, tensor<8xf32>, tensor<8xi64>, tensor<f32>) outs(%{{.*}} : tensor<8x16xbf16>)
// CHECK: ^bb0(%[[X:.*]]: bf16, %[[LSEI:.*]]: f32, %[[LABEL:.*]]: i64, %[[GI:.*]]: f32, %{{.*}}: bf16):
// CHECK: %[[XW:.*]] = arith.extf %[[X]] : bf16 to f32
// CHECK: %[[SH:.*]] = arith.subf %[[XW]], %[[LSEI]] : f32
// CHECK: %[[P:.*]] = math.exp %[[SH]] : f32
// CHECK: %[[COL:.*]] = linalg.index 1 : index
// CHECK: %[[LI:.*]] = arith.index_cast %[[LABEL]] : i64 to index
// CHECK: %[[HIT:.*]] = arith.cmpi eq, %[[COL]], %[[LI]] : index
// CHECK: %[[ONEHOT:.*]] = arith.select %[[HIT]], %{{.*}}, %{{.*}} : f32
// CHECK: %[[INVN:.*]] = arith.constant 1.250000e-01 : f32
// CHECK: %[[SCALE:.*]] = arith.mulf %[[GI]], %[[INVN]] : f32
// CHECK: %[[D:.*]] = arith.subf %[[P]], %[[ONEHOT]] : f32
// CHECK: %[[R:.*]] = arith.mulf %[[D]], %[[SCALE]] : f32
// CHECK: %[[RN:.*]] = arith.truncf %[[R]] : f32 to bf16
// CHECK: linalg.yield %[[RN]] : bf16
// CHECK: %[[DF:.*]] = tensor.collapse_shape %[[DL]]
// CHECK: %[[D3:.*]] = tensor.expand_shape %[[DF]] {{.*}} output_shape [2, 4, 16]
// CHECK: return %[[D3]]
func.func @cross_entropy_grad(%l: tensor<2x4x16xbf16>, %t: tensor<2x4xi64>, %g: tensor<f32>) -> tensor<2x4x16xbf16> {
  %0 = cleave.cross_entropy_grad %l, %t, %g : (tensor<2x4x16xbf16>, tensor<2x4xi64>, tensor<f32>) -> tensor<2x4x16xbf16>
  return %0 : tensor<2x4x16xbf16>
}

// -----

// Dropout on a block of a sharded tensor: the Philox counter is the
// element's index in the global [16, 16] tensor, (i + 8 bi) * 16 + (j + 4 bj)
// for the local [8, 4] block (bi, bj); kept elements are scaled by
// 1 / (1 - rate).
// CHECK-LABEL: func.func @dropout_block
// CHECK-SAME: (%[[X:.*]]: tensor<8x4xf32>, %[[SEED:.*]]: tensor<i64>, %[[BI:.*]]: tensor<i64>, %[[BJ:.*]]: tensor<i64>)
// CHECK: %[[C8:.*]] = arith.constant 8 : i64
// CHECK: %[[I0:.*]] = tensor.extract %[[BI]][] : tensor<i64>
// CHECK: %[[S0:.*]] = arith.muli %[[I0]], %[[C8]] : i64
// CHECK: %[[C4:.*]] = arith.constant 4 : i64
// CHECK: %[[J0:.*]] = tensor.extract %[[BJ]][] : tensor<i64>
// CHECK: %[[S1:.*]] = arith.muli %[[J0]], %[[C4]] : i64
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[IW:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK: %[[GI:.*]] = arith.addi %[[IW]], %[[S0]] : i64
// CHECK: %[[C16:.*]] = arith.constant 16 : i64
// CHECK: %[[J:.*]] = linalg.index 1 : index
// CHECK: %[[JW:.*]] = arith.index_cast %[[J]] : index to i64
// CHECK: %[[GJ:.*]] = arith.addi %[[JW]], %[[S1]] : i64
// CHECK: %[[C16B:.*]] = arith.constant 16 : i64
// CHECK: %[[ROWOFF:.*]] = arith.muli %{{.*}}, %[[C16B]] : i64
// CHECK: %[[CTR:.*]] = arith.addi %[[ROWOFF]], %[[GJ]] : i64
// CHECK: arith.trunci %[[CTR]] : i64 to i32
// CHECK-COUNT-20: arith.mului_extended
// CHECK: %[[RATE:.*]] = arith.constant 1.000000e-01 : f32
// CHECK: %[[KEEP:.*]] = arith.cmpf oge, %{{.*}}, %[[RATE]] : f32
// CHECK: %[[SCALE:.*]] = arith.constant 1.11111116 : f32
// CHECK: %[[SC:.*]] = arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK: arith.select %[[KEEP]], %[[SC]], %{{.*}} : f32
func.func @dropout_block(%x: tensor<8x4xf32>, %seed: tensor<i64>, %i: tensor<i64>, %j: tensor<i64>) -> tensor<8x4xf32> {
  %0 = cleave.dropout %x, %seed, %i, %j {global_shape = array<i64: 16, 16>, rate = 0.1 : f64, stream = 1 : i64} : (tensor<8x4xf32>, tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// SGD: p - lr (g + wd p), lr read once as a scalar; a bf16 gradient is
// widened.
// CHECK-LABEL: func.func @sgd
// CHECK-SAME: (%[[P:.*]]: tensor<4x4xf32>, %[[G:.*]]: tensor<4x4xbf16>, %[[LR:.*]]: tensor<f32>)
// CHECK: %[[LRS:.*]] = tensor.extract %[[LR]][] : tensor<f32>
// CHECK: %[[LR64:.*]] = arith.extf %[[LRS]] : f32 to f64
// CHECK: linalg.generic {{.*}} ins(%[[P]], %[[G]] : tensor<4x4xf32>, tensor<4x4xbf16>) outs(%{{.*}} : tensor<4x4xf32>)
// CHECK: ^bb0(%[[PI:.*]]: f32, %[[GI:.*]]: bf16, %{{.*}}: f32):
// CHECK: %[[GW:.*]] = arith.extf %[[GI]] : bf16 to f32
// CHECK: %[[WD:.*]] = arith.constant 0.00999999977 : f32
// CHECK: %[[DECAY:.*]] = arith.mulf %[[PI]], %[[WD]] : f32
// CHECK: %[[GD:.*]] = arith.addf %[[GW]], %[[DECAY]] : f32
// CHECK: %[[LR32:.*]] = arith.truncf %[[LR64]] : f64 to f32
// CHECK: %[[STEP:.*]] = arith.mulf %[[LR32]], %[[GD]] : f32
// CHECK: %[[NEW:.*]] = arith.subf %[[PI]], %[[STEP]] : f32
// CHECK: linalg.yield %[[NEW]] : f32
func.func @sgd(%p: tensor<4x4xf32>, %g: tensor<4x4xbf16>, %lr: tensor<f32>) -> tensor<4x4xf32> {
  %0 = cleave.sgd %p, %g, %lr {weight_decay = 0.01 : f64} : (tensor<4x4xf32>, tensor<4x4xbf16>, tensor<f32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// lr_schedule: scalar f64 arithmetic on the extracted lr and step; the
// decay's progress is clamped, the warmup selected while t <= W.
// CHECK-LABEL: func.func @lr_schedule
// CHECK-SAME: (%[[LR:.*]]: tensor<f32>, %[[T:.*]]: tensor<f32>)
// CHECK-DAG: %[[LR64:.*]] = arith.extf %{{.*}} : f32 to f64
// CHECK-DAG: %[[T64:.*]] = arith.extf %{{.*}} : f32 to f64
// CHECK: %[[SINCE:.*]] = arith.subf %[[T64]], %{{.*}} : f64
// CHECK: %[[FRAC:.*]] = arith.divf %[[SINCE]], %{{.*}} : f64
// CHECK: %[[LO:.*]] = arith.maximumf %{{.*}}, %[[FRAC]] : f64
// CHECK: %[[P:.*]] = arith.minimumf %{{.*}}, %[[LO]] : f64
// CHECK: %[[ANGLE:.*]] = arith.mulf %{{.*}}, %[[P]] : f64
// CHECK: math.cos %[[ANGLE]] : f64
// CHECK: %[[WARM:.*]] = arith.divf %{{.*}}, %{{.*}} : f64
// CHECK: %[[WARMING:.*]] = arith.cmpf ole, %[[T64]], %{{.*}} : f64
// CHECK: %[[RATE:.*]] = arith.select %[[WARMING]], %[[WARM]], %{{.*}} : f64
// CHECK: %[[R32:.*]] = arith.truncf %[[RATE]] : f64 to f32
// CHECK: tensor.from_elements %[[R32]] : tensor<f32>
func.func @lr_schedule(%lr: tensor<f32>, %t: tensor<f32>) -> tensor<f32> {
  %0 = cleave.lr_schedule %lr, %t {decay = #cleave.lr_decay<cosine>, warmup_steps = 10 : i64, decay_steps = 30 : i64, min_lr = 6.0e-05 : f64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// AdamW: bias corrections and the step size in f64 outside the loop, as
// torch.optim.AdamW computes them; one generic writes the parameter and
// both moments.
// CHECK-LABEL: func.func @adamw
// CHECK-SAME: (%[[P:.*]]: tensor<4x4xf32>, %[[G:.*]]: tensor<4x4xbf16>, %[[M:.*]]: tensor<4x4xf32>, %[[V:.*]]: tensor<4x4xf32>, %[[LR:.*]]: tensor<f32>, %[[T:.*]]: tensor<f32>)
// CHECK: %[[LR64:.*]] = arith.extf %{{.*}} : f32 to f64
// CHECK: %[[T64:.*]] = arith.extf %{{.*}} : f32 to f64
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK: %[[B1:.*]] = arith.constant 9.000000e-01 : f64
// CHECK: %[[B1T:.*]] = math.powf %[[B1]], %[[T64]] : f64
// CHECK: %[[BC1:.*]] = arith.subf %[[ONE]], %[[B1T]] : f64
// CHECK: %[[B2:.*]] = arith.constant 0.94999999999999996 : f64
// CHECK: %[[B2T:.*]] = math.powf %[[B2]], %[[T64]] : f64
// CHECK: %[[BC2:.*]] = arith.subf %[[ONE]], %[[B2T]] : f64
// CHECK: %[[STEP:.*]] = arith.divf %[[LR64]], %[[BC1]] : f64
// CHECK: %[[BC2S:.*]] = math.sqrt %[[BC2]] : f64
// CHECK: %[[R:.*]]:3 = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%[[P]], %[[G]], %[[M]], %[[V]] : tensor<4x4xf32>, tensor<4x4xbf16>, tensor<4x4xf32>, tensor<4x4xf32>) outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK: ^bb0(%[[PI:.*]]: f32, %[[GI:.*]]: bf16, %[[MI:.*]]: f32, %[[VI:.*]]: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK: %[[GW:.*]] = arith.extf %[[GI]] : bf16 to f32
// CHECK: %[[PD:.*]] = arith.mulf %[[PI]], %{{.*}} : f32
// CHECK: %[[M1:.*]] = arith.addf
// CHECK: %[[G2:.*]] = arith.mulf %[[GW]], %[[GW]] : f32
// CHECK: %[[V1:.*]] = arith.addf
// CHECK: %[[SQ:.*]] = math.sqrt %[[V1]] : f32
// CHECK: %[[Q:.*]] = arith.divf %[[M1]], %{{.*}} : f32
// CHECK: %[[U:.*]] = arith.mulf %[[Q]], %{{.*}} : f32
// CHECK: %[[NEWP:.*]] = arith.subf %[[PD]], %[[U]] : f32
// CHECK: linalg.yield %[[NEWP]], %[[M1]], %[[V1]] : f32, f32, f32
// CHECK: return %[[R]]#0, %[[R]]#1, %[[R]]#2
func.func @adamw(%p: tensor<4x4xf32>, %gb: tensor<4x4xbf16>, %m: tensor<4x4xf32>, %v: tensor<4x4xf32>, %lr: tensor<f32>, %t: tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %1:3 = cleave.adamw %p, %gb, %m, %v, %lr, %t {beta2 = 0.95 : f64} : (tensor<4x4xf32>, tensor<4x4xbf16>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  return %1#0, %1#1, %1#2 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Ops that the communication lowering owns are not this pass's: one left
// here is an error at the op.
cleave.mesh @m(dp = 2 : host)
func.func @axis_index() -> tensor<i64> {
  // expected-error @below {{failed to legalize operation 'cleave.axis_index' that was explicitly marked illegal}}
  %0 = cleave.axis_index on @m axes = [dp] : tensor<i64>
  return %0 : tensor<i64>
}

// -----

// MoE dispatch is the one-hot einsum over the group's tokens: iteration
// [E, G, C, H, S] reducing S, weights read at [g, s, e, c], tokens at
// [g, s, h]; combine reduces E and C.
// CHECK-DAG: #[[$W:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4, d0, d2)>
// CHECK-DAG: #[[$X:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4, d3)>
// CHECK-DAG: #[[$BUF:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$CW:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
// CHECK-DAG: #[[$CY:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d3, d0, d4, d2)>
// CHECK-DAG: #[[$OUT:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @moe_dispatch_combine
// CHECK: linalg.generic {indexing_maps = [#[[$W]], #[[$X]], #[[$BUF]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<2x8x4x4xf32>, tensor<2x8x16xf32>) outs(%{{.*}} : tensor<4x2x4x16xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: linalg.generic {indexing_maps = [#[[$CW]], #[[$CY]], #[[$OUT]]], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<2x8x4x4xf32>, tensor<4x2x4x16xf32>) outs(%{{.*}} : tensor<2x8x16xf32>)
// CHECK-NOT: cleave.
func.func @moe_dispatch_combine(%x: tensor<2x8x16xf32>, %w: tensor<2x8x4x4xf32>) -> tensor<2x8x16xf32> {
  %0 = cleave.moe_dispatch %x, %w : (tensor<2x8x16xf32>, tensor<2x8x4x4xf32>) -> tensor<4x2x4x16xf32>
  %1 = cleave.moe_combine %w, %0 : (tensor<2x8x4x4xf32>, tensor<4x2x4x16xf32>) -> tensor<2x8x16xf32>
  return %1 : tensor<2x8x16xf32>
}

// -----

// The router counts instead of sorting: each expert's rank over the E x E
// comparisons (higher logit, or equal logit and lower index), each
// selection's slot over the group's tokens, then the one-hots.
// CHECK-DAG: #[[$SELF:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG: #[[$OTHER:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[$TOKEN:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
// CHECK-LABEL: func.func @moe_router
// CHECK: linalg.generic {indexing_maps = [#[[$SELF]], #[[$OTHER]], #[[$SELF]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<2x8x4xbf16>, tensor<2x8x4xbf16>) outs(%{{.*}} : tensor<2x8x4xf32>)
// CHECK: arith.cmpf olt
// CHECK: arith.cmpf oeq
// CHECK: math.exp
// CHECK: linalg.generic {indexing_maps = [#[[$SELF]], #[[$TOKEN]], #[[$SELF]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK: %[[C:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x8x4x2xbf16>)
// CHECK: arith.divf
// CHECK: %[[D:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x8x4x2xbf16>)
// CHECK: return %[[C]], %[[D]]
func.func @moe_router(%l: tensor<2x8x4xbf16>) -> (tensor<2x8x4x2xbf16>, tensor<2x8x4x2xbf16>) {
  %0:2 = cleave.moe_router %l {top_k = 1 : i64, normalize, capacity_factor = 1.0 : f64} : (tensor<2x8x4xbf16>) -> (tensor<2x8x4x2xbf16>, tensor<2x8x4x2xbf16>)
  return %0#0, %0#1 : tensor<2x8x4x2xbf16>, tensor<2x8x4x2xbf16>
}
