// RUN: cleave-plan --model gpt2-medium --cluster dgx-a100-80gb --gpus 8 --global-batch 16 --top 2 --quiet --scale 8,16,12 --json %t.json --html %t.html | FileCheck %s
// RUN: FileCheck %s --check-prefix=JSON < %t.json
// RUN: FileCheck %s --check-prefix=HTML < %t.html
// RUN: cleave-estimate --model llama3-8b --cluster dgx-h100 --tp 2 --pp 2 --dp 2 --micro-batches 4 --html %t.est.html | FileCheck %s --check-prefix=EST
// RUN: FileCheck %s --check-prefix=HTML < %t.est.html
// RUN: cleave-estimate --model llama3-8b --cluster dgx-h100 --tp 2 --pp 2 --dp 2 --micro-batches 4 --json | FileCheck %s --check-prefix=ESTJSON
// RUN: not cleave-plan --model gpt2-medium --gpus 8 --global-batch 16 --quiet --scale 64,0 2>&1 | FileCheck %s --check-prefix=BADSCALE
// RUN: not cleave-plan --model gpt2-medium --gpus 8 --global-batch 16 --quiet --html %t.missing/x.html 2>&1 | FileCheck %s --check-prefix=BADPATH
// RUN: not cleave-estimate --model llama3-8b --tp 2 --dp 4 --html %t.missing/x.html 2>&1 | FileCheck %s --check-prefix=BADPATH-EST
// RUN: cleave-models --model tiny-gpt --vocab 100 --seq 16 -o %t.v100.mlir
// RUN: cleave-plan %t.v100.mlir --cluster local-cpu --gpus 4 --quiet --scale 2,4,3 --json %t.graph.json | FileCheck %s --check-prefix=GRAPH
// RUN: %python -c "import json, sys; j = json.load(open(sys.argv[1])); c = j['chosen']; p = [x for x in j['scale'] if x['gpus'] == 4][0]; assert (p['plan'], p['step_time_s']) == (c['plan'], c['step_time_s']), (p, c); print('same plan at 4')" %t.graph.json | FileCheck %s --check-prefix=SAME
// RUN: cleave-models --model tiny-mlp -o %t.mlp.mlir
// RUN: cleave-plan %t.mlp.mlir --cluster local-cpu --gpus 2 --quiet --scale 1,2 | FileCheck %s --check-prefix=MLP

// The report page of cleave-plan and cleave-estimate (lib/Report): the JSON
// of --json with the mesh, the pipeline and the simulated step, embedded
// once in a self-contained page; the scale study's table. The drawing is
// checked in Chromium by test/Report/check-html.py (ctest report.browser-*).

// CHECK: chosen plan
// CHECK: scale study (global batch 16 sequences; the best plan at each size)
// CHECK-NEXT: GPUs{{ +}}step{{ +}}tokens/s{{ +}}MFU{{ +}}exposed comm{{ +}}bubble{{ +}}plan
// CHECK-NEXT: {{^ +}}8{{ +}}{{[0-9.]+}} ms{{ +}}{{[0-9]+}}{{ +}}{{[0-9.]+}}%{{ +}}{{[0-9.]+}}%{{ +}}{{[0-9.]+}}%  tp=
// CHECK-NEXT: {{^ +}}16{{ +}}{{[0-9.]+}} ms
// CHECK-NEXT: {{^ +}}12  gpus: 12 is not a whole number of 8-GPU nodes of dgx-a100-80gb

// JSON: "chosen": {
// JSON: "mesh": {
// JSON: "axes": [
// JSON: "link": "
// JSON: "rank_order": "rank = ((pp * dp_size + dp) * cp_size + cp) * tp_size + tp"
// JSON: "pipeline": {
// JSON: "scale": [
// JSON: "exposed_comm_share":
// JSON: "error": "gpus: 12 is not a whole number
// JSON: "sharding_table": [
// JSON: "kind": "parameter",
// JSON: "timeline": {
// JSON: "streams": [
// JSON-NEXT: "compute",
// JSON: "tasks": [

// HTML: <!DOCTYPE html>
// HTML: <title>cleave-{{plan|estimate}}: {{[a-z0-9-]+}} on {{[0-9]+}} GPUs</title>
// HTML-NOT: src="http
// HTML: <script type="application/json" id="cleave-data">{{.*}}"timeline":{{.*}}</script>
// HTML-NOT: id="cleave-data"
// HTML-NOT: src="http
// HTML: </html>

// EST: step time
// EST: MFU / HFU

// ESTJSON: "mesh": {
// ESTJSON: "pipeline": {
// ESTJSON: "timeline": {

// BADSCALE: cleave-plan: error: --scale: expected GPU counts >= 1, got 0
// BADPATH: cleave-plan: error: --html: cannot write {{.*}}x.html
// BADPATH-EST: cleave-estimate: --html: cannot write {{.*}}x.html
// A module no preset describes (tiny-gpt with another vocabulary) is
// priced from its own ops at every size (planner::searchAtSize), as its
// plan is; the point at the module's own size is the chosen plan. So is a
// module without repeated blocks (graph mode).
// GRAPH: scale study (global batch 4 sequences; the best plan at each size)
// GRAPH-NEXT: GPUs{{ +}}step
// GRAPH-NEXT: {{^ +}}2{{ +}}{{[0-9.]+}} {{m|u}}s{{ +}}{{[0-9]+}}{{ +}}{{[0-9.]+}}%{{ +}}{{[0-9.]+}}%{{ +}}{{[0-9.]+}}%  tp=
// GRAPH-NEXT: {{^ +}}4{{ +}}{{[0-9.]+}} {{m|u}}s
// GRAPH-NEXT: {{^ +}}3  mesh: no factorization of the 3 GPUs
// SAME: same plan at 4
// MLP: scale study
// MLP-NEXT: GPUs
// MLP-NEXT: {{^ +}}1{{ +}}{{[0-9.]+}} {{m|u}}s{{.*}}  tp=1
// MLP-NEXT: {{^ +}}2{{ +}}{{[0-9.]+}} {{m|u}}s{{.*}}  tp=
