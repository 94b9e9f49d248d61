"""python3 -m cleave.torch.compare: compare two tensor files.

    python3 -m cleave.torch.compare EXPECTED ACTUAL [--rtol 1e-4] [--atol 0]

Every tensor of EXPECTED must be in ACTUAL with the same shape, and
``max|actual - expected| <= rtol * max|expected| + atol`` (relative to the
tensor's largest magnitude, so that near-zero entries do not dominate). Prints
the worst tensors; exits 1 on any mismatch.
"""

import argparse
import sys
from typing import Dict, List, Tuple

import torch

from .params import load_tensors
from ..tensorfile import TensorFileError


def compare(expected: Dict[str, torch.Tensor], actual: Dict[str, torch.Tensor],
            rtol: float, atol: float = 0.0) -> Tuple[List[str], List[Tuple[float, str]]]:
    """Returns (errors, [(relative error, name)] sorted worst first)."""
    errors, report = [], []
    for name, want in expected.items():
        got = actual.get(name)
        if got is None:
            errors.append(f"'{name}' is missing")
            continue
        if tuple(got.shape) != tuple(want.shape):
            errors.append(f"'{name}': shape {list(got.shape)}, expected {list(want.shape)}")
            continue
        want64, got64 = want.double(), got.double()
        scale = want64.abs().max().item() if want64.numel() else 0.0
        diff = (got64 - want64).abs().max().item() if want64.numel() else 0.0
        relative = diff / max(scale, 1e-30)
        if not diff <= rtol * scale + atol:  # also catches NaN
            errors.append(f"'{name}': max difference {diff:.3g} is {relative:.3g} of its "
                          f"largest magnitude {scale:.3g} (rtol {rtol:g}, atol {atol:g})")
        report.append((relative, name))
    report.sort(reverse=True)
    return errors, report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m cleave.torch.compare",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("expected")
    parser.add_argument("actual")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=0.0)
    args = parser.parse_args(argv)
    try:
        errors, report = compare(load_tensors(args.expected), load_tensors(args.actual),
                                 args.rtol, args.atol)
    except TensorFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for relative, name in report[:5]:
        print(f"{name}: relative difference {relative:.3g}")
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    print(f"{len(report) - len(errors)}/{len(report)} tensors within rtol {args.rtol:g}"
          if not errors else f"{len(errors)} tensors differ", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
