// cleave-run's prediction of a program read from a file (docs/cleave-run.md):
// the cost model prices the program's own training step as the planner
// prices its candidates (estimateModulePlan on local-cpu), with the batch
// and the compute type read from the module; no zoo --model is needed.
// RUN: split-file %s %t

// A hand-written two-layer transformer (an embedding, two blocks of
// attention and MLP, a head): priced from its ops. --predict prints the
// cost model's step and memory, and the progress line shows that
// prediction.
// RUN: cleave-run %t/gpt.mlir -n 2 --plan dp=2 --predict --steps 2 | FileCheck %s --check-prefix=DP
// DP: predicted by the cost model: {{[0-9.]+}} ms/step, peak memory {{[0-9.]+}} MiB per rank
// DP: predicted step: [[MS:[0-9]+\.[0-9]]] ms, MFU {{[0-9.]+}}% (cost model: --predict, tp=1 pp=1 dp=2 cp=1 mbs=2 m=1 1f1b zero=0 recompute=none f32 {{.*}} priced from the module's ops on local-cpu (built-in), 2 ranks)
// DP: step 2/2 {{.*}} ms/step (predicted [[MS]])

// Without --predict the progress line has the same prediction, here of
// the default plan (data parallel over the ranks) and of a pipeline.
// RUN: cleave-run %t/gpt.mlir --steps 1 | FileCheck %s --check-prefix=ONE
// ONE: predicted step: {{[0-9.]+}} ms, MFU {{[0-9.]+}}% (cost model: tp=1 pp=1 dp=1 cp=1 mbs=4 m=1 {{.*}} priced from the module's ops on local-cpu (built-in), 1 rank)
// RUN: cleave-run %t/gpt.mlir -n 2 --plan pp=2,micro=2 --steps 1 | FileCheck %s --check-prefix=PP
// PP: predicted step: {{[0-9.]+}} ms, MFU {{[0-9.]+}}% (cost model: tp=1 pp=2 dp=1 cp=1 mbs=2 m=2 1f1b {{.*}} priced from the module's ops on local-cpu (built-in), 2 ranks)

// A front-end export (nanoGPT's model written the usual PyTorch way, its
// attention projection one fused Linear) is priced from its ops alike.
// RUN: env PYTHONPATH=%cleave_src/python %python -m cleave.torch %cleave_src/python/tests/models/gpt.py:make_gpt --loss-output 1 --input idx=4x16:int64:64 --input targets=4x16:int64:64 -o %t/export.mlir > /dev/null
// RUN: env PYTHONPATH=%cleave_src/python %python -m cleave.torch.batches --input idx=4x16:int64:64 --input targets=4x16:int64:64 --steps 1 -o %t/batches.safetensors
// RUN: cleave-run %t/export.mlir -n 2 --plan dp=2 --predict --inputs %t/batches.safetensors --steps 1 | FileCheck %s --check-prefix=EXPORT
// EXPORT: predicted by the cost model: {{[0-9.]+}} ms/step, peak memory {{[0-9.]+}} MiB per rank
// EXPORT: predicted step: {{[0-9.]+}} ms, MFU {{[0-9.]+}}% (cost model: --predict, tp=1 pp=1 dp=2 cp=1 mbs=2 m=1 {{.*}} priced from the module's ops on local-cpu (built-in), 2 ranks)
// EXPORT: step 1/1

// Context parallelism is priced from the ops too: the export's sequence
// split over cp, its attention's keys and values gathered.
// RUN: cleave-run %t/export.mlir -n 2 --plan cp=2 --predict --inputs %t/batches.safetensors --steps 1 | FileCheck %s --check-prefix=CP
// CP: predicted by the cost model: {{[0-9.]+}} ms/step, peak memory {{[0-9.]+}} MiB per rank
// CP: predicted step: {{[0-9.]+}} ms, MFU {{[0-9.]+}}% (cost model: --predict, tp=1 pp=1 dp=1 cp=2 mbs=4 m=1 {{.*}} priced from the module's ops on local-cpu (built-in), 2 ranks)
// CP: step 1/1

// A module without repeated blocks (an MLP) is priced op by op as the
// planner's graph mode prices its meshes: a dp x tp mesh and a ZeRO
// stage. A plan graph mode cannot price is named by its field.
// RUN: cleave-run %t/mlp.mlir -n 2 --plan dp=2,zero=1 --predict --inputs %S/Inputs/mlp-batches.safetensors --steps 1 | FileCheck %s --check-prefix=MLP
// MLP: predicted by the cost model: {{[0-9.]+}} ms/step, peak memory {{[0-9.]+}} MiB per rank
// MLP: predicted step: {{[0-9.]+}} ms, MFU {{[0-9.]+}}% (cost model: --predict, tp=1 pp=1 dp=2 cp=1 mbs=4 m=1 1f1b zero=1 {{.*}} priced op by op (graph mode) on local-cpu (built-in), 2 ranks)
// RUN: cleave-run %t/mlp.mlir -n 2 --plan dp=2,micro=2 --inputs %S/Inputs/mlp-batches.safetensors --steps 1 | FileCheck %s --check-prefix=MICRO
// MICRO: no predicted step time: plan.micro = 2: graph mode prices no micro-batches (function @train_step has no repeated block and matches no transformer preset: graph mode prices it op by op)
// MICRO: step 1/1
// RUN: not cleave-run %t/mlp.mlir -n 2 --plan dp=2,micro=2 --predict --inputs %S/Inputs/mlp-batches.safetensors --steps 1 2>&1 | FileCheck %s --check-prefix=MICROPREDICT
// MICROPREDICT: cleave-run: error: --plan prediction: plan.micro = 2: graph mode prices no micro-batches

// An op the planner cannot price is named with its location and what it
// lacks: --predict fails on it before anything is compiled.
// RUN: not cleave-run %t/unpriced.mlir -n 2 --plan dp=2 --predict --inputs %S/Inputs/mlp-batches.safetensors 2>&1 | FileCheck %s --check-prefix=UNPRICED
// UNPRICED: cleave-run: error: --plan prediction: op 'arith.mulf' at loc("{{.*}}unpriced.mlir":5:9) has no sharding rule (ShardingRuleOpInterface): the planner cannot split or price it on the path to the loss

// A program with its own mesh and shardings has no plan to price.
// RUN: cleave-run %t/meshed.mlir -n 2 --inputs %S/Inputs/mlp-batches.safetensors --steps 1 | FileCheck %s --check-prefix=MESHED
// MESHED: no predicted step time: the program carries its own mesh and shardings; the cost model prices a named --plan

//--- gpt.mlir
func.func @forward(%tokens: tensor<4x8xi32> {cleave.input = "tokens"},
                   %targets: tensor<4x8xi32> {cleave.input = "targets"},
                   %emb: tensor<76x16xf32> {cleave.param = "emb"},
                   %q0: tensor<16x16xf32> {cleave.param = "h.0.q"},
                   %k0: tensor<16x16xf32> {cleave.param = "h.0.k"},
                   %v0: tensor<16x16xf32> {cleave.param = "h.0.v"},
                   %o0: tensor<16x16xf32> {cleave.param = "h.0.o"},
                   %up0: tensor<32x16xf32> {cleave.param = "h.0.up"},
                   %down0: tensor<16x32xf32> {cleave.param = "h.0.down"},
                   %q1: tensor<16x16xf32> {cleave.param = "h.1.q"},
                   %k1: tensor<16x16xf32> {cleave.param = "h.1.k"},
                   %v1: tensor<16x16xf32> {cleave.param = "h.1.v"},
                   %o1: tensor<16x16xf32> {cleave.param = "h.1.o"},
                   %up1: tensor<32x16xf32> {cleave.param = "h.1.up"},
                   %down1: tensor<16x32xf32> {cleave.param = "h.1.down"},
                   %head: tensor<76x16xf32> {cleave.param = "head"}) -> tensor<f32> {
  %x0 = cleave.embedding %emb, %tokens : (tensor<76x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  // Block 0.
  %a0 = cleave.matmul %x0, %q0 {transpose_rhs} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %qa0 = cleave.reshape %a0 : tensor<4x8x16xf32> to tensor<4x8x2x8xf32>
  %b0 = cleave.matmul %x0, %k0 {transpose_rhs} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %kb0 = cleave.reshape %b0 : tensor<4x8x16xf32> to tensor<4x8x2x8xf32>
  %c0 = cleave.matmul %x0, %v0 {transpose_rhs} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %vc0 = cleave.reshape %c0 : tensor<4x8x16xf32> to tensor<4x8x2x8xf32>
  %att0 = cleave.attention %qa0, %kb0, %vc0 {causal} : (tensor<4x8x2x8xf32>, tensor<4x8x2x8xf32>, tensor<4x8x2x8xf32>) -> tensor<4x8x2x8xf32>
  %m0 = cleave.reshape %att0 : tensor<4x8x2x8xf32> to tensor<4x8x16xf32>
  %p0 = cleave.matmul %m0, %o0 {transpose_rhs} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %h0 = cleave.add %x0, %p0 : tensor<4x8x16xf32>
  %u0 = cleave.matmul %h0, %up0 {transpose_rhs} : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  %g0 = cleave.gelu %u0 : tensor<4x8x32xf32>
  %d0 = cleave.matmul %g0, %down0 {transpose_rhs} : (tensor<4x8x32xf32>, tensor<16x32xf32>) -> tensor<4x8x16xf32>
  %x1 = cleave.add %h0, %d0 : tensor<4x8x16xf32>
  // Block 1.
  %a1 = cleave.matmul %x1, %q1 {transpose_rhs} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %qa1 = cleave.reshape %a1 : tensor<4x8x16xf32> to tensor<4x8x2x8xf32>
  %b1 = cleave.matmul %x1, %k1 {transpose_rhs} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %kb1 = cleave.reshape %b1 : tensor<4x8x16xf32> to tensor<4x8x2x8xf32>
  %c1 = cleave.matmul %x1, %v1 {transpose_rhs} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %vc1 = cleave.reshape %c1 : tensor<4x8x16xf32> to tensor<4x8x2x8xf32>
  %att1 = cleave.attention %qa1, %kb1, %vc1 {causal} : (tensor<4x8x2x8xf32>, tensor<4x8x2x8xf32>, tensor<4x8x2x8xf32>) -> tensor<4x8x2x8xf32>
  %m1 = cleave.reshape %att1 : tensor<4x8x2x8xf32> to tensor<4x8x16xf32>
  %p1 = cleave.matmul %m1, %o1 {transpose_rhs} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %h1 = cleave.add %x1, %p1 : tensor<4x8x16xf32>
  %u1 = cleave.matmul %h1, %up1 {transpose_rhs} : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  %g1 = cleave.gelu %u1 : tensor<4x8x32xf32>
  %d1 = cleave.matmul %g1, %down1 {transpose_rhs} : (tensor<4x8x32xf32>, tensor<16x32xf32>) -> tensor<4x8x16xf32>
  %x2 = cleave.add %h1, %d1 : tensor<4x8x16xf32>
  %logits = cleave.matmul %x2, %head {transpose_rhs} : (tensor<4x8x16xf32>, tensor<76x16xf32>) -> tensor<4x8x76xf32>
  %loss = cleave.cross_entropy %logits, %targets : (tensor<4x8x76xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

//--- mlp.mlir
func.func @forward(%x: tensor<8x32xf32> {cleave.input = "features"},
                   %y: tensor<8xi32> {cleave.input = "labels"},
                   %w0: tensor<64x32xf32> {cleave.param = "fc0.weight"},
                   %w1: tensor<10x64xf32> {cleave.param = "head.weight"}) -> tensor<f32> {
  %0 = cleave.matmul %x, %w0 {transpose_rhs} : (tensor<8x32xf32>, tensor<64x32xf32>) -> tensor<8x64xf32>
  %1 = cleave.relu %0 : tensor<8x64xf32>
  %2 = cleave.matmul %1, %w1 {transpose_rhs} : (tensor<8x64xf32>, tensor<10x64xf32>) -> tensor<8x10xf32>
  %3 = cleave.cross_entropy %2, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %3 : tensor<f32>
}

//--- unpriced.mlir
func.func @forward(%x: tensor<8x32xf32> {cleave.input = "features"},
                   %y: tensor<8xi32> {cleave.input = "labels"},
                   %w: tensor<10x32xf32> {cleave.param = "w"}) -> tensor<f32> {
  // Squares the features with an op of another dialect.
  %sq = arith.mulf %x, %x : tensor<8x32xf32>
  %0 = cleave.matmul %sq, %w {transpose_rhs} : (tensor<8x32xf32>, tensor<10x32xf32>) -> tensor<8x10xf32>
  %1 = cleave.cross_entropy %0, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %1 : tensor<f32>
}

//--- meshed.mlir
cleave.mesh @mesh(dp = 2 : host)
func.func @forward(%x: tensor<8x32xf32> {cleave.input = "features", cleave.sharding = #cleave.sharding<@mesh, [dp, _]>},
                   %y: tensor<8xi32> {cleave.input = "labels", cleave.sharding = #cleave.sharding<@mesh, [dp]>},
                   %w: tensor<10x32xf32> {cleave.param = "w"}) -> tensor<f32> {
  %0 = cleave.matmul %x, %w {transpose_rhs} : (tensor<8x32xf32>, tensor<10x32xf32>) -> tensor<8x10xf32>
  %1 = cleave.cross_entropy %0, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %1 : tensor<f32>
}
