// RUN: cleave-opt %s --cleave-estimate="cluster=dgx-a100-80gb" --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s
// RUN: cleave-opt %s --cleave-estimate="cluster-file=%S/Inputs/estimate-cluster.json" --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=FILE
// RUN: cleave-opt %s --cleave-estimate="cluster=tpu-v5" -verify-diagnostics -o /dev/null

// The pass prices each function: FLOPs from CostOpInterface, bytes from the
// operand and result types, collectives with the cost model on the group
// their mesh axes form (tp inside a node on NVLink, dp across nodes).

cleave.mesh @world(dp = 4 : ib, tp = 8 : nvlink)

// Global view: one matmul of 2 x 1024 x 1024 x 4096 FLOPs reading and
// writing (1 + 4 + 4) Mi bf16 elements.
// CHECK: remark: cleave-estimate on dgx-a100-80gb: 8589934592 FLOP, 18874368 bytes moved by compute, compute {{[0-9]+\.[0-9]+}} us, communication 0.000 us, total {{[0-9]+\.[0-9]+}} us
// With a cluster the model does not know, the error is on the first
// function:
// expected-error @below {{cleave-estimate: unknown cluster preset 'tpu-v5' (known: dgx-a100-40gb, dgx-a100-80gb, dgx-h100, dgx-h200)}}
func.func @global(%x: tensor<1024x1024xbf16>, %w: tensor<1024x4096xbf16>) -> tensor<1024x4096xbf16> {
  %y = cleave.matmul %x, %w : (tensor<1024x1024xbf16>, tensor<1024x4096xbf16>) -> tensor<1024x4096xbf16>
  return %y : tensor<1024x4096xbf16>
}

// Per device: the collectives are priced on their axes; the f32 add counts
// one FLOP per element and reads and writes 3 x 4 Mi f32 elements.
// CHECK: remark: cleave-estimate on dgx-a100-80gb: 4194304 FLOP, 50331648 bytes moved by compute, compute {{[0-9.]+}} us, communication {{[0-9.]+}} us (dp {{[0-9.]+}} us, dp+tp {{[0-9.]+}} us, tp {{[0-9.]+}} us), total {{[0-9.]+}} us
// FILE: remark: cleave-estimate on h100-pod-with-sharp: 4194304 FLOP
func.func @per_device(%x: tensor<1024x1024xf32>, %w: tensor<1024x4096xf32>) -> tensor<256x4096xf32> {
  %a = cleave.all_reduce %x on @world axes = [tp] : tensor<1024x1024xf32>
  %b = cleave.all_gather %a on @world axes = [dp] dim = 1 : tensor<1024x1024xf32> -> tensor<1024x4096xf32>
  %c = cleave.add %b, %w : tensor<1024x4096xf32>
  %d = cleave.reduce_scatter %c on @world axes = [dp, tp] dim = 0 : tensor<1024x4096xf32> -> tensor<32x4096xf32>
  %e = cleave.all_gather %d on @world axes = [tp] dim = 0 : tensor<32x4096xf32> -> tensor<256x4096xf32>
  return %e : tensor<256x4096xf32>
}

// A started collective is priced as the blocking one (its request carries
// the tensor); the wait adds nothing.
// CHECK: remark: cleave-estimate on dgx-a100-80gb: 0 FLOP, 0 bytes moved by compute, compute 0.000 us, communication [[COMM:[0-9.]+]] us (tp [[COMM]] us)
// CHECK: remark: cleave-estimate on dgx-a100-80gb: 0 FLOP, 0 bytes moved by compute, compute 0.000 us, communication [[COMM]] us (tp [[COMM]] us)
func.func @blocking(%x: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %a = cleave.all_reduce %x on @world axes = [tp] : tensor<1024x1024xf32>
  return %a : tensor<1024x1024xf32>
}
func.func @started(%x: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %r = cleave.all_reduce_start %x on @world axes = [tp] : tensor<1024x1024xf32> -> !cleave.request<tensor<1024x1024xf32>>
  %a = cleave.wait %r : !cleave.request<tensor<1024x1024xf32>> -> tensor<1024x1024xf32>
  return %a : tensor<1024x1024xf32>
}
