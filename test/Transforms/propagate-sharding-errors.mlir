// RUN: cleave-opt %s -split-input-file --cleave-propagate-sharding -verify-diagnostics | FileCheck %s

// Annotations propagation refuses, each with an error naming the value.

cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// expected-error @below {{argument #0 is sharded over unknown axis 'xp' of mesh @m (axes: dp, tp)}}
func.func @unknown_axis(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [xp, _]>}) -> tensor<8x16xf32> {
  return %x : tensor<8x16xf32>
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

func.func @unknown_axis_constraint(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @below {{'cleave.sharding_constraint' op the constrained value is sharded over unknown axis 'pp' of mesh @m (axes: dp, tp)}}
  %0 = cleave.sharding_constraint %x <@m, [_, pp]> : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

// expected-error @below {{argument #0 is sharded on unknown mesh @world}}
func.func @unknown_mesh(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@world, [dp, _]>}) -> tensor<8x16xf32> {
  return %x : tensor<8x16xf32>
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 2 : nvlink)

func.func @unknown_mesh_constraint(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @below {{refers to unknown mesh @world}}
  %0 = cleave.sharding_constraint %x <@world, [dp, _]> : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)

// expected-error @below {{dimension 1 of argument #0 has size 6, which is not divisible by 4 (the number of devices on axes tp)}}
func.func @not_divisible(%x: tensor<8x6xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>}) -> tensor<8x6xf32> {
  return %x : tensor<8x6xf32>
}

// -----

cleave.mesh @m(dp = 2 : ib, tp = 4 : nvlink)

func.func @not_divisible_constraint(%x: tensor<8x12xf32>) -> tensor<8x12xf32> {
  // expected-error @below {{dimension 1 of the constrained value has size 12, which is not divisible by 8 (the number of devices on axes dp, tp)}}
  %0 = cleave.sharding_constraint %x <@m, [_, (dp, tp)]> : tensor<8x12xf32>
  return %0 : tensor<8x12xf32>
}

// -----

// A split that does not divide the factor it would land on is not
// proposed (no error): 16 columns become 2 x 8, and 4 devices cannot split
// the major factor 2, so the reshape's result stays whole.
cleave.mesh @m(tp = 4 : nvlink)

// CHECK-LABEL: func.func @not_divisible_downstream
// CHECK: cleave.reshape {{.*}} {cleave.shardings = [#cleave.sharding<@m, [_, _, _]>]}
func.func @not_divisible_downstream(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@m, [_, tp]>}) -> tensor<8x2x8xf32> {
  %y = cleave.reshape %x : tensor<8x16xf32> to tensor<8x2x8xf32>
  return %y : tensor<8x2x8xf32>
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

// expected-error @below {{sharding propagation needs a function with one block}}
func.func @blocks(%x: tensor<8xf32>) -> tensor<8xf32> {
  cf.br ^next
^next:
  return %x : tensor<8xf32>
}
