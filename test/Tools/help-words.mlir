// The planning tools and passes use the same words, and state the same
// defaults, for the options they share (include/cleave/CostModel/Defaults.h
// defines them once; Passes.td repeats the words for the pass options).
// RUN: cleave-plan --help | FileCheck %s --check-prefixes=PLAN,SHARED
// RUN: cleave-opt --help | FileCheck %s --check-prefixes=PLAN,SHARED,EST-PASS
// RUN: cleave-estimate --help | FileCheck %s --check-prefixes=EST,SHARED
//
// PLAN-DAG: --cluster=<string>{{ +}}- Cluster preset (dgx-a100-40gb, dgx-a100-80gb, dgx-h100, dgx-h200), local-cpu, or a JSON cluster file (default: dgx-a100-80gb)
// PLAN-DAG: --gpus=<int>{{ +}}- Devices (default: one node of a preset, 4 local CPU processes, the file's size)
// PLAN-DAG: --global-batch=<{{long|int64_t}}>{{ +}}- Sequences per step (default: {{.*}}; the report prints it)
// PLAN-DAG: --tp=<int>{{ +}}- Fix the tensor-parallel size (default: search)
// PLAN-DAG: --zero=<int>{{ +}}- Fix the ZeRO stage 0-3 (default: search)
// PLAN-DAG: --max-pp=<int>{{ +}}- Largest pipeline size (default: the layer count)
// PLAN-DAG: --max-micro-batches=<{{long|int64_t}}>{{ +}}- Largest micro-batch count (default: any)
// PLAN-DAG: --json=<string>{{ +}}- Write the report as JSON to this file
// SHARED-DAG: --headroom=<number>{{ +}}- Fraction of device memory kept free (default: 0)
// EST-DAG: --cluster=<string>{{ +}}- Cluster preset (dgx-a100-40gb, dgx-a100-80gb, dgx-h100, dgx-h200) (default: dgx-a100-80gb)
// EST-PASS-DAG: --cluster=<string>{{ +}}- Cluster preset (dgx-a100-40gb, dgx-a100-80gb, dgx-h100, dgx-h200) (default: dgx-a100-80gb)
// EST-DAG: --cluster-file=<string>{{ +}}- JSON cluster file (docs/cost-model.md); overrides the preset
// EST-PASS-DAG: --cluster-file=<string>{{ +}}- JSON cluster file (docs/cost-model.md); overrides the preset
// EST-DAG: --global-batch=<{{long|int64_t}}>{{ +}}- Sequences per step (default: {{.*}}; the report prints it)

// Every bench's --help lists its own options and none of LLVM's or MLIR's.
// RUN: cleave-bench-ops --help | FileCheck %s --check-prefix=OPS --implicit-check-not=--mlir --implicit-check-not=--debug --implicit-check-not=--print
// RUN: cleave-bench-train-step --help | FileCheck %s --check-prefix=STEP --implicit-check-not=--mlir --implicit-check-not=--debug --implicit-check-not=--print
// RUN: cleave-bench-verify --help | FileCheck %s --check-prefix=VERIFY --implicit-check-not=--mlir --implicit-check-not=--debug --implicit-check-not=--print
// RUN: cleave-bench-collectives --help | FileCheck %s --check-prefix=COLL
// RUN: cleave-estimate --help | FileCheck %s --check-prefix=EST-ONLY --implicit-check-not=--mlir --implicit-check-not=--debug --implicit-check-not=--print
//
// OPS: cleave-bench-ops options:
// OPS: --filter=<string>
// OPS: --runs=<int>
// STEP: cleave-bench-train-step options:
// STEP: --arch=<string>
// STEP: --warmup=<long>
// VERIFY: OVERVIEW: Times cleave-verify-collectives
// COLL: usage: {{.*}}cleave-bench-collectives [ranks...]
// EST-ONLY: cluster:
// EST-ONLY: model (a preset, optionally with fields overridden, or every field):
// EST-ONLY: --model=<string>
// EST-ONLY: output:
// EST-ONLY: --trace=<path>
// EST-ONLY: plan:
