// bf16 and f16 compute with f32 master weights train like f32: the loss
// curves stay within 2% of each other over 20 steps and fall.
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-run --model tiny-gpt --steps 20 --save-losses %t/f32.st > /dev/null
// RUN: cleave-run --model tiny-gpt --dtype bf16 --steps 20 --save-losses %t/bf16.st > /dev/null
// RUN: cleave-run --model tiny-gpt --dtype f16 --steps 20 --save-losses %t/f16.st --save-params %t/f16-params.st > /dev/null
// RUN: env PYTHONPATH=%cleave_src/python %python %s.py %t/f32.st %t/bf16.st %t/f16.st | FileCheck %s
// RUN: env PYTHONPATH=%cleave_src/python %python -m cleave.tensorfile %t/f16-params.st | FileCheck %s --check-prefix=MASTER
// CHECK: bf16: falls, within 2% of f32
// CHECK: f16: falls, within 2% of f32
// Master weights are saved in f32 whatever the compute type.
// MASTER: wte.weight{{[[:space:]]+}}F32{{[[:space:]]+}}[{{[0-9]+}}, 64]
