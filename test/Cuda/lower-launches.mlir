// RUN: cleave-opt %s --split-input-file --cleave-cuda-lower-launches --verify-diagnostics | FileCheck %s

// A cubin becomes an internal constant and a module handle slot; each
// kernel gets its NUL-terminated name and a function handle slot, shared
// by all its launches. A launch packs its arguments into a struct whose
// address array lives in the entry block, and calls the runtime;
// malloc/free become the device allocator; the entry point brackets the
// step. The container attribute goes with the gpu ops.
// CHECK-LABEL: module {
// CHECK-DAG: llvm.func @cleave_rt_cuda_step_begin()
// CHECK-DAG: llvm.func @cleave_rt_cuda_synchronize()
// CHECK-DAG: llvm.func @cleave_rt_cuda_alloc(i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @cleave_rt_cuda_free(!llvm.ptr)
// CHECK-DAG: llvm.func @cleave_rt_cuda_launch(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i32, !llvm.ptr)
// CHECK-DAG: llvm.mlir.global internal constant @__cleave_cubin_cleave_kernels("\7FELFcubin") {addr_space = 0 : i32, alignment = 64 : i64}
// CHECK-DAG: llvm.mlir.global internal @__cleave_module_cleave_kernels() {addr_space = 0 : i32} : !llvm.ptr
// CHECK-DAG: llvm.mlir.global internal constant @__cleave_kname_k_ew("k_ew\00") {addr_space = 0 : i32, alignment = 64 : i64}
// CHECK-DAG: llvm.mlir.global internal @__cleave_function_k_ew() {addr_space = 0 : i32} : !llvm.ptr
// CHECK-DAG: llvm.mlir.global internal constant @__cleave_kname_k_reduce("k_reduce\00")
// CHECK-DAG: llvm.mlir.global internal @__cleave_function_k_reduce()
// CHECK-NOT: gpu.binary
// CHECK-NOT: llvm.func @malloc
// CHECK-NOT: llvm.func @free
// CHECK-NOT: @__cleave_kname_k_ew(

// CHECK-LABEL: llvm.func @step
// CHECK-SAME: (%[[X:.*]]: !llvm.ptr, %[[N:.*]]: i64)
// Argument storage of the three launches (the last one's first), in the
// entry block: a struct of the arguments and an array of their addresses.
// CHECK: %[[ONE2:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK: %[[S2:.*]] = llvm.alloca %[[ONE2]] x !llvm.struct<(ptr, i64)> : (i64) -> !llvm.ptr
// CHECK: %[[K2:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK: %[[ARGV2:.*]] = llvm.alloca %[[K2]] x !llvm.ptr : (i64) -> !llvm.ptr
// CHECK: %[[S1:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, ptr)> : (i64) -> !llvm.ptr
// CHECK: %[[ARGV1:.*]] = llvm.alloca %{{.*}} x !llvm.ptr : (i64) -> !llvm.ptr
// CHECK: %[[S0:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, ptr)> : (i64) -> !llvm.ptr
// CHECK: %[[ARGV0:.*]] = llvm.alloca %{{.*}} x !llvm.ptr : (i64) -> !llvm.ptr
// CHECK: %[[G:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK: %[[B:.*]] = llvm.mlir.constant(256 : i64) : i64
// CHECK: %[[U:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK: %[[BYTES:.*]] = llvm.mlir.constant(4096 : i64) : i64
// CHECK: %[[BUF:.*]] = llvm.call @cleave_rt_cuda_alloc(%[[BYTES]]) : (i64) -> !llvm.ptr
// The first launch: each argument into its field, the field's address
// into the array, then the call.
// CHECK: %[[F0:.*]] = llvm.getelementptr %[[S0]][0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, ptr)>
// CHECK: llvm.store %[[X]], %[[F0]] : !llvm.ptr, !llvm.ptr
// CHECK: %[[A0:.*]] = llvm.getelementptr %[[ARGV0]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: llvm.store %[[F0]], %[[A0]] : !llvm.ptr, !llvm.ptr
// CHECK: %[[F1:.*]] = llvm.getelementptr %[[S0]][0, 1] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, ptr)>
// CHECK: llvm.store %[[BUF]], %[[F1]] : !llvm.ptr, !llvm.ptr
// CHECK: %[[A1:.*]] = llvm.getelementptr %[[ARGV0]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: llvm.store %[[F1]], %[[A1]] : !llvm.ptr, !llvm.ptr
// CHECK: %[[SHM:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: %[[FN:.*]] = llvm.mlir.addressof @__cleave_function_k_ew : !llvm.ptr
// CHECK: %[[MOD:.*]] = llvm.mlir.addressof @__cleave_module_cleave_kernels : !llvm.ptr
// CHECK: %[[IMG:.*]] = llvm.mlir.addressof @__cleave_cubin_cleave_kernels : !llvm.ptr
// CHECK: %[[NAME:.*]] = llvm.mlir.addressof @__cleave_kname_k_ew : !llvm.ptr
// CHECK: llvm.call @cleave_rt_cuda_launch(%[[FN]], %[[MOD]], %[[IMG]], %[[NAME]], %[[G]], %[[U]], %[[U]], %[[B]], %[[U]], %[[U]], %[[SHM]], %[[ARGV0]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i32, !llvm.ptr) -> ()
// The second launch of the same kernel: its own storage, the same globals.
// CHECK: llvm.getelementptr %[[S1]][0, 0]
// CHECK: llvm.store %[[BUF]]
// CHECK: llvm.getelementptr %[[S1]][0, 1]
// CHECK: llvm.store %[[X]]
// CHECK: llvm.mlir.addressof @__cleave_function_k_ew
// CHECK: llvm.mlir.addressof @__cleave_kname_k_ew
// CHECK: llvm.call @cleave_rt_cuda_launch({{.*}}, %[[ARGV1]]) :
// The third passes its dynamic shared memory size and a scalar argument.
// CHECK: %[[SHARED:.*]] = llvm.mlir.constant(1024 : i32) : i32
// CHECK: %[[F2:.*]] = llvm.getelementptr %[[S2]][0, 1] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, i64)>
// CHECK: llvm.store %[[N]], %[[F2]] : i64, !llvm.ptr
// CHECK: %[[FN2:.*]] = llvm.mlir.addressof @__cleave_function_k_reduce : !llvm.ptr
// CHECK: %[[NAME2:.*]] = llvm.mlir.addressof @__cleave_kname_k_reduce : !llvm.ptr
// CHECK: llvm.call @cleave_rt_cuda_launch(%[[FN2]], %{{.*}}, %{{.*}}, %[[NAME2]], %[[U]], %[[U]], %[[U]], %[[B]], %[[U]], %[[U]], %[[SHARED]], %[[ARGV2]]) :
// CHECK: llvm.call @cleave_rt_cuda_free(%[[BUF]]) : (!llvm.ptr) -> ()
// CHECK-NEXT: llvm.return

// CHECK-LABEL: llvm.func @cleave_entry_step
// CHECK-NEXT: llvm.call @cleave_rt_cuda_step_begin() : () -> ()
// CHECK: llvm.call @step
// CHECK-NEXT: llvm.call @cleave_rt_cuda_synchronize() : () -> ()
// CHECK-NEXT: llvm.return
module attributes {gpu.container_module} {
  gpu.binary @cleave_kernels [#gpu.object<#nvvm.target<chip = "sm_90">, bin = "\7FELFcubin">]
  llvm.func @malloc(i64) -> !llvm.ptr
  llvm.func @free(!llvm.ptr)
  llvm.func @step(%x: !llvm.ptr, %n: i64) {
    %g = llvm.mlir.constant(16 : i64) : i64
    %b = llvm.mlir.constant(256 : i64) : i64
    %one = llvm.mlir.constant(1 : i64) : i64
    %bytes = llvm.mlir.constant(4096 : i64) : i64
    %buf = llvm.call @malloc(%bytes) : (i64) -> !llvm.ptr
    gpu.launch_func @cleave_kernels::@k_ew blocks in (%g, %one, %one) threads in (%b, %one, %one) : i64 args(%x : !llvm.ptr, %buf : !llvm.ptr)
    gpu.launch_func @cleave_kernels::@k_ew blocks in (%g, %one, %one) threads in (%b, %one, %one) : i64 args(%buf : !llvm.ptr, %x : !llvm.ptr)
    %shared = llvm.mlir.constant(1024 : i32) : i32
    gpu.launch_func @cleave_kernels::@k_reduce blocks in (%one, %one, %one) threads in (%b, %one, %one) : i64 dynamic_shared_memory_size %shared args(%buf : !llvm.ptr, %n : i64)
    llvm.call @free(%buf) : (!llvm.ptr) -> ()
    llvm.return
  }
  llvm.func @cleave_entry_step(%args: !llvm.ptr) {
    %p = llvm.load %args : !llvm.ptr -> !llvm.ptr
    %n = llvm.mlir.constant(4 : i64) : i64
    llvm.call @step(%p, %n) : (!llvm.ptr, i64) -> ()
    llvm.return
  }
}

// -----

// A fatbin is embedded like a cubin. Sizes of index type are cast to i64
// (the cast is reconciled once the index constants are in the LLVM
// dialect); a kernel without arguments still gets a one-slot argument
// array. A module without entry points does not bracket anything.
// CHECK-NOT: cleave_rt_cuda_step_begin
// CHECK-DAG: llvm.mlir.global internal constant @__cleave_cubin_kernels("fatbin")
// CHECK-LABEL: llvm.func @index_sizes
// CHECK: llvm.alloca %{{.*}} x !llvm.struct<()> : (i64) -> !llvm.ptr
// CHECK: %[[SLOTS:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK: %[[ARGV:.*]] = llvm.alloca %[[SLOTS]] x !llvm.ptr : (i64) -> !llvm.ptr
// CHECK: %[[C4:.*]] = arith.constant 4 : index
// CHECK: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[G:.*]] = builtin.unrealized_conversion_cast %[[C4]] : index to i64
// CHECK: %[[U:.*]] = builtin.unrealized_conversion_cast %[[C1]] : index to i64
// CHECK: llvm.call @cleave_rt_cuda_launch(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[G]], %[[U]], {{.*}}, %[[ARGV]])
module attributes {gpu.container_module} {
  gpu.binary @kernels [#gpu.object<#nvvm.target<chip = "sm_90">, fatbin = "fatbin">]
  llvm.func @index_sizes() {
    %c4 = arith.constant 4 : index
    %c1 = arith.constant 1 : index
    gpu.launch_func @kernels::@k blocks in (%c4, %c1, %c1) threads in (%c1, %c1, %c1)
    llvm.return
  }
}

// -----

// Without kernels, allocations or entry points nothing changes.
// CHECK-LABEL: llvm.func @no_gpu
// CHECK-NOT: cleave_rt_cuda
module {
  llvm.func @no_gpu() {
    llvm.return
  }
}

// -----

module attributes {gpu.container_module} {
  // expected-error @below {{expected a cubin (run cleave-cuda-compile-ptx first)}}
  gpu.binary @ptx [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "// PTX">]
}

// -----

module attributes {gpu.container_module} {
  // expected-error @below {{expected exactly one object (one target)}}
  gpu.binary @two [#gpu.object<#nvvm.target<chip = "sm_80">, bin = "a">, #gpu.object<#nvvm.target<chip = "sm_90">, bin = "b">]
}

// -----

// A launch of a kernel that was not compiled to a cubin.
module attributes {gpu.container_module} {
  gpu.module @uncompiled {
    gpu.func @k() kernel {
      gpu.return
    }
  }
  llvm.func @f() {
    %one = llvm.mlir.constant(1 : i64) : i64
    // expected-error @below {{no cubin for kernel module "uncompiled"}}
    gpu.launch_func @uncompiled::@k blocks in (%one, %one, %one) threads in (%one, %one, %one) : i64
    llvm.return
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.binary @kernels [#gpu.object<#nvvm.target<chip = "sm_90">, bin = "cubin">]
  llvm.func @f() {
    %one = llvm.mlir.constant(1 : i64) : i64
    %t = gpu.wait async
    // expected-error @below {{asynchronous and cluster launches are not supported (the runtime orders launches on its compute stream)}}
    %t2 = gpu.launch_func async [%t] @kernels::@k blocks in (%one, %one, %one) threads in (%one, %one, %one) : i64
    llvm.return
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.binary @kernels [#gpu.object<#nvvm.target<chip = "sm_90">, bin = "cubin">]
  llvm.func @f() {
    %one = llvm.mlir.constant(1 : i64) : i64
    // expected-error @below {{asynchronous and cluster launches are not supported}}
    gpu.launch_func @kernels::@k clusters in (%one, %one, %one) blocks in (%one, %one, %one) threads in (%one, %one, %one) : i64
    llvm.return
  }
}

// -----

// Host code must be in the LLVM dialect by now.
module attributes {gpu.container_module} {
  gpu.binary @kernels [#gpu.object<#nvvm.target<chip = "sm_90">, bin = "cubin">]
  func.func @f() {
    %c1 = arith.constant 1 : index
    // expected-error @below {{expected the host code in the LLVM dialect}}
    gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
}

// -----

// The C library may not touch what are device buffers.
module {
  llvm.func @memcpy(!llvm.ptr, !llvm.ptr, i64)
  llvm.func @f(%a: !llvm.ptr, %b: !llvm.ptr) {
    %n = llvm.mlir.constant(64 : i64) : i64
    // expected-error @below {{host code calls memcpy on what are device buffers on the GPU}}
    llvm.call @memcpy(%a, %b, %n) : (!llvm.ptr, !llvm.ptr, i64) -> ()
    llvm.return
  }
}
