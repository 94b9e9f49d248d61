// The zoo's GPT and Llama steps partitioned data parallel 2 x tensor
// parallel 2 (Megatron column/row splits, without sequence parallelism)
// through the whole CUDA pipeline: ptxas accepts every kernel for sm_90 and
// the host code calls the collectives.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-models --model tiny-gpt | cleave-opt --cleave-autodiff --cleave-apply-plan="dp=2 tp=2" --cleave-propagate-sharding --cleave-partition | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/gpt.json" -o %t/gpt.mlir
// RUN: %python %S/Inputs/check_ptxas_report.py %t/gpt.json --label gpt-dp2-tp2 --max-registers 128 | FileCheck %s --check-prefix=GPT
// RUN: FileCheck %s --check-prefix=COMM < %t/gpt.mlir
// RUN: cleave-models --model tiny-llama | cleave-opt --cleave-autodiff --cleave-apply-plan="dp=2 tp=2" --cleave-propagate-sharding --cleave-partition | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/llama.json" -o /dev/null
// RUN: %python %S/Inputs/check_ptxas_report.py %t/llama.json --label llama-dp2-tp2 --max-registers 128 --max-spill-bytes 8 | FileCheck %s --check-prefix=LLAMA

// GPT: gpt-dp2-tp2: {{[0-9]+}} kernels, at most {{[0-9]+}} registers ({{.*}}), 0 bytes spilled
// LLAMA: llama-dp2-tp2: {{[0-9]+}} kernels, at most {{[0-9]+}} registers
// COMM-DAG: llvm.call @cleave_rt_all_reduce(
// COMM-DAG: llvm.call @cleave_rt_cuda_launch(
