// RUN: cleave-opt %s -split-input-file --cleave-verify-collectives -verify-diagnostics -o /dev/null
// RUN: cleave-opt %s -split-input-file --cleave-verify-collectives=exhaustive=1 -verify-diagnostics -o /dev/null

// Every kind of mismatch and deadlock cleave-verify-collectives finds: one
// error at an operation of one rank, naming the ranks (with their mesh
// coordinates) and both operations, with a note at the other operation.
// Both runs (one device per class, every device) report the same.

// A shape that differs on one rank: the group along [pp, dp] spans both
// stages, and stage 1 reduces a tensor of another shape.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : ib, dp = 4 : ib)
  func.func @s0(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    // expected-note @below {{rank 0 (pp=0, dp=0) issues all_reduce(tensor<4x8xf32>, sum) here}}
    %y = cleave.all_reduce %x on @world axes = [pp, dp] : tensor<4x8xf32>
    return %y : tensor<4x8xf32>
  }
  func.func @s1(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
    // expected-error @below {{collective mismatch on the group along [pp, dp]: rank 4 (pp=1, dp=0) issues all_reduce(tensor<8x8xf32>, sum) as call #1 on its group, but rank 0 (pp=0, dp=0) issues all_reduce(tensor<4x8xf32>, sum)}}
    %y = cleave.all_reduce %x on @world axes = [pp, dp] : tensor<8x8xf32>
    return %y : tensor<8x8xf32>
  }
}

// -----

// Collectives reordered on one stage, on one group.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : ib)
  func.func @s0(%x: tensor<4xf32>) -> tensor<8xf32> {
    // expected-note @below {{rank 0 (pp=0) issues all_reduce(tensor<4xf32>, sum) here}}
    %y = cleave.all_reduce %x on @world axes = [pp] : tensor<4xf32>
    %z = cleave.all_gather %y on @world axes = [pp] dim = 0 : tensor<4xf32> -> tensor<8xf32>
    return %z : tensor<8xf32>
  }
  func.func @s1(%x: tensor<4xf32>) -> tensor<8xf32> {
    // expected-error @below {{collective mismatch on the group along [pp]: rank 1 (pp=1) issues all_gather(tensor<4xf32> -> tensor<8xf32>, dim 0) as call #1 on its group, but rank 0 (pp=0) issues all_reduce(tensor<4xf32>, sum)}}
    %z = cleave.all_gather %x on @world axes = [pp] dim = 0 : tensor<4xf32> -> tensor<8xf32>
    %y = cleave.all_reduce %x on @world axes = [pp] : tensor<4xf32>
    return %z : tensor<8xf32>
  }
}

// -----

// Collectives reordered on one stage, across two groups that both span the
// stages: each stage waits in a group the other has not reached.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : ib, dp = 2 : ib)
  func.func @s0(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @below {{deadlock: these calls wait for each other in a cycle: rank 0 (pp=0, dp=0) waits in all_reduce(tensor<4xf32>, sum) (call #1 on its group along [pp]) -> rank 2 (pp=1, dp=0) waits in all_reduce(tensor<4xf32>, sum) (call #1 on its group along [pp, dp]) -> back to rank 0 (pp=0, dp=0)}}
    %y = cleave.all_reduce %x on @world axes = [pp] : tensor<4xf32>
    %z = cleave.all_reduce %y on @world axes = [pp, dp] : tensor<4xf32>
    return %z : tensor<4xf32>
  }
  func.func @s1(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-note @below {{rank 2 (pp=1, dp=0) waits here in all_reduce(tensor<4xf32>, sum) (call #1 on its group along [pp, dp])}}
    %z = cleave.all_reduce %x on @world axes = [pp, dp] : tensor<4xf32>
    %y = cleave.all_reduce %z on @world axes = [pp] : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// A missing recv: stage 0 sends two micro-batches, stage 1 receives one.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : ib, tp = 2 : nvlink)
  func.func @s0(%x: tensor<4xf32>) {
    cleave.send %x on @world axes = [pp] to 1 : tensor<4xf32>
    // expected-error @below {{rank 0 (pp=0, tp=0) waits forever in send of tensor<4xf32> to rank 2 (pp=1, tp=0) along [pp]: rank 2 (pp=1, tp=0) returns from @s1 without receiving it}}
    cleave.send %x on @world axes = [pp] to 1 : tensor<4xf32>
    return
  }
  // expected-note @below {{rank 2 (pp=1, tp=0) runs @s1, which ends here}}
  func.func @s1() -> tensor<4xf32> {
    %a = cleave.recv on @world axes = [pp] from 0 : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}

// -----

// A cyclic send/recv order: both stages send first, and a send blocks
// until its peer receives.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : ib)
  func.func @s0(%a: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @below {{deadlock: these calls wait for each other in a cycle: rank 0 (pp=0) waits in send of tensor<4xf32> to rank 1 (pp=1) along [pp] -> rank 1 (pp=1) waits in send of tensor<4xf32> to rank 0 (pp=0) along [pp] -> back to rank 0 (pp=0) (a collective blocks until every member of its group arrives, a send until its peer reaches the matching recv, a recv until its peer reaches the matching send)}}
    cleave.send %a on @world axes = [pp] to 1 : tensor<4xf32>
    %g = cleave.recv on @world axes = [pp] from 1 : tensor<4xf32>
    return %g : tensor<4xf32>
  }
  func.func @s1(%g: tensor<4xf32>) -> tensor<4xf32> {
    // expected-note @below {{rank 1 (pp=1) waits here in send of tensor<4xf32> to rank 0 (pp=0) along [pp]}}
    cleave.send %g on @world axes = [pp] to 0 : tensor<4xf32>
    %a = cleave.recv on @world axes = [pp] from 0 : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}

// -----

// A mismatched reduction.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : ib)
  func.func @s0(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-note @below {{rank 0 (pp=0) issues all_reduce(tensor<4xf32>, sum) here}}
    %y = cleave.all_reduce %x on @world axes = [pp] : tensor<4xf32>
    return %y : tensor<4xf32>
  }
  func.func @s1(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @below {{collective mismatch on the group along [pp]: rank 1 (pp=1) issues all_reduce(tensor<4xf32>, max) as call #1 on its group, but rank 0 (pp=0) issues all_reduce(tensor<4xf32>, sum)}}
    %y = cleave.all_reduce %x on @world axes = [pp] reduction = max : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// A wrong peer: stage 1 sends to stage 3 instead of 2, so 1, 3 and 2 wait
// for each other.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1, @s2, @s3]}} {
  cleave.mesh @world(pp = 4 : ib)
  func.func @s0(%x: tensor<4xf32>) {
    cleave.send %x on @world axes = [pp] to 1 : tensor<4xf32>
    return
  }
  func.func @s1() {
    %a = cleave.recv on @world axes = [pp] from 0 : tensor<4xf32>
    // expected-error @below {{deadlock: these calls wait for each other in a cycle: rank 1 (pp=1) waits in send of tensor<4xf32> to rank 3 (pp=3) along [pp] -> rank 3 (pp=3) waits in recv of tensor<4xf32> from rank 2 (pp=2) along [pp] -> rank 2 (pp=2) waits in recv of tensor<4xf32> from rank 1 (pp=1) along [pp] -> back to rank 1 (pp=1)}}
    cleave.send %a on @world axes = [pp] to 3 : tensor<4xf32>
    return
  }
  func.func @s2() {
    // expected-note @below {{rank 2 (pp=2) waits here in recv of tensor<4xf32> from rank 1 (pp=1) along [pp]}}
    %a = cleave.recv on @world axes = [pp] from 1 : tensor<4xf32>
    cleave.send %a on @world axes = [pp] to 3 : tensor<4xf32>
    return
  }
  func.func @s3() -> tensor<4xf32> {
    // expected-note @below {{rank 3 (pp=3) waits here in recv of tensor<4xf32> from rank 2 (pp=2) along [pp]}}
    %a = cleave.recv on @world axes = [pp] from 2 : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}

// -----

// A recv of another shape than what its peer sends.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : ib)
  func.func @s0(%x: tensor<4x8xf32>) {
    // expected-error @below {{send/recv mismatch: rank 0 (pp=0) sends tensor<4x8xf32> to rank 1 (pp=1) along [pp], which receives tensor<8x4xf32> from it}}
    cleave.send %x on @world axes = [pp] to 1 : tensor<4x8xf32>
    return
  }
  func.func @s1() -> tensor<8x4xf32> {
    // expected-note @below {{rank 1 (pp=1) receives tensor<8x4xf32> here}}
    %a = cleave.recv on @world axes = [pp] from 0 : tensor<8x4xf32>
    return %a : tensor<8x4xf32>
  }
}

// -----

// A collective that one stage issues fewer times.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : ib, dp = 2 : ib)
  func.func @s0(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = cleave.all_reduce %x on @world axes = [pp] : tensor<4xf32>
    // expected-error @below {{rank 0 (pp=0, dp=0) waits forever in all_reduce(tensor<4xf32>, sum) (call #2 on its group along [pp]): rank 2 (pp=1, dp=0) returns from @s1 after 1 call(s) on that group}}
    %z = cleave.all_reduce %y on @world axes = [pp] : tensor<4xf32>
    return %z : tensor<4xf32>
  }
  // expected-note @below {{rank 2 (pp=1, dp=0) runs @s1, which ends here}}
  func.func @s1(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = cleave.all_reduce %x on @world axes = [pp] : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// Dimensions that differ while the types agree.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : ib)
  func.func @s0(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
    // expected-note @below {{rank 0 (pp=0) issues all_to_all(tensor<4x4xf32>, split_dim 0, concat_dim 0) here}}
    %y = cleave.all_to_all %x on @world axes = [pp] split_dim = 0 concat_dim = 0 : tensor<4x4xf32> -> tensor<4x4xf32>
    return %y : tensor<4x4xf32>
  }
  func.func @s1(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
    // expected-error @below {{collective mismatch on the group along [pp]: rank 1 (pp=1) issues all_to_all(tensor<4x4xf32>, split_dim 1, concat_dim 1) as call #1 on its group, but rank 0 (pp=0) issues all_to_all(tensor<4x4xf32>, split_dim 0, concat_dim 0)}}
    %y = cleave.all_to_all %x on @world axes = [pp] split_dim = 1 concat_dim = 1 : tensor<4x4xf32> -> tensor<4x4xf32>
    return %y : tensor<4x4xf32>
  }
}

// -----

// Permutation pairs that differ between stages.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : ib)
  func.func @s0(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-note @below {{rank 0 (pp=0) issues collective_permute(tensor<4xf32>, pairs [0 -> 1, 1 -> 0]) here}}
    %y = cleave.collective_permute %x on @world axes = [pp] pairs = [0 -> 1, 1 -> 0] : tensor<4xf32>
    return %y : tensor<4xf32>
  }
  func.func @s1(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @below {{collective mismatch on the group along [pp]: rank 1 (pp=1) issues collective_permute(tensor<4xf32>, pairs [0 -> 1]) as call #1 on its group, but rank 0 (pp=0) issues collective_permute(tensor<4xf32>, pairs [0 -> 1, 1 -> 0])}}
    %y = cleave.collective_permute %x on @world axes = [pp] pairs = [0 -> 1] : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// The same devices in another axis order form another communicator (the
// order fixes the devices' indices in the group), so the two stages wait in
// different groups.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : ib, dp = 2 : ib)
  func.func @s0(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @below {{deadlock: these calls wait for each other in a cycle: rank 0 (pp=0, dp=0) waits in all_reduce(tensor<4xf32>, sum) (call #1 on its group along [pp, dp]) -> rank 2 (pp=1, dp=0) waits in all_reduce(tensor<4xf32>, sum) (call #1 on its group along [dp, pp]) -> back to rank 0 (pp=0, dp=0)}}
    %y = cleave.all_reduce %x on @world axes = [pp, dp] : tensor<4xf32>
    return %y : tensor<4xf32>
  }
  func.func @s1(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-note @below {{rank 2 (pp=1, dp=0) waits here in all_reduce(tensor<4xf32>, sum) (call #1 on its group along [dp, pp])}}
    %y = cleave.all_reduce %x on @world axes = [dp, pp] : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// SPMD: every device runs @step, so the device at index 1 of its pp group
// would send to itself.
cleave.mesh @world(pp = 2 : ib, dp = 2 : ib)
func.func @step(%x: tensor<4xf32>) {
  // expected-error @below {{rank 2 (pp=1, dp=0) sends to itself: peer 1 is its own index in its group along [pp]}}
  cleave.send %x on @world axes = [pp] to 1 : tensor<4xf32>
  return
}


// -----

// Per-device control flow (cleave.axis_index): both sides of the branch
// send first.
cleave.mesh @world(pp = 2 : ib, tp = 2 : nvlink)
func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
  %pp = cleave.axis_index on @world axes = [pp] : tensor<i64>
  %p = tensor.extract %pp[] : tensor<i64>
  %c0 = arith.constant 0 : i64
  %first = arith.cmpi eq, %p, %c0 : i64
  %r = scf.if %first -> tensor<4xf32> {
    // expected-error @below {{deadlock: these calls wait for each other in a cycle: rank 0 (pp=0, tp=0) waits in send of tensor<4xf32> to rank 2 (pp=1, tp=0) along [pp] -> rank 2 (pp=1, tp=0) waits in send of tensor<4xf32> to rank 0 (pp=0, tp=0) along [pp] -> back to rank 0 (pp=0, tp=0)}}
    cleave.send %x on @world axes = [pp] to 1 : tensor<4xf32>
    %g = cleave.recv on @world axes = [pp] from 1 : tensor<4xf32>
    scf.yield %g : tensor<4xf32>
  } else {
    // expected-note @below {{rank 2 (pp=1, tp=0) waits here in send of tensor<4xf32> to rank 0 (pp=0, tp=0) along [pp]}}
    cleave.send %x on @world axes = [pp] to 0 : tensor<4xf32>
    %a = cleave.recv on @world axes = [pp] from 0 : tensor<4xf32>
    scf.yield %a : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Only the first device of each tensor-parallel group reduces: the others
// never join it.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : ib, tp = 2 : nvlink)
  // expected-note @below {{rank 1 (pp=0, tp=1) runs @s0, which ends here}}
  func.func @s0(%x: tensor<4xf32>) -> tensor<4xf32> {
    %tp = cleave.axis_index on @world axes = [tp] : tensor<i64>
    %t = tensor.extract %tp[] : tensor<i64>
    %c0 = arith.constant 0 : i64
    %lead = arith.cmpi eq, %t, %c0 : i64
    %r = scf.if %lead -> tensor<4xf32> {
      // expected-error @below {{rank 0 (pp=0, tp=0) waits forever in all_reduce(tensor<4xf32>, sum) (call #1 on its group along [tp]): rank 1 (pp=0, tp=1) returns from @s0 after 0 call(s) on that group}}
      %s = cleave.all_reduce %x on @world axes = [tp] : tensor<4xf32>
      scf.yield %s : tensor<4xf32>
    } else {
      scf.yield %x : tensor<4xf32>
    }
    return %r : tensor<4xf32>
  }
  func.func @s1(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
