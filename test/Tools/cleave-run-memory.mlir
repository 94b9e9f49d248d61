// cleave-run's peak memory is the runtime allocator's count of the training
// program's buffers (parameters, gradients, optimizer state, activations,
// temporaries): at least the model state, less with a smaller batch per
// rank, less again with ZeRO-3 (docs/cleave-run.md).
// RUN: cleave-run --model tiny-gpt --steps 2 > %t.one
// RUN: cleave-run -n 2 --plan dp=2 --model tiny-gpt --steps 2 > %t.dp2
// RUN: cleave-run -n 2 --plan dp=2,zero=3 --model tiny-gpt --steps 2 > %t.zero3
// RUN: FileCheck %s --check-prefix=PARAMS < %t.one
// RUN: %python %S/Inputs/peak_memory.py 107008 %t.one %t.dp2 %t.zero3 | FileCheck %s
// PARAMS: 107008 parameters
// CHECK-NOT: FAILED
// CHECK: one process holds the model state: ok
// CHECK: zero=3 needs less than dp=2: ok

func.func @unused() {
  return
}
