// cleave-run keeps compiled steps in a compile cache keyed by the
// partitioned program, the target and options, the host CPU and the build
// IDs of the compiler and runtime (docs/cleave-run.md). A second run of the
// same program loads it and trains bit for bit the same; another program
// or plan compiles anew; --no-compile-cache and CLEAVE_COMPILE_CACHE=0
// compile without it.
// RUN: rm -rf %t && mkdir -p %t
// RUN: env CLEAVE_COMPILE_CACHE_DIR=%t/cache cleave-run --model tiny-gpt --steps 3 --save-losses %t/first.st | FileCheck %s --check-prefix=MISS
// RUN: env CLEAVE_COMPILE_CACHE_DIR=%t/cache cleave-run --model tiny-gpt --steps 3 --save-losses %t/second.st | FileCheck %s --check-prefix=HIT
// RUN: cmp %t/first.st %t/second.st
// RUN: env CLEAVE_COMPILE_CACHE_DIR=%t/cache cleave-run -n 2 --plan dp=2 --model tiny-gpt --steps 1 | FileCheck %s --check-prefix=MISS
// RUN: env CLEAVE_COMPILE_CACHE_DIR=%t/cache cleave-run -n 2 --plan dp=2 --model tiny-gpt --steps 1 | FileCheck %s --check-prefix=HIT
// RUN: env CLEAVE_COMPILE_CACHE_DIR=%t/cache cleave-run --model tiny-gpt --steps 1 --no-compile-cache | FileCheck %s --check-prefix=OFF
// RUN: env CLEAVE_COMPILE_CACHE_DIR=%t/cache CLEAVE_COMPILE_CACHE=0 cleave-run --model tiny-gpt --steps 1 | FileCheck %s --check-prefix=OFF
// RUN: ls %t/cache | FileCheck %s --check-prefix=ENTRIES
// MISS: compiled in {{[0-9.]+}} s (into the compile cache) ([[KEY:[0-9a-f]+]])
// HIT: loaded the compiled step from the compile cache in {{[0-9.]+}} s
// OFF: compiled in {{[0-9.]+}} s (lowering
// ENTRIES: step-{{[0-9a-f]+}}.so
// ENTRIES-NEXT: step-{{[0-9a-f]+}}.so
// ENTRIES-NOT: step-
//
// Processes that compile the same program at once all succeed, and leave
// one entry and no temporary file.
// RUN: %python %S/Inputs/concurrent.py 3 env CLEAVE_COMPILE_CACHE_DIR=%t/together cleave-run --model tiny-gpt --layers 1 --steps 1
// RUN: ls %t/together | FileCheck %s --check-prefix=ONE
// ONE: step-{{[0-9a-f]+}}.so
// ONE-NOT: tmp
// ONE-NOT: step-
//
// Bad settings are named.
// RUN: env CLEAVE_COMPILE_CACHE=maybe not cleave-run --model tiny-gpt --steps 1 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: env CLEAVE_COMPILE_CACHE_MAX_MB=-1 not cleave-run --model tiny-gpt --steps 1 2>&1 | FileCheck %s --check-prefix=BADMAX
// RUN: env CLEAVE_COMPILE_CACHE_DIR=/proc/no-such-dir not cleave-run --model tiny-gpt --steps 1 2>&1 | FileCheck %s --check-prefix=BADDIR
// BAD: error: compile cache: CLEAVE_COMPILE_CACHE=maybe: expected 0, off, 1 or on
// BADMAX: error: compile cache: CLEAVE_COMPILE_CACHE_MAX_MB=-1: expected a size in MiB >= 0 (0: no bound)
// BADDIR: error: compile cache: cannot create /proc/no-such-dir: {{.*}} (set CLEAVE_COMPILE_CACHE_DIR, or CLEAVE_COMPILE_CACHE=0)

func.func @unused() {
  return
}
