#!/usr/bin/env python3
"""cleave-run --on-nan stop|skip|rollback, end to end, on 1 rank and on 2
(tp=2). CLEAVE_FAULT_NAN=RANK:STEP makes the loss and an updated parameter
of that step NaN on that rank only (the last one), as a diverged batch
would; the other rank's step is finite, so the ranks must agree.

1. stop: the run fails, naming the step.
2. skip, 7 steps: the parameters and optimizer state equal those of a
   straight 6-step run bit for bit (the update of step 7 is dropped on every
   rank); skip, 10 steps: every later loss is finite and the same on every
   rank.
3. rollback, 10 steps, checkpoints every 5: the run goes back to step 5,
   runs step 6 again, passes over batch 7 and ends bit-identical to the
   skip run (both leave out batch 7's update).
Prints one line per check."""
import argparse
import math
import os
import subprocess
import sys
import tempfile

from checkpoint import read, losses  # noqa: E402  (this directory)


def launch(cleave_run, out, tag, ranks, plan, *extra, nan_rank=0):
    cmd = [cleave_run, "--model", "tiny-gpt", "--seed", "7", "--log-every",
           "1000", "--save-params", os.path.join(out, tag + ".params"),
           "--save-state", "--save-losses",
           os.path.join(out, tag + ".losses")] + list(extra)
    if ranks > 1:
        cmd += ["-n", str(ranks), "--plan", plan]
    env = dict(os.environ)
    if nan_rank is not None:
        env["CLEAVE_FAULT_NAN"] = f"{nan_rank}:7"
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300, env=env)
    return proc.returncode, proc.stdout


def checked(cleave_run, out, tag, ranks, plan, *extra, nan_rank=0):
    rc, text = launch(cleave_run, out, tag, ranks, plan, *extra,
                      nan_rank=nan_rank)
    if rc != 0:
        sys.exit(f"{tag} failed:\n{text}")
    return text


def tensors(out, tag):
    """The parameters and optimizer state, without the counters."""
    return {k: t.values() for k, t in read(out, tag, "params").items()
            if not k.startswith("cleave.")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cleave-run", required=True)
    opts = parser.parse_args()
    for ranks, plan in [(1, ""), (2, "tp=2")]:
        with tempfile.TemporaryDirectory() as out:
            run = opts.cleave_run
            bad = ranks - 1
            rc, text = launch(run, out, "stop", ranks, plan, "--steps", "10",
                              nan_rank=bad)
            print(f"{ranks} rank(s): stop: failed {rc != 0}, names step 7:",
                  "the loss is NaN at step 7" in text)
            checked(run, out, "straight6", ranks, plan, "--steps", "6",
                    nan_rank=None)
            checked(run, out, "skip7", ranks, plan, "--steps", "7",
                    "--on-nan", "skip", nan_rank=bad)
            print(f"{ranks} rank(s): skip: step 7 dropped on every rank:",
                  tensors(out, "straight6") == tensors(out, "skip7"))
            text = checked(run, out, "skip", ranks, plan, "--steps", "10",
                           "--on-nan", "skip", nan_rank=bad)
            loss = losses(out, "skip")
            rows = read(out, "skip", "losses")["loss_by_rank"].values()
            agree = all(rows[r * 10 + s] == rows[s] for r in range(ranks)
                        for s in range(7, 10))
            print(f"{ranks} rank(s): skip: said so:",
                  "step 7: the loss is NaN or infinite" in text,
                  "loss 7 NaN on rank", bad, math.isnan(rows[bad * 10 + 6]),
                  "later losses finite and equal on every rank:",
                  all(math.isfinite(v) for v in loss[7:]) and agree)
            text = checked(run, out, "rollback", ranks, plan, "--steps", "10",
                           "--on-nan", "rollback", "--checkpoint",
                           os.path.join(out, "ckpt"), "--checkpoint-every",
                           "5", nan_rank=bad)
            print(f"{ranks} rank(s): rollback: back to step 5:",
                  "rolled back to " + os.path.join(out, "ckpt",
                                                   "step-00000005") in text,
                  "equal to skip:",
                  tensors(out, "skip") == tensors(out, "rollback") and
                  losses(out, "rollback")[7:] == loss[7:])


if __name__ == "__main__":
    main()
