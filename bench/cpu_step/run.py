"""Train-step time of a small GPT: Cleave (compiled, OpenBLAS) against
PyTorch 1.13 eager on the CPU, same model, same thread count, in one run.

    /usr/bin/python3 bench/cpu_step/run.py [--build build] [--threads 1 2]

Prints one row per thread count and the ratio PyTorch / Cleave (> 1 means
Cleave is faster). Median of --steps steps after --warmup steps.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run(command, threads):
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    out = subprocess.run(command, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{command[0]} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--arch", default="gpt", choices=["gpt", "llama"])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()
    shape = ["--arch", a.arch, "--layers", str(a.layers), "--hidden", str(a.hidden),
             "--heads", str(a.heads), "--seq", str(a.seq), "--batch", str(a.batch),
             "--steps", str(a.steps)]
    print(f"{a.arch}: {a.layers} layers, hidden {a.hidden}, {a.heads} heads, "
          f"seq {a.seq}, batch {a.batch}; median of {a.steps} steps (forward, backward, AdamW)")
    print(f"{'threads':>7} {'cleave ms':>10} {'torch ms':>9} {'ratio':>6}  (compile s)")
    for threads in a.threads:
        cleave = run([os.path.join(a.build, "bin", "cleave-bench-train-step"), *shape], threads)
        torch_ = run(["/usr/bin/python3", os.path.join(HERE, "torch_step.py"), *shape,
                      "--threads", str(threads)], threads)
        ratio = torch_["median_ms"] / cleave["median_ms"]
        print(f"{threads:>7} {cleave['median_ms']:>10.1f} {torch_['median_ms']:>9.1f} "
              f"{ratio:>6.2f}  ({cleave['compile_s']:.1f})")


if __name__ == "__main__":
    main()
