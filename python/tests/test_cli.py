"""The command lines: export, batches, the PyTorch reference trainer and compare.

The reference trainer is the PyTorch side of the end-to-end comparison with
cleave-run. Here the exported program itself (evaluated op by op, trained
with the same AdamW) stands in for the Cleave side: the two must agree to
1e-5 over 5 steps, through the real parameter and batch files. The
comparisons with the real cleave-run (one process and 4 ranks) are the
python.e2e_* tests of python/CMakeLists.txt.
"""

import os
import subprocess
import sys
import tempfile
import unittest

import torch

from cleave import tensorfile
from cleave.torch import export
from cleave.torch.params import load_tensors
from tests import support

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
MODELS = os.path.join(HERE, "models")
GPT = [f"{MODELS}/gpt.py:make_gpt", "--config", "n_layer=2", "--config", "block_size=16",
       "--loss-output", "1"]
LLAMA = [f"{MODELS}/llama.py:make_llama", "--config", "n_kv_heads=2"]


def run(module, *args, expect=0, test=None):
    result = subprocess.run([sys.executable, "-m", module, *args], cwd=PYTHON_DIR,
                            capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": PYTHON_DIR})
    if test is not None:
        test.assertEqual(result.returncode, expect,
                         f"{module} {' '.join(args)}\nstdout:\n{result.stdout}\n"
                         f"stderr:\n{result.stderr}")
    return result


class CommandLineTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def test_export_gpt_with_check(self):
        result = run("cleave.torch", *GPT, "--input", "idx=2x16:int64",
                     "--input", "targets=2x16:int64", "-o", self.path("gpt.mlir"),
                     "--params", self.path("gpt.st"), "--check", test=self)
        self.assertIn("check: PyTorch loss", result.stderr)
        self.assertIn("recognized: attention x2", result.stderr)
        with open(self.path("gpt.mlir")) as f:
            mlir = f.read()
        support.verify(self, mlir)
        params = tensorfile.read(self.path("gpt.st"))
        self.assertEqual(len(params.tensors), 28)
        self.assertIn("transformer.wte.weight", params.tensors)

    def test_export_with_a_loss_function_and_loss_input(self):
        run("cleave.torch", f"{MODELS}/mlp.py:MLP", "--config", "n_in=6",
            "--input", "x=4x6:float32", "--loss-fn", "cross_entropy",
            "--loss-input", "y=4:int64", "-o", self.path("mlp.mlir"), "--check", test=self)
        with open(self.path("mlp.mlir")) as f:
            mlir = f.read()
        self.assertIn('%y: tensor<4xi32> {cleave.input = "y"}', mlir)
        self.assertEqual(os.listdir(self.dir), ["mlp.mlir"])

    def test_usage_errors(self):
        cases = [(["--input", "idx=2x16"], "expected NAME=SHAPE:DTYPE"),
                 (["--input", "idx=2x16:complex"], "unknown dtype 'complex'"),
                 (["--config", "no_such_field=1"], "no_such_field")]
        for extra, words in cases:
            with self.subTest(words=words):
                result = run("cleave.torch", *GPT, *extra, "-o", self.path("x.mlir"))
                self.assertNotEqual(result.returncode, 0)
                self.assertIn(words, result.stderr)
                self.assertFalse(os.path.exists(self.path("x.mlir")))
        result = run("cleave.torch", f"{MODELS}/nope.py:X", "-o", self.path("x.mlir"))
        self.assertEqual(result.returncode, 2)
        self.assertIn("no such file", result.stderr)

    def test_reference_training_matches_the_exported_program(self):
        """batches -> export -> reference (PyTorch) vs the exported program
        trained on the same files; compare passes, and fails against the
        initial weights."""
        run("cleave.torch.batches", "--input", "idx=2x16:int64:64",
            "--input", "targets=2x16:int64:64", "--steps", "5", "--seed", "3",
            "-o", self.path("batches.st"), test=self)
        run("cleave.torch", *GPT, "--input", "idx=2x16:int64", "--input", "targets=2x16:int64",
            "-o", self.path("m.mlir"), "--params", self.path("params.st"), test=self)
        run("cleave.torch.reference", *GPT, "--params", self.path("params.st"),
            "--batches", self.path("batches.st"), "--steps", "5", "--lr", "1e-3",
            "--weight-decay", "0.01", "--out-losses", self.path("ref_losses.st"),
            "--out-params", self.path("ref_final.st"), test=self)
        self.train_exported_gpt(self.path("params.st"), self.path("batches.st"))
        for what in ("losses", "final"):
            run("cleave.torch.compare", self.path(f"ref_{what}.st"),
                self.path(f"cleave_{what}.st"), "--rtol", "1e-5", test=self)
        bad = run("cleave.torch.compare", self.path("ref_final.st"), self.path("params.st"),
                  expect=1, test=self)
        self.assertIn("tensors differ", bad.stderr)

    def test_end_to_end_driver_with_the_interpreter(self):
        """python3 -m cleave.torch.e2e, with the interpreter standing in for
        cleave-run: 5 AdamW steps agree to 1e-5 for the three models."""
        from cleave.torch import e2e
        cases = {
            "gpt": GPT + ["--input", "idx=2x16:int64:64", "--input", "targets=2x16:int64:64"],
            "llama": LLAMA + ["--input", "tokens=2x16:int64:64",
                              "--input", "targets=2x16:int64:64"],
            "mlp": [f"{MODELS}/mlp.py:MLP", "--loss-fn", "cross_entropy",
                    "--input", "x=8x16:float32", "--loss-input", "y=8:int64:10"],
        }
        for name, argv in cases.items():
            with self.subTest(model=name):
                workdir = self.path(name)
                status = e2e.main(argv + ["--steps", "5", "--interpreter", "--rtol", "1e-5",
                                          "--workdir", workdir])
                self.assertEqual(status, 0)
                self.assertEqual(load_tensors(os.path.join(workdir, "ref_losses.safetensors"))
                                 ["loss"].shape, (5,))
        command = e2e.cleave_run_command("cleave-run", {k: k for k in (
            "mlir", "params", "batches", "run_losses", "run_final")},
            e2e._parser().parse_args(cases["gpt"] + ["--cleave-run", "x", "--ranks", "4"]))
        self.assertEqual(command[:2], ["cleave-run", "mlir"])
        self.assertEqual(command[-2:], ["-n", "4"])
        self.assertIn("--inputs", command)

    def test_weights_and_batch_files_are_checked(self):
        from cleave.torch import cli, save_batches, save_parameters
        from cleave.tensorfile import TensorFileError
        from tests.models.mlp import MLP
        model = MLP()
        changed = {n: torch.full_like(p, 0.5) for n, p in model.named_parameters()}
        save_parameters(self.path("w.st"), changed)
        cli.load_weights(model, self.path("w.st"))
        self.assertTrue(all(torch.equal(p, changed[n]) for n, p in model.named_parameters()))
        save_parameters(self.path("bad.st"), {"fc1.weight": torch.zeros(3)})
        with self.assertRaisesRegex(cli.UsageError, r"'fc1.weight' has shape \[3\]"):
            cli.load_weights(model, self.path("bad.st"))
        exported = export(model, (torch.zeros(4, 16),), loss=lambda out: out.sum())
        with self.assertRaisesRegex(TensorFileError, r"per-step shape \[5, 16\]"):
            save_batches(self.path("b.st"), {"x": torch.zeros(2, 5, 16)}, exported.inputs)
        with self.assertRaisesRegex(TensorFileError, "do not fit in int32"):
            save_batches(self.path("b.st"), [{"ids": torch.tensor([2 ** 40])}])
        save_batches(self.path("b.st"), [{"x": torch.ones(4, 16)}] * 3, exported.inputs)
        stored = tensorfile.read(self.path("b.st"))
        self.assertEqual(stored.tensors["x"].shape, (3, 4, 16))
        self.assertEqual(stored.metadata["steps"], "3")

    def train_exported_gpt(self, params_path, batches_path):
        """Trains the exported GPT (interpreter) from the files and writes its
        results where cleave-run's would go."""
        from tests.models.gpt import GPT as GPTModel, GPTConfig
        from cleave.torch.params import save_tensors
        from cleave.torch.reference import train_exported
        batches = load_tensors(batches_path)
        exported = export(GPTModel(GPTConfig()), {n: t[0].long() for n, t in batches.items()},
                          1)
        initial = load_tensors(params_path)
        self.assertEqual(list(initial), list(exported.parameters))
        losses, final = train_exported(exported, initial, batches, 5)
        save_tensors(self.path("cleave_losses.st"), {"loss": losses}, "losses")
        save_tensors(self.path("cleave_final.st"), final, "parameters")
        self.assertFalse(torch.equal(final["transformer.wte.weight"],
                                     initial["transformer.wte.weight"]), "training changed nothing")


if __name__ == "__main__":
    unittest.main()
