"""Mixture-of-experts blocks written the usual PyTorch way export to the MoE
ops (tests/models/mixtral.py; cleave/torch/moe.py): a Mixtral-style model
with the mask-style block and with Hugging Face's block gives PyTorch's loss
and gradients and trains equal to PyTorch for a few AdamW steps; the routing
(top_k, renormalization, softmax or sigmoid) is the one the block computes;
the stacked expert weights map to the state_dict both ways; blocks that look
like MoE but are not recognized fail naming the module and the reason;
Mixtral's load-balancing loss exports to moe_aux_loss; the interpreter's
router follows docs/moe.md (ties, slot priority, capacity).

Weights are random, so router scores do not tie: torch.topk orders ties its
own way, Cleave gives them to the lower expert index (docs/moe.md)."""

import os
import re
import tempfile
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

from cleave import tensorfile
from cleave.torch import ExportError, export
from cleave.torch import cli
from cleave.torch.interpreter import evaluate_op
from cleave.torch.ir import Op, TensorType, Value
from cleave.torch.params import from_file_tensor, split_stacked, stack_like
from cleave.torch.reference import train, train_exported
from tests import support
from tests.models.llama import FeedForward
from tests.models.mixtral import HFSparseMoeBlock, SparseMoeBlock, make_mixtral

GEN = torch.Generator().manual_seed(1)
IDS = torch.randint(0, 64, (2, 16), generator=GEN)
INPUTS = {"tokens": IDS, "targets": torch.roll(IDS, -1, 1)}
STACKED = {  # name suffix: shape of the stacked [E, out, in] weight
    "experts.*.w1.weight": [4, 48, 32], "experts.*.w2.weight": [4, 32, 48],
    "experts.*.w3.weight": [4, 48, 32]}


def _loss_and_grads(model, inputs, loss, loss_inputs, names):
    """PyTorch's loss and gradients under the exported (stacked) names."""
    model.zero_grad(set_to_none=True)
    value = support.apply_loss(model(**inputs), loss, list(loss_inputs.values()))
    value.backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    return value.detach(), stack_like(names, grads)


class MixtralTest(unittest.TestCase):
    def build(self, block):
        torch.manual_seed(0)
        return make_mixtral(block=block)

    def check_export(self, block):
        model = self.build(block)
        exported = export(model, INPUTS)
        support.verify(self, exported.mlir)
        mlir = exported.mlir
        self.assertEqual(mlir.count("cleave.moe_router %"), 2)
        self.assertRegex(mlir, r"cleave.moe_router %\d+ \{normalize, top_k = 2 : i64\} : "
                               r"\(tensor<2x16x4xf32>\) -> \(tensor<2x16x4x16xf32>, "
                               r"tensor<2x16x4x16xf32>\)")
        self.assertEqual(mlir.count("cleave.moe_dispatch"), 2)
        self.assertEqual(mlir.count("cleave.moe_combine"), 2)
        self.assertEqual(mlir.count("cleave.silu"), 2)  # one batched SwiGLU per layer
        self.assertNotIn("capacity_factor", mlir, "the router is dropless")
        self.assertEqual(exported.rewrites["moe_router"], 2)
        self.assertEqual(exported.rewrites["moe_aux_loss"], 0)
        self.assertEqual(exported.unused_parameters, [])
        params = re.findall(r'cleave.param = "([^"]+)"', mlir)
        self.assertEqual(params, list(exported.parameters))
        for layer in range(2):
            prefix = f"layers.{layer}.feed_forward."
            self.assertIn(prefix + "gate.weight", params)
            for suffix, shape in STACKED.items():
                self.assertEqual(list(exported.parameters[prefix + suffix].shape), shape)
            self.assertFalse([p for p in params if p.startswith(prefix + "experts.0")])
        self.assertEqual(len(params), 1 + 2 * (4 + 2 + 1 + 3) + 2)
        names = list(exported.parameters)
        expected_loss, expected_grads = _loss_and_grads(model, INPUTS, None, {}, names)
        loss, grads = support.exported_loss_and_grads(exported, INPUTS)
        support.assert_close_relative(self, expected_loss, loss, 1e-6, f"{block} loss")
        for name in names:
            support.assert_close_relative(self, expected_grads[name], grads[name], 1e-5,
                                          f"{block} gradient of {name}")
        return model, exported

    def test_mask_block(self):
        self.check_export("mask")

    def test_hugging_face_block(self):
        # torch.where on the expert masks: not traceable, recognized whole.
        self.check_export("hf")

    def test_trains_equal_to_pytorch(self):
        """Three AdamW steps of the exported program (interpreter) and of
        PyTorch from the same parameter file, within 1e-4 (cleave-run does
        the same in python.e2e_mixtral*)."""
        model = self.build("mask")
        exported = export(model, INPUTS)
        gen = torch.Generator().manual_seed(2)
        ids = torch.randint(0, 64, (3, 2, 16), generator=gen)
        batches = {"tokens": ids, "targets": torch.roll(ids, -1, 2)}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "p.st")
            exported.save(os.path.join(tmp, "m.mlir"), path)
            initial = {n: from_file_tensor(t) for n, t in tensorfile.read(path).tensors.items()}
        ref_losses, ref_final = train(model, initial, batches, 3)
        losses, final = train_exported(exported, initial, batches, 3)
        support.assert_close_relative(self, ref_losses, losses, 1e-5, "losses")
        self.assertEqual(list(final), list(ref_final))
        for name, tensor in ref_final.items():
            self.assertFalse(torch.equal(tensor, initial[name]), f"{name} was not trained")
            diff = (final[name] - tensor).abs().max().item()
            self.assertLessEqual(diff, 1e-4 * tensor.abs().max().item() + 1e-5, name)

    def test_parameter_file_maps_to_state_dict(self):
        model = self.build("mask")
        exported = export(model, INPUTS)
        state = model.state_dict()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "p.st")
            exported.save(os.path.join(tmp, "m.mlir"), path)
            stored = {n: from_file_tensor(t) for n, t in tensorfile.read(path).tensors.items()}
            experts = "layers.1.feed_forward.experts"
            self.assertTrue(torch.equal(stored[experts + ".*.w2.weight"][3],
                                        state[experts + ".3.w2.weight"]))
            split = split_stacked(stored)
            self.assertEqual(sorted(split), sorted(state))
            for name, tensor in split.items():
                self.assertTrue(torch.equal(tensor, state[name]), name)
            self.assertEqual(list(stack_like(list(stored), split)), list(stored))
            # Loading the file into a fresh model (cli --weights) splits it.
            torch.manual_seed(5)
            fresh = make_mixtral()
            cli.load_weights(fresh, path)
            for name, tensor in fresh.state_dict().items():
                self.assertTrue(torch.equal(tensor, state[name]), name)

    def test_load_balancing_loss(self):
        """Mixtral's load_balancing_loss_func over both layers' router logits
        (returned by Hugging Face's block) is moe_aux_loss of the
        concatenated logits, times top_k / E."""
        torch.manual_seed(0)
        model = make_mixtral(block="hf", aux_loss_coef=0.5)
        exported = export(model, INPUTS)
        support.verify(self, exported.mlir)
        self.assertRegex(exported.mlir, r"cleave.moe_aux_loss %\d+ \{top_k = 2 : i64\} : "
                                        r"\(tensor<1x64x4xf32>\) -> tensor<f32>")
        names = list(exported.parameters)
        expected_loss, expected_grads = _loss_and_grads(model, INPUTS, None, {}, names)
        loss, grads = support.exported_loss_and_grads(exported, INPUTS)
        support.assert_close_relative(self, expected_loss, loss, 1e-6, "loss")
        for name in names:
            support.assert_close_relative(self, expected_grads[name], grads[name], 1e-5, name)
        # The balance loss's own gradient reaches the routers.
        without = export(make_mixtral(block="hf"), INPUTS)
        _, plain = support.exported_loss_and_grads(without, INPUTS)
        gate = "layers.0.feed_forward.gate.weight"
        self.assertFalse(torch.allclose(plain[gate], grads[gate]))

    def test_untraceable_unrecognized_block_names_the_module(self):
        model = self.build("gelu")
        with self.assertRaises(ExportError) as caught:
            export(model, INPUTS)
        text = str(caught.exception)
        self.assertIn("module 'layers.0.feed_forward' is not exported as a mixture-of-experts "
                      "block: GeluMoeBlock has router 'gate' Linear(32, 4) and 4 experts "
                      "'experts', but an expert (GeluExpert) is not three bias-free Linear "
                      "layers", text)
        self.assertIn("tests/models/mixtral.py", text)


class Wrapped(nn.Module):
    """A block as a submodule (the root module is never a leaf)."""

    def __init__(self, block):
        super().__init__()
        self.moe = block

    def forward(self, x):
        if isinstance(self.moe, HFSparseMoeBlock):  # returns (output, router_logits)
            out, _logits = self.moe(hidden_states=x)
            return out
        return self.moe(x)


class SigmoidMoeBlock(SparseMoeBlock):
    """DeepSeek-V3-style scores: sigmoid, top-k, renormalized; w3 under the
    SiLU instead of w1."""

    def forward(self, x):
        scores = torch.sigmoid(self.gate(x))
        weights, chosen = torch.topk(scores, self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            gate = (weights * (chosen == e)).sum(dim=-1, keepdim=True)
            out = out + gate * expert.w2(F.silu(expert.w3(x)) * expert.w1(x))
        return out


class UngatedMoeBlock(SparseMoeBlock):
    """Sums the chosen experts without their gates: not Cleave's MoE."""

    def forward(self, x):
        _, chosen = torch.topk(self.gate(x), self.top_k, dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            out = out + (chosen == e).sum(dim=-1, keepdim=True) * expert(x)
        return out


class SharedExpertBlock(SparseMoeBlock):
    def __init__(self, *args):
        super().__init__(*args)
        self.shared = FeedForward(16, 24)

    def forward(self, x):
        return super().forward(x) + self.shared(x)


class BlockRecognitionTest(unittest.TestCase):
    X = torch.randn(12, 16, generator=torch.Generator().manual_seed(3))
    Y = torch.randn(12, 16, generator=torch.Generator().manual_seed(4))

    def export_block(self, block):
        torch.manual_seed(0)
        model = Wrapped(block)
        exported = export(model, {"x": self.X}, F.mse_loss, {"y": self.Y})
        return model, exported

    def check_routing(self, block, attrs):
        model, exported = self.export_block(block)
        support.verify(self, exported.mlir)
        self.assertIn(f"cleave.moe_router %1 {attrs} : (tensor<1x12x5xf32>) -> "
                      f"(tensor<1x12x5x12xf32>, tensor<1x12x5x12xf32>)", exported.mlir)
        names = list(exported.parameters)
        self.assertEqual(names, ["moe.gate.weight", "moe.experts.*.w1.weight",
                                 "moe.experts.*.w2.weight", "moe.experts.*.w3.weight"])
        inputs = {"x": self.X, "y": self.Y}
        expected_loss, expected_grads = _loss_and_grads(model, {"x": self.X}, F.mse_loss,
                                                        {"y": self.Y}, names)
        loss, grads = support.exported_loss_and_grads(exported, inputs)
        support.assert_close_relative(self, expected_loss, loss, 1e-6, "loss")
        for name in names:
            support.assert_close_relative(self, expected_grads[name], grads[name], 1e-5, name)
        return exported

    def test_top1_without_renormalization(self):
        self.check_routing(SparseMoeBlock(16, 24, 5, 1, False), "{top_k = 1 : i64}")

    def test_top3_renormalized(self):
        self.check_routing(SparseMoeBlock(16, 24, 5, 3, True), "{normalize, top_k = 3 : i64}")

    def test_hugging_face_top2(self):
        # Hugging Face's block on a [1, 12, 16] batch; forward returns the logits too.
        block = HFSparseMoeBlock(16, 24, 5, 2, False)
        torch.manual_seed(0)
        model = Wrapped(block)
        x, y = self.X[None], self.Y[None]
        exported = export(model, {"x": x}, F.mse_loss, {"y": y})
        self.assertIn("{top_k = 2 : i64} : (tensor<1x12x5xf32>)", exported.mlir)
        support.assert_close_relative(self, F.mse_loss(model(x), y).detach(),
                                      exported.evaluate({"x": x, "y": y}), 1e-6, "loss")

    def test_sigmoid_router_and_silu_on_w3(self):
        exported = self.check_routing(SigmoidMoeBlock(16, 24, 5, 2, True),
                                      "{normalize, sigmoid, top_k = 2 : i64}")
        # silu(x w3^T) * (x w1^T): the stacked w3 feeds the silu.
        self.assertRegex(exported.mlir, r"%(\d+) = cleave.matmul %\d+, "
                                        r"%p.moe.experts._.w3.weight \{transpose_rhs\}.*\n"
                                        r".*\n.*cleave.silu %\1 ")

    def test_long_sequences_are_routed_in_groups(self):
        # [2, 96] tokens: groups of 48 (the largest divisor of 96 up to 64).
        torch.manual_seed(0)
        model = Wrapped(SparseMoeBlock(16, 24, 5, 2, True))
        x = torch.randn(2, 96, 16, generator=torch.Generator().manual_seed(8))
        y = torch.randn(2, 96, 16, generator=torch.Generator().manual_seed(9))
        exported = export(model, {"x": x}, F.mse_loss, {"y": y})
        self.assertIn("{normalize, top_k = 2 : i64} : (tensor<4x48x5xf32>) -> "
                      "(tensor<4x48x5x48xf32>, tensor<4x48x5x48xf32>)", exported.mlir)
        support.assert_close_relative(self, F.mse_loss(model(x), y).detach(),
                                      exported.evaluate({"x": x, "y": y}), 1e-6, "loss")

    def test_blocks_of_one_class_with_other_settings(self):
        # One probe per class, shapes and attributes: top_k differs here.
        torch.manual_seed(0)
        model = nn.Sequential(SparseMoeBlock(16, 24, 5, 1, False),
                              SparseMoeBlock(16, 24, 5, 2, True))
        exported = export(model, {"input": self.X}, F.mse_loss, {"y": self.Y})
        routers = re.findall(r"cleave.moe_router %\d+ (\{[^}]*\})", exported.mlir)
        self.assertEqual(routers, ["{top_k = 1 : i64}", "{normalize, top_k = 2 : i64}"])
        support.assert_close_relative(
            self, F.mse_loss(model(self.X), self.Y).detach(),
            exported.evaluate({"input": self.X, "y": self.Y}), 1e-6, "loss")

    def check_rejected(self, block, reason):
        with self.assertRaises(ExportError) as caught:
            self.export_block(block)
        self.assertIn("module 'moe' is not exported as a mixture-of-experts block: ",
                      str(caught.exception))
        self.assertIn(reason, str(caught.exception))

    def test_rejects_other_computations(self):
        self.check_rejected(UngatedMoeBlock(16, 24, 5, 2, False),
                            "its output is not a top-k mixture of its SwiGLU experts")

    def test_rejects_a_router_bias(self):
        block = SparseMoeBlock(16, 24, 5, 2, False)
        block.gate = nn.Linear(16, 5)
        self.check_rejected(block, "the router 'gate' has a bias")

    def test_rejects_shared_experts(self):
        self.check_rejected(SharedExpertBlock(16, 24, 5, 2, False),
                            "parameters beside the router and the experts (shared.w1.weight")


class TopKElsewhere(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        values, _ = torch.topk(F.softmax(self.fc(x), -1), 2)
        return values.sum()


class NotABlock(nn.Module):
    """A Linear(H, 2) beside a list of two modules that are no experts."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 2)
        self.blocks = nn.ModuleList([nn.Tanh(), nn.Tanh()])

    def forward(self, x):
        return torch.erf(self.blocks[1](self.blocks[0](self.head(x)))).sum()


class TopKErrorTest(unittest.TestCase):
    def test_other_modules_are_not_called_moe_blocks(self):
        with self.assertRaises(ExportError) as caught:
            export(nn.Sequential(NotABlock()), {"input": torch.randn(12, 16)})
        self.assertIn("unsupported function torch.erf", str(caught.exception))
        self.assertNotIn("mixture-of-experts", str(caught.exception))

    def test_other_uses_of_topk_are_refused(self):
        with self.assertRaises(ExportError) as caught:
            export(TopKElsewhere(), {"x": torch.randn(12, 16)})
        self.assertIn("torch.topk is exported only as the expert choice of a load-balancing "
                      "loss", str(caught.exception))
        self.assertIn("another use of its values", str(caught.exception))


def _naive_router(logits, top_k, normalize, capacity):
    """docs/moe.md, one selection at a time."""
    groups, seq, experts = logits.shape
    combine = torch.zeros(groups, seq, experts, capacity, dtype=logits.dtype)
    dispatch = torch.zeros_like(combine)
    for g in range(groups):
        ranks = [[sum(1 for f in range(experts) if logits[g, s, f] > logits[g, s, e] or (
            logits[g, s, f] == logits[g, s, e] and f < e)) for e in range(experts)]
            for s in range(seq)]
        probs = torch.softmax(logits[g], -1)
        used = [0] * experts
        for r in range(top_k):  # first choices of every token, then second...
            for s in range(seq):
                e = ranks[s].index(r)
                if used[e] < capacity:
                    chosen = [f for f in range(experts) if ranks[s][f] < top_k]
                    gate = probs[s, e] / (probs[s, chosen].sum() if normalize else 1)
                    dispatch[g, s, e, used[e]] = 1
                    combine[g, s, e, used[e]] = gate
                    used[e] += 1
    return combine, dispatch


class InterpreterRouterTest(unittest.TestCase):
    def test_ties_priority_and_capacity(self):
        gen = torch.Generator().manual_seed(6)
        logits = torch.randint(0, 3, (2, 6, 4), generator=gen).double()  # many ties
        for capacity, normalize in ((6, True), (2, False), (1, True)):
            t = TensorType((2, 6, 4, capacity), "f64")
            op = Op("moe_router", [], {"top_k": 2, "normalize": normalize}, [])
            op.results = [Value(t, op), Value(t, op)]
            combine, dispatch = evaluate_op(op, [logits])
            want_combine, want_dispatch = _naive_router(logits, 2, normalize, capacity)
            self.assertTrue(torch.equal(dispatch, want_dispatch), capacity)
            self.assertTrue(torch.allclose(combine, want_combine), capacity)


if __name__ == "__main__":
    unittest.main()
