// Mesh axes of any size: collectives' axes collapse to one simulated device
// by symmetry, so 2^62 devices verify as fast as 2; what must be simulated
// device by device (exhaustive mode, point-to-point axes) is refused above
// 2^20 devices with an error naming the axes, never an abort or memory
// proportional to the axis.
// RUN: split-file %s %t
// RUN: cleave-opt %t/collectives.mlir --cleave-verify-collectives | FileCheck %s --check-prefix=OK
// RUN: not cleave-opt %t/collectives.mlir --cleave-verify-collectives=exhaustive=1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXHAUSTIVE
// RUN: cleave-opt %t/collectives-2-32.mlir --cleave-verify-collectives | FileCheck %s --check-prefix=OK
// RUN: not cleave-opt %t/collectives-2-32.mlir --cleave-verify-collectives=exhaustive=1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXHAUSTIVE32
// RUN: not cleave-opt %t/p2p.mlir --cleave-verify-collectives -o /dev/null 2>&1 | FileCheck %s --check-prefix=P2P
// OK: func.func @step
// EXHAUSTIVE: error: cleave-verify-collectives: the axes simulated device by device (dp = 4611686018427387904, tp = 2: exhaustive mode) have more than 1048576 devices, the most the check simulates; without exhaustive=1 collectives' axes collapse to one device
// EXHAUSTIVE32: error: cleave-verify-collectives: the axes simulated device by device (dp = 4294967296, tp = 2: exhaustive mode) have more than 1048576 devices
// P2P: error: cleave-verify-collectives: the axes simulated device by device (pp = 4294967296) have more than 1048576 devices, the most the check simulates; point-to-point communication and pipeline stages are simulated on every device of their axes

//--- collectives.mlir
cleave.mesh @world(dp = 4611686018427387904 : ib, tp = 2 : nvlink)
func.func @step(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %y = cleave.all_reduce %x on @world axes = [dp] : tensor<8x16xf32>
  %z = cleave.all_reduce %y on @world axes = [tp] : tensor<8x16xf32>
  return %z : tensor<8x16xf32>
}

//--- collectives-2-32.mlir
cleave.mesh @world(dp = 4294967296 : ib, tp = 2 : nvlink)
func.func @step(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %y = cleave.all_reduce %x on @world axes = [dp, tp] : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

//--- p2p.mlir
cleave.mesh @world(pp = 4294967296 : ib)
func.func @step(%x: tensor<8xf32>) -> tensor<8xf32> {
  cleave.send %x on @world axes = [pp] to 1 : tensor<8xf32>
  %y = cleave.recv on @world axes = [pp] from 0 : tensor<8xf32>
  return %y : tensor<8xf32>
}
