// A stopped rank (SIGSTOP) is declared hung after --heartbeat-timeout: every
// other rank stops naming it, the launcher kills it, and cleave-run ends
// within the heartbeat timeout plus 5 s.
// RUN: %python %S/Inputs/sigstop.py cleave-run -n 3 --plan dp=3 --model tiny-gpt --batch 3 --steps 100000 --log-every 1 --heartbeat-timeout 2 | FileCheck %s
// CHECK: exit status 1
// CHECK: ended within 7 s
// Both waiting ranks name rank 2, whichever sees its stale heartbeat first:
// the other's call then fails on the closed connections, and it checks the
// heartbeats of the ranks it waits for before it reports.
// CHECK-DAG: [rank 0] {{.*}}rank 2 is hung: its last heartbeat was
// CHECK-DAG: [rank 1] {{.*}}rank 2 is hung: its last heartbeat was
// CHECK-DAG: cleave_launch_local: rank 2 (pid {{[0-9]+}}) is stopped; killing it

func.func @unused() {
  return
}
