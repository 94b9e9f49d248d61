// RUN: cleave-models --model tiny-gpt | cleave-opt --cleave-autodiff | cleave-opt --cleave-auto-shard="cluster=local-cpu gpus=4" --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s

// A zoo model's training step on four local CPU processes: the model is
// known (cleave.model = "tiny-gpt"), so the plan comes from the cost model
// and the ops' shardings from the integer program. On a local CPU cluster
// the mesh links are `host` and there is no pipeline. Optimizer state and
// the updated parameters keep their parameter's sharding; the loss is
// replicated; every op gets a stage.

// CHECK: remark: cleave-auto-shard: {{.*}} pp=1 {{.*}} f32
// CHECK: module attributes {cleave.model = "tiny-gpt", cleave.plan = {micro_batch = {{[0-9]+}} : i64, num_micro_batches = 1 : i64, recompute = "{{none|selective|full}}", schedule = "1f1b", virtual_stages = 1 : i64, zero = {{[0-3]}} : i64}}
// CHECK: cleave.mesh @cluster(pp = 1 : host, dp = {{[124]}} : host, cp = {{[124]}} : host, tp = {{[124]}} : host)
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: {cleave.input = "tokens", cleave.sharding = #cleave.sharding<@cluster, [[TOKENS:[^>]*]]>}
// CHECK-SAME: cleave.param = "wte.weight", cleave.sharding = #cleave.sharding<@cluster, [[WTE:[^>]*]]>}
// CHECK-SAME: cleave.sharding = #cleave.sharding<@cluster, [[WTE]]>, cleave.state = "wte.weight.exp_avg"}
// CHECK-SAME: cleave.sharding = #cleave.sharding<@cluster, [[WTE]]>, cleave.state = "wte.weight.exp_avg_sq"}
// CHECK-SAME: {cleave.input = "lr", cleave.sharding = #cleave.sharding<@cluster, []>}
// CHECK-SAME: -> (tensor<65x64xf32> {cleave.output = "wte.weight", cleave.sharding = #cleave.sharding<@cluster, [[WTE]]>}
// CHECK-SAME: {cleave.output = "wte.weight.exp_avg", cleave.sharding = #cleave.sharding<@cluster, [[WTE]]>}
// CHECK-SAME: tensor<f32> {cleave.output = "loss", cleave.sharding = #cleave.sharding<@cluster, []>})
// CHECK: cleave.embedding {{.*}}cleave.stage = 0 : i64
// CHECK: cleave.attention {{.*}}cleave.stage = 0 : i64
// CHECK: cleave.cross_entropy_grad {{.*}}cleave.stage = 0 : i64
// CHECK: cleave.adamw {{.*}}cleave.stage = 0 : i64
