// RUN: cleave-models --model tiny-gpt | cleave-opt --cleave-autodiff > %t.step.mlir
// RUN: cleave-opt %t.step.mlir --cleave-auto-shard="cluster=local-cpu gpus=4 tp=1 zero=1" 2>/dev/null | FileCheck %s --check-prefix=Z1
// RUN: cleave-opt %t.step.mlir --cleave-auto-shard="cluster=local-cpu gpus=4 tp=1 zero=3" 2>/dev/null | FileCheck %s --check-prefix=Z3
// RUN: cleave-models --model tiny-gpt | cleave-opt --cleave-auto-shard="cluster=local-cpu gpus=4 tp=1 zero=3" 2>/dev/null | FileCheck %s --check-prefix=FWD
// RUN: not cleave-opt %t.step.mlir --cleave-auto-shard="cluster=local-cpu gpus=4 zero=4" 2>&1 | FileCheck %s --check-prefix=BAD

// The ZeRO stage of the plan (fixed here with `zero`) is written into a
// training step as cleave-apply-plan writes it: the optimizer state is
// split over dp (the first dimension dp divides); with stage 1 the
// gradient is reduced whole before the update (a constraint to the
// parameter's layout); with stage 3 the parameter itself is split over dp
// and gathered before every use but its update.

// Z1: cleave.plan = {{{.*}}zero = 1 : i64}
// Z1: cleave.mesh @cluster(pp = 1 : host, dp = 4 : host, cp = 1 : host, tp = 1 : host)
// Z1-LABEL: func.func @train_step(
// Z1-SAME: cleave.param = "wte.weight", cleave.sharding = #cleave.sharding<@cluster, [_, _]>}
// Z1-SAME: cleave.sharding = #cleave.sharding<@cluster, [_, dp]>, cleave.state = "wte.weight.exp_avg"}
// Z1-SAME: {cleave.output = "wte.weight", cleave.sharding = #cleave.sharding<@cluster, [_, _]>}
// Z1-SAME: {cleave.output = "wte.weight.exp_avg", cleave.sharding = #cleave.sharding<@cluster, [_, dp]>}
// Z1: %[[G:.*]] = cleave.sharding_constraint %{{.*}} <@cluster, [_, _]> {cleave.stage = 0 : i64} : tensor<65x64xf32>
// Z1-NEXT: cleave.adamw %arg2, %[[G]],

// Z3: cleave.plan = {{{.*}}zero = 3 : i64}
// Z3-LABEL: func.func @train_step(
// Z3-SAME: cleave.param = "wte.weight", cleave.sharding = #cleave.sharding<@cluster, [_, dp]>}
// Z3-SAME: cleave.sharding = #cleave.sharding<@cluster, [_, dp]>, cleave.state = "wte.weight.exp_avg"}
// Z3-SAME: {cleave.output = "wte.weight", cleave.sharding = #cleave.sharding<@cluster, [_, dp]>}
// Z3: %[[W:.*]] = cleave.sharding_constraint %arg2 <@cluster, [_, _]> {cleave.stage = 0 : i64} : tensor<65x64xf32>
// Z3: cleave.embedding %[[W]],
// Z3: cleave.adamw %arg2, %{{[0-9]+}},

// A forward function has no optimizer state: the stage is only recorded.
// FWD: cleave.plan = {{{.*}}zero = 3 : i64}
// FWD: cleave.param = "wte.weight", cleave.sharding = #cleave.sharding<@cluster, [_, _]>}
// FWD-NOT: cleave.sharding_constraint %arg2

// BAD: error: cleave-auto-shard: options.space.zero: stage must be 0-3, got 4
