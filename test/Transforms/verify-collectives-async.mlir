// RUN: cleave-opt %s -split-input-file --cleave-verify-collectives -verify-diagnostics | FileCheck %s

// Start/wait pairs: the runtime runs requests in start order, behind the
// blocking calls made before them, so a start is checked as the blocking
// call at its place and a wait, which only blocks on a request already
// started, adds no event (docs/verify-collectives.md).

// A pipeline whose stages exchange activations and gradients with start and
// wait, in a matching order: proved deadlock-free.
// CHECK-LABEL: func.func @s0
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : host, dp = 2 : host)
  func.func @s0(%a: tensor<4xf32>) -> tensor<4xf32> {
    %s = cleave.send_start %a on @world axes = [pp] to 1 : tensor<4xf32> -> !cleave.request
    %r = cleave.recv_start on @world axes = [pp] from 1 : !cleave.request<tensor<4xf32>>
    %g = cleave.wait %r : !cleave.request<tensor<4xf32>> -> tensor<4xf32>
    %q = cleave.all_reduce_start %g on @world axes = [dp] : tensor<4xf32> -> !cleave.request<tensor<4xf32>>
    %e = cleave.exp %a : tensor<4xf32>
    %t = cleave.wait %q : !cleave.request<tensor<4xf32>> -> tensor<4xf32>
    cleave.wait %s : !cleave.request
    return %t : tensor<4xf32>
  }
  func.func @s1(%g: tensor<4xf32>) -> tensor<4xf32> {
    %r = cleave.recv_start on @world axes = [pp] from 0 : !cleave.request<tensor<4xf32>>
    %a = cleave.wait %r : !cleave.request<tensor<4xf32>> -> tensor<4xf32>
    %s = cleave.send_start %g on @world axes = [pp] to 0 : tensor<4xf32> -> !cleave.request
    %q = cleave.all_reduce_start %a on @world axes = [dp] : tensor<4xf32> -> !cleave.request<tensor<4xf32>>
    %t = cleave.wait %q : !cleave.request<tensor<4xf32>> -> tensor<4xf32>
    cleave.wait %s : !cleave.request
    return %t : tensor<4xf32>
  }
}

// -----

// A bad ordering: each stage waits for its recv before it starts the send
// the other stage's recv needs. Both recvs are started first, so every
// device's progress thread blocks in its recv: a deadlock, found as for the
// blocking program.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : host)
  func.func @s0(%a: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @below {{deadlock: these calls wait for each other in a cycle: rank 0 (pp=0) waits in recv of tensor<4xf32> from rank 1 (pp=1) along [pp]}}
    %r = cleave.recv_start on @world axes = [pp] from 1 : !cleave.request<tensor<4xf32>>
    %g = cleave.wait %r : !cleave.request<tensor<4xf32>> -> tensor<4xf32>
    %s = cleave.send_start %a on @world axes = [pp] to 1 : tensor<4xf32> -> !cleave.request
    cleave.wait %s : !cleave.request
    return %g : tensor<4xf32>
  }
  func.func @s1(%g: tensor<4xf32>) -> tensor<4xf32> {
    // expected-note @below {{rank 1 (pp=1) waits here in recv of tensor<4xf32> from rank 0 (pp=0) along [pp]}}
    %r = cleave.recv_start on @world axes = [pp] from 0 : !cleave.request<tensor<4xf32>>
    %s = cleave.send_start %g on @world axes = [pp] to 0 : tensor<4xf32> -> !cleave.request
    %a = cleave.wait %r : !cleave.request<tensor<4xf32>> -> tensor<4xf32>
    cleave.wait %s : !cleave.request
    return %a : tensor<4xf32>
  }
}

// -----

// SPMD: the devices of a group start different collectives in the same
// position: a mismatch, with the start read as its blocking op.
cleave.mesh @m(dp = 2 : host)
func.func @mismatch(%x: tensor<4xf32>) -> tensor<4xf32> {
  %i = cleave.axis_index on @m axes = [dp] : tensor<i64>
  %c0 = arith.constant 0 : i64
  %v = tensor.extract %i[] : tensor<i64>
  %p = arith.cmpi eq, %v, %c0 : i64
  %y = scf.if %p -> tensor<4xf32> {
    // expected-note @below {{rank 0 (dp=0) issues all_reduce(tensor<4xf32>, sum) here}}
    %r = cleave.all_reduce_start %x on @m axes = [dp] : tensor<4xf32> -> !cleave.request<tensor<4xf32>>
    %a = cleave.wait %r : !cleave.request<tensor<4xf32>> -> tensor<4xf32>
    scf.yield %a : tensor<4xf32>
  } else {
    // expected-error @below {{collective mismatch on the group along [dp]: rank 1 (dp=1) issues all_reduce(tensor<4xf32>, max) as call #1 on its group, but rank 0 (dp=0) issues all_reduce(tensor<4xf32>, sum)}}
    %r = cleave.all_reduce_start %x on @m axes = [dp] reduction = max : tensor<4xf32> -> !cleave.request<tensor<4xf32>>
    %a = cleave.wait %r : !cleave.request<tensor<4xf32>> -> tensor<4xf32>
    scf.yield %a : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// all_to_all and collective_permute starts are replayed as the blocking
// calls: matching programs are proved deadlock-free...
// CHECK-LABEL: func.func @exchanges
cleave.mesh @m(cp = 2 : host)
func.func @exchanges(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %p = cleave.collective_permute_start %x on @m axes = [cp] pairs = [0 -> 1, 1 -> 0] : tensor<4xf32> -> !cleave.request<tensor<4xf32>>
  %a = cleave.all_to_all_start %x on @m axes = [cp] split_dim = 0 concat_dim = 0 : tensor<4xf32> -> !cleave.request<tensor<4xf32>>
  %e = cleave.exp %x : tensor<4xf32>
  %y = cleave.wait %a : !cleave.request<tensor<4xf32>> -> tensor<4xf32>
  %z = cleave.wait %p : !cleave.request<tensor<4xf32>> -> tensor<4xf32>
  return %y, %z : tensor<4xf32>, tensor<4xf32>
}

// -----

// ... and devices whose starts disagree (a permute against an all_to_all,
// pairs that differ) are a mismatch named with the blocking op.
cleave.mesh @m(cp = 2 : host)
func.func @exchange_mismatch(%x: tensor<4xf32>) -> tensor<4xf32> {
  %i = cleave.axis_index on @m axes = [cp] : tensor<i64>
  %c0 = arith.constant 0 : i64
  %v = tensor.extract %i[] : tensor<i64>
  %p = arith.cmpi eq, %v, %c0 : i64
  %y = scf.if %p -> tensor<4xf32> {
    // expected-note @below {{rank 0 (cp=0) issues all_to_all(tensor<4xf32>, split_dim 0, concat_dim 0) here}}
    %r = cleave.all_to_all_start %x on @m axes = [cp] split_dim = 0 concat_dim = 0 : tensor<4xf32> -> !cleave.request<tensor<4xf32>>
    %a = cleave.wait %r : !cleave.request<tensor<4xf32>> -> tensor<4xf32>
    scf.yield %a : tensor<4xf32>
  } else {
    // expected-error @below {{collective mismatch on the group along [cp]: rank 1 (cp=1) issues collective_permute(tensor<4xf32>, pairs [0 -> 1, 1 -> 0]) as call #1 on its group, but rank 0 (cp=0) issues all_to_all(tensor<4xf32>, split_dim 0, concat_dim 0)}}
    %r = cleave.collective_permute_start %x on @m axes = [cp] pairs = [0 -> 1, 1 -> 0] : tensor<4xf32> -> !cleave.request<tensor<4xf32>>
    %a = cleave.wait %r : !cleave.request<tensor<4xf32>> -> tensor<4xf32>
    scf.yield %a : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}
