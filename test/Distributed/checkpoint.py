#!/usr/bin/env python3
"""Sharded checkpoints of cleave-run, end to end.

1. tiny-gpt trains 20 steps on 4 ranks (dp=2,tp=2) straight through.
2. The same run stops after 10 steps, with a checkpoint every 5, and
   resumes to 20 on the same mesh: the final parameters, optimizer state
   and the losses of steps 11-20 are bit-identical to the straight run.
3. The step-10 checkpoint resumes on other meshes and plans (tp=2 and pp=2
   on 2 ranks, dp=4 with ZeRO-3 on 4, one process): each rank reads only the
   saved blocks that overlap its own. They equal the straight run within
   the distributed tests' criterion (equality.py).
4. A checkpoint write that died (a step folder without a manifest, with a
   writer's temporary file in it) is ignored by --resume, which loads the
   last committed one, and removed at start.
5. Rank 1 is killed (SIGKILL, CLEAVE_FAULT_KILL) at step 7 of a 20-step run
   with checkpoints every 5 and --max-restarts 1: the group restarts from
   step 5 and ends bit-identical to the straight run.
6. The same with --restart-ranks 2 --plan-for 2:tp=2: the group restarts on
   2 ranks (the step compiled again for tp=2, the step-5 checkpoint
   resharded onto it) and equals the straight run within the distributed
   tests' criterion; from 2 ranks (dp=2) to 1 with no plan given for 1, the
   planner chooses it.
Prints one line per check."""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "python"))
from cleave import tensorfile  # noqa: E402

LR = 1e-3


def run(cleave_run, out, tag, ranks, plan, *extra, env=None):
    cmd = [cleave_run, "--model", "tiny-gpt", "--seed", "7", "--lr", str(LR),
           "--log-every", "1000", "--save-params",
           os.path.join(out, tag + ".params"), "--save-state",
           "--save-losses", os.path.join(out, tag + ".losses")] + list(extra)
    if ranks > 1:
        cmd += ["-n", str(ranks), "--plan", plan]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=600,
                          env=dict(os.environ, **(env or {})))
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stdout}")
    return proc.stdout


def read(out, tag, what):
    return tensorfile.read(os.path.join(out, f"{tag}.{what}")).tensors


def losses(out, tag):
    return read(out, tag, "losses")["loss"].values()


def params_close(base, got):
    worst = 0.0
    for name, tensor in base.items():
        if name.startswith("cleave.") or name not in got:
            continue
        a, b = tensor.values(), got[name].values()
        bound = 1e-5 * max(abs(v) for v in a) + 0.01 * LR
        worst = max(worst, max(abs(x - y) for x, y in zip(a, b)) / bound)
    return worst


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cleave-run", required=True)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        ckpt = os.path.join(out, "ckpt")
        run(opts.cleave_run, out, "straight", 4, "dp=2,tp=2", "--steps", "20")
        run(opts.cleave_run, out, "first", 4, "dp=2,tp=2", "--steps", "10",
            "--checkpoint", ckpt, "--checkpoint-every", "5")
        print("committed:", sorted(os.listdir(ckpt)))
        text = run(opts.cleave_run, out, "same", 4, "dp=2,tp=2", "--steps",
                   "20", "--checkpoint", ckpt, "--resume")
        print("same mesh:", "resuming from" in text,
              "bit-identical parameters and state:",
              open(os.path.join(out, "straight.params"), "rb").read() ==
              open(os.path.join(out, "same.params"), "rb").read(),
              "bit-identical losses 11-20:",
              losses(out, "straight")[10:] == losses(out, "same"))
        straight = read(out, "straight", "params")
        for ranks, plan in [(2, "tp=2"), (2, "pp=2"), (4, "dp=4,zero=3"),
                            (1, "")]:
            tag = f"r{ranks}-{plan.replace(',', '-').replace('=', '')}"
            run(opts.cleave_run, out, tag, ranks, plan, "--steps", "20",
                "--checkpoint", ckpt, "--resume")
            a, b = losses(out, "straight")[10:], losses(out, tag)
            loss_ok = all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b))
            worst = params_close(straight, read(out, tag, "params"))
            print(f"onto {ranks}:{plan or 'one process'}: losses equal",
                  loss_ok, "parameters equal", worst <= 1.0)
        # A write that died at step 15: no manifest, a temporary file.
        dead = os.path.join(ckpt, "step-00000015")
        os.makedirs(dead)
        with open(os.path.join(dead, "shard-0.ckpt.tmp.vm.999999.0"), "wb") as f:
            f.write(b"partial")
        text = run(opts.cleave_run, out, "after-crash", 4, "dp=2,tp=2",
                   "--steps", "20", "--checkpoint", ckpt, "--resume")
        print("after a dead write:",
              "resuming from " + os.path.join(ckpt, "step-00000010") in text,
              "dead folder removed:", not os.path.exists(dead),
              "equal:", losses(out, "straight")[10:] ==
              losses(out, "after-crash"))
        text = run(opts.cleave_run, out, "killed", 4, "dp=2,tp=2", "--steps",
                   "20", "--checkpoint", os.path.join(out, "ckpt2"),
                   "--checkpoint-every", "5", "--max-restarts", "1",
                   env={"CLEAVE_FAULT_KILL": "1:7"})
        print("killed at step 7:", "was killed by signal 9" in text,
              "restarted from step 5:",
              "restart 1 of 1 from " + os.path.join(out, "ckpt2",
                                                    "step-00000005") in text,
              "bit-identical parameters:",
              open(os.path.join(out, "straight.params"), "rb").read() ==
              open(os.path.join(out, "killed.params"), "rb").read())
        # The same, restarting on 2 ranks: the step is compiled again with
        # the plan given for 2 ranks and the checkpoint resharded onto it.
        text = run(opts.cleave_run, out, "shrunk", 4, "dp=2,tp=2", "--steps",
                   "20", "--checkpoint", os.path.join(out, "ckpt3"),
                   "--checkpoint-every", "5", "--max-restarts", "1",
                   "--restart-ranks", "2", "--plan-for", "2:tp=2",
                   env={"CLEAVE_FAULT_KILL": "1:7"})
        a, b = losses(out, "straight")[5:], losses(out, "shrunk")
        print("restart on 2 ranks:",
              "restart 1 of 1 from " + os.path.join(out, "ckpt3",
                                                    "step-00000005") +
              " on 2 ranks" in text,
              "plan tp=2:", "for 2 ranks on mesh (tp=2)" in text,
              "losses equal", len(a) == len(b) and
              all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)),
              "parameters equal",
              params_close(straight, read(out, "shrunk", "params")) <= 1.0)
        # From 2 ranks to 1 with no plan given for 1: the planner's.
        text = run(opts.cleave_run, out, "planned", 2, "dp=2", "--steps",
                   "10", "--checkpoint", os.path.join(out, "ckpt4"),
                   "--checkpoint-every", "5", "--max-restarts", "1",
                   "--restart-ranks", "1", env={"CLEAVE_FAULT_KILL": "1:7"})
        a, b = losses(out, "straight")[5:10], losses(out, "planned")
        print("restart on 1 rank:", "plan 'auto' (the planner's choice" in text,
              "from step 5:", "resuming from " +
              os.path.join(out, "ckpt4", "step-00000005") in text,
              "losses equal", len(a) == len(b) and
              all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)))


if __name__ == "__main__":
    main()
