// Four stages (1F1B and the zero-bubble ZB-H1, whose backward passes split
// into input and weight gradients) and interleaved 1F1B with two model
// chunks per rank train a 4-layer tiny-gpt exactly like one process.
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-gpt --extra "--layers 4 --batch 8" \
// RUN:   4:pp=4,micro=4 4:pp=4,micro=8,schedule=zb-h1 2:pp=2,micro=4,schedule=interleaved,virtual=2 | FileCheck %s
// CHECK: ok   tiny-gpt -n 4 --plan pp=4,micro=4
// CHECK: ok   tiny-gpt -n 4 --plan pp=4,micro=8,schedule=zb-h1
// CHECK: ok   tiny-gpt -n 2 --plan pp=2,micro=4,schedule=interleaved,virtual=2
// CHECK: 3 of 3 plans equal the single-process run
