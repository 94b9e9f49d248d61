// Ahead-of-time: an object file linked with the runtime alone trains exactly
// like the JIT.
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-run --model tiny-llama --emit-object %t/step.o | FileCheck %s --check-prefix=EMIT
// EMIT: wrote {{.*}}step.o
// RUN: %host_cc -shared -o %t/step.so %t/step.o -L%cleave_lib -lCleaveRuntime -Wl,-rpath,%cleave_lib
// RUN: nm -D --defined-only %t/step.so | FileCheck %s --check-prefix=SYMS
// SYMS-DAG: T cleave_entry_forward
// SYMS-DAG: T cleave_entry_train_step
// SYMS-DAG: T cleave_manifest_json
// RUN: cleave-run --model tiny-llama --aot %t/step.so --steps 3 --log-every 1 | grep -o "loss [0-9.]*" > %t/aot.txt
// RUN: cleave-run --model tiny-llama --steps 3 --log-every 1 | grep -o "loss [0-9.]*" > %t/jit.txt
// RUN: diff %t/aot.txt %t/jit.txt
// RUN: count 3 < %t/aot.txt
// RUN: not cleave-run --model tiny-llama --aot %t/step.o 2>&1 | FileCheck %s --check-prefix=NOTSO
// NOTSO: cleave-run: error: {{.*}}step.o: {{.*}}
