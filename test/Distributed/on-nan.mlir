// cleave-run --on-nan stop|skip|rollback on 1 and 2 ranks, with a NaN loss
// forced at step 7 on the last rank only (on-nan.py says what each line
// checks).
// RUN: %python %S/on-nan.py --cleave-run cleave-run | FileCheck %s
// CHECK: 1 rank(s): stop: failed True, names step 7: True
// CHECK: 1 rank(s): skip: step 7 dropped on every rank: True
// CHECK: 1 rank(s): skip: said so: True loss 7 NaN on rank 0 True later losses finite and equal on every rank: True
// CHECK: 1 rank(s): rollback: back to step 5: True equal to skip: True
// CHECK: 2 rank(s): stop: failed True, names step 7: True
// CHECK: 2 rank(s): skip: step 7 dropped on every rank: True
// CHECK: 2 rank(s): skip: said so: True loss 7 NaN on rank 1 True later losses finite and equal on every rank: True
// CHECK: 2 rank(s): rollback: back to step 5: True equal to skip: True

func.func @unused() {
  return
}
