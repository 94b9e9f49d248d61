// A tool whose reader closes the pipe early ends normally, as Unix tools do:
// lit runs every pipeline under pipefail, so a non-zero exit of the writer
// (LLVM's default is 74, EX_IOERR) fails the RUN line. The outputs are far
// larger than a pipe's buffer, so each writer does see the closed pipe.

// RUN: cleave-models --model gpt3-175b | head -n 1 | FileCheck %s --check-prefix=MODELS
// MODELS: module

// RUN: cleave-models --model gpt3-175b > %t.mlir
// RUN: cleave-opt %t.mlir | head -n 1 | FileCheck %s --check-prefix=OPT
// OPT: module

