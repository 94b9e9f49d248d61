// Sequence parallelism: the tied embedding's weight-gradient scatter reads
// its indices from the sequence slice of the tokens that a copy kernel
// filled; kernels load them themselves (cleave-cuda-map-to-gpu: buffers
// written only before they are read), so no host code touches device
// memory.
// The partitioned zoo steps (dp 2 x tp 2 with sequence parallelism) through
// the whole CUDA pipeline: ptxas accepts every kernel, the host code calls
// the collectives, and the kernels have the expected shapes.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-models --model tiny-gpt | cleave-opt --cleave-autodiff --cleave-apply-plan="dp=2 tp=2 sp=true" --cleave-propagate-sharding --cleave-partition | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/gpt-part.json" --mlir-print-ir-after=cleave-cuda-map-to-gpu -o %t/gpt-part.mlir 2> %t/gpt-part-kernels.mlir
// RUN: %python %S/Inputs/check_ptxas_report.py %t/gpt-part.json --label gpt-dp2-tp2-sp --max-registers 128 | FileCheck %s --check-prefix=GPTPART
// RUN: FileCheck %s --check-prefix=COMM < %t/gpt-part.mlir
// RUN: FileCheck %s --check-prefix=KERNELS < %t/gpt-part-kernels.mlir
// RUN: FileCheck %s --check-prefix=SCATTER < %t/gpt-part-kernels.mlir
// RUN: FileCheck %s --check-prefix=PTXLOOP < %t/gpt-part.json
// RUN: cleave-models --model tiny-llama | cleave-opt --cleave-autodiff --cleave-apply-plan="dp=2 tp=2 sp=true" --cleave-propagate-sharding --cleave-partition | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/llama-part.json" -o /dev/null
// RUN: %python %S/Inputs/check_ptxas_report.py %t/llama-part.json --label llama-dp2-tp2-sp --max-registers 128 --max-spill-bytes 8 | FileCheck %s --check-prefix=LLAMAPART

// GPTPART: gpt-dp2-tp2-sp: {{[0-9]+}} kernels, at most {{[0-9]+}} registers ({{.*}}), 0 bytes spilled
// LLAMAPART: llama-dp2-tp2-sp: {{[0-9]+}} kernels, at most {{[0-9]+}} registers
// The partitioned step communicates through the runtime (NCCL on device
// buffers) between kernels.
// COMM-DAG: llvm.call @cleave_rt_all_reduce(
// COMM-DAG: llvm.call @cleave_rt_all_gather(
// COMM-DAG: llvm.call @cleave_rt_cuda_launch(

// The kernels of the partitioned GPT's forward (local shapes: a batch of 2
// of 4 per data-parallel rank; between blocks each tensor-parallel rank keeps
// 16 of the 32 positions; column-parallel layers produce 32 of 64 attention
// and 128 of 256 MLP features). The first layer norm's statistics over this
// rank's sequence slice: one block of 32 threads per row (2 x 16 rows),
// 128-bit loads, a block all-reduce. The slice is gathered over tp before
// the column-parallel projections, whose bias is the cuBLASLt epilogue. The
// MLP's bias addition and tanh-GELU are one kernel on 4 elements a thread
// (8 blocks of 256 threads for 2 x 32 x 128 elements).
// KERNELS-LABEL: func.func @forward(
// KERNELS: gpu.launch_func @cleave_kernels::@forward_k[[LN:[0-9]+]]_block_reduce blocks in (%c32{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c32{{(_[0-9]+)?}},
// KERNELS: call @cleave_rt_all_gather(
// KERNELS: call @cleave_rt_cuda_gemm_epilogue(
// KERNELS: call @cleave_rt_gemm(
// KERNELS: gpu.launch_func @cleave_kernels::@forward_k[[GELU:[0-9]+]]_ew blocks in (%c8{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c256{{(_[0-9]+)?}}, {{.*}} args({{.*}} : memref<64x128xf32>, {{.*}} : memref<128xf32>, {{.*}} : memref<2x32x128xf32>)
// KERNELS: gpu.module @cleave_kernels
// KERNELS: gpu.func @forward_k[[LN]]_block_reduce(%{{.*}}: memref<2x32x64xf32>, %{{.*}}: i64, %{{.*}}: memref<2x16xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>}
// KERNELS: memref.subview {{.*}} [2, 16, 64] [1, 1, 1]
// KERNELS: vector.load {{.*}} vector<4xf32>
// KERNELS: gpu.all_reduce add
// KERNELS: gpu.func @forward_k[[GELU]]_ew(
// KERNELS: vector.load {{.*}} : memref<2x32x128xf32>, vector<4xf32>
// KERNELS: vector.load {{.*}} : memref<128xf32>, vector<4xf32>
// KERNELS-COUNT-4: math.tanh
// KERNELS: vector.store {{.*}} : memref<2x32x128xf32>, vector<4xf32>
// KERNELS-NEXT: gpu.return

// The scatter itself is one kernel: a thread per column loops over this
// rank's 2 x 16 tokens of the sequence slice, loaded from the copied buffer.
// SCATTER-LABEL: func.func @train_step(
// SCATTER-NOT: scf.for
// SCATTER: gpu.launch_func @cleave_kernels::@train_step_k{{[0-9]+}}_ew {{.*}} args(%arg0 : memref<2x32xi32>, {{.*}}, %[[IDS:[a-z_0-9]+]] : memref<2x16xi32>)
// SCATTER-NOT: scf.for
// SCATTER: gpu.launch_func @cleave_kernels::@train_step_k[[SCATTER:[0-9]+]]_loop {{.*}} args(%[[IDS]] : memref<2x16xi32>,
// SCATTER-NOT: scf.for
// SCATTER: gpu.module @cleave_kernels
// SCATTER: gpu.func @train_step_k[[SCATTER]]_loop(
// SCATTER: scf.for %{{.*}} = %c0 to %c32 step %c1 {
// SCATTER: memref.load %{{.*}} : memref<32xi32>
// PTXLOOP: "name": "train_step_k{{[0-9]+}}_loop",
// PTXLOOP-NEXT: "registers": {{[0-9]+}},
// PTXLOOP-NEXT: "smem": 0,
// PTXLOOP-NEXT: "spill_loads": 0,
// PTXLOOP-NEXT: "spill_stores": 0,
