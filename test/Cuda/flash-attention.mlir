// Attention whose memory is linear in the sequence on the CUDA pipeline:
// cleave-lower-to-cuda lowers cleave.attention and its gradient with the
// CPU's tiled online-softmax loops (attention-tile, default 128;
// docs/attention.md). The tile loops stay in host code; each iteration
// calls cuBLASLt for the tile GEMMs and launches the masking, exp, row max
// and row sum kernels. At sequence 4096, no buffer is [B*H, S, S] (4 x 4096
// x 4096 for tiny-gpt at batch 1) and the step's peak of live buffers stays
// linear in S; the materialised lowering (attention-tile=0) keeps the
// probabilities, which the same check rejects. ptxas accepts every kernel
// for sm_90 (f32 and bf16, GPT and Llama with grouped-query attention).
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-models --model tiny-gpt --seq 4096 --batch 1 | cleave-opt --cleave-autodiff -o %t/gpt.mlir
// RUN: cleave-opt %t/gpt.mlir --cleave-lower-to-cuda="ptxas-report=%t/gpt.json" --mlir-print-ir-after=cleave-cuda-map-to-gpu -o /dev/null 2> %t/gpt-kernels.mlir
// RUN: FileCheck %s --check-prefix=TILED < %t/gpt-kernels.mlir
// RUN: %python %S/Inputs/buffer_sizes.py %t/gpt-kernels.mlir --label gpt-4096 --max-elements 16777215 --max-peak-bytes 100000000 | FileCheck %s --check-prefix=SIZES
// RUN: %python %S/Inputs/check_ptxas_report.py %t/gpt.json --label gpt --max-registers 128 | FileCheck %s --check-prefix=GPT
// RUN: cleave-opt %t/gpt.mlir --cleave-lower-to-cuda="attention-tile=0" --mlir-print-ir-after=cleave-cuda-map-to-gpu -o /dev/null 2> %t/gpt-full.mlir
// RUN: not %python %S/Inputs/buffer_sizes.py %t/gpt-full.mlir --label gpt-4096-materialised --max-elements 16777215 2>&1 | FileCheck %s --check-prefix=FULL
// RUN: cleave-models --model tiny-llama --dtype bf16 --seq 4096 --batch 1 | cleave-opt --cleave-autodiff | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/llama.json" --mlir-print-ir-after=cleave-cuda-map-to-gpu -o /dev/null 2> %t/llama-kernels.mlir
// RUN: %python %S/Inputs/buffer_sizes.py %t/llama-kernels.mlir --label llama-bf16-4096 --max-elements 16777215 --max-peak-bytes 60000000 | FileCheck %s --check-prefix=SIZES16
// RUN: %python %S/Inputs/check_ptxas_report.py %t/llama.json --label llama-bf16 --max-registers 128 --max-spill-bytes 8 | FileCheck %s --check-prefix=LLAMA16
// Several tiles at the zoo's 32 positions (tiles of 8); the host code
// translates to LLVM IR (the tile bounds' ceildivui is expanded), and
// cleave-run's option reaches the CUDA pipeline (an object file).
// RUN: cleave-models --model tiny-gpt --dtype bf16 | cleave-opt --cleave-autodiff | cleave-opt --cleave-lower-to-cuda="attention-tile=8 ptxas-report=%t/gpt-bf16.json" -o %t/gpt-bf16-host.mlir
// RUN: mlir-translate --mlir-to-llvmir %t/gpt-bf16-host.mlir -o %t/gpt-bf16-host.ll
// RUN: %python %S/Inputs/check_ptxas_report.py %t/gpt-bf16.json --label gpt-bf16 --max-registers 128 | FileCheck %s --check-prefix=GPT16
// RUN: cleave-models --model tiny-llama | cleave-opt --cleave-autodiff | cleave-opt --cleave-lower-to-cuda="attention-tile=8 ptxas-report=%t/llama-f32.json" -o /dev/null
// RUN: %python %S/Inputs/check_ptxas_report.py %t/llama-f32.json --label llama --max-registers 128 --max-spill-bytes 8 | FileCheck %s --check-prefix=LLAMA
// The tensor-level IR that the CUDA pipeline lowers is the CPU pipeline's,
// whose numbers FlashAttentionTest and CudaProgram.TiledReference* check
// (tiny-llama: GQA, 4 tiles a sequence).
// RUN: cleave-models --model tiny-llama | cleave-opt --cleave-autodiff -o %t/llama-small.mlir
// RUN: cleave-opt %t/llama-small.mlir --cleave-lower-to-cpu="attention-tile=8" --mlir-print-ir-after=cleave-fuse-elementwise -o /dev/null 2> %t/cpu-tensors.mlir
// RUN: cleave-opt %t/llama-small.mlir --cleave-lower-to-cuda="attention-tile=8" --mlir-print-ir-after=cleave-fuse-elementwise -o /dev/null 2> %t/cuda-tensors.mlir
// RUN: diff %t/cpu-tensors.mlir %t/cuda-tensors.mlir
// RUN: FileCheck %s --check-prefix=TENSORS < %t/cuda-tensors.mlir
// Context parallelism (cp 2, the balanced layout): the key tile bounds
// come from the rank's query block on the host (no load of device memory).
// RUN: cleave-models --model tiny-gpt | cleave-opt --cleave-distribute="plan=cp=2 ranks=2" | cleave-opt --cleave-lower-to-cuda="attention-tile=8" --mlir-print-ir-after=cleave-cuda-map-to-gpu -o %t/cp-host.mlir 2> %t/cp-kernels.mlir
// RUN: FileCheck %s --check-prefix=CP < %t/cp-kernels.mlir
// RUN: mlir-translate --mlir-to-llvmir %t/cp-host.mlir -o %t/cp-host.ll
// RUN: cleave-run --model tiny-llama --backend cuda --attention-tile 8 --emit-object %t/step.o
// RUN: nm -u %t/step.o | FileCheck %s --check-prefix=UNDEF
// RUN: not cleave-run --model tiny-gpt --backend cuda --attention-tile -1 --emit-object %t/bad.o 2>&1 | FileCheck %s --check-prefix=BAD

// 32 query tiles of 128 rows; per key tile (below the diagonal first,
// unmasked) a batched cuBLASLt GEMM of Q_i K_j^T over the 4 heads, then
// kernels, then P V_j; the masked loop's kernels take the tile indices.
// TILED-LABEL: func.func @train_step(
// TILED: scf.for %[[I:.*]] = %c0{{.*}} to %c32{{.*}} step %c1
// TILED: memref.subview {{.*}} memref<4x4096x16xf32> to memref<4x128x16xf32, strided<[65536, 16, 1], offset: ?>>
// TILED: scf.for %[[J:.*]] = %c0{{.*}} to %{{.*}} step %c1
// TILED: call @cleave_rt_gemm(%c0_i32, %c0_i32, %c1_i32, %c4_i64, %c128_i64, %c128_i64, %c16_i64
// TILED: gpu.launch_func
// TILED: scf.for %[[J2:.*]] = %{{.*}} to %{{.*}} step %c1
// TILED: gpu.launch_func @cleave_kernels::@{{.*}} args(%[[J2]] : index, %[[I]] : index,
// TILED-NOT: x4096x4096x
// TILED: gpu.module @cleave_kernels

// The first rows' positions: b S/2 + i in the first chunk of query block
// b, (2n-1-b) S/2 + i - S/2 in the second; the bound is their tile.
// CP-LABEL: func.func @train_step(
// CP-NOT: memref.load
// CP: %[[BLOCK:.*]] = arith.index_cast %{{.*}} : i64 to index
// CP-NOT: memref.load
// CP: scf.for %{{.*}} = %c0{{.*}} to %c2{{.*}} step %c1
// CP: arith.muli %[[BLOCK]], %c8
// CP: arith.subi %c2{{.*}}, %[[BLOCK]] : index
// CP: arith.ceildivui
// CP: scf.for
// CP: call @cleave_rt_gemm(
// CP-NOT: memref.load
// CP: gpu.module @cleave_kernels

// TENSORS-LABEL: func.func @train_step(
// TENSORS: scf.for {{.*}} = %c0 to %c4 step %c1 iter_args(
// TENSORS: linalg.batch_matmul_transpose_b

// SIZES: gpt-4096: {{[0-9]+}} buffers, largest 4096x256xf32 (1048576 elements, 4194304 bytes), peak {{[0-9]+}} bytes
// FULL: gpt-4096-materialised: buffers over 16777215 elements: 4x4096x4096xf32
// SIZES16: llama-bf16-4096: {{[0-9]+}} buffers, largest 4096x128xbf16 (524288 elements, 1048576 bytes), peak {{[0-9]+}} bytes
// GPT: gpt: {{[0-9]+}} kernels, at most {{[0-9]+}} registers ({{.*}}), 0 bytes spilled
// LLAMA16: llama-bf16: {{[0-9]+}} kernels, at most {{[0-9]+}} registers
// GPT16: gpt-bf16: {{[0-9]+}} kernels, at most {{[0-9]+}} registers ({{.*}}), 0 bytes spilled
// LLAMA: llama: {{[0-9]+}} kernels, at most {{[0-9]+}} registers
// UNDEF: cleave_rt_cuda_launch
// UNDEF: cleave_rt_gemm
// BAD: cleave-run: error: --attention-tile=-1: must be 0 (materialised) or a number of rows
