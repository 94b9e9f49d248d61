#!/usr/bin/env python3
"""Global-norm gradient clipping against the unsharded norm.

One SGD step (lr 1, no weight decay) moves every parameter by its gradient,
so a run without clipping gives the whole model's gradient g on one process
and its norm N. With --grad-clip C every parameter must move by
min(1, C / (N + 1e-6)) * g: the same coefficient for every tensor. A plan
that left a partial sum of squares incomplete over an axis that shards a
gradient (tp, ZeRO's dp shards, cp, pipeline stages), or counted a
replicated copy twice, gives some tensors another coefficient and fails.

    clip_norm.py --cleave-run cleave-run --model tiny-gpt 4:dp=2,tp=2 ...

--skew F (GPT zoo models) makes one tp shard of the last layer's MLP (on
the last pipeline stage) hold almost all of the gradient: the rows of the
first tp block of its fc layer are multiplied by F and the matching columns
of its proj layer divided by F, so the layer computes the same function
while the gradient of that proj block grows by F. A norm that missed that
shard, or counted it on every rank, clips every tensor wrongly.
"""

import argparse
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from equality import run, tensorfile  # noqa: E402


def scale_block(t, rows, cols, factor):
    """`t` (2-D, or 1-D with cols None) with rows x cols multiplied."""
    values = list(t.values())
    width = t.shape[1] if len(t.shape) == 2 else 1
    for r in range(*rows):
        for c in range(*(cols or (0, 1))):
            values[r * width + c] *= factor
    return tensorfile.Tensor.from_values(values, t.shape, t.dtype)


def skew(init, factor, path):
    """Writes `init` with the last layer's MLP skewed (see --skew); returns
    the names and blocks whose gradient grows."""
    last = max(int(n.split(".")[1]) for n in init if n.startswith("h."))
    fc, proj = f"h.{last}.mlp.fc", f"h.{last}.mlp.proj"
    half = init[fc + ".weight"].shape[0] // 2  # the first of 2 tp blocks
    skewed = dict(init)
    skewed[fc + ".weight"] = scale_block(init[fc + ".weight"], (0, half),
                                         (0, init[fc + ".weight"].shape[1]), factor)
    skewed[fc + ".bias"] = scale_block(init[fc + ".bias"], (0, half), None, factor)
    skewed[proj + ".weight"] = scale_block(
        init[proj + ".weight"], (0, init[proj + ".weight"].shape[0]), (0, half),
        1.0 / factor)
    tensorfile.write(path, skewed)
    return proj + ".weight", half


def block_share(grads, name, shape, half):
    """The share of the squared norm in columns [0, half) of `name`."""
    rows, cols = shape
    block = sum(grads[name][r * cols + c] ** 2
                for r in range(rows) for c in range(half))
    return block / sum(v * v for g in grads.values() for v in g)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cleave-run", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--clip-fraction", type=float, default=0.25,
                        help="C as a fraction of the unclipped norm")
    parser.add_argument("--skew", type=float, default=0.0,
                        help="concentrate the gradient in one tp shard of the "
                             "last stage by this factor (see above)")
    parser.add_argument("configs", nargs="*", help="ranks:plan")
    opts = parser.parse_args()
    args = ["--model", opts.model, "--optimizer", "sgd", "--lr", "1",
            "--weight-decay", "0", "--seed", "7", "--batch", "8"]
    with tempfile.TemporaryDirectory() as out:
        init = run(opts.cleave_run, args + ["--steps", "0"], out, "init", 0, "")[1]
        if opts.skew:
            skewed_path = os.path.join(out, "skewed.params")
            block, half = skew(init, opts.skew, skewed_path)
            args += ["--params", skewed_path]
            init = tensorfile.read(skewed_path).tensors
        free = run(opts.cleave_run, args + ["--steps", "1"], out, "free", 0, "")[1]
        grads = {n: [a - b for a, b in zip(t.values(), free[n].values())]
                 for n, t in init.items()}
        norm = math.sqrt(sum(v * v for g in grads.values() for v in g))
        if opts.skew:
            print(f"{block}[:, :{half}] (one tp shard of the last stage) holds "
                  f"{100 * block_share(grads, block, init[block].shape, half):.1f}% of the squared "
                  f"gradient norm")
        clip = opts.clip_fraction * norm
        coeff = min(1.0, clip / (norm + 1e-6))
        print(f"{opts.model}: unclipped gradient norm {norm:.6g}, clip at "
              f"{clip:.6g}: coefficient {coeff:.6g}")
        failures = 0
        for config in ["1:"] + opts.configs:
            ranks, plan = config.split(":", 1)
            tag = f"clip-n{ranks}-" + plan.replace(",", "-").replace("=", "")
            got = run(opts.cleave_run,
                      args + ["--steps", "1", "--grad-clip", repr(clip)], out,
                      tag, int(ranks) if plan else 0, plan)[1]
            problems = []
            for name, g in grads.items():
                moved = [a - b for a, b in zip(init[name].values(),
                                               got[name].values())]
                scale = max(abs(v) for v in g) * coeff
                diff = max(abs(m - coeff * v) for m, v in zip(moved, g))
                if diff > 1e-3 * scale + 1e-7:
                    ratio = (sum(m * v for m, v in zip(moved, g)) /
                             max(sum(v * v for v in g), 1e-30))
                    problems.append(f"{name}: moved by {ratio:.6g} x its "
                                    f"gradient, expected {coeff:.6g}")
            label = "one process" if not plan else f"-n {ranks} --plan {plan}"
            print(f"{'FAIL' if problems else 'ok':4} {label}")
            for p in problems[:10]:
                print("     " + p)
            failures += bool(problems)
    total = 1 + len(opts.configs)
    print(f"{total - failures} of {total} runs clip by the global norm")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
