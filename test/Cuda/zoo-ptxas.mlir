// The zoo's GPT and Llama training steps (AdamW; f32 and bf16; dropout;
// unpartitioned; partitioned ones are in zoo-ptxas-partitioned*.mlir)
// through the whole CUDA pipeline: ptxas accepts every kernel for sm_90.
// Registers and spills are recorded (docs/cuda.md has the table for larger
// models, from bench/cuda/kernels.py). Llama's rotary kernels keep libdevice's
// sin/cos slow path (Payne-Hanek reduction for |x| > 105615, a 28-byte local
// array): at most 8 bytes of spills there, none elsewhere.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-models --model tiny-gpt --dropout 0.1 | cleave-opt --cleave-autodiff | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/gpt.json" -o /dev/null
// RUN: %python %S/Inputs/check_ptxas_report.py %t/gpt.json --label gpt --max-registers 128 | FileCheck %s --check-prefix=GPT
// RUN: cleave-models --model tiny-gpt --dtype bf16 | cleave-opt --cleave-autodiff | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/gpt-bf16.json" -o /dev/null
// RUN: %python %S/Inputs/check_ptxas_report.py %t/gpt-bf16.json --label gpt-bf16 --max-registers 128 | FileCheck %s --check-prefix=GPT16
// RUN: cleave-models --model tiny-llama | cleave-opt --cleave-autodiff | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/llama.json" -o /dev/null
// RUN: %python %S/Inputs/check_ptxas_report.py %t/llama.json --label llama --max-registers 128 --max-spill-bytes 8 | FileCheck %s --check-prefix=LLAMA
// RUN: cleave-models --model tiny-llama --dtype bf16 | cleave-opt --cleave-autodiff | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/llama-bf16.json" -o /dev/null
// RUN: %python %S/Inputs/check_ptxas_report.py %t/llama-bf16.json --label llama-bf16 --max-registers 128 --max-spill-bytes 8 | FileCheck %s --check-prefix=LLAMA16

// GPT: gpt: {{[0-9]+}} kernels, at most {{[0-9]+}} registers ({{.*}}), 0 bytes spilled
// GPT16: gpt-bf16: {{[0-9]+}} kernels, at most {{[0-9]+}} registers ({{.*}}), 0 bytes spilled
// LLAMA: llama: {{[0-9]+}} kernels, at most {{[0-9]+}} registers
// LLAMA16: llama-bf16: {{[0-9]+}} kernels, at most {{[0-9]+}} registers
