// RUN: cleave-opt %s -split-input-file --cleave-async-collectives | FileCheck %s

cleave.mesh @m(dp = 2 : ib)

// Data parallelism: each gradient's all-reduce starts when the gradient is
// computed and is waited where the optimizer uses it, so it overlaps the
// rest of the backward pass.
// CHECK-LABEL: func.func @dp_backward
func.func @dp_backward(%x: tensor<8x8xf32>, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  // CHECK: %[[G2:.*]] = cleave.matmul
  // CHECK-NEXT: %[[R2:.*]] = cleave.all_reduce_start %[[G2]] on @m axes = [dp] : tensor<8x8xf32> -> !cleave.request<tensor<8x8xf32>>
  // CHECK-NEXT: cleave.matmul
  // CHECK-NEXT: %[[G1:.*]] = cleave.matmul
  // CHECK-NEXT: %[[R1:.*]] = cleave.all_reduce_start %[[G1]]
  // CHECK-NEXT: %[[A2:.*]] = cleave.wait %[[R2]] : !cleave.request<tensor<8x8xf32>> -> tensor<8x8xf32>
  // CHECK-NEXT: cleave.sub %{{.*}}, %[[A2]]
  // CHECK-NEXT: %[[A1:.*]] = cleave.wait %[[R1]]
  // CHECK-NEXT: cleave.sub %{{.*}}, %[[A1]]
  %g2 = cleave.matmul %x, %w2 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %r2 = cleave.all_reduce %g2 on @m axes = [dp] : tensor<8x8xf32>
  %d = cleave.matmul %g2, %w2 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %g1 = cleave.matmul %d, %w1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %r1 = cleave.all_reduce %g1 on @m axes = [dp] : tensor<8x8xf32>
  %u2 = cleave.sub %w2, %r2 : tensor<8x8xf32>
  %u1 = cleave.sub %w1, %r1 : tensor<8x8xf32>
  return %u1, %u2 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

cleave.mesh @m(dp = 2 : ib)

// ZeRO-3: parameters are ready at entry, but each all-gather starts only
// after the previous gather's wait (prefetch = 1): layer k + 1's parameters
// are gathered while layer k computes.
// CHECK-LABEL: func.func @zero3_prefetch
func.func @zero3_prefetch(%x: tensor<8x8xf32>, %w1: tensor<4x8xf32>, %w2: tensor<4x8xf32>, %w3: tensor<4x8xf32>) -> tensor<8x8xf32> {
  // The first gather has nothing to overlap with and stays blocking.
  // CHECK-NEXT: %[[F1:.*]] = cleave.all_gather %{{.*}} on @m axes = [dp] dim = 0
  // CHECK-NEXT: %[[S2:.*]] = cleave.all_gather_start %{{.*}} on @m axes = [dp] dim = 0 : tensor<4x8xf32> -> !cleave.request<tensor<8x8xf32>>
  // CHECK-NEXT: %[[Y1:.*]] = cleave.matmul %{{.*}}, %[[F1]]
  // CHECK-NEXT: %[[F2:.*]] = cleave.wait %[[S2]]
  // CHECK-NEXT: %[[S3:.*]] = cleave.all_gather_start
  // CHECK-NEXT: %[[Y2:.*]] = cleave.matmul %[[Y1]], %[[F2]]
  // CHECK-NEXT: %[[F3:.*]] = cleave.wait %[[S3]]
  // CHECK-NEXT: cleave.matmul %[[Y2]], %[[F3]]
  %f1 = cleave.all_gather %w1 on @m axes = [dp] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %y1 = cleave.matmul %x, %f1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %f2 = cleave.all_gather %w2 on @m axes = [dp] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %y2 = cleave.matmul %y1, %f2 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %f3 = cleave.all_gather %w3 on @m axes = [dp] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %y3 = cleave.matmul %y2, %f3 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %y3 : tensor<8x8xf32>
}

// -----

cleave.mesh @m(dp = 2 : ib)

// A start never moves above an earlier communication op, so every device
// starts its communication in program order (the second start follows the
// first); the one-operand ops that read the first result (neg, exp) move
// down to their first use, behind both starts.
// CHECK-LABEL: func.func @program_order
func.func @program_order(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // CHECK-NEXT: %[[S0:.*]] = cleave.all_reduce_start %{{.*}} on @m axes = [dp] reduction = max
  // CHECK-NEXT: %[[S1:.*]] = cleave.all_reduce_start %{{.*}} on @m axes = [dp] :
  // CHECK-NEXT: %[[A:.*]] = cleave.wait %[[S0]]
  // CHECK-NEXT: %[[B:.*]] = cleave.neg %[[A]]
  // CHECK-NEXT: %[[E:.*]] = cleave.exp %[[B]]
  // CHECK-NEXT: %[[C:.*]] = cleave.wait %[[S1]]
  // CHECK-NEXT: cleave.add %[[C]], %[[E]]
  %a = cleave.all_reduce %x on @m axes = [dp] reduction = max : tensor<8xf32>
  %b = cleave.neg %a : tensor<8xf32>
  %e = cleave.exp %b : tensor<8xf32>
  %c = cleave.all_reduce %y on @m axes = [dp] : tensor<8xf32>
  %d = cleave.add %c, %e : tensor<8xf32>
  return %d, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

cleave.mesh @m(pp = 2 : ib)

// Pipeline transfers: the recv starts as early as the previous transfer
// allows and is waited where its tensor is used; the send's wait goes to
// the end of the block.
// CHECK-LABEL: func.func @pipeline_stage
func.func @pipeline_stage(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK-NEXT: %[[S:.*]] = cleave.send_start %{{.*}} on @m axes = [pp] to 1 : tensor<8xf32> -> !cleave.request
  // CHECK-NEXT: %[[R:.*]] = cleave.recv_start on @m axes = [pp] from 1 : !cleave.request<tensor<8xf32>>
  // CHECK-NEXT: %[[E:.*]] = cleave.exp
  // CHECK-NEXT: %[[V:.*]] = cleave.wait %[[R]] : !cleave.request<tensor<8xf32>> -> tensor<8xf32>
  // CHECK-NEXT: %[[Z:.*]] = cleave.add %[[V]], %[[E]]
  // CHECK-NEXT: cleave.wait %[[S]] : !cleave.request
  // CHECK-NEXT: return %[[Z]]
  cleave.send %x on @m axes = [pp] to 1 : tensor<8xf32>
  %e = cleave.exp %x : tensor<8xf32>
  %v = cleave.recv on @m axes = [pp] from 1 : tensor<8xf32>
  %z = cleave.add %v, %e : tensor<8xf32>
  return %z : tensor<8xf32>
}

// -----

cleave.mesh @m(dp = 2 : ib)

// A bucket: the slices and reshapes that cut the bucket's result back into
// gradients move down to their first use, so the wait goes where the first
// gradient is needed and the all-reduce overlaps the compute in between.
// CHECK-LABEL: func.func @bucket_views
func.func @bucket_views(%ga: tensor<4xf32>, %gb: tensor<4xf32>, %x: tensor<8x8xf32>, %wa: tensor<4xf32>, %wb: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<8x8xf32>) {
  // CHECK-NEXT: cleave.concat
  // CHECK-NEXT: %[[S:.*]] = cleave.all_reduce_start
  // CHECK-NEXT: %[[Y:.*]] = cleave.matmul
  // CHECK-NEXT: %[[B:.*]] = cleave.wait %[[S]]
  // CHECK-NEXT: %[[A:.*]] = cleave.slice %[[B]] offsets = [0]
  // CHECK-NEXT: cleave.sub %{{.*}}, %[[A]]
  // CHECK-NEXT: %[[C:.*]] = cleave.slice %[[B]] offsets = [4]
  // CHECK-NEXT: cleave.sub %{{.*}}, %[[C]]
  %c = cleave.concat %ga, %gb dim = 0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  %r = cleave.all_reduce %c on @m axes = [dp] : tensor<8xf32>
  %a = cleave.slice %r offsets = [0] sizes = [4] strides = [1] : tensor<8xf32> -> tensor<4xf32>
  %b = cleave.slice %r offsets = [4] sizes = [4] strides = [1] : tensor<8xf32> -> tensor<4xf32>
  %y = cleave.matmul %x, %x : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %ua = cleave.sub %wa, %a : tensor<4xf32>
  %ub = cleave.sub %wb, %b : tensor<4xf32>
  return %ua, %ub, %y : tensor<4xf32>, tensor<4xf32>, tensor<8x8xf32>
}

// -----

cleave.mesh @m(cp = 2 : ib, ep = 2 : ib)

// Ring attention's K/V shift and expert dispatch: the collective_permute
// and the all_to_all become start/wait pairs around the compute that does
// not need their results.
// CHECK-LABEL: func.func @permute_and_all_to_all
func.func @permute_and_all_to_all(%kv: tensor<8x8xf32>, %q: tensor<8x8xf32>, %tokens: tensor<8x4xf32>) -> (tensor<8x8xf32>, tensor<4x8xf32>) {
  // CHECK-NEXT: %[[P:.*]] = cleave.collective_permute_start %{{.*}} on @m axes = [cp] pairs = [0 -> 1, 1 -> 0] : tensor<8x8xf32> -> !cleave.request<tensor<8x8xf32>>
  // CHECK-NEXT: %[[A:.*]] = cleave.all_to_all_start %{{.*}} on @m axes = [ep] split_dim = 0 concat_dim = 1 : tensor<8x4xf32> -> !cleave.request<tensor<4x8xf32>>
  // CHECK-NEXT: %[[S:.*]] = cleave.matmul
  // CHECK-NEXT: %[[NEXT:.*]] = cleave.wait %[[P]] : !cleave.request<tensor<8x8xf32>> -> tensor<8x8xf32>
  // CHECK-NEXT: cleave.matmul %[[S]], %[[NEXT]]
  // CHECK-NEXT: %[[D:.*]] = cleave.wait %[[A]] : !cleave.request<tensor<4x8xf32>> -> tensor<4x8xf32>
  // CHECK-NEXT: cleave.neg %[[D]]
  %next = cleave.collective_permute %kv on @m axes = [cp] pairs = [0 -> 1, 1 -> 0] : tensor<8x8xf32>
  %d = cleave.all_to_all %tokens on @m axes = [ep] split_dim = 0 concat_dim = 1 : tensor<8x4xf32> -> tensor<4x8xf32>
  %s = cleave.matmul %q, %kv : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %o = cleave.matmul %s, %next : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %e = cleave.neg %d : tensor<4x8xf32>
  return %o, %e : tensor<8x8xf32>, tensor<4x8xf32>
}

// -----

cleave.mesh @m(cp = 2 : ib)

// Two gradients of one backward op (an attention's dK and dV under cp): the
// copies that prepare the second one's reduce-scatter rise with it, above
// the first one's consumers, so its start does too and it is in flight
// while they compute. The first has nothing to overlap with.
// CHECK-LABEL: func.func @second_gradient_rises
func.func @second_gradient_rises(%x: tensor<8x8xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  // CHECK: %[[G:.*]] = cleave.neg
  // CHECK-NEXT: %[[VS:.*]] = cleave.slice %[[G]] offsets = [0, 0]
  // CHECK-NEXT: %[[V:.*]] = cleave.reduce_scatter %[[VS]] on @m axes = [cp] dim = 1
  // CHECK-NEXT: %[[KS:.*]] = cleave.slice %[[G]] offsets = [4, 0]
  // CHECK-NEXT: %[[RK:.*]] = cleave.reduce_scatter_start %[[KS]]
  // CHECK-NEXT: cleave.matmul %[[V]]
  // CHECK-NEXT: %[[K:.*]] = cleave.wait %[[RK]]
  // CHECK-NEXT: cleave.matmul %[[K]]
  %g = cleave.neg %x : tensor<8x8xf32>
  %vs = cleave.slice %g offsets = [0, 0] sizes = [4, 8] strides = [1, 1] : tensor<8x8xf32> -> tensor<4x8xf32>
  %v = cleave.reduce_scatter %vs on @m axes = [cp] dim = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  %mv = cleave.matmul %v, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %ks = cleave.slice %g offsets = [4, 0] sizes = [4, 8] strides = [1, 1] : tensor<8x8xf32> -> tensor<4x8xf32>
  %k = cleave.reduce_scatter %ks on @m axes = [cp] dim = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  %mk = cleave.matmul %k, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %mv, %mk : tensor<4x4xf32>, tensor<4x4xf32>
}
