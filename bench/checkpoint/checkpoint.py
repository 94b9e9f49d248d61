#!/usr/bin/env python3
"""Sharded checkpoints against the disk: cleave-run trains a ~100M-parameter
GPT on 4 local ranks (dp=2,tp=2) and prints, as medians over --reps
repetitions whose variants are interleaved (the machine may be shared):

  * the disk's sequential write speed, measured with dd in this run, twice
    per repetition: through the page cache (1 GiB, fdatasync) and straight
    to the disk (O_DIRECT, 1 GiB); the ratios below are to the faster one;
  * checkpoint write bandwidth during training: all ranks' shard bytes over
    the slowest rank's background write time, and its ratio to dd
    (target >= 0.7);
  * the same for a checkpoint written after the last step, with nothing
    else running;
  * checkpoint read bandwidth of --resume (every rank reads its blocks at
    once; the shards were written past the page cache, so from the disk),
    and its ratio to dd;
  * the wall time of N steps with and without a checkpoint every 10 steps
    (asynchronous: a memcpy snapshot on the training thread, checksum and
    write in the background), run back to back in alternating order, and
    the overhead (target <= 5%), and the CPU seconds of both runs (user +
    system of all ranks, which moves less than wall time with what else
    the machine runs).

With --baseline PATH (another cleave-run, e.g. an older build; its
runtime library from --baseline-lib DIR; --baseline-env KEY=VALUE, which
may repeat, sets its environment, e.g. the same binary with
CLEAVE_CHECKPOINT_NICE=19) its checkpointing runs too, in the same
repetitions, for an A/B comparison under the same load.

Usage: checkpoint.py [--cleave-run PATH] [--dir DIR] [--steps N] [--reps R]
                     [--baseline PATH [--baseline-lib DIR]
                      [--baseline-env KEY=VALUE]...]
The directory needs room for two checkpoints (~1.2 GB each with AdamW)."""
import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

MODEL = ["--model", "tiny-gpt", "--layers", "12", "--hidden", "832",
         "--heads", "13", "--seq", "32", "--batch", "4", "--seed", "1"]


CPU = []  # CPU seconds (user + system) of each run's processes, in order


def run(cmd, env=None):
    start = time.time()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime + after.ru_stime - before.ru_utime -
               before.ru_stime)
    if proc.returncode != 0:
        sys.exit(" ".join(cmd) + " failed:\n" + proc.stdout)
    return proc.stdout, time.time() - start


def dd_write_mb_s(directory, direct):
    path = os.path.join(directory, "dd.test")
    flags = ["oflag=direct", "bs=8M", "count=128"] if direct else \
        ["bs=1M", "count=1024"]
    proc = subprocess.run(["dd", "if=/dev/zero", "of=" + path,
                           "conv=fdatasync"] + flags,
                          stderr=subprocess.PIPE, text=True)
    os.unlink(path)
    m = re.search(r"([\d.]+) s, ([\d.]+) ([MG])B/s", proc.stderr)
    if not m:
        sys.exit("cannot parse dd: " + proc.stderr)
    return float(m.group(2)) * (1000 if m.group(3) == "G" else 1)


def checkpoint_line(text):
    m = re.search(r"checkpoints: (\d+) written, ([\d.]+) MB by all ranks in "
                  r"([\d.]+) s of background writing; ([\d.]+) ms of "
                  r"snapshots", text)
    if not m:
        sys.exit("no checkpoint line in:\n" + text)
    return (int(m.group(1)), float(m.group(2)), float(m.group(3)),
            float(m.group(4)))


def loadavg():
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cleave-run", default="cleave-run")
    parser.add_argument("--dir", default="/tmp/cleave-checkpoint-bench")
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--baseline")
    parser.add_argument("--baseline-lib")
    parser.add_argument("--baseline-env", action="append", default=[])
    opts = parser.parse_args()
    env = dict(os.environ)
    if opts.baseline_lib:
        env["LD_LIBRARY_PATH"] = opts.baseline_lib
    for setting in opts.baseline_env:
        key, _, value = setting.partition("=")
        env[key] = value
    shutil.rmtree(opts.dir, ignore_errors=True)
    os.makedirs(opts.dir)
    base = [opts.cleave_run] + MODEL + ["-n", "4", "--plan", "dp=2,tp=2",
                                        "--log-every", "1000"]
    print(f"load average at start: {loadavg()}", flush=True)
    run(base + ["--steps", "1"])  # Fills the compile cache.
    ckpt = os.path.join(opts.dir, "ckpt")
    dd_cached, dd_direct, plain, timed, write, alone, read, snap = (
        [], [], [], [], [], [], [], [])
    # The baseline's checkpointing runs: time, write, read, snapshot.
    b_timed, b_write, b_read, b_snap = [], [], [], []
    # CPU seconds of the runs without and with checkpoints (less sensitive
    # than wall time to what else the machine runs).
    plain_cpu, timed_cpu, b_cpu = [], [], []

    def checkpointed(binary, timed, cpu, write, snap, read,
                     environment=None):
        """One run with a checkpoint every 10 steps, then its resume."""
        shutil.rmtree(ckpt, ignore_errors=True)
        command = [binary] + base[1:]
        text, seconds = run(command + ["--steps", str(opts.steps),
                                       "--checkpoint", ckpt,
                                       "--checkpoint-every", "10"],
                            environment)
        timed.append(seconds)
        cpu.append(CPU[-1])
        count, mb, busy, snap_ms = checkpoint_line(text)
        write.append(mb / busy)
        snap.append(snap_ms / count)
        text, _ = run(command + ["--steps", "0", "--checkpoint", ckpt,
                                 "--resume"], environment)
        m = re.search(r"read ([\d.]+) MB in ([\d.]+) s", text)
        if not m:
            sys.exit("no resume line in:\n" + text)
        read.append(float(m.group(1)) / float(m.group(2)))

    for rep in range(opts.reps):
        dd_cached.append(dd_write_mb_s(opts.dir, direct=False))
        dd_direct.append(dd_write_mb_s(opts.dir, direct=True))
        variants = ["plain", "ckpt"] + (["baseline"] if opts.baseline else [])
        if rep % 2:
            variants.reverse()
        for variant in variants:
            if variant == "plain":
                _, seconds = run(base + ["--steps", str(opts.steps)])
                plain.append(seconds)
                plain_cpu.append(CPU[-1])
            elif variant == "ckpt":
                checkpointed(opts.cleave_run, timed, timed_cpu, write, snap,
                             read)
            else:
                checkpointed(opts.baseline, b_timed, b_cpu, b_write, b_snap,
                             b_read, env)
        # A checkpoint with nothing else running: the one of the last step.
        shutil.rmtree(ckpt, ignore_errors=True)
        text, _ = run(base + ["--steps", "10", "--checkpoint", ckpt,
                              "--checkpoint-every", "10"])
        count, mb, busy, _ = checkpoint_line(text)
        alone.append(mb / busy)
        print(f"rep {rep + 1}: dd {dd_cached[-1]:.0f} / {dd_direct[-1]:.0f} "
              f"MB/s, write {write[-1]:.0f} MB/s (alone {alone[-1]:.0f}), "
              f"read {read[-1]:.0f} MB/s, {plain[-1]:.1f} s vs "
              f"{timed[-1]:.1f} s (CPU {plain_cpu[-1]:.1f} s vs "
              f"{timed_cpu[-1]:.1f} s)" +
              (f"; baseline write {b_write[-1]:.0f} MB/s, read "
               f"{b_read[-1]:.0f} MB/s, {b_timed[-1]:.1f} s"
               if opts.baseline else "") +
              f"; load average {loadavg()}", flush=True)
    med = statistics.median
    disk = max(med(dd_cached), med(dd_direct))
    print(f"disk sequential write (dd, 1 GiB, median of {opts.reps}): "
          f"{med(dd_cached):.0f} MB/s through the page cache (fdatasync), "
          f"{med(dd_direct):.0f} MB/s O_DIRECT; ratios below are to "
          f"{disk:.0f} MB/s")
    print(f"checkpoint write during training: {med(write):.0f} MB/s over 4 "
          f"ranks; ratio to dd {med(write) / disk:.2f} (target >= 0.7)")
    print(f"checkpoint write after the last step: {med(alone):.0f} MB/s; "
          f"ratio to dd {med(alone) / disk:.2f}")
    print(f"checkpoint read (--resume, from the disk): {med(read):.0f} MB/s; "
          f"ratio to dd {med(read) / disk:.2f}")
    overhead = 100 * (med(timed) - med(plain)) / med(plain)
    print(f"{opts.steps} steps: {med(plain):.1f} s without checkpoints, "
          f"{med(timed):.1f} s with one every 10 ({med(snap):.0f} ms per "
          f"snapshot on the training thread); overhead {overhead:+.1f}% "
          f"(target <= 5%); per repetition: " +
          ", ".join(f"{100 * (t - p) / p:+.1f}%"
                    for p, t in zip(plain, timed)))
    cpu_overhead = med(timed_cpu) - med(plain_cpu)
    print(f"CPU time of the {opts.steps}-step runs: {med(plain_cpu):.1f} s "
          f"without checkpoints, {med(timed_cpu):.1f} s with ("
          f"{cpu_overhead:+.1f} s, "
          f"{100 * cpu_overhead / med(plain_cpu):+.1f}%)" +
          (f"; baseline {med(b_cpu):.1f} s "
           f"({100 * (med(b_cpu) - med(plain_cpu)) / med(plain_cpu):+.1f}%)"
           if opts.baseline else ""))
    if opts.baseline:
        b_overhead = 100 * (med(b_timed) - med(plain)) / med(plain)
        print(f"baseline {opts.baseline} "
              f"{' '.join(opts.baseline_env)}: write {med(b_write):.0f} MB/s "
              f"(ratio {med(b_write) / disk:.2f}), read {med(b_read):.0f} "
              f"MB/s (ratio {med(b_read) / disk:.2f}), {med(b_timed):.1f} s "
              f"with a checkpoint every 10 ({med(b_snap):.0f} ms per "
              f"snapshot); overhead {b_overhead:+.1f}%; per repetition: " +
              ", ".join(f"{100 * (t - p) / p:+.1f}%"
                        for p, t in zip(plain, b_timed)))
    print(f"load average at the end: {loadavg()}")
    shutil.rmtree(opts.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
