#!/usr/bin/env python3
"""Checkpoints that go wrong, end to end (2 ranks, tp=2).

1. kill -9 during a checkpoint write: CLEAVE_FAULT_STALL_WRITE holds rank
   1's writer halfway through its step-10 shard (after the header and half
   of the tensors); the test kills cleave-run with SIGKILL (the ranks die
   with it). Step 10 has no manifest and a temporary file; step 5 is
   committed. The next start (--resume) loads step 5, and no temporary
   file survives it.
2. Checksums: the manifest records each shard's CRC32C, which equals the
   CRC32C of the shard file (computed here). A byte flipped in the data of
   a step-10 shard makes --resume name the file and the checkpoint and
   fall back to step 5; a step-5 shard truncated as well makes it fail,
   naming both.
Prints one line per check."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from checkpoint import run  # noqa: E402  (this directory)


def crc32c(data):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ table[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def temporaries(root):
    return [f for _, _, files in os.walk(root) for f in files if ".tmp" in f]


def kill_mid_write(cleave_run, out, ckpt):
    cmd = [cleave_run, "--model", "tiny-gpt", "--seed", "7", "-n", "2",
           "--plan", "tp=2", "--steps", "10", "--log-every", "1000",
           "--checkpoint", ckpt, "--checkpoint-every", "5"]
    env = dict(os.environ,
               CLEAVE_FAULT_STALL_WRITE="step-00000010/shard-1.ckpt")
    log = os.path.join(out, "stalled.log")
    with open(log, "w") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT,
                                env=env)
        deadline = time.time() + 120
        committed = os.path.join(ckpt, "step-00000005", "manifest.json")
        # Rank 0 commits step 5 in the background once both step-5 shards
        # are written (rank 1's is, before its writer stalls at step 10):
        # the kill waits for that commit, which would otherwise race it.
        while ("stalled writing" not in open(log).read() or
               not os.path.exists(committed)):
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                sys.exit("the writer did not stall:\n" + open(log).read())
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    time.sleep(0.5)  # the ranks die with their parent (PDEATHSIG)
    dead = os.path.join(ckpt, "step-00000010")
    print("killed mid-write: step 10 uncommitted:",
          not os.path.exists(os.path.join(dead, "manifest.json")),
          "temporary file left:", len(temporaries(dead)) > 0,
          "step 5 committed:", os.path.exists(
              os.path.join(ckpt, "step-00000005", "manifest.json")))
    text = run(cleave_run, out, "after-kill", 2, "tp=2", "--steps", "10",
               "--checkpoint", ckpt, "--resume")
    print("next start: loads step 5:",
          "resuming from " + os.path.join(ckpt, "step-00000005") in text,
          "no temporary file:", temporaries(ckpt) == [],
          "step 10 folder removed:", not os.path.exists(dead))


def resume(cleave_run, out, ckpt):
    cmd = [cleave_run, "--model", "tiny-gpt", "--seed", "7", "-n", "2",
           "--plan", "tp=2", "--steps", "12", "--log-every", "1000",
           "--checkpoint", ckpt, "--resume"]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    return proc.returncode, proc.stdout


def corrupt(cleave_run, out, ckpt):
    run(cleave_run, out, "written", 2, "tp=2", "--steps", "10",
        "--checkpoint", ckpt, "--checkpoint-every", "5")
    step10 = os.path.join(ckpt, "step-00000010")
    manifest = json.load(open(os.path.join(step10, "manifest.json")))
    print("manifest shard checksums are the files' CRC32C:", all(
        int(s["crc32c"], 16) ==
        crc32c(open(os.path.join(step10, s["file"]), "rb").read())
        for s in manifest["shards"]))
    shard = os.path.join(step10, "shard-1.ckpt")
    data = bytearray(open(shard, "rb").read())
    data[-100] ^= 0x40
    open(shard, "wb").write(data)
    rc, text = resume(cleave_run, out, ckpt)
    print("flipped byte: named:",
          f"checkpoint {step10} is corrupted: shard file {shard}" in text,
          "fell back to step 5:", rc == 0 and "resuming from " +
          os.path.join(ckpt, "step-00000005") in text)
    step5 = os.path.join(ckpt, "step-00000005", "shard-0.ckpt")
    os.truncate(step5, 100)
    rc, text = resume(cleave_run, out, ckpt)
    print("both bad: failed", rc != 0, "names the truncated shard:",
          f"shard file {step5} has 100 bytes but the manifest says" in text,
          "no checkpoint loads:", "no checkpoint in " + ckpt +
          " loads on every rank" in text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cleave-run", required=True)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        kill_mid_write(opts.cleave_run, out, os.path.join(out, "ckpt"))
        corrupt(opts.cleave_run, out, os.path.join(out, "ckpt2"))


if __name__ == "__main__":
    main()
