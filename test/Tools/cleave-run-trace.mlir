// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-run -n 2 --plan dp=2 --model tiny-gpt --steps 3 --trace %t/run.json | FileCheck %s --check-prefix=LOG
// RUN: %python -m json.tool %t/run.json | FileCheck %s
// RUN: not ls %t/run.json.rank0 %t/run.json.rank1

// cleave-run --trace: each rank's steps and communication calls (the
// runtime's flight recorder) as one Chrome trace in the simulator's format,
// one process per rank; the per-rank parts are merged by rank 0 and removed.

// LOG: step 3/3
// CHECK-DAG: "name": "rank 0 (measured)"
// CHECK-DAG: "name": "rank 1 (measured)"
// CHECK-DAG: "name": "communication"
// CHECK-DAG: "name": "all_reduce g{{[0-9]+}}"
// CHECK-DAG: "name": "compute"
// CHECK-DAG: "name": "step 2"
// CHECK-DAG: "generator": "cleave-run (measured)"
