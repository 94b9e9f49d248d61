// Sharded, resumable checkpoints (checkpoint.py says what each line checks):
// bit-exact resume on the same mesh, restore onto other meshes and plans,
// a checkpoint write that died is skipped and cleaned up, and a rank killed
// mid-run is restarted from the newest checkpoint (--max-restarts), on as
// many ranks and on fewer (--restart-ranks).
// RUN: %python %S/checkpoint.py --cleave-run cleave-run | FileCheck %s
// CHECK: committed: ['step-00000005', 'step-00000010']
// CHECK: same mesh: True bit-identical parameters and state: True bit-identical losses 11-20: True
// CHECK: onto 2:tp=2: losses equal True parameters equal True
// CHECK: onto 2:pp=2: losses equal True parameters equal True
// CHECK: onto 4:dp=4,zero=3: losses equal True parameters equal True
// CHECK: onto 1:one process: losses equal True parameters equal True
// CHECK: after a dead write: True dead folder removed: True equal: True
// CHECK: killed at step 7: True restarted from step 5: True bit-identical parameters: True
// CHECK: restart on 2 ranks: True plan tp=2: True losses equal True parameters equal True
// CHECK: restart on 1 rank: True from step 5: True losses equal True

func.func @unused() {
  return
}
