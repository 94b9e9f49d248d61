// A custom shape no preset matches (BLOOM-176B: a GPT with 70 layers,
// hidden 14336, 112 heads, vocabulary 250880) on the 384 A100s it was
// trained on: the module is read, priced from its ops, and gets the full
// search's pipelined plan (BLOOM ran tp 4 x pp 12 x dp 8).
// RUN: cleave-models --model gpt3-175b --layers 70 --hidden 14336 --heads 112 --kv-heads 112 --ffn 57344 --vocab 250880 --seq 2048 --batch 2048 --dtype bf16 -o %t.mlir
// RUN: cleave-plan %t.mlir --cluster dgx-a100-80gb --gpus 384 --quiet -o /dev/null | FileCheck %s

// CHECK: model    forward (176B parameters, 70 layers, seq 2048)
// CHECK: chosen plan
// CHECK-NEXT: mesh pp={{([2-9]|[1-9][0-9]+)}} dp={{[0-9]+}} cp=1 tp={{[0-9]+}}
// CHECK: (no preset matches: 70 layers, hidden 14336, 112 heads, vocabulary 250880 read from the module; kernels priced from its ops)
