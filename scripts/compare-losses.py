#!/usr/bin/env python3
"""Prints two runs' losses side by side (files written by cleave-run
--save-losses) and the largest relative difference over every step and
rank. Usage: compare-losses.py REFERENCE OTHER [--every N]"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from cleave import tensorfile  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("reference")
    parser.add_argument("other")
    parser.add_argument("--every", type=int, default=25)
    opts = parser.parse_args()
    ref = tensorfile.read(opts.reference).tensors["loss"].values()
    other = tensorfile.read(opts.other).tensors
    by_rank = other.get("loss_by_rank")
    if by_rank is None:
        rows = [other["loss"].values()]
    else:
        ranks, steps = by_rank.shape
        values = by_rank.values()
        rows = [values[r * steps:(r + 1) * steps] for r in range(ranks)]
    if any(len(row) != len(ref) for row in rows):
        print("error: the runs have different numbers of steps",
              file=sys.stderr)
        return 1
    print(f"   {'step':>5} {'1 process':>12} {'rank 0':>12} "
          f"{'max rel. diff (all ranks)':>26}")
    worst = 0.0
    for s, a in enumerate(ref):
        diff = max(abs(row[s] - a) / abs(a) for row in rows)
        worst = max(worst, diff)
        if (s + 1) % opts.every == 0 or s == 0 or s + 1 == len(ref):
            print(f"   {s + 1:5d} {a:12.6f} {rows[0][s]:12.6f} {diff:26.2e}")
    print(f"   largest relative difference over {len(ref)} steps and "
          f"{len(rows)} rank(s): {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
