// The training recipe sharded, with 2 accumulated micro-batches per update
// (the pipeline's micro-batches for tp x pp): global-norm clipping (at 0.05, so that it
// clips every step), a cosine schedule with warmup and weight decay on
// matrices only, 5 AdamW steps of the zoo GPT on 4 ranks with dp x tp,
// tp x pp, ZeRO-3 and cp: every rank's losses and the gathered parameters
// equal the single-process run (equality.py's criterion). The norm is the
// whole model's only if the sums of squares are completed over tp, the
// ZeRO shards of dp, cp and the pipeline stages, each counted once.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-gpt \
// RUN:   --extra="--grad-clip 0.05 --lr-schedule cosine --warmup-steps 2 --decay-steps 5 --lr-min 1e-4 --no-decay-vectors --weight-decay 0.1 --beta2 0.95 --accumulate 2" \
// RUN:   4:dp=2,tp=2 4:pp=2,tp=2,micro=2 4:dp=4,zero=3 4:dp=2,cp=2 | FileCheck %s
// CHECK: tiny-gpt: one process
// CHECK-NOT: FAIL
// CHECK: 4 of 4 plans equal the single-process run
