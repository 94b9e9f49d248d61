"""python3 -m cleave.torch.compare: compare two tensor files.

    python3 -m cleave.torch.compare EXPECTED ACTUAL [--rtol 1e-4] [--lr 1e-3] [--atol A]

Every tensor of EXPECTED must be in ACTUAL with the same shape, and
``max|actual - expected| <= rtol * max|expected| + atol`` (relative to the
tensor's largest magnitude, so that near-zero entries do not dominate). The
criterion is the one the end-to-end driver (``cleave.torch.e2e``) applies,
from the same function (``criterion``): for parameter files ``atol`` is 1%
of one learning-rate step (``0.01 * --lr``) unless ``--atol`` is given, for
loss files it is 0. Prints the criterion and the worst tensors; exits 1 on
any mismatch.
"""

import argparse
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch

from .params import load_tensors
from .. import tensorfile
from ..tensorfile import TensorFileError

#: The absolute floor for final parameters, in learning-rate steps. A
#: parameter whose exact gradient is zero (an attention key bias: softmax
#: ignores a constant added to every score) receives only rounding noise,
#: which AdamW normalizes into updates of up to ``lr`` per step; no two
#: implementations agree on that noise. Losses get no floor.
PARAMETER_FLOOR_STEPS = 0.01


@dataclass(frozen=True)
class Criterion:
    """``max|actual - expected| <= rtol * max|expected| + atol``, per tensor."""

    rtol: float
    atol: float = 0.0

    def __str__(self) -> str:
        return (f"max|actual - expected| <= {self.rtol:g} * max|expected| + {self.atol:g} "
                f"per tensor")


def criterion(content: str, rtol: float, lr: float, atol: Optional[float] = None) -> Criterion:
    """The comparison criterion for a file of ``content`` (``losses`` or
    ``parameters``, the tensor files' metadata): ``rtol``, plus for
    parameters an absolute floor of ``PARAMETER_FLOOR_STEPS * lr`` unless
    ``atol`` is given. Shared by the compare tool and the e2e driver."""
    if atol is None:
        atol = PARAMETER_FLOOR_STEPS * lr if content == "parameters" else 0.0
    return Criterion(rtol, atol)


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


def compare_files(expected_path: str, actual_path: str, rtol: float, lr: float,
                  atol: Optional[float] = None):
    """Compares two tensor files under ``criterion`` for the expected file's
    content. Returns (criterion, errors, report)."""
    content = tensorfile.read(expected_path).metadata.get("content", "")
    rule = criterion(content, rtol, lr, atol)
    errors, report = compare(load_tensors(expected_path), load_tensors(actual_path),
                             rule.rtol, rule.atol)
    return rule, errors, report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m cleave.torch.compare",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("expected")
    parser.add_argument("actual")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--lr", type=float, default=1e-3,
                        help="the learning rate of the runs: parameter files get an "
                             f"absolute floor of {PARAMETER_FLOOR_STEPS:g} * lr (default 1e-3)")
    parser.add_argument("--atol", type=float, default=None,
                        help="absolute floor instead (default: 0.01 * lr for parameter "
                             "files, 0 for loss files)")
    args = parser.parse_args(argv)
    try:
        rule, errors, report = compare_files(args.expected, args.actual, args.rtol, args.lr,
                                             args.atol)
    except TensorFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"criterion: {rule}", file=sys.stderr)
    for relative, name in report[:5]:
        print(f"{name}: relative difference {relative:.3g}")
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    print(f"{len(report) - len(errors)}/{len(report)} tensors within the criterion"
          if not errors else f"{len(errors)} tensors differ", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
