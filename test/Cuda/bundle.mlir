// A cuda bundle carries the CUDA build of the step and the CPU build of the
// same program (the selftest's reference, and --backend cpu), and no CUDA
// library. Where there is no GPU, or a CUDA library is missing, it says so
// in one line before any step; the CPU build runs anywhere.
// REQUIRES: ptxas, cuda-backend
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-run --model tiny-gpt --layers 1 --backend cuda --emit-bundle %t/b | FileCheck %s --check-prefix=EMIT
// EMIT: the step for CUDA (sm_90): step-cuda.so
// EMIT-NEXT: the same step for the CPU (the selftest's reference, and --backend cpu): step-cpu.so
// RUN: ls %t/b/lib | FileCheck %s --check-prefix=LIBS --implicit-check-not=libnccl --implicit-check-not=libcublas --implicit-check-not=libcuda.so
// LIBS: libCleaveRuntime.so
// LIBS: libCleaveRuntimeCuda.so
// RUN: %python -c "import json; b = json.load(open('%t/b/bundle.json')); print(b['backend'], b['chip'], sorted(b['builds']), b['cuda_libraries'], sorted(b['predictions']), b['attention_tile'])" | FileCheck %s --check-prefix=MANIFEST
// MANIFEST: cuda sm_90 ['cpu', 'cuda'] ['libcublasLt.so.{{[0-9]+}}', 'libnccl.so.2'] ['dgx-a100-80gb', 'dgx-h100', 'dgx-h200'] 128
// RUN: %t/b/run --backend cpu --steps 2 | FileCheck %s --check-prefix=CPU
// CPU: bundle {{.*}}: cpu build, 1 rank
// CPU: step     2/2  loss
// RUN: env CLEAVE_CUDA_HOME=%t/none CLEAVE_PYTHON=false LD_LIBRARY_PATH= CLEAVE_CUDA_LIBS= not %t/b/run 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: cleave bundle: error: libcublasLt.so.{{[0-9]+}} not found; looked in CLEAVE_CUDA_LIBS (unset), LD_LIBRARY_PATH (unset), {{.*}}none/lib64, {{.*}}none/lib and the nvidia wheels of false (none); set CLEAVE_CUDA_LIBS to its folder, or run with --backend cpu
// Without a GPU (this machine), one line before any step:
// RUN: %t/b/run --steps 1 > %t/nogpu.txt 2>&1 || true
// RUN: FileCheck %s --check-prefix=NOGPU < %t/nogpu.txt
// NOGPU: cleave-bundle-run: error: {{no usable CUDA driver|no CUDA device on this machine}}
// NOGPU-NOT: step
// Checkpoints are no different (nothing refuses them on cuda): the GPU is
// what is missing.
// RUN: %t/b/run --steps 1 --checkpoint %t/ck-cuda --checkpoint-every 1 > %t/nogpu-ckpt.txt 2>&1 || true
// RUN: FileCheck %s --check-prefix=NOGPU < %t/nogpu-ckpt.txt
// The CPU build's checkpoints through the bundle's runner, written and
// resumed (the cuda build's round trip is a --selftest check on a GPU):
// RUN: %t/b/run --backend cpu --steps 2 --checkpoint %t/ck --checkpoint-every 2 > /dev/null
// RUN: %t/b/run --backend cpu --steps 3 --checkpoint %t/ck --resume | FileCheck %s --check-prefix=RESUME
// RESUME: resuming from {{.*}}step-00000002 (after step 2)
// RESUME: step     3/3  loss
