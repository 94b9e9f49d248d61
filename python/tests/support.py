"""Helpers shared by the front-end tests (stdlib unittest, run by ctest)."""

import os
import subprocess
import tempfile
import unittest
from typing import Dict

import torch

from cleave.torch.export import apply_loss


def _built_tool(variable: str, name: str) -> str:
    """The tool CMake built, from the variable ctest sets."""
    path = os.environ.get(variable)
    if not path or not os.access(path, os.X_OK):
        raise AssertionError(f"{variable}={path!r} is not an executable {name}; run the "
                             f"tests through ctest (or set {variable})")
    return path


def cleave_opt() -> str:
    """The cleave-opt that CMake built (ctest sets CLEAVE_OPT)."""
    return _built_tool("CLEAVE_OPT", "cleave-opt")


def cleave_run() -> str:
    """The cleave-run that CMake built (ctest sets CLEAVE_RUN)."""
    return _built_tool("CLEAVE_RUN", "cleave-run")


def cleave_plan() -> str:
    """The cleave-plan that CMake built (ctest sets CLEAVE_PLAN)."""
    return _built_tool("CLEAVE_PLAN", "cleave-plan")


def verify(test: unittest.TestCase, mlir: str) -> str:
    """Runs cleave-opt on the text; fails the test with its diagnostics."""
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(mlir)
    try:
        run = subprocess.run([cleave_opt(), f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if run.returncode != 0:
        test.fail(f"cleave-opt rejected the export:\n{run.stderr}\n--- input ---\n{mlir}")
    return run.stdout


def reference_loss_and_grads(model, inputs: Dict[str, torch.Tensor], loss, loss_inputs,
                             names):
    """PyTorch's loss and the gradients of the named parameters."""
    model.zero_grad(set_to_none=True)
    value = apply_loss(model(**inputs), loss, list(loss_inputs.values()))
    value.backward()
    params = dict(model.named_parameters())
    return value.detach(), {n: params[n].grad.detach().clone() for n in names}


def exported_loss_and_grads(exported, inputs):
    """The exported program's loss and parameter gradients (interpreter)."""
    params = {n: t.clone().requires_grad_(True) for n, t in exported.parameters.items()}
    value = exported.evaluate(inputs, params)
    value.backward()
    return value.detach(), {n: p.grad for n, p in params.items()}


def assert_close_relative(test, expected: torch.Tensor, actual: torch.Tensor, rtol: float,
                          what: str):
    """max|actual - expected| <= rtol * max|expected| (and shapes equal)."""
    test.assertEqual(tuple(actual.shape), tuple(expected.shape), what)
    scale = max(expected.abs().max().item(), 1e-30) if expected.numel() else 1.0
    diff = (actual.double() - expected.double()).abs().max().item() if expected.numel() else 0
    test.assertLessEqual(diff, rtol * scale, f"{what}: max difference {diff:.3g}, "
                         f"largest magnitude {scale:.3g}")

