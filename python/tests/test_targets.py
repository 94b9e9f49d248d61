"""Targets and losses: cross_entropy's ignore_index (nanoGPT's -1, PyTorch's
default -100) gives PyTorch's mean over the kept targets; any other target
outside the class range is an error naming the batch and position, in
save_batches and in cleave-run; cleave-run's loss file and the reference
trainer's are the same tensor (name, dtype, shape) read by the same reader.
"""

import os
import subprocess
import tempfile
import unittest

import torch
import torch.nn.functional as F

from cleave.tensorfile import TensorFileError
from cleave.torch import export, save_batches
from cleave.torch.compare import compare_files, criterion
from cleave.torch.params import load_tensors, save_losses
from cleave.torch.reference import pin_threads, train
from tests import support
from tests.models.gpt import make_gpt
from tests.models.mlp import MLP

STEPS, LR = 3, 1e-3


def gpt_batches(steps=STEPS):
    """nanoGPT-style ids and targets, a quarter of the targets ignored (-1)."""
    generator = torch.Generator().manual_seed(5)
    idx = torch.randint(0, 64, (steps, 4, 16), generator=generator)
    targets = torch.randint(0, 64, (steps, 4, 16), generator=generator)
    targets[torch.rand(targets.shape, generator=generator) < 0.25] = -1
    return {"idx": idx, "targets": targets}


class IgnoredTargets(unittest.TestCase):
    def test_nanogpt_ignore_index_matches_pytorch(self):
        batches = gpt_batches()
        inputs = {n: t[0] for n, t in batches.items()}
        model = make_gpt()
        exported = export(model, inputs, loss=1)
        support.verify(self, exported.mlir)
        self.assertIn("ignore_index = -1 : i64", exported.mlir)
        names = list(exported.parameters)
        want, grads = support.reference_loss_and_grads(model, inputs, 1, {}, names)
        got, got_grads = support.exported_loss_and_grads(exported, inputs)
        # The mean over all 64 positions would differ by a quarter.
        support.assert_close_relative(self, want, got, 1e-6, "loss")
        for name in names:
            support.assert_close_relative(self, grads[name], got_grads[name], 1e-5, name)

    def test_default_ignore_index_and_sum(self):
        """F.cross_entropy ignores -100 unless told otherwise; reduction='sum'
        sums the kept targets only."""
        torch.manual_seed(0)
        x = torch.randn(8, 16)
        y = torch.randint(0, 10, (8,))
        y[[1, 4]] = -100
        for reduction in ("mean", "sum"):
            with self.subTest(reduction=reduction):
                def loss(out, labels, reduction=reduction):
                    return F.cross_entropy(out, labels, reduction=reduction)
                model = MLP()
                exported = export(model, {"x": x}, loss=loss, loss_inputs={"y": y})
                support.verify(self, exported.mlir)
                self.assertIn("ignore_index = -100 : i64", exported.mlir)
                want = loss(model(x), y)
                got = exported.evaluate({"x": x, "y": y})
                support.assert_close_relative(self, want, got, 1e-6, reduction)

    def test_save_batches_rejects_targets_out_of_range(self):
        batches = gpt_batches()
        exported = export(make_gpt(), {n: t[0] for n, t in batches.items()}, loss=1)
        spec = {s.name: s for s in exported.inputs}
        self.assertEqual((spec["targets"].id_limit, spec["targets"].ignore_index), (64, -1))
        self.assertEqual((spec["idx"].id_limit, spec["idx"].ignore_index), (64, None))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "b.safetensors")
            save_batches(path, batches, exported.inputs)  # -1 targets are fine
            cases = [("targets", 64, "64 is not a valid id or label: the program needs "
                                     "[0, 64) or the ignore_index -1"),
                     ("targets", -2, "-2 is not a valid"),
                     ("idx", -1, "-1 is not a valid id or label: the program needs [0, 64) "
                                 "(no ignore_index)")]
            for name, value, words in cases:
                with self.subTest(name=name, value=value):
                    bad = {n: t.clone() for n, t in batches.items()}
                    bad[name][2, 1, 7] = value
                    with self.assertRaises(TensorFileError) as caught:
                        save_batches(path, bad, exported.inputs)
                    message = str(caught.exception)
                    self.assertIn(f"batch input '{name}', batch 2 (step 3), position [1, 7]",
                                  message)
                    self.assertIn(words, message)


class AgainstCleaveRun(unittest.TestCase):
    """One exported nanoGPT trained by cleave-run with ignored targets."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.batches = gpt_batches()
        self.model = make_gpt()
        self.exported = export(self.model, {n: t[0] for n, t in self.batches.items()}, loss=1)
        self.files = {n: os.path.join(self.tmp.name, n) for n in (
            "model.mlir", "params", "batches", "run_losses", "ref_losses", "run_final")}
        self.exported.save(self.files["model.mlir"], self.files["params"])

    def tearDown(self):
        self.tmp.cleanup()

    def cleave_run(self, batches):
        save_batches(self.files["batches"], batches)  # unchecked: cleave-run checks
        return subprocess.run(
            [support.cleave_run(), self.files["model.mlir"], "--params", self.files["params"],
             "--inputs", self.files["batches"], "--steps", str(STEPS), "--optimizer", "adamw",
             "--lr", str(LR), "--beta1", "0.9", "--beta2", "0.999", "--eps", "1e-08",
             "--weight-decay", "0.01", "--save-losses", self.files["run_losses"],
             "--save-params", self.files["run_final"]],
            capture_output=True, text=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})

    def test_loss_files_agree_with_pytorch_through_one_reader(self):
        run = self.cleave_run(self.batches)
        self.assertEqual(run.returncode, 0, run.stderr)
        pin_threads(1)
        losses, _ = train(self.model, load_tensors(self.files["params"]), self.batches, STEPS,
                          loss=1, lr=LR)
        save_losses(self.files["ref_losses"], losses)
        ref = load_tensors(self.files["ref_losses"])
        got = load_tensors(self.files["run_losses"])
        self.assertEqual(ref["loss"].dtype, torch.float64)
        self.assertEqual(got["loss"].dtype, ref["loss"].dtype)
        self.assertEqual(got["loss"].shape, ref["loss"].shape)
        self.assertEqual(list(got["loss_by_rank"].shape), [1, STEPS])
        rule, errors, _ = compare_files(self.files["ref_losses"], self.files["run_losses"],
                                        1e-4, LR)
        self.assertEqual(rule, criterion("losses", 1e-4, LR))
        self.assertEqual(errors, [], f"{got['loss'].tolist()} vs {ref['loss'].tolist()}")

    def test_cleave_run_rejects_targets_out_of_range(self):
        for value, words in ((64, "64 is not a valid id or label: the program needs [0, 64) "
                                   "or the ignore_index -1"),
                             (-5, "-5 is not a valid id or label")):
            with self.subTest(value=value):
                bad = {n: t.clone() for n, t in self.batches.items()}
                bad["targets"][1, 2, 3] = value
                run = self.cleave_run(bad)
                self.assertNotEqual(run.returncode, 0)
                self.assertIn("inputs file tensor 'targets', batch 1 (step 2), position [2, 3]",
                              run.stderr)
                self.assertIn(words, run.stderr)


if __name__ == "__main__":
    unittest.main()
