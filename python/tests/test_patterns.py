"""Pattern recognition: exact hand-written forms become cleave.attention,
cleave.rms_norm and cleave.rotary; near misses stay primitive. Either way the
exported program must compute PyTorch's loss and gradients."""

import math
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

from cleave.torch import export
from tests import support
from tests.models.llama import RotaryEmbedding, rotate_half

B, S, H, D = 2, 6, 2, 4
CAUSAL = torch.tril(torch.ones(S, S, dtype=torch.bool))


class Heads(nn.Module):
    """q, k, v of shape [B, H, S, D] from x, then ``attend(q, k, v)``."""

    def __init__(self, attend):
        super().__init__()
        torch.manual_seed(3)
        self.proj = nn.Linear(H * D, 3 * H * D)
        self.attend = attend

    def forward(self, x):
        q, k, v = self.proj(x).split(H * D, dim=-1)
        q, k, v = (t.view(B, S, H, D).transpose(1, 2) for t in (q, k, v))
        return (self.attend(q, k, v) * torch.arange(1.0, D + 1)).sum()


def causal(q, k, v, fill=float("-inf"), scale_first=True):
    att = q @ k.transpose(-2, -1)
    if scale_first:
        att = att * (1.0 / math.sqrt(D))
    att = att.masked_fill(~CAUSAL, fill)
    if not scale_first:
        att = att / math.sqrt(D)
    return F.softmax(att, dim=-1) @ v


class Norm(nn.Module):
    def __init__(self, normalize, weight=True):
        super().__init__()
        torch.manual_seed(4)
        self.proj = nn.Linear(8, 8)
        self.weight = nn.Parameter(torch.rand(8) + 0.5) if weight else None
        self.normalize = normalize

    def forward(self, x):
        y = self.normalize(self.proj(x), self.weight)
        return (y * torch.arange(8.0)).sum()


class Rotary(nn.Module):
    def __init__(self, apply, theta=10000.0, seq_first=False):
        super().__init__()
        torch.manual_seed(5)
        self.proj = nn.Linear(H * D, H * D)
        self.rotary = RotaryEmbedding(D, 16, theta)
        self.apply_ = apply
        self.seq_first = seq_first

    def forward(self, x):
        q = self.proj(x).view(B, S, H, D)
        cos, sin = self.rotary(S)
        if not self.seq_first:
            q = q.transpose(1, 2)
        else:
            cos, sin = cos[:, None, :], sin[:, None, :]
        return (self.apply_(q, cos, sin) * torch.arange(1.0, D + 1)).sum()


CASES = {  # name: (module, {op: count})
    "attention_causal": (Heads(causal), {"cleave.attention": 1, "causal": 1}),
    "attention_scale_after_mask": (Heads(lambda q, k, v: causal(q, k, v, scale_first=False)),
                                   {"cleave.attention": 1, "causal": 1}),
    "attention_finite_fill": (Heads(lambda q, k, v: causal(q, k, v, fill=-1e9)),
                              {"cleave.attention": 1, "causal": 1}),
    "attention_unmasked": (Heads(lambda q, k, v: torch.softmax(q @ k.transpose(2, 3) / 2, -1) @ v),
                           {"cleave.attention": 1, "causal": 0, "scale = 0.5 : f64": 1}),
    "attention_rank3": (Heads(lambda q, k, v: causal(q.reshape(B * H, S, D),
                                                     k.reshape(B * H, S, D),
                                                     v.reshape(B * H, S, D)).view(B, H, S, D)),
                        {"cleave.attention": 1}),
    "attention_small_fill_stays_primitive": (
        Heads(lambda q, k, v: causal(q, k, v, fill=-1e4)), {"cleave.attention": 0}),
    "attention_non_causal_mask_stays_primitive": (
        Heads(lambda q, k, v: F.softmax((q @ k.transpose(-2, -1)).masked_fill(
            torch.eye(S, dtype=torch.bool), float("-inf")), -1) @ v),
        {"cleave.attention": 0, "cleave.softmax": 1}),
    "attention_weights_reused_stay_primitive": (
        Heads(lambda q, k, v: (lambda p: p @ v + p.sum(-1, keepdim=True))(
            F.softmax(q @ k.transpose(-2, -1), -1))), {"cleave.attention": 0}),
    "rms_norm": (Norm(lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w),
                 {"cleave.rms_norm": 1, "cleave.rsqrt": 0}),
    "rms_norm_div_sqrt": (Norm(lambda x, w: w * (x / torch.sqrt((x * x).mean(-1, keepdim=True)
                                                                + 1e-5))),
                          {"cleave.rms_norm": 1}),
    "rms_norm_no_weight": (Norm(lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)
                                                             + 1e-6), weight=False),
                           {"cleave.rms_norm": 1}),
    "rms_norm_wrong_dim_stays_primitive": (
        Norm(lambda x, w: x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + 1e-6) * w),
        {"cleave.rms_norm": 0, "cleave.rsqrt": 1}),
    "rotary": (Rotary(lambda q, c, s: q * c + rotate_half(q) * s),
               {"cleave.rotary": 1, "theta = 10000.0": 1}),
    "rotary_llama3_theta": (Rotary(lambda q, c, s: q * c + rotate_half(q) * s, 500000.0),
                            {"cleave.rotary": 1, "theta = 500000.0": 1}),
    "rotary_sequence_major": (Rotary(lambda q, c, s: q * c + rotate_half(q) * s,
                                     seq_first=True),
                              {"cleave.rotary": 1, "cleave.transpose": 0}),
    "rotary_scaled_positions_stay_primitive": (
        Rotary(lambda q, c, s: q * c[torch.arange(S) // 2]
               + rotate_half(q) * s[torch.arange(S) // 2]),
        {"cleave.rotary": 0, "cleave.concat": 1}),
    "rotary_wrong_sign_stays_primitive": (
        Rotary(lambda q, c, s: q * c - rotate_half(q) * s), {"cleave.rotary": 0}),
}


class PatternsTest(unittest.TestCase):
    def check(self, name):
        module, counts = CASES[name]
        x = torch.randn(B, S, H * D if not isinstance(module, Norm) else 8,
                        generator=torch.Generator().manual_seed(11))
        exported = export(module, (x,))
        support.verify(self, exported.mlir)
        for text, count in counts.items():
            self.assertEqual(exported.mlir.count(text), count, f"{name}: count of {text!r}\n"
                             f"{exported.mlir}")
        names = list(exported.parameters)
        loss, grads = support.reference_loss_and_grads(module, {"x": x}, None, {}, names)
        got_loss, got_grads = support.exported_loss_and_grads(exported, {"x": x})
        support.assert_close_relative(self, loss, got_loss, 1e-5, f"{name}: loss")
        for param in names:
            support.assert_close_relative(self, grads[param], got_grads[param], 1e-5,
                                          f"{name}: gradient of {param}")


def _add_case(name):
    setattr(PatternsTest, f"test_{name}", lambda self: self.check(name))


for _name in CASES:
    _add_case(_name)


if __name__ == "__main__":
    unittest.main()
