// A CUDA training step, partitioned for 4 GPUs (data parallel 2 x tensor
// parallel 2 with sequence parallelism), compiled ahead of time, links into
// an executable:
// against libCleaveRuntime alone (the cuda backend is loaded when asked
// for), and explicitly against the backend with NCCL, cuBLASLt and the
// driver (the stub library links; the driver comes with the GPU).
// REQUIRES: ptxas, cuda-backend
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-run --model tiny-gpt --backend cuda -n 4 --plan dp=2,tp=2,sp --emit-object %t/step.o | FileCheck %s --check-prefix=EMIT
// EMIT: wrote {{.*}}step.o
// RUN: nm -u %t/step.o | FileCheck %s --check-prefix=UNDEF
// UNDEF-DAG: U cleave_rt_cuda_alloc
// UNDEF-DAG: U cleave_rt_cuda_free
// UNDEF-DAG: U cleave_rt_cuda_launch
// UNDEF-DAG: U cleave_rt_cuda_step_begin
// UNDEF-DAG: U cleave_rt_cuda_synchronize
// UNDEF-DAG: U cleave_rt_gemm
// UNDEF-DAG: U cleave_rt_cuda_gemm_epilogue
// UNDEF-DAG: U cleave_rt_all_reduce
// UNDEF-DAG: U cleave_rt_all_gather
// UNDEF-DAG: U cleave_rt_group_rank
// UNDEF-NOT: U {{malloc|free|memrefCopy|mgpu}}

// RUN: %host_cc -I%cleave_src/include %S/Inputs/run_step.c %t/step.o -o %t/step -L%cleave_lib -lCleaveRuntime -Wl,-rpath,%cleave_lib
// RUN: %host_cc -I%cleave_src/include %S/Inputs/run_step.c %t/step.o -o %t/step-linked -L%cleave_lib -Wl,--no-as-needed -lCleaveRuntime -lCleaveRuntimeCuda %cuda_link_libraries -Wl,-rpath,%cleave_lib
// RUN: readelf -d %t/step-linked | FileCheck %s --check-prefix=NEEDED
// RUN: nm -D --defined-only %cleave_lib/libCleaveRuntimeCuda.so | FileCheck %s --check-prefix=PLUGIN
// RUN: nm -D --undefined-only %cleave_lib/libCleaveRuntimeCuda.so | FileCheck %s --check-prefix=USES

// Where there is no GPU the program starts and says why it cannot run.
// RUN: %t/step | FileCheck %s --check-prefix=START
// START-LABEL: train_step at 0x{{[0-9a-f]+}}, manifest of {{[0-9]+}} bytes
// START: cuda backend: {{(ready|rank 0: init: no CUDA device: .+)}}

// NEEDED-DAG: (NEEDED) {{.*}}[libCleaveRuntime.so]
// NEEDED-DAG: (NEEDED) {{.*}}[libCleaveRuntimeCuda.so]
// NEEDED-DAG: (NEEDED) {{.*}}[libnccl.so.2]
// NEEDED-DAG: (NEEDED) {{.*}}[libcublasLt.so.{{[0-9]+}}]
// NEEDED-DAG: (NEEDED) {{.*}}[libcuda.so.1]

// PLUGIN-DAG: T cleave_rt_cuda_plugin_create_backend
// PLUGIN-DAG: T cleave_rt_cuda_plugin_device_count
// USES-DAG: U ncclCommSplit
// USES-DAG: U ncclCommInitRankConfig
// USES-DAG: U ncclCommGetAsyncError
// USES-DAG: U ncclCommAbort
// USES-DAG: U cublasLtMatmul
// USES-DAG: U cuLaunchKernel
// USES-DAG: U cuModuleLoadData
// USES-DAG: U cuMemAllocFromPoolAsync
