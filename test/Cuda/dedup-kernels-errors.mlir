// RUN: cleave-opt %s --allow-unregistered-dialect --cleave-cuda-dedup-kernels --verify-diagnostics


// A kernel that something other than a launch names cannot be merged away.
module attributes {gpu.container_module} {
  func.func @f(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @cleave_kernels::@k0 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    // expected-error @below {{uses kernel @cleave_kernels::@k1 other than by gpu.launch_func; cleave-cuda-dedup-kernels cannot merge it}}
    "test.use"() {kernel = @cleave_kernels::@k1} : () -> ()
    return
  }
  gpu.module @cleave_kernels {
    gpu.func @k0(%x: memref<4xf32>) kernel {
      gpu.return
    }
    gpu.func @k1(%x: memref<4xf32>) kernel {
      gpu.return
    }
  }
}
