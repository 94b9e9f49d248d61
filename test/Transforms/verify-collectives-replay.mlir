// RUN: cleave-opt %s -split-input-file --cleave-verify-collectives -verify-diagnostics -o /dev/null

// What cleave-verify-collectives cannot prove is an error too: control flow
// around communication that the replay cannot decide at compile time, and
// malformed pipeline attributes.

// A collective under a condition known only at run time.
cleave.mesh @world(dp = 2 : ib)
func.func @step(%x: tensor<4xf32>, %flag: i1) -> tensor<4xf32> {
  // expected-error @below {{cleave-verify-collectives cannot decide this branch: its condition is not a compile-time value, and its alternatives communicate differently}}
  %y = scf.if %flag -> tensor<4xf32> {
    // expected-note @below {{one alternative makes this call}}
    %r = cleave.all_reduce %x on @world axes = [dp] : tensor<4xf32>
    scf.yield %r : tensor<4xf32>
  } else {
    scf.yield %x : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// A loop whose trip count is known only at run time, around a collective.
cleave.mesh @world(dp = 2 : ib)
func.func @step(%x: tensor<4xf32>, %n: index) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @below {{cleave-verify-collectives cannot replay this op: the loop bounds are not compile-time values, and the body communicates}}
  scf.for %i = %c0 to %n step %c1 {
    // expected-note @below {{it contains this communication}}
    %r = cleave.all_reduce %x on @world axes = [dp] : tensor<4xf32>
  }
  return %x : tensor<4xf32>
}

// -----

// Recursion around communication.
cleave.mesh @world(dp = 2 : ib)
func.func private @again(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-note @below {{it contains this communication}}
  %r = cleave.all_reduce %x on @world axes = [dp] : tensor<4xf32>
  // expected-error @below {{cleave-verify-collectives cannot replay this op: the call to @again is recursive}}
  %y = func.call @again(%r) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = func.call @again(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Control flow the replay does not model, around communication.
cleave.mesh @world(dp = 2 : ib)
func.func @step(%x: tensor<4xf32>, %n: i32) -> tensor<4xf32> {
  %c0 = arith.constant 0 : i32
  // expected-error @below {{cleave-verify-collectives cannot replay this op: communication inside 'scf.while' (only scf.for, scf.if, scf.index_switch, scf.execute_region with one block, and calls are replayed)}}
  %r = scf.while (%i = %c0) : (i32) -> i32 {
    %more = arith.cmpi slt, %i, %n : i32
    scf.condition(%more) %i : i32
  } do {
  ^bb0(%i: i32):
    // expected-note @below {{it contains this communication}}
    %s = cleave.all_reduce %x on @world axes = [dp] : tensor<4xf32>
    %c1 = arith.constant 1 : i32
    %next = arith.addi %i, %c1 : i32
    scf.yield %next : i32
  }
  return %x : tensor<4xf32>
}

// -----

// Two meshes in one program.
cleave.mesh @a(dp = 2 : ib)
cleave.mesh @b(dp = 2 : ib)
func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-note @below {{this op uses @a}}
  %y = cleave.all_reduce %x on @a axes = [dp] : tensor<4xf32>
  // expected-error @below {{cleave-verify-collectives needs one mesh per program, but this op uses @b and the program @a}}
  %z = cleave.all_reduce %y on @b axes = [dp] : tensor<4xf32>
  return %z : tensor<4xf32>
}

// -----

// The pipeline attribute must name one stage function per coordinate of
// its axis, on an axis of the mesh, and functions that exist.
// expected-error @below {{cleave.pipeline lists 2 stage functions, but axis 'pp' of mesh @world has size 4}}
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 4 : ib)
  func.func @s0(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = cleave.all_reduce %x on @world axes = [pp] : tensor<4xf32>
    return %y : tensor<4xf32>
  }
  func.func @s1(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = cleave.all_reduce %x on @world axes = [pp] : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// expected-error @below {{cleave.pipeline: 'stage' is not an axis of mesh @world}}
module attributes {cleave.pipeline = {axis = "stage", stages = [@s0]}} {
  cleave.mesh @world(pp = 1 : ib, dp = 2 : ib)
  func.func @s0(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = cleave.all_reduce %x on @world axes = [dp] : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// expected-error @below {{cleave.pipeline: stage #1 (@missing) is not a function with a body in this module}}
module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @missing]}} {
  cleave.mesh @world(pp = 2 : ib)
  func.func @s0(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
