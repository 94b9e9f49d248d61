// RUN: cleave-opt %s -split-input-file -verify-diagnostics

// Every verifier error of the cleave dialect, one per split.

//===----------------------------------------------------------------------===//
// Meshes
//===----------------------------------------------------------------------===//

// expected-error @below {{axis 'dp' is declared twice}}
cleave.mesh @m(dp = 2 : ib, dp = 4 : nvlink)

// -----

// expected-error @below {{axis 'tp' has size 0; sizes must be >= 1}}
cleave.mesh @m(tp = 0 : nvlink)

// -----

// expected-error @below {{axis #0 name 'a b' is not an identifier}}
cleave.mesh @m("a b" = 2 : nvlink)

// -----

// expected-error @below {{axis #1 name '_' is not an identifier}}
cleave.mesh @m(x = 2 : nvlink, _ = 2 : ib)

// -----

// expected-error @below {{unknown link kind 'warp' (expected nvlink, pcie, ib, roce, ethernet or host)}}
cleave.mesh @m(x = 2 : warp)

// -----

// expected-error @below {{has 2 axis names, 1 sizes and 2 link kinds}}
"cleave.mesh"() <{sym_name = "m", axis_names = ["a", "b"], shape = array<i64: 2>, links = [#cleave.link<nvlink>, #cleave.link<ib>]}> : () -> ()

// -----

// expected-error @below {{needs at least one axis}}
"cleave.mesh"() <{sym_name = "m", axis_names = [], shape = array<i64>, links = []}> : () -> ()

//===----------------------------------------------------------------------===//
// Shardings on arguments, results and ops
//===----------------------------------------------------------------------===//

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
// expected-error @below {{mesh axis 'dp' is used more than once in the sharding (dimension 1)}}
func.func private @f(%x: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@m, [dp, dp]>})

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
// expected-error @below {{mesh axis 'tp' is used more than once in the sharding (partial)}}
func.func private @f(%x: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@m, [tp, _], partial = [tp]>})

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
// expected-error @below {{expected a mesh axis, '_' or '(axes...)'}}
func.func private @f(%x: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@m, [dp, 3]>})

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
// expected-error @below {{sharding of argument #0 has 1 dimension entries but the tensor 'tensor<8x8xf32>' has rank 2}}
func.func private @f(%x: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@m, [dp]>})

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
// expected-error @below {{argument #0 is sharded over unknown axis 'xp' of mesh @m (axes: dp, tp)}}
func.func private @f(%x: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@m, [xp, _]>})

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
// expected-error @below {{dimension 1 of argument #0 has size 6, which is not divisible by 8 (the number of devices on axes dp, tp)}}
func.func private @f(%x: tensor<4x6xf32> {cleave.sharding = #cleave.sharding<@m, [_, (dp, tp)]>})

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
// expected-error @below {{argument #0 is sharded on unknown mesh @other}}
func.func private @f(%x: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@other, [dp, _]>})

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
// expected-error @below {{argument #0 has a sharding but type 'i32' is not a ranked tensor}}
func.func private @f(%x: i32 {cleave.sharding = #cleave.sharding<@m, []>})

// -----

// expected-error @below {{'cleave.sharding' on argument #0 must be a #cleave.sharding, got 3 : i64}}
func.func private @f(%x: tensor<8xf32> {cleave.sharding = 3})

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
// expected-error @below {{dimension 0 of result #0 has size 3, which is not divisible by 2 (the number of devices on axes dp)}}
func.func private @f(%x: tensor<3xf32>) -> (tensor<3xf32> {cleave.sharding = #cleave.sharding<@m, [dp]>})

// -----

// expected-error @below {{result #0 has unknown cleave attribute 'cleave.shard'}}
func.func private @f(%x: tensor<3xf32>) -> (tensor<3xf32> {cleave.shard = 1})

// -----

// expected-error @below {{'cleave.param' on argument #0 must be a non-empty string}}
func.func private @f(%x: tensor<3xf32> {cleave.param = ""})

// -----

// expected-error @below {{argument #0 is marked 'cleave.input' but is not a ranked tensor}}
func.func private @f(%x: i32 {cleave.input = "x"})

// -----

// expected-error @below {{'cleave.init' on argument #0 must be a #cleave.init}}
func.func private @f(%x: tensor<3xf32> {cleave.param = "x", cleave.init = 0.5})

// -----

// expected-error @below {{argument #0 has 'cleave.init' but is not a parameter (no 'cleave.param' or 'cleave.state')}}
func.func private @f(%x: tensor<3xf32> {cleave.init = #cleave.init<zeros>})

// -----

// expected-error @below {{argument #0 has unknown cleave attribute 'cleave.parameter'}}
func.func private @f(%x: tensor<3xf32> {cleave.parameter = "x"})

// -----

// expected-error @below {{#cleave.init<normal> needs a positive scale, got 0}}
func.func private @f(%x: tensor<3xf32> {cleave.param = "x", cleave.init = #cleave.init<normal>})

// -----

// expected-error @below {{#cleave.init<ones> takes no scale}}
func.func private @f(%x: tensor<3xf32> {cleave.param = "x", cleave.init = #cleave.init<ones, 1.0>})

// -----

// expected-error @below {{unknown init kind 'xavier' (expected zeros, ones, normal or uniform)}}
func.func private @f(%x: tensor<3xf32> {cleave.param = "x", cleave.init = #cleave.init<xavier, 1.0>})

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{has unknown cleave attribute 'cleave.stages'}}
  %0 = cleave.exp %x {cleave.stages = 1} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'cleave.stage' must be a non-negative integer, got -1 : i64}}
  %0 = cleave.exp %x {cleave.stage = -1} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @below {{'cleave.plan' entry 'zero' must be an integer in [0, 3], got 4 : i64}}
module attributes {cleave.plan = {zero = 4}} {}

// -----

// expected-error @below {{'cleave.plan' entry 'schedule' must be one of "gpipe", "1f1b", "interleaved", "zb-h1", got "2f2b"}}
module attributes {cleave.plan = {schedule = "2f2b"}} {}

// -----

// expected-error @below {{'cleave.plan' entry 'recompute_per_stage' must be a non-empty array of "none", "selective" or "full" (one per pipeline rank), got ["full", "some"]}}
module attributes {cleave.plan = {recompute_per_stage = ["full", "some"]}} {}

// -----

// expected-error @below {{'cleave.plan' entry 'recompute_per_stage' must be a non-empty array}}
module attributes {cleave.plan = {recompute_per_stage = "full"}} {}

// -----

// expected-error @below {{'cleave.plan' entry 'zeros' is unknown}}
module attributes {cleave.plan = {zeros = 1}} {}

// -----

// expected-error @below {{'cleave.pipeline' must be {axis = "<mesh axis>", stages = [@f, ...]}}}
module attributes {cleave.pipeline = {axis = "pp", stages = []}} {}

// -----

// expected-error @below {{'cleave.pipeline' must be {axis = "<mesh axis>", stages = [@f, ...]} with at least one stage function, and optionally entries = {<step> = [@f, ...]}}}
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0], entries = {eval_step = ["e0"]}}} {}

// -----

// expected-error @below {{'cleave.groups' must be an array of non-empty arrays of mesh axis names}}
module attributes {cleave.groups = [["dp"], []]} {}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'cleave.plan' belongs on a builtin.module}}
  %0 = cleave.exp %x {cleave.plan = {zero = 1}} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'cleave.shardings' must be an array of #cleave.sharding}}
  %0 = cleave.exp %x {cleave.shardings = 1} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m(dp = 2 : ib)
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'cleave.shardings' has 2 entries but the op has 1 results}}
  %0 = cleave.exp %x {cleave.shardings = [#cleave.sharding<@m, [dp]>, #cleave.sharding<@m, [dp]>]} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m(dp = 2 : ib)
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{sharding of result #0 has 2 dimension entries but the tensor 'tensor<4xf32>' has rank 1}}
  %0 = cleave.exp %x {cleave.shardings = [#cleave.sharding<@m, [dp, _]>]} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m(dp = 2 : ib)
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{refers to unknown mesh @n}}
  %0 = cleave.sharding_constraint %x <@n, [dp]> : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m(dp = 2 : ib)
func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @below {{dimension 0 of the constrained value has size 3, which is not divisible by 2}}
  %0 = cleave.sharding_constraint %x <@m, [dp]> : tensor<3xf32>
  return %0 : tensor<3xf32>
}

//===----------------------------------------------------------------------===//
// Elementwise, reductions, shapes
//===----------------------------------------------------------------------===//

// -----

func.func @f(%x: tensor<4xf32>, %y: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @below {{requires the same type for all operands and results}}
  %0 = "cleave.add"(%x, %y) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @below {{operand #0 must be statically shaped tensor of}}
  %0 = "cleave.exp"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @below {{operand #0 must be statically shaped tensor}}
  %0 = "cleave.exp"(%x) : (tensor<?xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{requires the same shape for all operands and results}}
  %0 = cleave.cast %x : tensor<4x8xf32> to tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @below {{'cleave.reduce_sum' op dims[0] = 2 is out of range for an operand of rank 2}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.reduce_sum %x dims = [2] : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<f32> {
  // expected-error @below {{'cleave.reduce_max' op dims must be strictly increasing, got [1, 0]}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.reduce_max %x dims = [1, 0] : tensor<4x8xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  // expected-error @below {{'cleave.reduce_mean' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<8xf32>'}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.reduce_mean %x dims = [1] : tensor<4x8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf16> {
  // expected-error @below {{changes the element type from 'f32' to 'f16'; use cleave.cast}}
  %0 = cleave.reshape %x : tensor<4x8xf32> to tensor<4x8xf16>
  return %0 : tensor<4x8xf16>
}

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @below {{operand shape [4, 8] has 32 elements but result shape [4, 4] has 16}}
  %0 = cleave.reshape %x : tensor<4x8xf32> to tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{'cleave.transpose' op permutation has 3 entries but the operand has rank 2}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.transpose %x permutation = [1, 0, 2] : tensor<4x8xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{'cleave.transpose' op permutation [1, 1] is not a permutation of [0, 2)}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.transpose %x permutation = [1, 1] : tensor<4x8xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @f(%x: tensor<8xf32>) -> tensor<4x8xf16> {
  // expected-error @below {{result element type 'f16' differs from operand element type 'f32'}}
  %0 = cleave.broadcast %x dims = [1] : tensor<8xf32> -> tensor<4x8xf16>
  return %0 : tensor<4x8xf16>
}

// -----

func.func @f(%x: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{dims has 2 entries but the operand has rank 1}}
  %0 = cleave.broadcast %x dims = [0, 1] : tensor<8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @f(%x: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{'cleave.broadcast' op dims[0] = 2 is out of range for an operand of rank 2}}
  %0 = cleave.broadcast %x dims = [2] : tensor<8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @f(%x: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{operand dimension 0 has size 8 but result dimension 0 has size 4}}
  %0 = cleave.broadcast %x dims = [0] : tensor<8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @f(%x: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @below {{'cleave.slice' op offsets, sizes and strides need 1 entries each (the operand rank), got 1, 2 and 1}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.slice %x offsets = [0] sizes = [4, 1] strides = [1] : tensor<8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @below {{'cleave.slice' op dimension 0 has offset 0, size 4, stride 0; offsets and sizes must be >= 0 and strides >= 1}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.slice %x offsets = [0] sizes = [4] strides = [0] : tensor<8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @below {{'cleave.slice' op dimension 0 reads index 8 but the operand has size 8}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.slice %x offsets = [2] sizes = [4] strides = [2] : tensor<8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f() -> tensor<4xf32> {
  // expected-error @below {{'cleave.concat' op needs at least one operand}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.concat dim = 0 : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @below {{'cleave.concat' op dim 1 is out of range for operands of rank 1}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.concat %x, %x dim = 1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @f(%x: tensor<4xf32>, %y: tensor<4xf16>) -> tensor<8xf32> {
  // expected-error @below {{'cleave.concat' op operand #1 must have the element type and rank of operand #0}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.concat %x, %y dim = 0 : (tensor<4xf32>, tensor<4xf16>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @f(%x: tensor<4x2xf32>, %y: tensor<4x3xf32>) -> tensor<8x2xf32> {
  // expected-error @below {{'cleave.concat' op operand #1 has size 3 in dimension 1 but operand #0 has 2}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.concat %x, %y dim = 0 : (tensor<4x2xf32>, tensor<4x3xf32>) -> tensor<8x2xf32>
  return %0 : tensor<8x2xf32>
}

// -----

func.func private @f(%x: tensor<4xf32>) {
  // expected-error @below {{'cleave.pad' op low, high and interior need 1 entries each (the operand rank), got 1, 1 and 2}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.pad %x low = [1] high = [1] interior = [0, 0] : tensor<4xf32> -> tensor<6xf32>
  return
}

// -----

func.func private @f(%x: tensor<4xf32>) {
  // expected-error @below {{'cleave.pad' op dimension 0 has negative padding (low -1, high 1, interior 0)}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.pad %x low = [-1] high = [1] interior = [0] : tensor<4xf32> -> tensor<4xf32>
  return
}

//===----------------------------------------------------------------------===//
// Neural-network ops
//===----------------------------------------------------------------------===//

// -----

func.func @f(%x: tensor<4xf32>, %w: tensor<4x4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'cleave.matmul' op operands need rank >= 2, got lhs rank 1 and rhs rank 2}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.matmul %x, %w : (tensor<4xf32>, tensor<4x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4x4xf32>, %w: tensor<4x4xbf16>) -> tensor<4x4xf32> {
  // expected-error @below {{'cleave.matmul' op lhs and rhs element types differ; insert a cleave.cast}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xbf16>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @f(%x: tensor<2x3x4x4xf32>, %w: tensor<3x4x4xf32>) -> tensor<2x3x4x4xf32> {
  // expected-error @below {{'cleave.matmul' op rhs must be a matrix or have the lhs rank 4, got rank 3}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.matmul %x, %w : (tensor<2x3x4x4xf32>, tensor<3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %0 : tensor<2x3x4x4xf32>
}

// -----

func.func @f(%x: tensor<2x4x4xf32>, %w: tensor<3x4x4xf32>) -> tensor<2x4x4xf32> {
  // expected-error @below {{'cleave.matmul' op batch dimensions differ: lhs [2] vs rhs [3]}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.matmul %x, %w : (tensor<2x4x4xf32>, tensor<3x4x4xf32>) -> tensor<2x4x4xf32>
  return %0 : tensor<2x4x4xf32>
}

// -----

func.func @f(%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @below {{'cleave.matmul' op reduce_batch needs transpose_lhs, an untransposed rhs and batch dimensions on both operands}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.matmul %x, %w {reduce_batch, transpose_lhs} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

func.func @f(%x: tensor<2x4x8xf32>, %y: tensor<2x4x16xf32>) -> tensor<8x16xf32> {
  // expected-error @below {{'cleave.matmul' op reduce_batch needs transpose_lhs, an untransposed rhs and batch dimensions on both operands}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.matmul %x, %y {reduce_batch} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

func.func @f(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>) -> tensor<8x16xf32> {
  // expected-error @below {{'cleave.matmul' op contracting dimension mismatch: lhs dim 1 has size 16 but rhs dim 0 has size 32}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.matmul %x, %w : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>) -> tensor<8x16xf32> {
  // expected-error @below {{'cleave.matmul' op inferred type(s) 'tensor<8x32xf32>' are incompatible with return type(s) of operation 'tensor<8x16xf32>'}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{dim 2 is out of range for an operand of rank 2}}
  %0 = cleave.softmax %x dim = 2 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{dim -1 is out of range for an operand of rank 2}}
  %0 = cleave.softmax_grad %x, %x dim = -1 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @f(%x: tensor<f32>, %g: tensor<1xf32>) -> tensor<f32> {
  // expected-error @below {{'cleave.rms_norm' op input must have rank >= 1}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.rms_norm %x, %g : (tensor<f32>, tensor<1xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @f(%x: tensor<4x8xf32>, %g: tensor<4xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{'cleave.layer_norm' op gamma must have shape [8] (the last input dimension), got [4]}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.layer_norm %x, %g, %g : (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @f(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf16>) -> tensor<4x8xf32> {
  // expected-error @below {{'cleave.layer_norm' op beta element type differs from the input's}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.layer_norm %x, %g, %b : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf16>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @f(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<8x4xf32>) {
  // expected-error @below {{'cleave.layer_norm_grad' op grad type must equal the input type}}
  // expected-error @below {{failed to infer returned types}}
  %0:3 = cleave.layer_norm_grad %x, %g, %dy : (tensor<4x8xf32>, tensor<8xf32>, tensor<8x4xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<8x4xf32>) {
  // expected-error @below {{'cleave.rms_norm_grad' op grad type must equal the input type}}
  // expected-error @below {{failed to infer returned types}}
  %0:2 = cleave.rms_norm_grad %x, %g, %dy : (tensor<4x8xf32>, tensor<8xf32>, tensor<8x4xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @f(%t: tensor<10xf32>, %ids: tensor<4xi32>) {
  // expected-error @below {{'cleave.embedding' op table must be [V, H], got shape [10]}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.embedding %t, %ids : (tensor<10xf32>, tensor<4xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%ids: tensor<4xi32>, %dy: tensor<4x8xf32>) {
  // expected-error @below {{result must be [V, H], got shape [10]}}
  %0 = cleave.embedding_grad %ids, %dy : (tensor<4xi32>, tensor<4x8xf32>) -> tensor<10xf32>
  return
}

// -----

func.func @f(%ids: tensor<4xi32>, %dy: tensor<4x6xf32>) {
  // expected-error @below {{grad must have shape [4, 8] (ids shape + [H]), got [4, 6]}}
  %0 = cleave.embedding_grad %ids, %dy : (tensor<4xi32>, tensor<4x6xf32>) -> tensor<10x8xf32>
  return
}

// -----

func.func @f(%ids: tensor<4xi32>, %dy: tensor<4x8xf16>) {
  // expected-error @below {{grad element type 'f16' differs from result element type 'f32'}}
  %0 = cleave.embedding_grad %ids, %dy : (tensor<4xi32>, tensor<4x8xf16>) -> tensor<10x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x16xf32>) {
  // expected-error @below {{input must be [B, S, N, D], got shape [2, 8, 16]}}
  %0 = cleave.rotary %x : tensor<2x8x16xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x4x15xf32>) {
  // expected-error @below {{head dimension D = 15 must be even}}
  %0 = cleave.rotary %x : tensor<2x8x4x15xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x4x16xf32>) {
  // expected-error @below {{theta must be positive}}
  %0 = cleave.rotary %x {theta = -1.0 : f64} : tensor<2x8x4x16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x64xf32>, %k: tensor<2x8x4x16xf32>) {
  // expected-error @below {{'cleave.attention' op q, k and v must be [B, S, H, D], got shapes [2, 8, 64], [2, 8, 4, 16] and [2, 8, 4, 16]}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.attention %q, %k, %k : (tensor<2x8x64xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xbf16>) {
  // expected-error @below {{'cleave.attention' op q, k and v must have the same element type}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.attention %q, %k, %k : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x16xf32>, %k: tensor<3x8x4x16xf32>) {
  // expected-error @below {{'cleave.attention' op batch sizes differ: q 2, k 3, v 3}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.attention %q, %k, %k : (tensor<2x8x4x16xf32>, tensor<3x8x4x16xf32>, tensor<3x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %v: tensor<2x6x4x16xf32>) {
  // expected-error @below {{'cleave.attention' op k and v sequence lengths differ: 8 vs 6}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.attention %q, %k, %v : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x6x4x16xf32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %v: tensor<2x8x2x16xf32>) {
  // expected-error @below {{'cleave.attention' op k and v head counts differ: 4 vs 2}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.attention %q, %k, %v : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x6x16xf32>, %k: tensor<2x8x4x16xf32>) {
  // expected-error @below {{'cleave.attention' op query heads (6) must be a multiple of key/value heads (4)}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.attention %q, %k, %k : (tensor<2x8x6x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x6x16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x32xf32>) {
  // expected-error @below {{'cleave.attention' op q and k head dimensions differ: 16 vs 32}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.attention %q, %k, %k : (tensor<2x8x4x16xf32>, tensor<2x8x4x32xf32>, tensor<2x8x4x32xf32>) -> tensor<2x8x4x32xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x16xf32>, %k: tensor<2x6x4x16xf32>) {
  // expected-error @below {{'cleave.attention' op causal attention needs equal query and key lengths, got 8 and 6}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.attention %q, %k, %k {causal} : (tensor<2x8x4x16xf32>, tensor<2x6x4x16xf32>, tensor<2x6x4x16xf32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x3x4x16xf32>, %k: tensor<2x8x4x16xf32>, %b: tensor<i64>) {
  // expected-error @below {{'cleave.attention' op with query_block, the query length (3) must divide the key length (8)}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.attention %q, %k, %k, %b {causal} : (tensor<2x3x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<i64>) -> tensor<2x3x4x16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x4x4x16xf32>, %k: tensor<2x8x4x16xf32>, %b: tensor<i32>) {
  // expected-error @below {{operand #3 must be 0D tensor of 64-bit signless integer values}}
  %0 = cleave.attention %q, %k, %k, %b {causal} : (tensor<2x4x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<i32>) -> tensor<2x4x4x16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x3x4x16xf32>, %k: tensor<2x8x4x16xf32>, %b: tensor<i64>) {
  // expected-error @below {{'cleave.attention_grad' op with query_block, the query length (3) must divide the key length (8)}}
  // expected-error @below {{failed to infer returned types}}
  %0:3 = cleave.attention_grad %q, %k, %k, %q, %b {causal} : (tensor<2x3x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x3x4x16xf32>, tensor<i64>) -> (tensor<2x3x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8x4x16xf32>, %b: tensor<2xi64>) {
  // expected-error @below {{operand #1 must be 0D tensor of 64-bit signless integer values}}
  %0 = cleave.rotary %x block %b : tensor<2xi64> : tensor<2x8x4x16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x16xf32>, %do: tensor<2x8x4x8xf32>) {
  // expected-error @below {{'cleave.attention_grad' op grad must have the forward result type [2, 8, 4, 16], got [2, 8, 4, 8]}}
  // expected-error @below {{failed to infer returned types}}
  %0:3 = cleave.attention_grad %q, %q, %q, %do : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x8xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>)
  return
}

// -----

func.func @f(%l: tensor<4x8x10xf32>, %y: tensor<8x4xi32>) {
  // expected-error @below {{'cleave.cross_entropy' op labels must have shape [4, 8] (logits shape without the class dimension), got [8, 4]}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.cross_entropy %l, %y : (tensor<4x8x10xf32>, tensor<8x4xi32>) -> tensor<f32>
  return
}

// -----

func.func @f(%l: tensor<4x10xf32>, %y: tensor<4x10xi32>, %g: tensor<f32>) {
  // expected-error @below {{'cleave.cross_entropy_grad' op labels must have shape [4] (logits shape without the class dimension), got [4, 10]}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.cross_entropy_grad %l, %y, %g : (tensor<4x10xf32>, tensor<4x10xi32>, tensor<f32>) -> tensor<4x10xf32>
  return
}

// -----

func.func @f(%l: tensor<4x10xf32>, %y: tensor<4xi32>, %n: tensor<f32>) {
  // expected-error @below {{'cleave.cross_entropy' op has a count operand but no ignore_index: without ignored labels the denominator is the number of labels}}
  %0 = cleave.cross_entropy %l, %y, %n : (tensor<4x10xf32>, tensor<4xi32>, tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @f(%l: tensor<4x10xf32>, %y: tensor<4xi32>, %g: tensor<f32>) {
  // expected-error @below {{'cleave.cross_entropy_grad' op has a count operand but no ignore_index}}
  %0 = cleave.cross_entropy_grad %l, %y, %g, %g : (tensor<4x10xf32>, tensor<4xi32>, tensor<f32>, tensor<f32>) -> tensor<4x10xf32>
  return
}

// -----

func.func @f(%y: tensor<4xi32>) {
  // expected-error @below {{'cleave.label_count' op requires attribute 'ignore_index'}}
  %0 = cleave.label_count %y : (tensor<4xi32>) -> tensor<f32>
  return
}

// -----

func.func @f(%t: tensor<10x8xf32>, %ids: tensor<4xi32>) {
  // expected-error @below {{'cleave.embedding' op padding_idx 10 is not a row of the 10-row table}}
  %0 = cleave.embedding %t, %ids {padding_idx = 10 : i64} : (tensor<10x8xf32>, tensor<4xi32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%ids: tensor<4xi32>, %dy: tensor<4x8xf32>) {
  // expected-error @below {{'cleave.embedding_grad' op padding_idx -1 is not a row of the 10-row table}}
  %0 = cleave.embedding_grad %ids, %dy {padding_idx = -1 : i64} : (tensor<4xi32>, tensor<4x8xf32>) -> tensor<10x8xf32>
  return
}

// -----

func.func @f(%l: tensor<4x10xf32>, %y: tensor<4xi32>) {
  // expected-error @below {{'cleave.cross_entropy' op inferred type(s) 'tensor<f32>' are incompatible with return type(s) of operation 'tensor<f16>'}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.cross_entropy %l, %y : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f16>
  return
}

// -----

func.func @f(%x: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @below {{'cleave.dropout' op rate must be in [0, 1), got 1.000000}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.dropout %x, %s {rate = 1.0 : f64, stream = 0 : i64} : (tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>, %s: tensor<i32>) {
  // expected-error @below {{operand #1 must be 0D tensor of 64-bit signless integer values}}
  %0 = cleave.dropout %x, %s {rate = 0.5 : f64, stream = 0 : i64} : (tensor<4xf32>, tensor<i32>) -> tensor<4xf32>
  return
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

// -----

func.func @f(%p: tensor<4x4xf32>, %g: tensor<4x2xf32>, %lr: tensor<f32>) {
  // expected-error @below {{grad shape [4, 2] differs from the parameter shape [4, 4]}}
  %0 = cleave.sgd %p, %g, %lr : (tensor<4x4xf32>, tensor<4x2xf32>, tensor<f32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %m: tensor<3xf32>, %lr: tensor<f32>) {
  // expected-error @below {{exp_avg shape [3] differs from the parameter shape [4]}}
  %0:3 = cleave.adamw %p, %p, %m, %p, %lr, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %m: tensor<4xbf16>, %lr: tensor<f32>) {
  // expected-error @below {{optimizer moments must be f32 or f64, got 'bf16'}}
  %0:3 = cleave.adamw %p, %p, %m, %m, %lr, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>)
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @below {{beta2 must be in [0, 1), got 1}}
  %0:3 = cleave.adamw %p, %p, %p, %p, %lr, %lr {beta2 = 1.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @below {{epsilon must be positive}}
  %0:3 = cleave.adamw %p, %p, %p, %p, %lr, %lr {epsilon = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%lr: tensor<f32>) {
  // expected-error @below {{decay_steps (5) must be >= warmup_steps (10): the decay ends at step decay_steps}}
  %0 = cleave.lr_schedule %lr, %lr {decay = #cleave.lr_decay<cosine>, warmup_steps = 10 : i64, decay_steps = 5 : i64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @f(%lr: tensor<f32>) {
  // expected-error @below {{min_lr must be a finite number >= 0, got -1}}
  %0 = cleave.lr_schedule %lr, %lr {decay = #cleave.lr_decay<linear>, min_lr = -1.0 : f64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @f(%lr: tensor<f32>) {
  // expected-error @below {{warmup_steps must be >= 0, got -2}}
  %0 = cleave.lr_schedule %lr, %lr {decay = #cleave.lr_decay<constant>, warmup_steps = -2 : i64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @below {{refers to unknown mesh @nowhere}}
  %0 = cleave.all_reduce %x on @nowhere axes = [dp] : tensor<4xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<4xf32>) {
  // expected-error @below {{needs at least one mesh axis}}
  %0 = cleave.all_reduce %x on @m axes = [] : tensor<4xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<4xf32>) {
  // expected-error @below {{uses unknown axis 'pp' of mesh @m}}
  %0 = cleave.all_reduce %x on @m axes = [pp] : tensor<4xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<4xf32>) {
  // expected-error @below {{names axis 'tp' twice}}
  %0 = cleave.all_reduce %x on @m axes = [tp, tp] : tensor<4xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<4xf32>) {
  // expected-error @below {{unknown reduction 'prod' (expected sum, max, min or avg)}}
  %0 = cleave.all_reduce %x on @m axes = [tp] reduction = prod : tensor<4xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<4xf32>) {
  // expected-error @below {{dim 1 is out of range for an operand of rank 1}}
  %0 = cleave.all_gather %x on @m axes = [tp] dim = 1 : tensor<4xf32> -> tensor<16xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<4xf32>) {
  // expected-error @below {{result shape should be [16] but is [8]}}
  %0 = cleave.all_gather %x on @m axes = [tp] dim = 0 : tensor<4xf32> -> tensor<8xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<4xf32>) {
  // expected-error @below {{result element type 'f16' differs from operand element type 'f32'}}
  %0 = cleave.all_gather %x on @m axes = [tp] dim = 0 : tensor<4xf32> -> tensor<16xf16>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<6xf32>) {
  // expected-error @below {{operand dimension 0 has size 6, which is not divisible by the group size 4}}
  %0 = cleave.reduce_scatter %x on @m axes = [tp] dim = 0 : tensor<6xf32> -> tensor<1xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{result shape should be [2] but is [4]}}
  %0 = cleave.reduce_scatter %x on @m axes = [tp] dim = 0 : tensor<8xf32> -> tensor<4xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<8x8xf32>) {
  // expected-error @below {{concat_dim 2 is out of range for an operand of rank 2}}
  %0 = cleave.all_to_all %x on @m axes = [tp] split_dim = 0 concat_dim = 2 : tensor<8x8xf32> -> tensor<2x32xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<8x8xf32>) {
  // expected-error @below {{result shape should be [2, 32] but is [32, 2]}}
  %0 = cleave.all_to_all %x on @m axes = [tp] split_dim = 0 concat_dim = 1 : tensor<8x8xf32> -> tensor<32x2xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{pair 0 -> 4 is outside the group of 4 devices}}
  %0 = cleave.collective_permute %x on @m axes = [tp] pairs = [0 -> 4] : tensor<8xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{device 0 is a source twice}}
  %0 = cleave.collective_permute %x on @m axes = [tp] pairs = [0 -> 1, 0 -> 2] : tensor<8xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{device 1 is a target twice}}
  %0 = cleave.collective_permute %x on @m axes = [tp] pairs = [0 -> 1, 2 -> 1] : tensor<8xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{pairs must hold (source, target) pairs}}
  %0 = "cleave.collective_permute"(%x) <{mesh = @m, axes = ["tp"], pairs = array<i64: 0, 1, 2>}> : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

cleave.mesh @m(pp = 4 : ib)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{peer 4 is outside the group of 4 devices}}
  cleave.send %x on @m axes = [pp] to 4 : tensor<8xf32>
  return
}

// -----

cleave.mesh @m(pp = 4 : ib)
func.func @f() {
  // expected-error @below {{peer -1 is outside the group of 4 devices}}
  %0 = cleave.recv on @m axes = [pp] from -1 : tensor<8xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f(%x: tensor<8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @below {{result shape should be [8, 4] but is [8, 8]}}
  %0 = cleave.shard %x on @m axes = [tp] dim = 1 : tensor<8x16xf32> -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)
func.func @f() -> tensor<i64> {
  // expected-error @below {{uses unknown axis 'sp' of mesh @m}}
  %0 = cleave.axis_index on @m axes = [sp] : tensor<i64>
  return %0 : tensor<i64>
}

// -----

func.func @f(%x: tensor<8x4xf32>, %seed: tensor<i64>) -> tensor<8x4xf32> {
  // expected-error @below {{global_shape [8, 6] is not a whole number of blocks of [8, 4] in dimension 1}}
  %0 = cleave.dropout %x, %seed, %seed, %seed {global_shape = array<i64: 8, 6>, rate = 0.1 : f64, stream = 1 : i64} : (tensor<8x4xf32>, tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @f(%x: tensor<8x4xf32>, %seed: tensor<i64>) -> tensor<8x4xf32> {
  // expected-error @below {{a block of a sharded tensor needs one block index per dimension and global_shape of rank 2}}
  %0 = cleave.dropout %x, %seed, %seed {global_shape = array<i64: 8, 8>, rate = 0.1 : f64, stream = 1 : i64} : (tensor<8x4xf32>, tensor<i64>, tensor<i64>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @barrier_changes_type(%x: tensor<4xf32>) -> tensor<2x2xf32> {
  // expected-error @below {{'cleave.optimization_barrier' op requires the same type for all operands and results}}
  %0 = "cleave.optimization_barrier"(%x) : (tensor<4xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

//===----------------------------------------------------------------------===//
// Start / wait
//===----------------------------------------------------------------------===//

// -----

// A wait without a start.
func.func @f(%r: !cleave.request<tensor<8xf32>>) -> tensor<8xf32> {
  // expected-error @below {{waits for a request that no cleave.*_start op defines (a wait without a start)}}
  %0 = cleave.wait %r : !cleave.request<tensor<8xf32>> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// A start never waited.
cleave.mesh @m(dp = 2 : ib)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{request is never waited (each start needs one cleave.wait)}}
  %r = cleave.all_reduce_start %x on @m axes = [dp] : tensor<8xf32> -> !cleave.request<tensor<8xf32>>
  return
}

// -----

// A handle used twice.
cleave.mesh @m(dp = 2 : ib)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{request is used 2 times; it must be waited exactly once}}
  %r = cleave.all_gather_start %x on @m axes = [dp] dim = 0 : tensor<8xf32> -> !cleave.request<tensor<16xf32>>
  %0 = cleave.wait %r : !cleave.request<tensor<16xf32>> -> tensor<16xf32>
  %1 = cleave.wait %r : !cleave.request<tensor<16xf32>> -> tensor<16xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib)
func.func @f(%x: tensor<8xf32>, %c: i1) {
  // expected-error @below {{request is waited in another block than the one it starts in}}
  %r = cleave.all_reduce_start %x on @m axes = [dp] : tensor<8xf32> -> !cleave.request<tensor<8xf32>>
  scf.if %c {
    %0 = cleave.wait %r : !cleave.request<tensor<8xf32>> -> tensor<8xf32>
  }
  return
}

// -----

cleave.mesh @m(dp = 2 : ib)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{result shape should be [4] but is [16]}}
  %r = cleave.reduce_scatter_start %x on @m axes = [dp] dim = 0 : tensor<8xf32> -> !cleave.request<tensor<16xf32>>
  %0 = cleave.wait %r : !cleave.request<tensor<16xf32>> -> tensor<16xf32>
  return
}

// -----

cleave.mesh @m(dp = 2 : ib)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{request must name the tensor its wait produces}}
  %r = cleave.all_reduce_start %x on @m axes = [dp] : tensor<8xf32> -> !cleave.request
  cleave.wait %r : !cleave.request
  return
}

// -----

cleave.mesh @m(pp = 2 : ib)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{request of a send produces nothing: its type is !cleave.request}}
  %r = cleave.send_start %x on @m axes = [pp] to 1 : tensor<8xf32> -> !cleave.request<tensor<8xf32>>
  %0 = cleave.wait %r : !cleave.request<tensor<8xf32>> -> tensor<8xf32>
  return
}

// -----

cleave.mesh @m(pp = 2 : ib)
func.func @f() {
  %r = cleave.recv_start on @m axes = [pp] from 1 : !cleave.request<tensor<8xf32>>
  // expected-error @below {{result type should be 'tensor<8xf32>' but is 'tensor<4xf32>'}}
  %0 = cleave.wait %r : !cleave.request<tensor<8xf32>> -> tensor<4xf32>
  return
}

// -----

cleave.mesh @m(pp = 2 : ib)
func.func @f() {
  // expected-error @below {{peer 2 is outside the group of 2 devices}}
  %r = cleave.recv_start on @m axes = [pp] from 2 : !cleave.request<tensor<8xf32>>
  %0 = cleave.wait %r : !cleave.request<tensor<8xf32>> -> tensor<8xf32>
  return
}

// -----

func.func @f(%l: tensor<8x4xf32>) {
  // expected-error @below {{'cleave.moe_router' op logits must be [groups, tokens, experts], got rank 2}}
  // expected-error @below {{failed to infer returned types}}
  %0:2 = cleave.moe_router %l {top_k = 2 : i64} : (tensor<8x4xf32>) -> (tensor<8x4x8xf32>, tensor<8x4x8xf32>)
  return
}

// -----

// all_to_all_start checks shapes as all_to_all does.
cleave.mesh @m(sp = 4 : ib)
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @below {{result shape should be [32, 4] but is [8, 16]}}
  %r = cleave.all_to_all_start %x on @m axes = [sp] split_dim = 1 concat_dim = 0 : tensor<8x16xf32> -> !cleave.request<tensor<8x16xf32>>
  %0 = cleave.wait %r : !cleave.request<tensor<8x16xf32>> -> tensor<8x16xf32>
  return
}

// -----

func.func @f(%l: tensor<2x8x4xf32>) {
  // expected-error @below {{'cleave.moe_router' op top_k = 5 must be in [1, 4] (the number of experts)}}
  // expected-error @below {{failed to infer returned types}}
  %0:2 = cleave.moe_router %l {top_k = 5 : i64} : (tensor<2x8x4xf32>) -> (tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>)
  return
}

// -----

cleave.mesh @m(sp = 4 : ib)
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @below {{split_dim 2 is out of range for an operand of rank 2}}
  %r = cleave.all_to_all_start %x on @m axes = [sp] split_dim = 2 concat_dim = 0 : tensor<8x16xf32> -> !cleave.request<tensor<32x4xf32>>
  %0 = cleave.wait %r : !cleave.request<tensor<32x4xf32>> -> tensor<32x4xf32>
  return
}

// -----

func.func @f(%l: tensor<2x8x4xf32>) {
  // expected-error @below {{'cleave.moe_router' op capacity_factor must be positive}}
  // expected-error @below {{failed to infer returned types}}
  %0:2 = cleave.moe_router %l {top_k = 1 : i64, capacity_factor = 0.0 : f64} : (tensor<2x8x4xf32>) -> (tensor<2x8x4x1xf32>, tensor<2x8x4x1xf32>)
  return
}

// -----

// An all_to_all_start never waited.
cleave.mesh @m(sp = 4 : ib)
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @below {{request is never waited (each start needs one cleave.wait)}}
  %r = cleave.all_to_all_start %x on @m axes = [sp] split_dim = 1 concat_dim = 0 : tensor<8x16xf32> -> !cleave.request<tensor<32x4xf32>>
  return
}

// -----

// capacity_factor 0.5 gives ceil(0.5 * 8 * 2 / 4) = 2 slots per expert.
func.func @f(%l: tensor<2x8x4xf32>) {
  // expected-error @below {{'cleave.moe_router' op inferred type(s) 'tensor<2x8x4x2xf32>', 'tensor<2x8x4x2xf32>' are incompatible with return type(s) of operation 'tensor<2x8x4x4xf32>', 'tensor<2x8x4x4xf32>'}}
  // expected-error @below {{failed to infer returned types}}
  %0:2 = cleave.moe_router %l {top_k = 2 : i64, capacity_factor = 0.5 : f64} : (tensor<2x8x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>)
  return
}

// -----

// A collective_permute_start's handle used twice.
cleave.mesh @m(cp = 2 : ib)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{request is used 2 times; it must be waited exactly once}}
  %r = cleave.collective_permute_start %x on @m axes = [cp] pairs = [0 -> 1, 1 -> 0] : tensor<8xf32> -> !cleave.request<tensor<8xf32>>
  %0 = cleave.wait %r : !cleave.request<tensor<8xf32>> -> tensor<8xf32>
  %1 = cleave.wait %r : !cleave.request<tensor<8xf32>> -> tensor<8xf32>
  return
}

// -----

func.func @f(%l: tensor<2x8x4xf32>, %d: tensor<2x8x4x4xf32>, %g: tensor<2x8x4x2xf32>) {
  // expected-error @below {{'cleave.moe_router_grad' op grad must be [2, 8, 4, 4], got [2, 8, 4, 2]}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.moe_router_grad %l, %d, %g {top_k = 2 : i64} : (tensor<2x8x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x2xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

cleave.mesh @m(cp = 2 : ib)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{request type '!cleave.request<tensor<4xf32>>' should carry the operand type 'tensor<8xf32>'}}
  %r = cleave.collective_permute_start %x on @m axes = [cp] pairs = [0 -> 1, 1 -> 0] : tensor<8xf32> -> !cleave.request<tensor<4xf32>>
  %0 = cleave.wait %r : !cleave.request<tensor<4xf32>> -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x16xf32>, %w: tensor<2x6x4x4xf32>) {
  // expected-error @below {{'cleave.moe_dispatch' op weights must be [groups = 2, tokens = 8, experts, capacity], got [2, 6, 4, 4]}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.moe_dispatch %x, %w : (tensor<2x8x16xf32>, tensor<2x6x4x4xf32>) -> tensor<4x2x4x16xf32>
  return
}

// -----

cleave.mesh @m(cp = 2 : ib)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{device 0 is a target twice}}
  %r = cleave.collective_permute_start %x on @m axes = [cp] pairs = [0 -> 0, 1 -> 0] : tensor<8xf32> -> !cleave.request<tensor<8xf32>>
  %0 = cleave.wait %r : !cleave.request<tensor<8xf32>> -> tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x16xbf16>, %w: tensor<2x8x4x4xf32>) {
  // expected-error @below {{'cleave.moe_dispatch' op weights has another element type than the first operand; insert a cleave.cast}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.moe_dispatch %x, %w : (tensor<2x8x16xbf16>, tensor<2x8x4x4xf32>) -> tensor<4x2x4x16xbf16>
  return
}

// -----

func.func @f(%w: tensor<2x8x4x4xf32>, %y: tensor<4x2x3x16xf32>) {
  // expected-error @below {{'cleave.moe_combine' op experts must be [4, 2, 4, 16], got [4, 2, 3, 16]}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.moe_combine %w, %y : (tensor<2x8x4x4xf32>, tensor<4x2x3x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @f(%g: tensor<2x8x16xf32>, %y: tensor<4x2x4x8xf32>) {
  // expected-error @below {{'cleave.moe_weights_grad' op experts must be [4, 2, 4, 16], got [4, 2, 4, 8]}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.moe_weights_grad %g, %y : (tensor<2x8x16xf32>, tensor<4x2x4x8xf32>) -> tensor<2x8x4x4xf32>
  return
}

// -----

func.func @f(%l: tensor<2x8x4xf32>) {
  // expected-error @below {{'cleave.moe_aux_loss' op top_k = 0 must be in [1, 4] (the number of experts)}}
  // expected-error @below {{failed to infer returned types}}
  %0 = cleave.moe_aux_loss %l {top_k = 0 : i64} : (tensor<2x8x4xf32>) -> tensor<f32>
  return
}

// -----

cleave.mesh @m(cp = 2 : ib)
func.func @f(%x: tensor<8xf32>) {
  // expected-error @below {{pair 0 -> 2 is outside the group of 2 devices}}
  %r = cleave.collective_permute_start %x on @m axes = [cp] pairs = [0 -> 2] : tensor<8xf32> -> !cleave.request<tensor<8xf32>>
  %0 = cleave.wait %r : !cleave.request<tensor<8xf32>> -> tensor<8xf32>
  return
}
