// tiny-llama (GQA, RMSNorm, SwiGLU, rotary) in pipelines: 1F1B alone,
// ZB-H1 with tensor parallelism, and 8 ranks of pp x dp x tp with sequence
// parallelism, all equal to one process.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-llama \
// RUN:   2:pp=2,micro=2 4:pp=2,tp=2,micro=2,schedule=zb-h1 8:pp=2,dp=2,tp=2,sp,micro=2 | FileCheck %s
// CHECK: ok   tiny-llama -n 2 --plan pp=2,micro=2
// CHECK: ok   tiny-llama -n 4 --plan pp=2,tp=2,micro=2,schedule=zb-h1
// CHECK: ok   tiny-llama -n 8 --plan pp=2,dp=2,tp=2,sp,micro=2
// CHECK: 3 of 3 plans equal the single-process run
