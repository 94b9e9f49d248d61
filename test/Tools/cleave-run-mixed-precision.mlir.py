"""Compares loss curves of cleave-run runs (tensor files with 'loss')."""
import sys

from cleave.tensorfile import read

base = read(sys.argv[1]).tensors["loss"].values()
for path, name in zip(sys.argv[2:], ("bf16", "f16")):
    losses = read(path).tensors["loss"].values()
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, base))
    falls = losses[-1] < losses[0] - 0.5
    print(f"{name}: {'falls' if falls else 'does not fall'}, "
          f"{'within' if worst <= 0.02 else 'beyond'} 2% of f32 (worst {worst:.4f})")
