// Recomputation (cleave-remat) trains exactly like one process without it:
// selective (the attention core) and full (every layer), alone and with
// data parallelism, ZeRO-3, tensor and sequence parallelism and pipelines
// (equality.py: losses within 1e-5 relative on every rank, final
// parameters within 1e-5 max|p| + 0.01 lr of the single-process run without
// recomputation). The GPT runs use dropout 0.1, so the recomputed forward
// pass must draw the masks the forward pass drew.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-gpt --extra "--dropout 0.1" \
// RUN:   1:recompute=selective 1:recompute=full 2:dp=2,recompute=full \
// RUN:   4:zero=3,recompute=selective 4:dp=2,tp=2,sp,recompute=full \
// RUN:   2:pp=2,micro=2,recompute=full 4:pp=2,dp=2,micro=2,recompute=selective \
// RUN:   | FileCheck %s --check-prefix=GPT
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-llama \
// RUN:   1:recompute=selective 1:recompute=full 2:tp=2,sp,recompute=full \
// RUN:   2:pp=2,micro=2,schedule=zb-h1,recompute=full 4:pp=2,dp=2,micro=2,recompute=selective \
// RUN:   | FileCheck %s --check-prefix=LLAMA
// GPT: tiny-gpt: one process
// GPT-NOT: FAIL
// GPT: 7 of 7 plans equal the single-process run
// LLAMA: tiny-llama: one process
// LLAMA-NOT: FAIL
// LLAMA: 5 of 5 plans equal the single-process run
