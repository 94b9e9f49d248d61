// cleave-run under an external launcher: each process is one rank, found
// from the variables torchrun (RANK, WORLD_SIZE, LOCAL_RANK) or Open MPI
// (OMPI_COMM_WORLD_*) set; rendezvous through a file store. Two ranks
// started that way train exactly like `-n 2`.
// RUN: rm -rf %t && mkdir -p %t/store %t/mpi
// RUN: cleave-run --model tiny-mlp --inputs %S/../Tools/Inputs/mlp-batches.safetensors --steps 4 -n 2 --plan tp=2 --save-losses %t/forked.st > /dev/null
// RUN: sh %S/Inputs/launch-two.sh torchrun %t/store cleave-run --model tiny-mlp --inputs %S/../Tools/Inputs/mlp-batches.safetensors --steps 4 --plan tp=2 --log-every 1 --save-losses %t/torchrun.st | FileCheck %s --check-prefix=RANK0
// RANK0: for 2 ranks on mesh (tp=2)
// RANK0: step 4/4 loss
// RUN: %python %cleave_src/scripts/compare-losses.py %t/forked.st %t/torchrun.st | FileCheck %s --check-prefix=SAME
// SAME: largest relative difference over 4 steps and 2 rank(s): 0.00e+00

// RUN: sh %S/Inputs/launch-two.sh mpi %t/mpi cleave-run --model tiny-mlp --inputs %S/../Tools/Inputs/mlp-batches.safetensors --steps 4 --plan dp=2 --log-every 1 | FileCheck %s --check-prefix=MPI
// MPI: for 2 ranks on mesh (dp=2)
// MPI: step 4/4 loss

// A launcher's world that does not match the plan fails before any step.
// RUN: env RANK=0 WORLD_SIZE=3 not cleave-run --model tiny-mlp --steps 1 --plan dp=2 2>&1 | FileCheck %s --check-prefix=WORLD
// WORLD: cleave-run: error: the plan's mesh (dp=2) has 2 devices but there are 3 ranks

// A rank that never arrives is named, within the timeout, instead of a hang.
// RUN: env CLEAVE_RENDEZVOUS=file:%t/alone CLEAVE_TIMEOUT_MS=2000 RANK=0 WORLD_SIZE=2 \
// RUN:   not cleave-run --model tiny-mlp --inputs %S/../Tools/Inputs/mlp-batches.safetensors --steps 4 --plan dp=2 2>&1 | FileCheck %s --check-prefix=ALONE
// ALONE: cleave-run: error: rank 0: init: timed out after 2000 ms waiting for rank(s) 1 to join through the rendezvous store file:
