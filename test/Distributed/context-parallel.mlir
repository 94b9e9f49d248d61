// Context parallelism: the sequence is split over cp (attention keeps its
// block of queries, all-gathers keys and values, reduce-scatters their
// gradients; causal masks and rotary embeddings use global positions), in
// the load-balanced layout by default (rank r holds chunks r and 2cp-1-r of
// 2cp) and in contiguous blocks with cp-layout=contiguous.
// Five AdamW steps of the zoo GPT (learned positions) and Llama (rotary,
// GQA) with cp = 2 and 4, alone and with dp, tp, sp, ZeRO and pipelines:
// every rank's losses and the gathered parameters equal the single-process
// run (equality.py's criterion).
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-gpt \
// RUN:   2:cp=2 4:cp=4 4:dp=2,cp=2 4:cp=2,tp=2 8:dp=2,cp=2,tp=2,sp,zero=1 \
// RUN:   4:dp=2,cp=2,zero=3 4:pp=2,cp=2,micro=2 2:cp=2,cp-layout=contiguous \
// RUN:   4:cp=4,cp-layout=contiguous | FileCheck %s --check-prefix=GPT
// GPT: tiny-gpt: one process
// GPT-NOT: FAIL
// GPT: 9 of 9 plans equal the single-process run
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-llama \
// RUN:   2:cp=2 4:cp=4 4:dp=2,cp=2 4:cp=2,tp=2,sp 8:cp=4,tp=2 \
// RUN:   4:pp=2,cp=2,micro=2 4:dp=2,cp=2,zero=1 4:cp=4,cp-layout=contiguous \
// RUN:   | FileCheck %s --check-prefix=LLAMA
// LLAMA: tiny-llama: one process
// LLAMA-NOT: FAIL
// LLAMA: 8 of 8 plans equal the single-process run
