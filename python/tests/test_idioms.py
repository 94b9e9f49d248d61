"""Models written the way popular model libraries write them export, compute
PyTorch's loss and gradients, and have their attention recognized
(tests/models/idioms.py): Hugging Face GPT-2's Conv1D (torch.addmm) and
masks, baddbmm scores (with and without ALiBi biases), nn.Embedding with
padding_idx, a forward(*args, **kwargs), and hand-written attention with
additive, finfo.min and zero padding masks and upcast softmax."""

import unittest

import torch

from cleave.torch import export
from tests import support
from tests.models import idioms

B = 2
GEN = torch.Generator().manual_seed(7)
IDS = torch.randint(0, idioms.VOCAB, (B, idioms.SEQ), generator=GEN)
TARGETS = torch.randint(0, idioms.VOCAB, (B, idioms.SEQ), generator=GEN)
IDX_TARGETS = {"idx": IDS, "targets": TARGETS}

CASES = {  # name: (factory, inputs, loss, recognized cleave.attention ops)
    "hf_gpt2_conv1d_where_finfo": (idioms.make_hf_gpt2,
                                   {"input_ids": IDS, "labels": TARGETS}, "loss", 2),
    "baddbmm_scaled_scores": (idioms.BaddbmmAttention, IDX_TARGETS, None, 1),
    # cleave.attention has no bias operand: ALiBi attention stays primitive.
    "baddbmm_alibi_bias": (lambda: idioms.BaddbmmAttention(alibi=True), IDX_TARGETS, None, 0),
    "embedding_padding_idx": (idioms.PaddedEmbedding, IDX_TARGETS, None, 0),
    "forward_kwargs_only": (idioms.KwargsOnly, {"input_ids": IDS, "labels": TARGETS}, None, 0),
}
for _style in idioms.HandWritten.STYLES:
    CASES[f"hand_written_{_style}"] = (lambda s=_style: idioms.HandWritten(s), IDX_TARGETS,
                                       None, 1)


class IdiomsTest(unittest.TestCase):
    def check(self, name):
        factory, inputs, loss, attention = CASES[name]
        model = factory()
        exported = export(model, inputs, loss=loss)
        support.verify(self, exported.mlir)
        self.assertEqual(exported.rewrites["attention"], attention, name)
        self.assertEqual(exported.mlir.count("cleave.attention"), attention, exported.mlir)
        names = list(exported.parameters)
        want, grads = support.reference_loss_and_grads(model, inputs, loss, {}, names)
        got, got_grads = support.exported_loss_and_grads(exported, inputs)
        support.assert_close_relative(self, want, got, 1e-5, f"{name}: loss")
        for param in names:
            support.assert_close_relative(self, grads[param], got_grads[param], 1e-5,
                                          f"{name}: gradient of {param}")

    def test_padding_row_gets_no_gradient(self):
        ids = IDS.clone()
        ids[:, ::3] = 5  # the padding id occurs
        model = idioms.PaddedEmbedding(padding_idx=5)
        exported = export(model, {"idx": ids, "targets": TARGETS})
        self.assertIn("padding_idx = 5 : i64", exported.mlir)
        _, grads = support.exported_loss_and_grads(exported, {"idx": ids, "targets": TARGETS})
        table = grads["emb.weight"]
        self.assertEqual(table[5].abs().max().item(), 0.0)
        self.assertGreater(table[ids[0, 1]].abs().max().item(), 0.0)

    def test_negative_padding_idx_is_a_row(self):
        exported = export(idioms.PaddedEmbedding(padding_idx=-1), IDX_TARGETS)
        self.assertIn(f"padding_idx = {idioms.VOCAB - 1} : i64", exported.mlir)

    def test_kwargs_inputs_keep_their_names(self):
        exported = export(idioms.KwargsOnly(), {"input_ids": IDS, "labels": TARGETS})
        self.assertEqual([s.name for s in exported.inputs], ["input_ids", "labels"])
        with self.assertRaisesRegex(TypeError, "by keyword"):
            export(idioms.KwargsOnly(), (IDS, TARGETS))


def _add_case(name):
    setattr(IdiomsTest, f"test_{name}", lambda self: self.check(name))


for _name in CASES:
    _add_case(_name)


if __name__ == "__main__":
    unittest.main()
