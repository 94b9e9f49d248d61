"""python3 -m cleave.torch.batches: random per-step batches for a comparison run.

    python3 -m cleave.torch.batches --input idx=4x16:int64:64 \\
        --input targets=4x16:int64:64 --steps 5 --seed 1 -o batches.safetensors

Each ``--input NAME=SHAPE:DTYPE[:HIGH]`` becomes tensor ``NAME`` of shape
``[steps] + SHAPE``: integers uniform in ``[0, HIGH)`` (HIGH is required for
integers: it is the vocabulary or class count; ``LOW..HIGH`` draws from
``[LOW, HIGH)``, e.g. ``-1..64`` for targets with some ignored -1 labels)
stored as I32, floats standard normal stored as F32. The same file feeds
``cleave-run`` and ``python3 -m cleave.torch.reference``.
"""

import argparse
import sys

import torch

from . import cli
from .params import save_batches
from ..tensorfile import TensorFileError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m cleave.torch.batches",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", action="append", required=True,
                        metavar="NAME=SHAPE:DTYPE[:HIGH|:LOW..HIGH]")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    generator = torch.Generator().manual_seed(args.seed)
    try:
        batches = {}
        for spec in args.input:
            name, shape, dtype, high = cli.parse_input(spec)
            if not dtype.is_floating_point and high is None:
                raise cli.UsageError(f"input {spec!r}: integers need a bound, "
                                     f"NAME=SHAPE:DTYPE:HIGH")
            batches[name] = cli.example_tensor((args.steps,) + shape, dtype, high, generator)
        save_batches(args.output, batches)
    except (cli.UsageError, TensorFileError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
