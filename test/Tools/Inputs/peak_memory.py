"""Checks cleave-run's "peak memory" lines (the runtime allocator's count):

    peak_memory.py PARAMS ONE DP2 ZERO3

ONE, DP2 and ZERO3 hold the output of one process, of -n 2 --plan dp=2 and
of -n 2 --plan dp=2,zero=3 on the same f32 model with AdamW. Every rank holds
at least its parameters, gradients and two moments (16 bytes per parameter,
or a half of them under ZeRO-3); halving the batch per rank (dp=2) lowers the
peak, and sharding the model state (ZeRO-3) lowers it again.
"""
import re
import sys


def peak(path):
    text = open(path).read()
    m = re.search(r"peak memory: ([0-9.]+) MiB per rank", text)
    if not m:
        sys.exit(f"{path}: no 'peak memory' line in:\n{text}")
    return float(m.group(1)) * 2**20


params = int(sys.argv[1])
one, dp2, zero3 = (peak(p) for p in sys.argv[2:5])
state = 16 * params
checks = [
    ("one process holds the model state", one >= state),
    ("dp=2 holds the model state", dp2 >= state),
    ("zero=3 holds its shard of the model state", zero3 >= state / 2),
    ("dp=2 needs less than one process", dp2 < one),
    ("zero=3 needs less than dp=2", zero3 < dp2),
]
print(f"model state {state / 2**20:.2f} MiB; peaks: one {one / 2**20:.2f}, "
      f"dp=2 {dp2 / 2**20:.2f}, zero=3 {zero3 / 2**20:.2f} MiB")
for name, ok in checks:
    print(f"{name}: {'ok' if ok else 'FAILED'}")
sys.exit(0 if all(ok for _, ok in checks) else 1)
