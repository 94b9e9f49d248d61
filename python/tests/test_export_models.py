"""Export of whole models written the usual PyTorch way: an MLP, a GPT-2-style
model and a Llama-style model.

For each: cleave-opt verifies the module; the function's parameters and
inputs are the expected ones (tied weights once); the recognized layers are
there (or, with recognition off, only primitive ops); the parameter file
round-trips (names, order, shapes, values, checksums); and the exported
program, evaluated op by op from the dialect's definitions, gives PyTorch's
loss and parameter gradients.
"""

import os
import re
import tempfile
import unittest

import torch
import torch.nn.functional as F

from cleave import tensorfile
from cleave.torch import export
from cleave.torch.params import from_file_tensor
from tests import support
from tests.models.gpt import GPT, GPTConfig
from tests.models.llama import Llama, LlamaConfig
from tests.models.mlp import MLP

_FUSED = ("cleave.attention", "cleave.rms_norm", "cleave.rotary")


def _arg_names(mlir: str, role: str):
    return re.findall(rf'{role} = "([^"]+)"', mlir)


class ModelCase:
    """One model: how to build it, its example inputs and its loss."""

    def build(self):
        raise NotImplementedError

    def check_structure(self, test, mlir, fused):
        raise NotImplementedError


class MLPCase(ModelCase):
    loss, inputs = staticmethod(F.cross_entropy), ["x"]

    def build(self):
        torch.manual_seed(0)
        model = MLP()
        gen = torch.Generator().manual_seed(1)
        return model, {"x": torch.randn(8, 16, generator=gen)}, \
            {"y": torch.randint(0, 10, (8,), generator=gen)}

    def check_structure(self, test, mlir, fused):
        test.assertEqual(_arg_names(mlir, "cleave.input"), ["x", "y"])
        test.assertEqual(_arg_names(mlir, "cleave.param"),
                         ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight",
                          "fc3.bias"])
        test.assertIn("cleave.gelu %2 {approximate = #cleave.gelu_approx<none>}", mlir)
        test.assertEqual(mlir.count("cleave.relu"), 1)
        test.assertRegex(mlir, r"cleave.cross_entropy %\d+, %y \{ignore_index = -100 : i64\} : "
                               r"\(tensor<8x10xf32>, tensor<8xi32>\) -> tensor<f32>")


class GPTCase(ModelCase):
    loss, inputs = 1, ["idx", "targets"]

    def build(self):
        torch.manual_seed(0)
        model = GPT(GPTConfig())
        gen = torch.Generator().manual_seed(1)
        ids = torch.randint(0, 64, (2, 16), generator=gen)
        return model, {"idx": ids, "targets": torch.roll(ids, -1, 1)}, {}

    def check_structure(self, test, mlir, fused):
        params = _arg_names(mlir, "cleave.param")
        test.assertEqual(params.count("transformer.wte.weight"), 1)
        test.assertNotIn("lm_head.weight", params, "the tied lm_head appears once, as wte")
        test.assertEqual(len(params), 28)
        test.assertEqual(_arg_names(mlir, "cleave.input"), ["idx", "targets"])
        test.assertEqual(mlir.count("epsilon = 1.0e-05 : f64"), 5)
        test.assertEqual(mlir.count("approximate = #cleave.gelu_approx<none>"), 2)
        test.assertNotIn("cleave.dropout", mlir, "dropout p=0 is the identity")
        test.assertEqual(mlir.count("cleave.embedding "), 2)
        if fused:
            test.assertEqual(mlir.count("cleave.attention"), 2)
            test.assertEqual(mlir.count("{causal, scale = 0.25 : f64} : (tensor<2x16x2x16xf32>"), 2)
            test.assertNotIn("cleave.softmax", mlir)


class LlamaCase(ModelCase):
    loss, inputs = None, ["tokens", "targets"]

    def build(self):
        torch.manual_seed(0)
        model = Llama(LlamaConfig())
        gen = torch.Generator().manual_seed(1)
        ids = torch.randint(0, 64, (2, 16), generator=gen)
        return model, {"tokens": ids, "targets": torch.roll(ids, -1, 1)}, {}

    def check_structure(self, test, mlir, fused):
        params = _arg_names(mlir, "cleave.param")
        test.assertEqual(len(params), 2 * 9 + 3)
        test.assertNotIn("rotary.cos_cached", params, "buffers are not parameters")
        test.assertEqual(mlir.count("cleave.silu"), 2)
        if fused:
            test.assertEqual(mlir.count("cleave.rms_norm"), 5)
            test.assertEqual(mlir.count("cleave.rotary"), 4)
            test.assertEqual(mlir.count("{theta = 10000.0 : f64}"), 4)
            # Grouped-query attention: 4 query heads share 2 key/value heads.
            test.assertEqual(mlir.count(
                "{causal, scale = 0.3535533966440824 : f64} : (tensor<2x16x4x8xf32>, "
                "tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32>) -> tensor<2x16x4x8xf32>"), 2)
            test.assertNotIn("cleave.softmax", mlir)


class ExportModelsTest(unittest.TestCase):
    CASES = {"mlp": MLPCase(), "gpt": GPTCase(), "llama": LlamaCase()}

    def export(self, name, fused=True):
        case = self.CASES[name]
        model, inputs, loss_inputs = case.build()
        exported = export(model, inputs, case.loss, loss_inputs, recognize_patterns=fused)
        return case, model, inputs, loss_inputs, exported

    def check_model(self, name, fused):
        case, model, inputs, loss_inputs, exported = self.export(name, fused)
        support.verify(self, exported.mlir)
        case.check_structure(self, exported.mlir, fused)
        if not fused:
            for op in _FUSED:
                self.assertNotIn(op, exported.mlir)
        self.assertEqual([i.name for i in exported.inputs], case.inputs + list(loss_inputs))
        names = list(exported.parameters)
        self.assertEqual(names, _arg_names(exported.mlir, "cleave.param"))
        expected_loss, expected_grads = support.reference_loss_and_grads(
            model, inputs, case.loss, loss_inputs, names)
        loss, grads = support.exported_loss_and_grads(exported, {**inputs, **loss_inputs})
        support.assert_close_relative(self, expected_loss, loss, 1e-6, f"{name} loss")
        for param in names:
            support.assert_close_relative(self, expected_grads[param], grads[param], 1e-5,
                                          f"{name} gradient of {param}")

    def check_parameter_file(self, name):
        _, model, _, _, exported = self.export(name)
        with tempfile.TemporaryDirectory() as tmp:
            mlir_path, params_path = os.path.join(tmp, "m.mlir"), os.path.join(tmp, "p.st")
            exported.save(mlir_path, params_path)
            self.assertEqual(sorted(os.listdir(tmp)), ["m.mlir", "p.st"])
            with open(mlir_path) as f:
                self.assertEqual(f.read(), exported.mlir)
            contents = tensorfile.read(params_path)  # checks every crc32
        self.assertEqual(contents.metadata["content"], "parameters")
        self.assertEqual(list(contents.tensors), _arg_names(exported.mlir, "cleave.param"))
        state = dict(model.named_parameters())
        for param, stored in contents.tensors.items():
            self.assertEqual(stored.dtype, "F32")
            self.assertEqual(stored.shape, tuple(state[param].shape), param)
            self.assertTrue(torch.equal(from_file_tensor(stored), state[param].detach()), param)

    def test_mlp(self):
        self.check_model("mlp", fused=True)

    def test_gpt(self):
        self.check_model("gpt", fused=True)

    def test_gpt_without_pattern_recognition(self):
        self.check_model("gpt", fused=False)

    def test_llama(self):
        self.check_model("llama", fused=True)

    def test_llama_without_pattern_recognition(self):
        self.check_model("llama", fused=False)

    def test_parameter_files(self):
        for name in self.CASES:
            with self.subTest(model=name):
                self.check_parameter_file(name)


if __name__ == "__main__":
    unittest.main()
