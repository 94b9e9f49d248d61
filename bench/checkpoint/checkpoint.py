#!/usr/bin/env python3
"""Sharded checkpoints against the disk: cleave-run trains a ~100M-parameter
GPT on 4 local ranks and prints

  * the disk's sequential write speed (dd, 1 GiB, fdatasync), in this run;
  * checkpoint write bandwidth: all ranks' shard bytes over the slowest
    rank's background write time, and its ratio to dd (target >= 0.7);
  * checkpoint read bandwidth of --resume (every rank reads its blocks at
    once), and its ratio to dd;
  * the training time of N steps with and without a checkpoint every 10
    steps (asynchronous: snapshot on the training thread, write in the
    background), and the overhead (target <= 5%).

Usage: checkpoint.py [--cleave-run PATH] [--dir DIR] [--steps N]
The directory needs room for two checkpoints (~1.2 GB each with AdamW)."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

MODEL = ["--model", "tiny-gpt", "--layers", "12", "--hidden", "832",
         "--heads", "13", "--seq", "32", "--batch", "4", "--seed", "1"]


def run(cmd):
    start = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    if proc.returncode != 0:
        sys.exit(" ".join(cmd) + " failed:\n" + proc.stdout)
    return proc.stdout, time.time() - start


def dd_write_mb_s(directory):
    path = os.path.join(directory, "dd.test")
    proc = subprocess.run(["dd", "if=/dev/zero", "of=" + path, "bs=1M",
                           "count=1024", "conv=fdatasync"],
                          stderr=subprocess.PIPE, text=True)
    os.unlink(path)
    m = re.search(r"([\d.]+) s, ([\d.]+) ([MG])B/s", proc.stderr)
    if not m:
        sys.exit("cannot parse dd: " + proc.stderr)
    return float(m.group(2)) * (1000 if m.group(3) == "G" else 1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cleave-run", default="cleave-run")
    parser.add_argument("--dir", default="/tmp/cleave-checkpoint-bench")
    parser.add_argument("--steps", type=int, default=25)
    opts = parser.parse_args()
    shutil.rmtree(opts.dir, ignore_errors=True)
    os.makedirs(opts.dir)
    base = [opts.cleave_run] + MODEL + ["-n", "4", "--plan", "dp=2,tp=2",
                                        "--log-every", "1000"]
    run(base + ["--steps", "1"])  # Fills the compile cache.
    disk = dd_write_mb_s(opts.dir)
    print(f"disk sequential write (dd, 1 GiB, fdatasync): {disk:.0f} MB/s")
    plain, plain_s = run(base + ["--steps", str(opts.steps)])
    ckpt = os.path.join(opts.dir, "ckpt")
    text, ckpt_s = run(base + ["--steps", str(opts.steps), "--checkpoint",
                               ckpt, "--checkpoint-every", "10"])
    m = re.search(r"checkpoints: (\d+) written, ([\d.]+) MB by all ranks in "
                  r"([\d.]+) s of background writing; ([\d.]+) ms of "
                  r"snapshots", text)
    if not m:
        sys.exit("no checkpoint line in:\n" + text)
    count, mb, seconds, snap_ms = (int(m.group(1)), float(m.group(2)),
                                   float(m.group(3)), float(m.group(4)))
    write = mb / seconds
    print(f"checkpoint write: {count} checkpoints, {mb / count:.0f} MB each, "
          f"{write:.0f} MB/s over 4 ranks; ratio to dd {write / disk:.2f} "
          f"(target >= 0.7)")
    text, _ = run(base + ["--steps", "0", "--checkpoint", ckpt, "--resume"])
    m = re.search(r"read ([\d.]+) MB in ([\d.]+) s", text)
    if not m:
        sys.exit("no resume line in:\n" + text)
    read = float(m.group(1)) / float(m.group(2))
    print(f"checkpoint read (--resume): {float(m.group(1)):.0f} MB in "
          f"{float(m.group(2)):.2f} s, {read:.0f} MB/s; ratio to dd "
          f"{read / disk:.2f}")
    print(f"{opts.steps} steps: {plain_s:.1f} s without checkpoints, "
          f"{ckpt_s:.1f} s with one every 10 ({snap_ms:.0f} ms of snapshots "
          f"on the training thread); overhead "
          f"{100 * (ckpt_s - plain_s) / plain_s:+.1f}% (target <= 5%)")
    shutil.rmtree(opts.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
