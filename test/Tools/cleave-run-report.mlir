// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-run -n 2 --plan dp=2 --model tiny-gpt --steps 4 --log-every 2 | FileCheck %s --check-prefix=LINE
// RUN: env CLEAVE_LOCAL_CPU_SPEC=%S/../Planner/Inputs/small-memory cleave-run -n 4 --plan dp=2,tp=2 --model tiny-gpt --steps 1 | FileCheck %s --check-prefix=MEASURED
// With --predict, the line shows that prediction (the planner's pricing
// of the module's ops), as it does without.
// RUN: cleave-run -n 2 --plan dp=2 --model tiny-gpt --steps 2 --predict | FileCheck %s --check-prefix=PREDICT
// PREDICT: predicted by the cost model: {{[0-9.]+}} ms/step
// PREDICT: predicted step: [[MS:[0-9]+\.[0-9]]] ms, MFU {{[0-9.]+}}% (cost model: --predict, tp=1 pp=1 dp=2 {{.*}} priced from the module's ops on local-cpu (built-in), 2 ranks)
// PREDICT: step 2/2 {{.*}} ms/step (predicted [[MS]])
// RUN: cleave-models --model tiny-gpt --vocab 76 -o %t/program.mlir
// RUN: cleave-run %t/program.mlir --steps 2 --log-every 1 | FileCheck %s --check-prefix=FILE
// RUN: cleave-run -n 2 --plan dp=2 --model tiny-gpt --steps 3 --report %t/run.html | FileCheck %s --check-prefix=LOG
// RUN: FileCheck %s --check-prefix=HTML < %t/run.html
// RUN: %python -c "import sys; import struct; sys.stdout.buffer.write(struct.pack('<2560H', *[(7 * i) % 64 for i in range(2560)]))" > %t/tokens.bin
// RUN: cleave-run --model tiny-gpt --data %t/tokens.bin --token-bytes 2 --vocab 65 --val-data %t/tokens.bin --eval-every 2 --steps 4 --report %t/val.html > /dev/null
// RUN: FileCheck %s --check-prefix=VAL < %t/val.html
// RUN: not cleave-run --model tiny-gpt --steps 1 --report %t/missing-dir/run.html 2>&1 | FileCheck %s --check-prefix=NODIR

// cleave-run's progress line (rank 0, every --log-every steps): the loss,
// the step time, tokens/s and, where the cost model predicts the step, the
// predicted step and MFU beside the measured ones; said once before the
// first step, or why there is no prediction. --report writes the run as one
// self-contained page (lib/Report), its data embedded once.

// LINE: predicted step: {{[0-9.]+}} ms, MFU {{[0-9.]+}}% (cost model: tp=1 pp=1 dp=2 {{.*}} f32 {{.*}} priced from the module's ops on local-cpu (built-in), 2 ranks)
// LINE-NEXT: step 1/4 loss {{[0-9]+\.[0-9][0-9][0-9][0-9]}} {{[0-9.]+}} ms (first step){{$}}
// LINE-NEXT: step 2/4 loss {{[0-9]+\.[0-9][0-9][0-9][0-9]}} {{[0-9.]+}} ms/step (predicted {{[0-9.]+}}) {{[0-9]+}} tokens/s MFU {{[0-9.]+}}% (predicted {{[0-9.]+}}%){{$}}
// LINE-NEXT: step 4/4 loss {{[0-9]+\.[0-9][0-9][0-9][0-9]}} {{[0-9.]+}} ms/step (predicted

// MEASURED: predicted step: {{.*}} on local-cpu{{[a-z-]*}} (measured, {{.*}}small-memory), 4 ranks)

// A program read from a file is priced from its ops as the zoo model is
// (test/Tools/cleave-run-predict.mlir).
// FILE: predicted step: {{[0-9.]+}} ms, MFU {{[0-9.]+}}% (cost model: tp=1 pp=1 dp=1 {{.*}} priced from the module's ops on local-cpu (built-in), 1 rank)
// FILE: step 2/2 loss {{[0-9.]+}} {{[0-9.]+}} ms/step (predicted {{[0-9.]+}}) {{[0-9]+}} tokens/s MFU {{[0-9.]+}}% (predicted {{[0-9.]+}}%){{$}}

// LOG: step 3/3
// HTML: <title>cleave-run: tiny-gpt, 2 ranks, --plan dp=2</title>
// HTML-NOT: src="http
// HTML: <script type="application/json" id="cleave-data">{"run":{{.*}}"losses":[{{[0-9.]+}},{{[0-9.]+}},{{[0-9.]+}}]{{.*}}"prediction":{"mfu":{{.*}}"timeline":{{.*}}"waits for all_reduce g{{[0-9]+}}","wait"{{.*}}</script>
// HTML-NOT: id="cleave-data"

// VAL: "val_losses":[{{[0-9.]+}},{{[0-9.]+}}],"val_steps":[2,4]

// NODIR-NOT: step
// NODIR: cleave-run: error: --report {{.*}}missing-dir/run.html: cannot write in the directory {{.*}}missing-dir
