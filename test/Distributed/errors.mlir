// Bad distributed input: a clear error before any step runs, nothing saved.
// RUN: rm -rf %t && mkdir -p %t

// The mesh of a named plan or of the program must have one device per rank.
// RUN: not cleave-run --model tiny-mlp -n 3 --plan dp=2 --steps 1 --save-params %t/p.st 2>&1 | FileCheck %s --check-prefix=PLAN-MESH
// RUN: not test -e %t/p.st
// PLAN-MESH: cleave-run: error: the plan's mesh (dp=2) has 2 devices but there are 3 ranks (-n 3)
// PLAN-MESH-NOT: step
// RUN: not cleave-run %S/Inputs/two-devices.mlir -n 4 --steps 1 2>&1 | FileCheck %s --check-prefix=PROGRAM-MESH
// PROGRAM-MESH: cleave-run: error: the program's mesh (dp=2) has 2 devices but there are 4 ranks (-n 4)
// RUN: not cleave-run %S/Inputs/two-devices.mlir --plan dp=2 -n 2 --steps 1 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: --plan: the program already has a mesh and sharding annotations

// Splits that the sizes do not allow.
// RUN: not cleave-run --model tiny-gpt -n 3 --plan tp=3 --steps 1 2>&1 | FileCheck %s --check-prefix=TP3
// TP3: error: loc("tiny-gpt.h.0.attn.q.weight"): tensor parallelism over 3 devices splits no matmul weight: parameter 'h.0.attn.q.weight' is 64 x 64, and tp must divide the dimension it splits
// TP3: cleave-run: error: partitioning the training step failed
// RUN: not cleave-run --model tiny-gpt -n 3 --plan dp=3 --steps 1 2>&1 | FileCheck %s --check-prefix=DP3
// DP3: data parallelism over 3 devices needs the batch of input 'tokens' (4) to be divisible by 3
// RUN: not cleave-run --model tiny-gpt -n 3 --plan cp=3 --steps 1 --save-params %t/cp.st 2>&1 | FileCheck %s --check-prefix=CP3
// RUN: not test -e %t/cp.st
// CP3: error: loc("tiny-gpt.tokens"): context parallelism (cp=3) with cp-layout=balanced needs the sequence (dimension 1) of input 'tokens' (32) to be divisible by 2*cp = 6 (or cp-layout=contiguous: divisible by cp)
// CP3: cleave-run: error: partitioning the training step failed
// CP3-NOT: loss
// RUN: not cleave-run --model tiny-gpt -n 2 --plan tp=2,zero=4 --steps 1 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: zero in 0..3
// RUN: not cleave-run --model tiny-gpt -n 2 --plan tp=2,fsdp --steps 1 2>&1 | FileCheck %s --check-prefix=SPELL
// SPELL: cleave-run: error: --plan: cannot read 'fsdp' (expected

// Hand-written annotations are checked where they are written.
// RUN: sed 's/dp = 2/dp = 3/' %S/Inputs/two-devices.mlir > %t/odd.mlir
// RUN: not cleave-run %t/odd.mlir -n 3 --steps 1 2>&1 | FileCheck %s --check-prefix=ODD
// ODD: odd.mlir:3:1: error: 'func.func' op dimension 0 of argument #1 has size 8, which is not divisible by 3 (the number of devices on axes dp)
// RUN: sed 's/\[dp, _\]/[dq, _]/' %S/Inputs/two-devices.mlir > %t/axis.mlir
// RUN: not cleave-run %t/axis.mlir -n 2 --steps 1 2>&1 | FileCheck %s --check-prefix=AXIS
// AXIS: axis.mlir:3:1: error: 'func.func' op argument #1 is sharded over unknown axis 'dq' of mesh @m (axes: dp)
