// RUN: cleave-opt %s --cleave-lower-to-cpu -verify-diagnostics -o /dev/null

// The CPU lowering pipeline starts with cleave-verify-collectives: a program
// that would hang does not compile.

module attributes {cleave.pipeline = {axis = "pp", stages = [@s0, @s1]}} {
  cleave.mesh @world(pp = 2 : host)
  func.func @s0(%a: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @below {{deadlock: these calls wait for each other in a cycle: rank 0 (pp=0) waits in recv of tensor<4xf32> from rank 1 (pp=1) along [pp]}}
    %g = cleave.recv on @world axes = [pp] from 1 : tensor<4xf32>
    cleave.send %a on @world axes = [pp] to 1 : tensor<4xf32>
    return %g : tensor<4xf32>
  }
  func.func @s1(%g: tensor<4xf32>) -> tensor<4xf32> {
    // expected-note @below {{rank 1 (pp=1) waits here in recv of tensor<4xf32> from rank 0 (pp=0) along [pp]}}
    %a = cleave.recv on @world axes = [pp] from 0 : tensor<4xf32>
    cleave.send %g on @world axes = [pp] to 0 : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}
