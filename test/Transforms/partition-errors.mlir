// RUN: cleave-opt %s -split-input-file --cleave-partition -verify-diagnostics

// Programs the partitioner refuses, each with an error that says what is
// wrong and where.

// A dimension not divisible by the devices that would split it.
cleave.mesh @m(tp = 4 : nvlink)

// expected-error @below {{dimension 1 of argument #0 has size 6, which is not divisible by 4 (the number of devices on axes tp)}}
func.func @not_divisible(%x: tensor<8x6xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>}) -> tensor<8x6xf32> {
  return %x : tensor<8x6xf32>
}

// -----

// A recorded op sharding that does not divide the result.
cleave.mesh @m(tp = 4 : nvlink)

func.func @result_not_divisible(%x: tensor<8x6xf32> {cleave.sharding = #cleave.sharding<@m, [_, _]>}) -> tensor<8x6xf32> {
  // expected-error @below {{dimension 1 of result #0 has size 6, which is not divisible by 4 (the number of devices on axes tp)}}
  %0 = cleave.exp %x {cleave.shardings = [#cleave.sharding<@m, [_, tp]>]} : tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}

// -----

// An op without a sharding rule.
cleave.mesh @m(dp = 2 : ib)

func.func @no_rule(%x: tensor<8xf32> {cleave.sharding = #cleave.sharding<@m, [dp]>}) -> (tensor<8xf32> {cleave.sharding = #cleave.sharding<@m, [dp]>}) {
  // expected-error @below {{cannot be partitioned: 'tensor.empty' has no sharding rule}}
  %0 = tensor.empty() : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Partitioning before propagation: an argument without a sharding.
cleave.mesh @m(dp = 2 : ib)

// expected-error @below {{argument #0 has no 'cleave.sharding' (run cleave-propagate-sharding first)}}
func.func @no_arg_sharding(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

// An op without recorded shardings.
cleave.mesh @m(dp = 2 : ib)

func.func @no_op_shardings(%x: tensor<8xf32> {cleave.sharding = #cleave.sharding<@m, [dp]>}) -> (tensor<8xf32> {cleave.sharding = #cleave.sharding<@m, [dp]>}) {
  // expected-error @below {{has no 'cleave.shardings' (run cleave-propagate-sharding first)}}
  %0 = cleave.exp %x : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// A result without a sharding.
cleave.mesh @m(dp = 2 : ib)

func.func @no_result_sharding(%x: tensor<8xf32> {cleave.sharding = #cleave.sharding<@m, [dp]>}) -> tensor<8xf32> {
  // expected-error @below {{result #0 has no 'cleave.sharding' (run cleave-propagate-sharding first)}}
  return %x : tensor<8xf32>
}

// -----

// A replicated value cannot become a pending sum.
cleave.mesh @m(tp = 2 : nvlink)

func.func @to_partial(%x: tensor<8xf32> {cleave.sharding = #cleave.sharding<@m, [_]>}) -> (tensor<8xf32> {cleave.sharding = #cleave.sharding<@m, [_], partial = [tp]>}) {
  // expected-error @below {{cannot reshard a value from #cleave.sharding<@m, [_]> to #cleave.sharding<@m, [_], partial = [tp]>: a replicated or split value cannot become a pending sum over 'tp'}}
  return %x : tensor<8xf32>
}

// -----

// expected-error @below {{needs a cleave.mesh in the module (the device mesh the program is split over)}}
module {
  func.func @no_mesh(%x: tensor<8xf32>) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

// expected-error @below {{has 2 cleave.mesh ops; partitioning needs exactly one}}
module {
  cleave.mesh @a(dp = 2 : ib)
  cleave.mesh @b(tp = 2 : nvlink)
}

// -----

cleave.mesh @m(dp = 2 : ib)

// expected-error @below {{partitioning needs a function with one block}}
func.func @blocks(%x: tensor<8xf32> {cleave.sharding = #cleave.sharding<@m, [dp]>}) -> tensor<8xf32> {
  cf.br ^next
^next:
  return %x : tensor<8xf32>
}

// -----

// An argument that is not a ranked tensor is named as such (not as missing
// a sharding that propagation cannot give it).
cleave.mesh @m(dp = 2 : ib)

// expected-error @below {{argument #1 has type 'f32', but partitioning handles ranked tensors only}}
func.func @scalar_argument(%x: tensor<8xf32> {cleave.sharding = #cleave.sharding<@m, [dp]>}, %s: f32) -> (tensor<8xf32> {cleave.sharding = #cleave.sharding<@m, [dp]>}) {
  return %x : tensor<8xf32>
}

// -----

// A call has no sharding rule (inline first).
cleave.mesh @m(dp = 2 : ib)

func.func private @ext(tensor<8xf32>) -> tensor<8xf32>

func.func @call(%x: tensor<8xf32> {cleave.sharding = #cleave.sharding<@m, [dp]>}) -> (tensor<8xf32> {cleave.sharding = #cleave.sharding<@m, [dp]>}) {
  // expected-error @below {{cannot be partitioned: 'func.call' has no sharding rule}}
  %0 = func.call @ext(%x) : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
