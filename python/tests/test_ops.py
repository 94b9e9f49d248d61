"""Op-by-op coverage: each small module is exported, verified by cleave-opt,
and evaluated op by op from the dialect's definitions; its loss and
parameter gradients must equal PyTorch's."""

import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

from cleave.torch import export
from tests import support


class Fn(nn.Module):
    """forward(x) = fn(self, x); parameters given by shape."""

    def __init__(self, fn, **shapes):
        super().__init__()
        self.fn = fn
        gen = torch.Generator().manual_seed(len(shapes))
        for name, shape in shapes.items():
            self.register_parameter(name, nn.Parameter(torch.randn(shape, generator=gen)))

    def forward(self, x):
        return self.fn(self, x)


MASK = torch.tensor([[True, False, True, False], [False, False, True, True],
                     [True, True, False, False]])

# name: (module, input shape, text the export must contain, text it must not)
CASES = {
    "broadcast_add": (Fn(lambda m, x: ((x + m.p) * m.q).sum(), p=(3, 4), q=(4,)),
                      (2, 1, 4), ["cleave.broadcast"], []),
    "scalars": (Fn(lambda m, x: ((1 - x * 2 + 0.5) / 3 * m.p - m.p / 4).mean(), p=(4,)),
                (2, 4), ["dense<2.0>", "dense<3.0>"], []),
    "pow": (Fn(lambda m, x: (x.pow(2) + (x * m.p) ** 3 + (x * x + 1) ** 0.5
                             + (x * x + 1) ** -0.5 + (x * x + 2) ** -1 + (x * x + 1) ** 1.5
                             + torch.square(m.p) + 2 ** (x * m.p)).sum(), p=(4,)),
            (3, 4), ["cleave.sqrt", "cleave.rsqrt", "cleave.pow"], []),
    "unary": (Fn(lambda m, x: (torch.exp(x * m.p) + torch.log(x * x + 1) + torch.tanh(x)
                               + torch.sigmoid(x) + F.relu(x * m.p) + F.silu(x)
                               + F.gelu(x * m.p, approximate="tanh") - x.neg()
                               + torch.rsqrt(x * x + 1) + nn.SiLU()(x)).sum(), p=(4,)),
              (3, 4), ["#cleave.gelu_approx<tanh>", "cleave.sigmoid"], []),
    "reductions": (Fn(lambda m, x: (x * m.p).mean(-1, keepdim=True).sum()
                      + (x * m.p).sum(dim=(0, 2)).mean() + (x * m.p).amax(1).sum()
                      + torch.max(x * m.p) + (x * m.p).mean(), p=(4,)),
                   (2, 3, 4), ["cleave.reduce_max", "cleave.reduce_mean"], []),
    "softmax": (Fn(lambda m, x: (F.softmax(x * m.p, dim=1) * m.p).sum()
                   + (F.log_softmax(x * m.p, dim=-1) * m.p).sum()
                   + (torch.softmax(x * m.p, -1) * m.p).sum(), p=(4,)),
                (2, 3, 4), ["softmax %", "dim = 1"], []),
    "views": (Fn(lambda m, x: ((x * m.p).view(-1) * m.p.repeat(6)).sum()
                 + (x * m.p).repeat(2, 1, 1, 3).mean()
                 + (x * m.p).reshape(6, 4).T.sum(0).mul(m.p.sum()).sum()
                 + (x * m.p).flatten(1).unsqueeze(0).squeeze(0).sum()
                 + (x * m.p).permute(2, 0, 1).contiguous().transpose(0, 1)[0].sum()
                 + (x.sum(0) * m.p).t().mean() + m.p.expand(2, 4).sum()
                 + (x * m.p).swapaxes(1, 2).expand_as(x.transpose(1, 2)).sum(), p=(4,)),
              (2, 3, 4), ["cleave.transpose"], []),
    "indexing": (Fn(lambda m, x: ((x * m.p)[:, 1:3].sum() + (x * m.p)[..., ::2].sum()
                                  + (x * m.p)[0].sum() + (x * m.p)[:, None].sum()
                                  + (x * m.p)[-1, -2:, 1].sum()
                                  + (x * m.p).narrow(2, 1, 2).sum()
                                  + (x * m.p).select(1, 2).sum()
                                  + ((x * m.p)[:, [-1], :] * m.p).sum()
                                  + ((x * m.p)[..., [3, 0, 0]] * torch.arange(3.0)).sum()),
                  p=(4,)),
                 (2, 3, 4), ["cleave.slice", "strides = [1, 1, 2]"], []),
    "split_chunk": (Fn(lambda m, x: sum((t * (i + 1)).sum() for i, t in enumerate(
        list((x * m.p).split(3, dim=-1)) + list((x * m.p).chunk(3, dim=1))
        + list((x * m.p).unbind(0)) + list(torch.split(x * m.p, [1, 2], dim=1)))), p=(4,)),
                    (2, 3, 4), ["cleave.slice"], []),
    "cat_stack": (Fn(lambda m, x: (torch.cat([x * m.p, torch.ones(2, 4)], dim=0)
                                   * torch.arange(4.0)).sum()
                  + torch.stack([x * m.p, x], dim=1).mean(), p=(4,)),
                  (2, 4), ["cleave.concat"], []),
    "masking": (Fn(lambda m, x: ((x * m.p).masked_fill(MASK, -1e4).softmax(-1) * m.p).sum()
                   + (x * m.p).masked_fill(MASK, 0.5).sum()
                   + torch.where(MASK, x * m.p, torch.tensor(0.25)).sum()
                   + torch.where(MASK, 2.0, x * m.p).sum()
                   + (x * m.p).masked_fill(~MASK, float("-inf")).softmax(-1)[:, 2:].sum(),
                   p=(4,)),
                (3, 4), ["cleave.constant dense<\"0x"], []),
    "matmul": (Fn(lambda m, x: (m.w @ m.v).sum() + (m.v[:3] @ m.w).sum()
                  + (x @ m.w.T).sum() + torch.matmul(m.w, x.transpose(1, 2)).sum()
                  + torch.bmm(x, x.transpose(1, 2)).mean() + F.linear(m.v, m.w).sum()
                  + (x.unsqueeze(1) @ m.b).mean() + torch.mm(m.w, m.w.t()).sum(),
                  v=(4,), w=(3, 4), b=(5, 4, 2)),
               (2, 3, 4), ["{transpose_rhs}", "cleave.matmul"], []),
    "layer_norm": (Fn(lambda m, x: (F.layer_norm(x * m.p, (4,)) * m.p).sum()
                      + (F.layer_norm(x, (3, 4), eps=1e-3) * m.p).sum()
                      + (nn.LayerNorm(4, elementwise_affine=False)(x) * m.p).sum(), p=(4,)),
                   (2, 3, 4), ["epsilon = 0.001 : f64", "epsilon = 1.0e-05 : f64"], []),
    "losses": (Fn(lambda m, x: F.cross_entropy((x * m.p).transpose(1, 2),
                                               torch.tensor([[0, 3, 1], [2, 2, 0]]))
                  + F.cross_entropy(x[0, 0] * m.p, torch.tensor(1), reduction="sum")
                  + nn.CrossEntropyLoss()(x[0] * m.p, torch.tensor([3, 0, 1]))
                  + F.mse_loss(x * m.p, x) + nn.MSELoss(reduction="sum")(x[0] * m.p, x[1]),
                  p=(4,)),
               (2, 3, 4), ["cleave.cross_entropy"], []),
    "inplace": (Fn(lambda m, x: _inplace(m, x), p=(4,)), (3, 4), ["cleave.relu"], []),
    "casts": (Fn(lambda m, x: ((x.double() * m.p.double()).sum(-1).float() * 2).sum()
                 + (x * m.p).to(torch.float64).type_as(x).sum()
                 + (x * m.p).bfloat16().float().sum(), p=(4,)),
              (3, 4), ["to tensor<3x4xf64>", "to tensor<3x4xbf16>"], []),
    "clamp": (Fn(lambda m, x: ((x * m.p).clamp(min=-0.5, max=0.5).sum()
                               + torch.clamp_min(x * m.p, 0.1).sum()
                               + torch.maximum(x, m.p).sum() + torch.minimum(x, m.p).sum()),
                 p=(4,)),
              (3, 4), ["cleave.max", "cleave.min"], []),
    "dropout_off": (Fn(lambda m, x: (F.dropout(x * m.p, 0.3, training=False)
                                     + nn.Dropout(0.0)(x) + x.new_zeros(3, 4)
                                     + torch.zeros_like(x) * 3).sum(), p=(4,)),
                    (3, 4), [], ["cleave.dropout"]),
}


def _inplace(m, x):
    h = x * m.p
    h.mul_(2)  # an intermediate updated in place, read afterwards
    h.masked_fill_(MASK, 0.0)
    F.relu(h, inplace=True)
    return (h * m.p).sum()


class OpsTest(unittest.TestCase):
    def check(self, name):
        module, shape, present, absent = CASES[name]
        x = torch.randn(shape, generator=torch.Generator().manual_seed(7))
        exported = export(module, (x,))
        support.verify(self, exported.mlir)
        for text in present:
            self.assertIn(text, exported.mlir)
        for text in absent:
            self.assertNotIn(text, exported.mlir)
        names = list(exported.parameters)
        loss, grads = support.reference_loss_and_grads(module, {"x": x}, None, {}, names)
        got_loss, got_grads = support.exported_loss_and_grads(exported, {"x": x})
        support.assert_close_relative(self, loss, got_loss, 1e-5, f"{name}: loss")
        for param in names:
            support.assert_close_relative(self, grads[param], got_grads[param], 1e-5,
                                          f"{name}: gradient of {param}")

    def test_dropout_in_training_mode_is_a_seeded_cleave_dropout(self):
        module = Fn(lambda m, x: (nn.functional.dropout(x * m.p, 0.1) * m.p).sum()
                    + F.dropout(x, 0.2, training=True).sum(), p=(4,))
        exported = export(module, (torch.randn(3, 4),))
        support.verify(self, exported.mlir)
        self.assertTrue(exported.uses_dropout_seed)
        self.assertIn('%dropout_seed: tensor<i64> {cleave.input = "dropout_seed"}',
                      exported.mlir)
        self.assertIn("{rate = 0.1 : f64, stream = 0 : i64}", exported.mlir)
        self.assertIn("{rate = 0.2 : f64, stream = 1 : i64}", exported.mlir)
        self.assertEqual([i.name for i in exported.inputs], ["x"])
        off = export(module, (torch.randn(3, 4),), dropout=False)
        self.assertNotIn("dropout", off.mlir)

    def test_eval_mode_drops_dropout(self):
        module = Fn(lambda m, x: (nn.Dropout(0.5).train(m.training)(x * m.p)).sum(), p=(4,))
        self.assertNotIn("dropout", export(module.eval(), (torch.randn(3, 4),)).mlir)


def _add_case(name):
    setattr(OpsTest, f"test_{name}", lambda self: self.check(name))


for _name in CASES:
    _add_case(_name)


if __name__ == "__main__":
    unittest.main()
