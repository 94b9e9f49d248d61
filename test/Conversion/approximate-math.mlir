// RUN: cleave-opt %s --split-input-file --cleave-approximate-math | FileCheck %s

// f32 transcendental functions become inline arithmetic: no call is left
// for libm, only operations that LLVM lowers to instructions (fma, fabs,
// floor).
// CHECK-LABEL: func.func @f32_scalars
// CHECK-NOT: math.{{(tanh|exp|erf|log)}}
// CHECK: return
func.func @f32_scalars(%x: f32) -> (f32, f32, f32, f32) {
  %0 = math.tanh %x : f32
  %1 = math.exp %x : f32
  %2 = math.erf %x : f32
  %3 = math.log %x : f32
  return %0, %1, %2, %3 : f32, f32, f32, f32
}

// -----

// tanh: the input clamped to the range where the rational approximation
// holds, an odd polynomial over an even one in x^2; tiny inputs return x.
// CHECK-LABEL: func.func @tanh
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK-DAG: %[[HI:.*]] = arith.constant 7.99881172 : f32
// CHECK-DAG: %[[LO:.*]] = arith.constant -7.99881172 : f32
// CHECK-DAG: %[[TINY:.*]] = arith.constant 4.000000e-04 : f32
// CHECK: %[[C1:.*]] = arith.cmpf ult, %[[X]], %[[HI]] : f32
// CHECK: %[[S1:.*]] = arith.select %[[C1]], %[[X]], %[[HI]] : f32
// CHECK: %[[C2:.*]] = arith.cmpf ugt, %[[S1]], %[[LO]] : f32
// CHECK: %[[CL:.*]] = arith.select %[[C2]], %[[S1]], %[[LO]] : f32
// CHECK: %[[ABS:.*]] = math.absf %[[X]] : f32
// CHECK: %[[SMALL:.*]] = arith.cmpf olt, %[[ABS]], %[[TINY]] : f32
// CHECK: %[[X2:.*]] = arith.mulf %[[CL]], %[[CL]] : f32
// CHECK: math.fma %[[X2]]
// CHECK: %[[P:.*]] = arith.mulf %[[CL]], %{{.*}} : f32
// CHECK: %[[Q:.*]] = arith.divf %[[P]], %{{.*}} : f32
// CHECK: %[[R:.*]] = arith.select %[[SMALL]], %[[CL]], %[[Q]] : f32
// CHECK: return %[[R]]
func.func @tanh(%x: f32) -> f32 {
  %0 = math.tanh %x : f32
  return %0 : f32
}

// -----

// exp: e^x = 2^k e^r with k = floor(x / ln 2 + 1/2) (both clamped), a
// polynomial in r, and 2^k built from its exponent bits.
// CHECK-LABEL: func.func @exp
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK-NOT: math.exp
// CHECK: %[[K:.*]] = math.floor %{{.*}} : f32
// CHECK: %[[KI:.*]] = arith.fptosi %{{.*}} : f32 to i32
// CHECK: %[[BIASED:.*]] = arith.addi %[[KI]], %{{.*}} : i32
// CHECK: %[[BITS:.*]] = arith.shli %[[BIASED]], %{{.*}} : i32
// CHECK: %[[POW2:.*]] = arith.bitcast %[[BITS]] : i32 to f32
// CHECK: %[[R:.*]] = arith.mulf %{{.*}}, %[[POW2]] : f32
// CHECK: return %[[R]]
func.func @exp(%x: f32) -> f32 {
  %0 = math.exp %x : f32
  return %0 : f32
}

// -----

// The loops of the lowered program are vectorized later: vectors of f32
// are approximated lane-wise.
// CHECK-LABEL: func.func @vectors
// CHECK-NOT: math.exp
// CHECK: math.floor %{{.*}} : vector<8xf32>
// CHECK: arith.bitcast %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK-NOT: math.exp
func.func @vectors(%x: vector<8xf32>) -> vector<8xf32> {
  %0 = math.exp %x : vector<8xf32>
  return %0 : vector<8xf32>
}

// -----

// f64 keeps libm (gradient checks run in f64); functions that LLVM lowers
// to instructions stay (sqrt, fma); and the AVX2-only rsqrt approximation
// is off, so that objects compiled ahead of time run on any x86-64.
// CHECK-LABEL: func.func @kept
// CHECK-SAME: (%[[X:.*]]: f64, %[[Y:.*]]: f32, %[[V:.*]]: vector<8xf32>)
// CHECK: %[[T:.*]] = math.tanh %[[X]] : f64
// CHECK: %[[E:.*]] = math.exp %[[X]] : f64
// CHECK: %[[S:.*]] = math.sqrt %[[Y]] : f32
// CHECK: %[[R:.*]] = math.rsqrt %[[V]] : vector<8xf32>
// CHECK: return %[[T]], %[[E]], %[[S]], %[[R]]
func.func @kept(%x: f64, %y: f32, %v: vector<8xf32>) -> (f64, f64, f32, vector<8xf32>) {
  %0 = math.tanh %x : f64
  %1 = math.exp %x : f64
  %2 = math.sqrt %y : f32
  %3 = math.rsqrt %v : vector<8xf32>
  return %0, %1, %2, %3 : f64, f64, f32, vector<8xf32>
}

// -----

// bf16 is widened to f32, approximated, and narrowed back.
// CHECK-LABEL: func.func @bf16
// CHECK-SAME: (%[[X:.*]]: bf16)
// CHECK: %[[W:.*]] = arith.extf %[[X]] : bf16 to f32
// CHECK-NOT: math.exp
// CHECK: %[[R:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[R]]
func.func @bf16(%x: bf16) -> bf16 {
  %0 = math.exp %x : bf16
  return %0 : bf16
}
