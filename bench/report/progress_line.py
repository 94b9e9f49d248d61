"""What cleave-run's progress line costs: tiny-gpt's step time with the line
on every step (--log-every 1) and with it only after the first and last
steps (--log-every = --steps), alternating over --rounds rounds.

    python3 bench/report/progress_line.py [--build build] [--steps 300]
        [--rounds 5] [--ranks 1 4]

Each number is cleave-run's own "then median X ms/step" (rank 0, the steps
after the first); the row shows the median over rounds of each side and the
difference per step. The load average is printed with it: the machine is
shared. A benchmark, not a test.
"""

import argparse
import os
import re
import statistics
import subprocess


def step_ms(args, ranks, log_every):
    cmd = [os.path.join(args.build, "bin", "cleave-run"), "--model", "tiny-gpt",
           "--steps", str(args.steps), "--log-every", str(log_every)]
    if ranks > 1:
        cmd += ["-n", str(ranks), "--plan", "dp=2,tp=2" if ranks == 4 else
                "dp=%d" % ranks]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return float(re.search(r"then median ([0-9.]+) ms/step", out.stdout)[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 4])
    args = ap.parse_args()
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())
    print("ranks  every step (ms)  first+last only (ms)  difference (ms/step)")
    for ranks in args.ranks:
        on, off = [], []
        for r in range(args.rounds):
            order = [(on, 1), (off, args.steps)]
            for side, every in order if r % 2 == 0 else order[::-1]:
                side.append(step_ms(args, ranks, every))
        a, b = statistics.median(on), statistics.median(off)
        print("%5d  %15.3f  %20.3f  %+20.3f" % (ranks, a, b, a - b))
    print("load average after: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
