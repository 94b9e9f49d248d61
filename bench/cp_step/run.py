"""Context-parallel step time: `cleave-run --plan cp=N` against one process,
beside the cost model's prediction for the same model and plan.

    /usr/bin/python3 bench/cp_step/run.py [--build build] [--seqs 1024 4096]
                                          [--ranks 2 4]

For each sequence length, runs the zoo GPT (shape below) on one process and
on N local ranks with cp=N (1 thread per rank) in each --layouts
(balanced: rank r holds chunks r and 2N-1-r, the default for causal models;
contiguous: rank r holds block r), prints the median step time and peak
memory of each beside `cleave-run --predict`'s (the cost model on the
planner's local-cpu cluster, priced from the program's ops for that plan
and layout). Runs are interleaved (one, cp=2, cp=4, then again) and the
median over --repeats is reported; the machine load is printed first.
Prints numbers only: it is not a test.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def measure(build, shape, ranks, layout, steps):
    """(measured median ms/step, predicted ms/step, measured peak MiB,
    predicted peak MiB) of one run; the prediction is cleave-run --predict's:
    the cost model on the planner's local-cpu cluster, priced from the
    program's ops for this plan and layout."""
    cmd = [os.path.join(build, "bin", "cleave-run"), *shape, "--steps",
           str(steps), "--log-every", "1000", "--predict"]
    if ranks > 1:
        cmd += ["-n", str(ranks), "--plan", f"cp={ranks},cp-layout={layout}"]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    text = out.stdout + out.stderr
    m = re.search(r"median ([0-9.]+) ms/step", text)
    pred = re.search(r"predicted by the cost model: ([0-9.]+) ms/step, "
                     r"peak memory ([0-9.]+) MiB", text)
    peak = re.search(r"peak memory: ([0-9.]+) MiB per rank", text)
    return (float(m.group(1)), float(pred.group(1)) if pred else None,
            float(peak.group(1)) if peak else None,
            float(pred.group(2)) if pred else None)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--seqs", type=int, nargs="+", default=[1024, 4096])
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=65)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--layouts", nargs="+", default=["balanced", "contiguous"],
                   choices=["balanced", "contiguous"])
    a = p.parse_args()
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"gpt: {a.layers} layers, hidden {a.hidden}, {a.heads} heads, "
          f"vocab {a.vocab}, batch {a.batch}, f32, 1 thread per rank; "
          f"median of {a.repeats} runs x {a.steps - 1} steps")
    print(f"{'seq':>5} {'ranks':>5} {'plan':>18} {'measured ms':>11} "
          f"{'predicted ms':>12} {'peak MiB':>9} {'predicted MiB':>13}")
    for seq in a.seqs:
        shape = ["--model", "tiny-gpt", "--layers", str(a.layers),
                 "--hidden", str(a.hidden), "--heads", str(a.heads),
                 "--seq", str(seq), "--batch", str(a.batch)]
        configs = [(1, "-")] + [(r, l) for r in a.ranks for l in a.layouts]
        runs = {c: [] for c in configs}
        for _ in range(a.repeats):
            for c in configs:
                runs[c].append(measure(a.build, shape, c[0], c[1], a.steps))
        for r, layout in configs:
            got = runs[(r, layout)]
            plan = "one" if r == 1 else f"cp={r},{layout}"
            ms = statistics.median(g[0] for g in got)
            pred, peak, pred_peak = got[0][1], got[0][2], got[0][3]
            fmt = lambda x, w: f"{x:{w}.1f}" if x is not None else f"{'-':>{w}}"
            print(f"{seq:>5} {r:>5} {plan:>18} {ms:11.1f} {fmt(pred, 12)} "
                  f"{fmt(peak, 9)} {fmt(pred_peak, 13)}", flush=True)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
