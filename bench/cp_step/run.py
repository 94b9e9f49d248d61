"""Context-parallel step time: `cleave-run --plan cp=N` against one process,
beside the cost model's prediction for the same model and plan.

    /usr/bin/python3 bench/cp_step/run.py [--build build] [--seqs 1024 4096]
                                          [--ranks 2 4]

For each sequence length, runs the zoo GPT (shape below) on one process and
on N local ranks with cp=N (1 thread per rank) in each --layouts
(balanced: rank r holds chunks r and 2N-1-r, the default for causal models;
contiguous: rank r holds block r), prints the median step time of each, and `cleave-estimate`'s step time for the same plan on the
planner's local-cpu cluster (lib/Planner/Cluster.cpp, written out as a
cluster file). Runs are interleaved (one, cp=2, cp=4, then again) and the
median over --repeats is reported; the machine load is printed first.
Prints numbers only: it is not a test.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def local_cpu(ranks):
    """lib/Planner/Cluster.cpp's local-cpu spec as a cluster file."""
    peak = 230e9 / ranks / 1e12
    return {
        "name": "local-cpu", "nodes": 1, "gpus_per_node": ranks,
        "gpu": {"name": "cpu-process",
                "peak_tflops": {"fp32": peak, "tf32": peak, "bf16": peak,
                                "fp16": peak, "fp8": 0},
                "hbm_gb": 24 * 2**30 / ranks / 1e9,
                "hbm_tb_per_s": 20e9 / ranks / 1e12, "sm_count": 1,
                "gemm_efficiency": 0.7, "memory_efficiency": 0.5},
        "intra_node": {"kind": "pcie", "gb_per_s": 1, "latency_us": 50,
                       "nvls": False},
        "inter_node": {"nics_per_node": 1, "nic_gbit_per_s": 8,
                       "latency_us": 50, "rail_optimized": False,
                       "sharp": False},
    }


def measure(build, shape, ranks, layout, steps):
    cmd = [os.path.join(build, "bin", "cleave-run"), *shape, "--steps",
           str(steps), "--log-every", "1000"]
    if ranks > 1:
        cmd += ["-n", str(ranks), "--plan", f"cp={ranks},cp-layout={layout}"]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    m = re.search(r"median ([0-9.]+) ms/step", out.stdout)
    return float(m.group(1))


def predict(build, a, seq, ranks, tmp):
    path = os.path.join(tmp, f"local-cpu-{ranks}.json")
    with open(path, "w") as f:
        json.dump(local_cpu(ranks), f)
    cmd = [os.path.join(build, "bin", "cleave-estimate"), "--arch", "gpt",
           "--layers", str(a.layers), "--hidden", str(a.hidden), "--heads",
           str(a.heads), "--vocab", str(a.vocab), "--seq-len", str(seq),
           "--cluster-file", path, "--cp", str(ranks), "--dp", "1",
           "--micro-batch", str(a.batch), "--dtype", "f32", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None
    report = json.loads(out.stdout)
    return 1000.0 * report["step_time_s"]


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
          f"{'predicted ms':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for seq in a.seqs:
            shape = ["--model", "tiny-gpt", "--layers", str(a.layers),
                     "--hidden", str(a.hidden), "--heads", str(a.heads),
                     "--seq", str(seq), "--batch", str(a.batch)]
            configs = [(1, "-")] + [(r, l) for r in a.ranks
                                    for l in a.layouts]
            times = {c: [] for c in configs}
            for _ in range(a.repeats):
                for c in configs:
                    times[c].append(measure(a.build, shape, c[0], c[1],
                                            a.steps))
            for r, layout in configs:
                # The model prices the balanced layout.
                pred = predict(a.build, a, seq, r, tmp)
                plan = "one" if r == 1 else f"cp={r},{layout}"
                pred_text = f"{pred:12.1f}" if pred is not None else f"{'-':>12}"
                print(f"{seq:>5} {r:>5} {plan:>18} "
                      f"{statistics.median(times[(r, layout)]):11.1f} "
                      f"{pred_text}", flush=True)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
