// RUN: cleave-opt %s --cleave-apply-plan="cp=2" | FileCheck %s --check-prefix=AUTO
// RUN: cleave-opt %s --cleave-apply-plan="cp=2 cp-layout=contiguous" | FileCheck %s --check-prefix=CONT
// RUN: not cleave-opt %s --cleave-apply-plan="cp=8" 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: not cleave-opt %s --cleave-apply-plan="cp=2 cp-layout=zigzag" 2>&1 | FileCheck %s --check-prefix=BAD

// A causal attention makes the load-balanced layout the default: the mesh
// marks cp balanced, every device reads the whole input and a constraint
// splits it over cp (the partitioner cuts the balanced block out of it).
// AUTO: cleave.mesh @mesh(cp = 2 : ib) {balanced_axes = ["cp"]}
// AUTO: func.func @step(%[[X:[^:]+]]: tensor<2x8x2x16xf32> {cleave.input = "x", cleave.sharding = #cleave.sharding<@mesh, [_, _, _, _]>})
// AUTO-NEXT: %[[S:.*]] = cleave.sharding_constraint %[[X]] <@mesh, [_, cp, _, _]>
// AUTO-NEXT: cleave.rotary %[[S]]

// cp-layout=contiguous keeps the runtime's contiguous blocks.
// CONT: cleave.mesh @mesh(cp = 2 : ib){{$}}
// CONT: {cleave.input = "x", cleave.sharding = #cleave.sharding<@mesh, [_, cp, _, _]>}
// CONT-NOT: sharding_constraint

// ERR: error: context parallelism (cp=8) with cp-layout=balanced needs the sequence (dimension 1) of input 'x' (8) to be divisible by 2*cp = 16 (or cp-layout=contiguous: divisible by cp)
// BAD: error: cleave-apply-plan: unknown cp-layout 'zigzag' (expected balanced, contiguous or auto)
func.func @step(%x: tensor<2x8x2x16xf32> {cleave.input = "x"}) -> tensor<f32> {
  %r = cleave.rotary %x : tensor<2x8x2x16xf32>
  %o = cleave.attention %r, %r, %x {causal} : (tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x2x16xf32>
  %l = cleave.reduce_mean %o dims = [0, 1, 2, 3] : tensor<2x8x2x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}
