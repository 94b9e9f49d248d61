"""Compares the loss curves of two cleave-run runs (tensor files with
'loss'): the largest relative difference, and whether the loss fell."""
import sys

from cleave.tensorfile import read

one = read(sys.argv[1]).tensors["loss"].values()
many = read(sys.argv[2]).tensors["loss"].values()
worst = max(abs(a - b) / abs(a) for a, b in zip(one, many))
print(f"steps: {len(one)} and {len(many)}")
print(f"{'within' if worst <= 1e-4 else 'beyond'} 1e-4 of one process "
      f"(worst {worst:.2e})")
print(f"loss {'falls' if many[-1] < many[0] else 'does not fall'}")
