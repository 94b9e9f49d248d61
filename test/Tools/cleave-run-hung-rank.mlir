// A stopped rank (SIGSTOP) is declared hung after --heartbeat-timeout: the
// other ranks stop naming it, the launcher kills it, and cleave-run ends
// within the heartbeat timeout plus 5 s.
// RUN: %python %S/Inputs/sigstop.py cleave-run -n 3 --plan dp=3 --model tiny-gpt --batch 3 --steps 100000 --log-every 1 --heartbeat-timeout 2 | FileCheck %s
// CHECK: exit status 1
// CHECK: ended within 7 s
// The first waiting rank to see the stale heartbeat names rank 2 and ends
// the job; the other may be terminated before its own check (under load,
// either comes first).
// CHECK-DAG: [rank {{[01]}}] {{.*}}rank 2 is hung: its last heartbeat was
// CHECK-DAG: cleave_launch_local: rank 2 (pid {{[0-9]+}}) is stopped; killing it

func.func @unused() {
  return
}
