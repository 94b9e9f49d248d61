// SIGTERM to cleave-run -n N ends the ranks and exits 143 (128 + SIGTERM),
// as a shell and a job scheduler expect; SIGINT keeps 130.
// RUN: %python %S/Inputs/sigterm.py cleave-run -n 2 --model tiny-gpt --steps 100000 --log-every 1 | FileCheck %s
// CHECK: exit status 143
// CHECK: interrupted message True

func.func @unused() {
  return
}
