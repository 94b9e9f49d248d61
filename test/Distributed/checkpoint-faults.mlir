// Checkpoints that go wrong (checkpoint-faults.py says what each line
// checks): cleave-run killed with SIGKILL while a rank's writer is held
// halfway through a shard (CLEAVE_FAULT_STALL_WRITE), and shards whose
// checksums or sizes no longer match the manifest.
// RUN: %python %S/checkpoint-faults.py --cleave-run cleave-run | FileCheck %s
// CHECK: killed mid-write: step 10 uncommitted: True temporary file left: True step 5 committed: True
// CHECK: next start: loads step 5: True no temporary file: True step 10 folder removed: True
// CHECK: manifest shard checksums are the files' CRC32C: True
// CHECK: flipped byte: named: True fell back to step 5: True
// CHECK: both bad: failed True names the truncated shard: True no checkpoint loads: True

func.func @unused() {
  return
}
