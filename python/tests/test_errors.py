"""The error path: one error listing each problem with file:line, nothing written."""

import os
import re
import subprocess
import sys
import tempfile
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

from cleave.torch import ExportError, export
from tests.models import unsupported

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
MODEL_FILE = unsupported.__file__


def _line_of(marker: str, path: str = MODEL_FILE) -> int:
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if marker in line:
                return number
    raise AssertionError(f"{marker!r} not in {path}")


EXPECTED = [  # (line marker in the model, words the problem must contain)
    ("torch.erf(h)", "unsupported function torch.erf"),
    ("if h.sum() > 0", "data-dependent control flow"),
    ("h.cumsum(", "unsupported tensor method Tensor.cumsum"),
    ("self.conv(", "unsupported module torch.nn.Conv1d ('conv')"),
]


def _export_error(module, *inputs, **kwargs) -> ExportError:
    try:
        export(module, inputs, **kwargs)
    except ExportError as err:
        return err
    raise AssertionError("export succeeded")


class ErrorPathTest(unittest.TestCase):
    def check_listing(self, text: str):
        self.assertIn(f"{len(EXPECTED)} problems", text)
        for marker, words in EXPECTED:
            line = _line_of(marker)
            self.assertRegex(text, rf"unsupported\.py:{line}: {re.escape(words)}",
                             f"problem at line {line} missing from:\n{text}")

    def test_api_lists_each_problem_with_its_location(self):
        err = _export_error(unsupported.Unsupported(), torch.randn(8, 8))
        self.assertEqual(len(err.problems), len(EXPECTED))
        self.check_listing(str(err))
        for problem, (marker, _) in zip(err.problems, EXPECTED):
            self.assertEqual(problem.location.path, MODEL_FILE)
            self.assertEqual(problem.location.line, _line_of(marker))
            self.assertIn(marker, problem.location.source)

    def test_cli_writes_nothing_on_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            keep = os.path.join(tmp, "old.safetensors")
            with open(keep, "wb") as f:
                f.write(b"previous contents")
            run = subprocess.run(
                [sys.executable, "-m", "cleave.torch", f"{MODEL_FILE}:Unsupported",
                 "--input", "x=8x8:float32", "-o", os.path.join(tmp, "out.mlir"),
                 "--params", keep],
                cwd=PYTHON_DIR, capture_output=True, text=True,
                env={**os.environ, "PYTHONPATH": PYTHON_DIR})
            self.assertEqual(run.returncode, 1, run.stderr)
            self.check_listing(run.stderr)
            self.assertEqual(os.listdir(tmp), ["old.safetensors"])
            with open(keep, "rb") as f:
                self.assertEqual(f.read(), b"previous contents")

    def test_data_dependent_values_are_reported(self):
        class ReadsValues(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                h = self.fc(x)
                scale = h.max().item()  # reads a value
                steps = int(h.sum())  # converts a traced value
                return (h * scale).sum() + steps

        err = _export_error(ReadsValues(), torch.randn(2, 4))
        text = str(err)
        self.assertIn("data-dependent tensor method Tensor.item", text)
        self.assertIn("data-dependent conversion to int", text)
        self.assertIn("steps = int(h.sum())", text)

    def test_exception_in_user_code_is_located(self):
        class Broken(nn.Module):
            def forward(self, x):
                return x.view(3, 5).sum()  # 8 elements do not fit

        err = _export_error(Broken(), torch.randn(2, 4))
        self.assertEqual(len(err.problems), 1)
        self.assertIn("tracing failed: RuntimeError", str(err))
        self.assertIn("x.view(3, 5)", str(err))

    def test_loss_must_be_a_scalar_that_depends_on_the_model(self):
        model = nn.Linear(4, 3)
        self.assertIn("the loss must be a float32 scalar, got tensor<2x3xf32>",
                      str(_export_error(model, torch.randn(2, 4))))
        err = _export_error(model, torch.randn(2, 4), loss=lambda out: out * 2)
        self.assertIn("test_errors.py", str(err.problems[0].location))

        class Constant(nn.Module):
            def forward(self, x):
                return torch.ones(()) * 2

        self.assertIn("does not depend on the inputs or parameters",
                      str(_export_error(Constant(), torch.randn(2))))

    def test_semantics_cleave_cannot_reproduce_are_refused(self):
        class Cases(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.emb = nn.Embedding(10, 4, max_norm=1.0)
                self.frozen = nn.Parameter(torch.ones(4), requires_grad=False)

            def forward(self, x, ids):
                h = self.fc(x)
                g = h.detach()  # stops the gradient
                m = h.masked_fill(x > 0, 0.0)  # mask depends on the input
                e = self.emb(ids)  # max_norm renormalizes the table in place
                return (g + m + e.sum(1) + self.frozen).sum()

        text = str(_export_error(Cases(), torch.randn(2, 4), torch.zeros(2, 3, dtype=torch.long)))
        for words in ("detach() of a value that depends on parameters",
                      "comparison of a traced tensor", "max_norm",
                      "parameter 'frozen' has requires_grad=False"):
            self.assertIn(words, text)

    def test_unsupported_loss_options(self):
        model = nn.Linear(4, 3)
        x, y = torch.randn(2, 4), torch.zeros(2, dtype=torch.long)
        for kwargs, words in (({"label_smoothing": 0.1}, "label_smoothing=0.1"),
                              ({"reduction": "none"}, "reduction='none'"),
                              ({"weight": torch.ones(3)}, "class weights")):
            with self.subTest(words=words):
                err = _export_error(model, x, loss=lambda out, t: F.cross_entropy(out, t, **kwargs),
                                    loss_inputs={"t": y})
                self.assertIn(words, str(err))


if __name__ == "__main__":
    unittest.main()
