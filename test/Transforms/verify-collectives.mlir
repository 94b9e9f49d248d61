// RUN: cleave-opt %s -split-input-file --cleave-verify-collectives -verify-diagnostics | FileCheck %s
// RUN: cleave-opt %s -split-input-file --cleave-verify-collectives=exhaustive=1 -verify-diagnostics -o /dev/null

// Programs whose communication is proven to match and complete on every
// rank (no diagnostics), once with one simulated device per class of
// interchangeable devices and once simulating every device. The pass
// changes nothing.

// A program without communication: nothing to prove.
// CHECK-LABEL: func.func @no_communication
func.func @no_communication(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = cleave.add %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// SPMD data and tensor parallelism: every device runs @step. The layer
// loop has compile-time bounds and is unrolled; the helper is followed.
// A loop without communication may have run-time bounds, and a branch
// decided at run time is fine when both sides communicate alike.
cleave.mesh @world(dp = 4 : ib, tp = 2 : nvlink)

func.func private @mlp(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %y = cleave.all_reduce %x on @world axes = [tp] : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @step
func.func @step(%x: tensor<8x16xf32>, %w: tensor<64x16xf32>, %n: index, %flag: i1) -> tensor<64x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %l = %c0 to %c4 step %c1 {
    %h = func.call @mlp(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %b = func.call @mlp(%h) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  }
  scf.for %i = %c0 to %n step %c1 {
    %z = cleave.add %x, %x : tensor<8x16xf32>
  }
  %m = scf.if %flag -> tensor<8x16xf32> {
    %r = cleave.all_reduce %x on @world axes = [dp] reduction = max : tensor<8x16xf32>
    scf.yield %r : tensor<8x16xf32>
  } else {
    %r = cleave.all_reduce %x on @world axes = [dp] reduction = max : tensor<8x16xf32>
    %s = cleave.add %r, %r : tensor<8x16xf32>
    scf.yield %s : tensor<8x16xf32>
  }
  // ZeRO-style: reduce-scatter the gradient, gather the parameter.
  %g = cleave.reduce_scatter %w on @world axes = [dp] dim = 0 : tensor<64x16xf32> -> tensor<16x16xf32>
  %p = cleave.all_gather %g on @world axes = [dp] dim = 0 : tensor<16x16xf32> -> tensor<64x16xf32>
  %t = cleave.all_to_all %p on @world axes = [dp, tp] split_dim = 0 concat_dim = 1 : tensor<64x16xf32> -> tensor<8x128xf32>
  return %p : tensor<64x16xf32>
}

// -----

// Ring shifts with collective_permute, along an SPMD axis and along the
// pipeline axis (every stage issues the same permute).
cleave.mesh @ring(tp = 4 : nvlink)

// CHECK-LABEL: func.func @ring_step
func.func @ring_step(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %x) -> tensor<8xf32> {
    %n = cleave.collective_permute %acc on @ring axes = [tp] pairs = [0 -> 1, 1 -> 2, 2 -> 3, 3 -> 0] : tensor<8xf32>
    scf.yield %n : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// -----

module attributes {cleave.pipeline = {axis = "pp", stages = [@p0, @p1, @p2]}} {
  cleave.mesh @world(pp = 3 : ib, dp = 2 : ib)
  // CHECK-LABEL: func.func @p0
  func.func @p0(%x: tensor<8xf32>) -> tensor<8xf32> {
    %y = cleave.collective_permute %x on @world axes = [pp] pairs = [0 -> 1, 1 -> 2, 2 -> 0] : tensor<8xf32>
    %l = cleave.all_reduce %y on @world axes = [pp, dp] : tensor<8xf32>
    return %l : tensor<8xf32>
  }
  func.func @p1(%x: tensor<8xf32>) -> tensor<8xf32> {
    %y = cleave.collective_permute %x on @world axes = [pp] pairs = [0 -> 1, 1 -> 2, 2 -> 0] : tensor<8xf32>
    %z = cleave.mul %y, %y : tensor<8xf32>
    %l = cleave.all_reduce %z on @world axes = [pp, dp] : tensor<8xf32>
    return %l : tensor<8xf32>
  }
  func.func @p2(%x: tensor<8xf32>) -> tensor<8xf32> {
    %y = cleave.collective_permute %x on @world axes = [pp] pairs = [0 -> 1, 1 -> 2, 2 -> 0] : tensor<8xf32>
    %l = cleave.all_reduce %y on @world axes = [pp, dp] : tensor<8xf32>
    return %l : tensor<8xf32>
  }
}

// -----

// Stage functions sharing a helper whose direction is a compile-time
// argument: the replay evaluates the call per argument value.
module attributes {cleave.pipeline = {axis = "pp", stages = [@first, @second]}} {
  cleave.mesh @world(pp = 2 : ib, tp = 4 : nvlink)
  func.func private @exchange(%x: tensor<4xf32>, %upstream: i1) -> tensor<4xf32> {
    %r = scf.if %upstream -> tensor<4xf32> {
      cleave.send %x on @world axes = [pp] to 1 : tensor<4xf32>
      %g = cleave.recv on @world axes = [pp] from 1 : tensor<4xf32>
      scf.yield %g : tensor<4xf32>
    } else {
      %a = cleave.recv on @world axes = [pp] from 0 : tensor<4xf32>
      cleave.send %a on @world axes = [pp] to 0 : tensor<4xf32>
      scf.yield %a : tensor<4xf32>
    }
    return %r : tensor<4xf32>
  }
  // CHECK-LABEL: func.func @first
  func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
    %true = arith.constant true
    %r = func.call @exchange(%x, %true) : (tensor<4xf32>, i1) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
  func.func @second(%x: tensor<4xf32>) -> tensor<4xf32> {
    %false = arith.constant false
    %r = func.call @exchange(%x, %false) : (tensor<4xf32>, i1) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

// A micro-batch counter carried through the loop picks the branch, and an
// scf.index_switch dispatches on it.
module attributes {cleave.pipeline = {axis = "pp", stages = [@a, @b]}} {
  cleave.mesh @world(pp = 2 : ib)
  // CHECK-LABEL: func.func @a
  func.func @a(%x: tensor<4xf32>) -> tensor<4xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %k = scf.for %i = %c0 to %c3 step %c1 iter_args(%n = %c0) -> index {
      scf.index_switch %n
      case 1 {
        %g = cleave.recv on @world axes = [pp] from 1 : tensor<4xf32>
        scf.yield
      }
      default {
        cleave.send %x on @world axes = [pp] to 1 : tensor<4xf32>
        scf.yield
      }
      %next = arith.addi %n, %c1 : index
      scf.yield %next : index
    }
    return %x : tensor<4xf32>
  }
  func.func @b(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a0 = cleave.recv on @world axes = [pp] from 0 : tensor<4xf32>
    cleave.send %a0 on @world axes = [pp] to 0 : tensor<4xf32>
    %a1 = cleave.recv on @world axes = [pp] from 0 : tensor<4xf32>
    return %a1 : tensor<4xf32>
  }
}

// -----

// 1F1B on 2 stages, 4 micro-batches (Megatron's non-interleaved schedule),
// with tensor-parallel all-reduces inside each stage and the data-parallel
// gradient all-reduce after the last micro-batch. Sends block until the
// peer receives, so the steady state orders each stage's paired calls by
// stage parity: even stages send first, odd stages receive first.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : ib, dp = 2 : ib, tp = 2 : nvlink)
  // CHECK-LABEL: func.func @s0
  func.func @s0(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %warmup = arith.constant 1 : index
    %steady = arith.constant 3 : index
    scf.for %i = %c0 to %warmup step %c1 {
      %t6 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      cleave.send %x on @world axes = [pp] to 1 : tensor<4x8xf32>
    }
    scf.for %i = %c0 to %steady step %c1 {
      %t10 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      cleave.send %x on @world axes = [pp] to 1 : tensor<4x8xf32>
      %g12 = cleave.recv on @world axes = [pp] from 1 : tensor<4x8xf32>
      %t13 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
    }
    scf.for %i = %c0 to %warmup step %c1 {
      %g16 = cleave.recv on @world axes = [pp] from 1 : tensor<4x8xf32>
      %t17 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
    }
    %dw = cleave.all_reduce %w on @world axes = [dp] : tensor<8x8xf32>
    return %dw : tensor<8x8xf32>
  }
  func.func @s1(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %warmup = arith.constant 0 : index
    %steady = arith.constant 4 : index
    scf.for %i = %c0 to %warmup step %c1 {
      %a6 = cleave.recv on @world axes = [pp] from 0 : tensor<4x8xf32>
      %t7 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
    }
    %a9 = cleave.recv on @world axes = [pp] from 0 : tensor<4x8xf32>
    scf.for %i = %c0 to %steady step %c1 {
      %t11 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      %t12 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      %next = arith.addi %i, %c1 : index
      %done = arith.cmpi eq, %next, %steady : index
      scf.if %done {
        cleave.send %x on @world axes = [pp] to 0 : tensor<4x8xf32>
      } else {
        %a18 = cleave.recv on @world axes = [pp] from 0 : tensor<4x8xf32>
        cleave.send %x on @world axes = [pp] to 0 : tensor<4x8xf32>
      }
    }
    scf.for %i = %c0 to %warmup step %c1 {
      %t23 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      cleave.send %x on @world axes = [pp] to 0 : tensor<4x8xf32>
    }
    %dw = cleave.all_reduce %w on @world axes = [dp] : tensor<8x8xf32>
    return %dw : tensor<8x8xf32>
  }
}

// -----

// 1F1B on 4 stages, 8 micro-batches.
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1, @s2, @s3]}} {
  cleave.mesh @world(pp = 4 : ib, dp = 2 : ib, tp = 2 : nvlink)
  // CHECK-LABEL: func.func @s0
  func.func @s0(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %warmup = arith.constant 3 : index
    %steady = arith.constant 5 : index
    scf.for %i = %c0 to %warmup step %c1 {
      %t6 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      cleave.send %x on @world axes = [pp] to 1 : tensor<4x8xf32>
    }
    scf.for %i = %c0 to %steady step %c1 {
      %t10 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      cleave.send %x on @world axes = [pp] to 1 : tensor<4x8xf32>
      %g12 = cleave.recv on @world axes = [pp] from 1 : tensor<4x8xf32>
      %t13 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
    }
    scf.for %i = %c0 to %warmup step %c1 {
      %g16 = cleave.recv on @world axes = [pp] from 1 : tensor<4x8xf32>
      %t17 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
    }
    %dw = cleave.all_reduce %w on @world axes = [dp] : tensor<8x8xf32>
    return %dw : tensor<8x8xf32>
  }
  func.func @s1(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %warmup = arith.constant 2 : index
    %steady = arith.constant 6 : index
    scf.for %i = %c0 to %warmup step %c1 {
      %a6 = cleave.recv on @world axes = [pp] from 0 : tensor<4x8xf32>
      %t7 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      cleave.send %x on @world axes = [pp] to 2 : tensor<4x8xf32>
    }
    %a10 = cleave.recv on @world axes = [pp] from 0 : tensor<4x8xf32>
    scf.for %i = %c0 to %steady step %c1 {
      %t12 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      %g13 = cleave.recv on @world axes = [pp] from 2 : tensor<4x8xf32>
      cleave.send %x on @world axes = [pp] to 2 : tensor<4x8xf32>
      %t15 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      %next = arith.addi %i, %c1 : index
      %done = arith.cmpi eq, %next, %steady : index
      scf.if %done {
        cleave.send %x on @world axes = [pp] to 0 : tensor<4x8xf32>
      } else {
        %a21 = cleave.recv on @world axes = [pp] from 0 : tensor<4x8xf32>
        cleave.send %x on @world axes = [pp] to 0 : tensor<4x8xf32>
      }
    }
    scf.for %i = %c0 to %warmup step %c1 {
      %g26 = cleave.recv on @world axes = [pp] from 2 : tensor<4x8xf32>
      %t27 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      cleave.send %x on @world axes = [pp] to 0 : tensor<4x8xf32>
    }
    %dw = cleave.all_reduce %w on @world axes = [dp] : tensor<8x8xf32>
    return %dw : tensor<8x8xf32>
  }
  func.func @s2(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %warmup = arith.constant 1 : index
    %steady = arith.constant 7 : index
    scf.for %i = %c0 to %warmup step %c1 {
      %a6 = cleave.recv on @world axes = [pp] from 1 : tensor<4x8xf32>
      %t7 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      cleave.send %x on @world axes = [pp] to 3 : tensor<4x8xf32>
    }
    %a10 = cleave.recv on @world axes = [pp] from 1 : tensor<4x8xf32>
    scf.for %i = %c0 to %steady step %c1 {
      %t12 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      cleave.send %x on @world axes = [pp] to 3 : tensor<4x8xf32>
      %g14 = cleave.recv on @world axes = [pp] from 3 : tensor<4x8xf32>
      %t15 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      %next = arith.addi %i, %c1 : index
      %done = arith.cmpi eq, %next, %steady : index
      scf.if %done {
        cleave.send %x on @world axes = [pp] to 1 : tensor<4x8xf32>
      } else {
        cleave.send %x on @world axes = [pp] to 1 : tensor<4x8xf32>
        %a22 = cleave.recv on @world axes = [pp] from 1 : tensor<4x8xf32>
      }
    }
    scf.for %i = %c0 to %warmup step %c1 {
      %g26 = cleave.recv on @world axes = [pp] from 3 : tensor<4x8xf32>
      %t27 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      cleave.send %x on @world axes = [pp] to 1 : tensor<4x8xf32>
    }
    %dw = cleave.all_reduce %w on @world axes = [dp] : tensor<8x8xf32>
    return %dw : tensor<8x8xf32>
  }
  func.func @s3(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %warmup = arith.constant 0 : index
    %steady = arith.constant 8 : index
    scf.for %i = %c0 to %warmup step %c1 {
      %a6 = cleave.recv on @world axes = [pp] from 2 : tensor<4x8xf32>
      %t7 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
    }
    %a9 = cleave.recv on @world axes = [pp] from 2 : tensor<4x8xf32>
    scf.for %i = %c0 to %steady step %c1 {
      %t11 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      %t12 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      %next = arith.addi %i, %c1 : index
      %done = arith.cmpi eq, %next, %steady : index
      scf.if %done {
        cleave.send %x on @world axes = [pp] to 2 : tensor<4x8xf32>
      } else {
        %a18 = cleave.recv on @world axes = [pp] from 2 : tensor<4x8xf32>
        cleave.send %x on @world axes = [pp] to 2 : tensor<4x8xf32>
      }
    }
    scf.for %i = %c0 to %warmup step %c1 {
      %t23 = cleave.all_reduce %x on @world axes = [tp] : tensor<4x8xf32>
      cleave.send %x on @world axes = [pp] to 2 : tensor<4x8xf32>
    }
    %dw = cleave.all_reduce %w on @world axes = [dp] : tensor<8x8xf32>
    return %dw : tensor<8x8xf32>
  }
}

// -----

// Per-device control flow: every device runs @step, and its pp index
// (cleave.axis_index) picks its side of the exchange; a 4-device ring along
// tp orders each device's send and recv by the parity of its tp index.
// CHECK-LABEL: func.func @step
cleave.mesh @world(pp = 2 : ib, dp = 2 : ib, tp = 4 : nvlink)
func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
  %pp = cleave.axis_index on @world axes = [pp] : tensor<i64>
  %p = tensor.extract %pp[] : tensor<i64>
  %c0 = arith.constant 0 : i64
  %first = arith.cmpi eq, %p, %c0 : i64
  %r = scf.if %first -> tensor<4xf32> {
    cleave.send %x on @world axes = [pp] to 1 : tensor<4xf32>
    %g = cleave.recv on @world axes = [pp] from 1 : tensor<4xf32>
    scf.yield %g : tensor<4xf32>
  } else {
    %a = cleave.recv on @world axes = [pp] from 0 : tensor<4xf32>
    cleave.send %a on @world axes = [pp] to 0 : tensor<4xf32>
    scf.yield %a : tensor<4xf32>
  }
  %tp = cleave.axis_index on @world axes = [tp] : tensor<i64>
  %t = tensor.extract %tp[] : tensor<i64>
  %ti = arith.index_cast %t : i64 to index
  scf.index_switch %ti
  case 0 {
    cleave.send %r on @world axes = [tp] to 1 : tensor<4xf32>
    %u = cleave.recv on @world axes = [tp] from 3 : tensor<4xf32>
    scf.yield
  }
  case 1 {
    %u = cleave.recv on @world axes = [tp] from 0 : tensor<4xf32>
    cleave.send %r on @world axes = [tp] to 2 : tensor<4xf32>
    scf.yield
  }
  case 2 {
    cleave.send %r on @world axes = [tp] to 3 : tensor<4xf32>
    %u = cleave.recv on @world axes = [tp] from 1 : tensor<4xf32>
    scf.yield
  }
  default {
    %u = cleave.recv on @world axes = [tp] from 2 : tensor<4xf32>
    cleave.send %r on @world axes = [tp] to 0 : tensor<4xf32>
    scf.yield
  }
  // A data-only use of the index (an offset) does not split the program.
  %dp = cleave.axis_index on @world axes = [dp] : tensor<i64>
  %s = cleave.all_reduce %r on @world axes = [dp] : tensor<4xf32>
  return %s : tensor<4xf32>
}
