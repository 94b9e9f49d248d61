// Global-norm clipping against the unsharded norm (clip_norm.py): after one
// SGD step with lr 1, every tensor of every plan moved by the same fraction
// of its single-process gradient, min(1, C / (N + 1e-6)) with N the norm of
// the whole model's gradient. The sums of squares are completed over tp,
// the pipeline stages, ZeRO's dp shards and cp; dp replicas count once.
// RUN: %python %S/clip_norm.py --cleave-run cleave-run --model tiny-gpt \
// RUN:   4:dp=2,tp=2 4:pp=2,tp=2,micro=2 4:dp=4,zero=3 4:dp=2,cp=2 | FileCheck %s
// CHECK: tiny-gpt: unclipped gradient norm {{.*}}: coefficient 0.25
// CHECK-NOT: FAIL
// CHECK: 5 of 5 runs clip by the global norm

// Only one tp shard of one pipeline stage has large gradients (--skew 30:
// the last layer's MLP, its first tp block): the norm is that shard's, and
// every plan must still clip every tensor of every rank by the unsharded
// norm's coefficient.
// RUN: %python %S/clip_norm.py --cleave-run cleave-run --model tiny-gpt --skew 30 \
// RUN:   4:pp=2,tp=2,micro=2 4:dp=2,tp=2 2:pp=2 | FileCheck %s --check-prefix=SKEW
// SKEW: h.1.mlp.proj.weight[:, :128] (one tp shard of the last stage) holds 9{{[0-9]}}.{{[0-9]}}% of the squared gradient norm
// SKEW: coefficient 0.25
// SKEW-NOT: FAIL
// SKEW: 4 of 4 runs clip by the global norm
