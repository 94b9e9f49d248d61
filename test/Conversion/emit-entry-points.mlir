// RUN: cleave-opt %s --cleave-emit-entry-points --split-input-file --verify-diagnostics | FileCheck %s

// CHECK-LABEL: llvm.func @cleave_entry_step(%{{.*}}: !llvm.ptr)
// CHECK: %[[S0:.*]] = llvm.getelementptr %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[P0:.*]] = llvm.load %[[S0]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[S1:.*]] = llvm.getelementptr %arg0[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[P1:.*]] = llvm.load %[[S1]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.call @step(%[[P0]], %[[P1]]) : (!llvm.ptr, !llvm.ptr) -> ()
// CHECK-NOT: cleave_entry_cleave_rt_gemm
llvm.func @cleave_rt_gemm(!llvm.ptr)
llvm.func @step(%a: !llvm.ptr, %b: !llvm.ptr) {
  llvm.return
}

// -----

// expected-error @below {{cannot emit an entry point: argument #0 is 'i64', not a buffer pointer}}
llvm.func @scalar(%a: i64) {
  llvm.return
}
