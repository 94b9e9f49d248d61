// Asynchronous communication (cleave-async-collectives) where it overlaps:
// small gradient buckets whose all-reduces and reduce-scatters run during
// the backward pass, ZeRO-3 all-gathers prefetched a layer ahead (pipeline
// transfers: the pipeline-*.mlir tests, async by default). Each rank's
// losses and the gathered parameters equal the single-process run
// (criterion in equality.py). The last run turns the
// pass off (--async-collectives=false) and the progress thread
// (CLEAVE_ASYNC=0 keeps the schedule, runs each start at once).
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-gpt \
// RUN:   --extra "--bucket-mb 0.02" 2:dp=2 4:zero=1 4:zero=3 | FileCheck %s
// RUN: env CLEAVE_ASYNC=0 %python %S/equality.py --cleave-run cleave-run \
// RUN:   --model tiny-gpt --extra "--bucket-mb 0.02" 2:dp=2 \
// RUN:   | FileCheck %s --check-prefix=NOTHREAD
// RUN: %python %S/equality.py --cleave-run cleave-run --model tiny-gpt \
// RUN:   --extra "--bucket-mb 0.02 --async-collectives=false" 2:dp=2 \
// RUN:   | FileCheck %s --check-prefix=OFF
// CHECK: tiny-gpt: one process
// CHECK-NOT: FAIL
// CHECK: 3 of 3 plans equal the single-process run
// NOTHREAD: 1 of 1 plans equal the single-process run
// OFF: 1 of 1 plans equal the single-process run
