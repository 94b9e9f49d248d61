"""Checks a cleave-run losses file of a run with dynamic loss scaling
(test/Tools/cleave-run-loss-scale.mlir): every rank skipped the same steps,
and the scale followed GradScaler's rule from INIT: halved after a skipped
step, doubled after INTERVAL good steps in a row, unchanged otherwise.

    loss_scale.py LOSSES INIT INTERVAL
    loss_scale.py --same-params A B   every tensor of A is in B, bit-equal
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
from cleave import tensorfile  # noqa: E402


def main(path, init, interval):
    tensors = tensorfile.read(path).tensors
    scales = tensors["loss_scale"].values()
    world, steps = tensors["skipped_by_rank"].shape
    flat = tensors["skipped_by_rank"].values()
    rows = [flat[r * steps:(r + 1) * steps] for r in range(world)]
    ok = True
    if any(row != rows[0] for row in rows):
        print(f"DIFFERENT skipped steps by rank: {rows}")
        ok = False
    skipped = rows[0]
    expected, good = init, 0
    for t in range(steps):
        if scales[t] != expected:
            print(f"step {t + 1}: scale {scales[t]}, the rule gives {expected}")
            ok = False
        if skipped[t]:
            expected, good = expected * 0.5, 0
        else:
            good += 1
            if good == interval:
                expected, good = expected * 2, 0
    print(f"{world} ranks, skipped steps {[t + 1 for t in range(steps) if skipped[t]]}")
    print(f"scales {scales}")
    grew = any(scales[t + 1] > scales[t] for t in range(steps - 1))
    print(f"rule: {'ok' if ok else 'VIOLATED'}; skips: {sum(skipped) > 0}; growth: {grew}")
    return ok


def same_params(a, b):
    ta, tb = tensorfile.read(a).tensors, tensorfile.read(b).tensors
    differ = [n for n in ta if n not in tb or ta[n].values() != tb[n].values()]
    print(f"{len(ta) - len(differ)} of {len(ta)} parameters bit-equal")
    return not differ


if __name__ == "__main__":
    if sys.argv[1] == "--same-params":
        sys.exit(0 if same_params(sys.argv[2], sys.argv[3]) else 1)
    sys.exit(0 if main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3])) else 1)
