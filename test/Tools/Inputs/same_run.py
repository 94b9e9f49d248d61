#!/usr/bin/env python3
"""Exits 0 if two runs trained the same: the same per-step losses and the
same saved parameters, bit for bit. Usage: same_run.py A B, where A.losses,
A.params, B.losses and B.params exist. Prints what differs."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "python"))
from cleave import tensorfile  # noqa: E402


def main():
    a, b = sys.argv[1], sys.argv[2]
    la = tensorfile.read(a + ".losses").tensors["loss"].values()
    lb = tensorfile.read(b + ".losses").tensors["loss"].values()
    if la != lb:
        sys.exit(f"losses differ:\n  {la}\n  {lb}")
    pa = tensorfile.read(a + ".params").tensors
    pb = tensorfile.read(b + ".params").tensors
    if sorted(pa) != sorted(pb):
        sys.exit(f"parameters differ in names: {sorted(pa)} vs {sorted(pb)}")
    for name in pa:
        if pa[name].values() != pb[name].values():
            sys.exit(f"parameter {name} differs")
    print(f"same run: {len(la)} losses, {len(pa)} parameters")


if __name__ == "__main__":
    main()
