// The zoo's GPT and Llama training steps (AdamW; f32 and bf16; dropout;
// unpartitioned; partitioned ones are in zoo-ptxas-partitioned*.mlir)
// through the whole CUDA pipeline: ptxas accepts every kernel for sm_90.
// Registers and spills are recorded (docs/cuda.md has the table for larger
// models, from bench/cuda/kernels.py). Llama's rotary kernels keep libdevice's
// sin/cos slow path (Payne-Hanek reduction for |x| > 105615, a 28-byte local
// array): at most 8 bytes of spills there, none elsewhere.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-models --model tiny-gpt --dropout 0.1 | cleave-opt --cleave-autodiff | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/gpt.json" --mlir-print-ir-after=cleave-cuda-map-to-gpu -o /dev/null 2> %t/gpt-kernels.mlir
// RUN: FileCheck %s --check-prefix=LOOP < %t/gpt-kernels.mlir
// RUN: %python %S/Inputs/check_ptxas_report.py %t/gpt.json --label gpt --max-registers 128 | FileCheck %s --check-prefix=GPT
// RUN: cleave-models --model tiny-gpt --dtype bf16 | cleave-opt --cleave-autodiff | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/gpt-bf16.json" --mlir-print-ir-after=cleave-cuda-map-to-gpu -o /dev/null 2> %t/gpt-bf16-kernels.mlir
// RUN: FileCheck %s --check-prefixes=LOOP,LOOP16 < %t/gpt-bf16-kernels.mlir
// RUN: FileCheck %s --check-prefix=PTXLOOP < %t/gpt.json
// RUN: FileCheck %s --check-prefix=PTXLOOP < %t/gpt-bf16.json
// RUN: %python %S/Inputs/check_ptxas_report.py %t/gpt-bf16.json --label gpt-bf16 --max-registers 128 | FileCheck %s --check-prefix=GPT16
// RUN: cleave-models --model tiny-llama | cleave-opt --cleave-autodiff | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/llama.json" -o /dev/null
// RUN: %python %S/Inputs/check_ptxas_report.py %t/llama.json --label llama --max-registers 128 --max-spill-bytes 8 | FileCheck %s --check-prefix=LLAMA
// RUN: cleave-models --model tiny-llama --dtype bf16 | cleave-opt --cleave-autodiff | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/llama-bf16.json" -o /dev/null
// RUN: %python %S/Inputs/check_ptxas_report.py %t/llama-bf16.json --label llama-bf16 --max-registers 128 --max-spill-bytes 8 | FileCheck %s --check-prefix=LLAMA16

// GPT: gpt: {{[0-9]+}} kernels, at most {{[0-9]+}} registers ({{.*}}), 0 bytes spilled
// GPT16: gpt-bf16: {{[0-9]+}} kernels, at most {{[0-9]+}} registers ({{.*}}), 0 bytes spilled
// LLAMA: llama: {{[0-9]+}} kernels, at most {{[0-9]+}} registers
// LLAMA16: llama-bf16: {{[0-9]+}} kernels, at most {{[0-9]+}} registers

// The embedding's weight gradient (4 x 32 = 128 tokens, 64 columns) is one
// kernel, a thread per column looping over the tokens in order, instead of
// a host loop launching two kernels per token (256 launches a step): no
// launch is left inside a host loop.
// LOOP-LABEL: func.func @train_step(
// LOOP-NOT: scf.for
// LOOP: gpu.launch_func @cleave_kernels::@train_step_k[[K:[0-9]+]]_loop blocks in (%c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c256{{(_[0-9]+)?}}, {{.*}} args(%arg0 : memref<4x32xi32>,
// LOOP-NOT: scf.for
// LOOP: gpu.module @cleave_kernels
// LOOP: gpu.func @train_step_k[[K]]_loop(
// LOOP: arith.cmpi ult, %{{.*}}, %c64
// LOOP: scf.for %{{.*}} = %c0 to %c128 step %c1 {
// LOOP: memref.load %{{.*}} : memref<128xi32>
// LOOP16: arith.extf %{{.*}} : bf16 to f32
// LOOP: arith.addf
// LOOP: gpu.return
// ptxas accepted the loop kernel, without spills.
// PTXLOOP: "name": "train_step_k{{[0-9]+}}_loop",
// PTXLOOP-NEXT: "registers": {{[0-9]+}},
// PTXLOOP-NEXT: "smem": 0,
// PTXLOOP-NEXT: "spill_loads": 0,
// PTXLOOP-NEXT: "spill_stores": 0,
