// cleave-run --emit-bundle writes a bundle (docs/cuda.md, "Running on a GPU
// cluster"): the compiled step, a runner that links no LLVM, MLIR or CBC
// library, the runtime with its libraries, the data and DIR/run. A CPU
// bundle whose host code is generated for this machine's CPU (--bundle-cpu
// host) trains exactly like cleave-run: the same losses and parameters, bit
// for bit. (The default, portable x86-64-v3 code rounds some reductions
// differently from this CPU's: attention's key bias, whose gradient is zero
// up to rounding, then differs.)
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-run --model tiny-gpt --layers 1 --seed 5 --bundle-cpu host --emit-bundle %t/cpu | FileCheck %s --check-prefix=EMIT
// EMIT: writing bundle {{.*}}cpu
// EMIT-NEXT: the step for the CPU ({{.+}}): step-cpu.so
// EMIT-NEXT: the runner and {{[0-9]+}} libraries
// EMIT-NEXT: wrote bundle {{.*}}cpu: {{[0-9.]+}} MiB; run it with {{.*}}/run
// RUN: ldd %t/cpu/bin/cleave-bundle-run | FileCheck %s --check-prefix=LDD --implicit-check-not=libLLVM --implicit-check-not=libMLIR --implicit-check-not=libCbc --implicit-check-not=libClp
// LDD: libCleaveRuntime.so
// RUN: %t/cpu/run --steps 4 --save-losses %t/bundle.losses --save-params %t/bundle.params | FileCheck %s --check-prefix=TRAIN
// RUN: cleave-run --model tiny-gpt --layers 1 --seed 5 --steps 4 --save-losses %t/direct.losses --save-params %t/direct.params
// RUN: %python %S/Inputs/same_run.py %t/bundle %t/direct | FileCheck %s --check-prefix=SAME
// RUN: %python -c "import json; b = json.load(open('%t/cpu/bundle.json')); print(b['backend'], b['world'], b['data']['kind'], b['model']['name'], b['defaults']['seed'])" | FileCheck %s --check-prefix=MANIFEST
// RUN: test -f %t/cpu/lib/libCleaveRuntime.so && test -f %t/cpu/data/corpus.txt
// TRAIN-LABEL: bundle {{.*}}cpu: cpu build, 1 rank
// TRAIN: step     4/4  loss
// SAME: same run: 4 losses
// MANIFEST: cpu 1 text tiny-gpt 5
//
// Two ranks, data parallel: the bundle runs with -n 2 like cleave-run, and
// says so when the ranks do not match the plan it was compiled for.
// RUN: cleave-run --model tiny-gpt --layers 1 -n 2 --plan dp=2 --bundle-cpu host --emit-bundle %t/dp2 > /dev/null
// RUN: %t/dp2/run -n 2 --steps 3 --save-losses %t/b2.losses --save-params %t/b2.params > /dev/null
// RUN: cleave-run --model tiny-gpt --layers 1 -n 2 --plan dp=2 --steps 3 --save-losses %t/d2.losses --save-params %t/d2.params > /dev/null
// RUN: %python %S/Inputs/same_run.py %t/b2 %t/d2 | FileCheck %s --check-prefix=SAME2
// RUN: not %t/dp2/run --steps 1 2>&1 | FileCheck %s --check-prefix=WORLD
// SAME2: same run: 3 losses
// WORLD: cleave-bundle-run: error: the bundle was compiled for 2 ranks (plan 'dp=2', mesh dp=2) but this run has 1 (run -n 2, or under a launcher with that world size)
//
// Bad input: a folder that is not a bundle is never written into; run
// options are checked as cleave-run checks them.
// RUN: mkdir -p %t/notempty && touch %t/notempty/keep
// RUN: not cleave-run --model tiny-gpt --layers 1 --emit-bundle %t/notempty 2>&1 | FileCheck %s --check-prefix=NOTEMPTY
// RUN: test -f %t/notempty/keep
// RUN: not %t/cpu/run --steps -2 2>&1 | FileCheck %s --check-prefix=STEPS
// RUN: not %t/cpu/run --backend cuda 2>&1 | FileCheck %s --check-prefix=NOCUDA
// RUN: not %t/cpu/bin/cleave-bundle-run --bundle %t/notempty 2>&1 | FileCheck %s --check-prefix=NOTBUNDLE
// NOTEMPTY: cleave-run: error: --emit-bundle: {{.*}}notempty is not empty and not a bundle; refusing to write into it (choose a new directory)
// STEPS: cleave-bundle-run: error: --steps -2: expected a number of steps >= 0
// NOCUDA: cleave-bundle-run: error: this bundle has no cuda build (it was emitted for cpu)
// NOTBUNDLE: cleave-bundle-run: error: {{.*}}notempty/bundle.json: cannot read it
