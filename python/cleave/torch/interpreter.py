"""Evaluates an exported ``Program`` with PyTorch, op by op.

Each cleave op is computed from its definition in the dialect reference
(docs/reference/CleaveDialect.md), independently of how the front-end
produced it; autograd flows through, so the interpreter also gives the
gradients the exported forward implies. ``ExportedProgram.evaluate`` and the
CLI's ``--check`` use it to confirm that an export computes what PyTorch
computes, before any compiler pass runs.
"""

import math
from typing import Dict

import torch
import torch.nn.functional as F

from .ir import ELEMENT_TO_TORCH, Op, Program


class InterpreterError(Exception):
    """An op the interpreter cannot evaluate (e.g. dropout's random stream)."""


def _broadcast(x, op, out):
    shape = [1] * out.type.rank
    for i, d in enumerate(op.attrs["dims"]):
        shape[d] = x.shape[i]
    return x.reshape(shape).expand(out.shape)


def _slice(x, op):
    index = tuple(slice(o, o + (n - 1) * s + 1, s) if n else slice(0, 0) for o, n, s in zip(
        op.attrs["offsets"], op.attrs["sizes"], op.attrs["strides"]))
    return x[index]


def _matmul(lhs, rhs, op):
    if op.attrs.get("transpose_lhs"):
        lhs = lhs.transpose(-1, -2)
    if op.attrs.get("transpose_rhs"):
        rhs = rhs.transpose(-1, -2)
    return torch.matmul(lhs, rhs)


def _attention(q, k, v, op):
    # q [B, S, Hq, D], k/v [B, Skv, Hkv, D]; query head h uses kv head h // (Hq / Hkv).
    group = q.shape[2] // k.shape[2]
    k = k.repeat_interleave(group, dim=2)
    v = v.repeat_interleave(group, dim=2)
    scale = op.attrs.get("scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = torch.einsum("bshd,bthd->bhst", q, k) * scale
    if op.attrs.get("causal"):
        s, t = scores.shape[-2:]
        hidden = torch.ones(s, t, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(hidden, float("-inf"))
    return torch.einsum("bhst,bthd->bshd", scores.softmax(-1), v)


def _rotary(x, op):
    # x [B, S, N, D]; position s rotates pair i by s * theta^(-2i/D).
    if op.attrs.get("interleaved"):
        raise InterpreterError("interleaved rotary is not used by the front-end")
    d = x.shape[-1]
    theta = op.attrs.get("theta", 10000.0)
    inv = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.outer(torch.arange(x.shape[1], dtype=torch.float64), inv)
    if op.attrs.get("inverse"):
        angles = -angles
    cos = angles.cos().to(x.dtype)[None, :, None, :]
    sin = angles.sin().to(x.dtype)[None, :, None, :]
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


def _norm(x, gamma, beta, op, rms):
    eps = op.attrs.get("epsilon", 1e-5)
    if rms:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


def _cross_entropy(logits, labels, count, op):
    """The mean over labels that are not ``ignore_index``; with ``count``,
    the sum over them divided by ``count``."""
    ignore = op.attrs.get("ignore_index")
    flat_logits = logits.reshape(-1, logits.shape[-1])
    flat_labels = labels.reshape(-1).long()
    if ignore is None:
        return F.cross_entropy(flat_logits, flat_labels)
    if count is None:
        return F.cross_entropy(flat_logits, flat_labels, ignore_index=ignore)
    total = F.cross_entropy(flat_logits, flat_labels, ignore_index=ignore, reduction="sum")
    return total / count.to(total.dtype)


def _moe_choice(logits, top_k):
    """(rank, selected): an expert's rank is the number of experts with a
    higher logit, or an equal one and a lower index (docs/moe.md)."""
    index = torch.arange(logits.shape[-1])
    higher = logits.unsqueeze(-2) > logits.unsqueeze(-1)  # [g, s, e, f]: f above e
    tied = (logits.unsqueeze(-2) == logits.unsqueeze(-1)) & (index < index[:, None])
    rank = (higher | tied).sum(-1)
    return rank, rank < top_k


def _moe_aux_loss(logits, op):
    """sum_g E sum_e f[g,e] P[g,e]: f the share of the group's S * top_k
    selections choosing e (a constant), P the mean router probability."""
    top_k = op.attrs["top_k"]
    seq, experts = logits.shape[1], logits.shape[2]
    _, selected = _moe_choice(logits, top_k)
    share = selected.sum(1).to(logits.dtype) / (seq * top_k)
    if op.attrs.get("sigmoid"):
        scores = torch.sigmoid(logits)
        probs = scores / scores.sum(-1, keepdim=True)
    else:
        probs = torch.softmax(logits, -1)
    return experts * (share * probs.mean(1)).sum()


def _moe_router(logits, op, capacity):
    """(combine, dispatch), docs/moe.md: an expert's rank is the number of
    experts with a higher logit, or an equal one and a lower index; the
    selections take slots first choices first, in token order; a selection
    finding its expert's ``capacity`` slots taken is dropped."""
    a = op.attrs
    seq = logits.shape[1]
    rank, selected = _moe_choice(logits, a["top_k"])
    scores = torch.sigmoid(logits) if a.get("sigmoid") else torch.softmax(logits, -1)
    gates = scores * selected
    if a.get("normalize"):
        gates = gates / gates.sum(-1, keepdim=True)
    tokens = torch.arange(seq)
    mine, other = rank.unsqueeze(2), rank.unsqueeze(1)  # [g, s, 1, e], [g, 1, t, e]
    earlier = (tokens < tokens[:, None])[None, :, :, None]  # t before s
    before = selected.unsqueeze(1) & ((other < mine) | ((other == mine) & earlier))
    slot = before.sum(2)
    kept = selected & (slot < capacity)
    dispatch = ((slot.unsqueeze(-1) == torch.arange(capacity)) & kept.unsqueeze(-1)).to(
        logits.dtype)
    return gates.unsqueeze(-1) * dispatch, dispatch


def _label_count(labels, op, out):
    kept = labels != op.attrs["ignore_index"]
    return kept.sum().to(ELEMENT_TO_TORCH[out.dtype])


_UNARY = {"neg": torch.neg, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
          "rsqrt": torch.rsqrt, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
          "relu": torch.relu, "silu": F.silu}
_BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
           "max": torch.maximum, "min": torch.minimum, "pow": torch.pow}
_REDUCE = {"reduce_sum": lambda x, d: x.sum(d), "reduce_mean": lambda x, d: x.mean(d),
           "reduce_max": lambda x, d: x.amax(d)}


def evaluate_op(op: Op, args):
    n, a = op.name, op.attrs
    out = op.results[0]
    if n == "constant":
        return a["value"].clone()
    if n in _UNARY:
        return _UNARY[n](args[0])
    if n == "gelu":
        return F.gelu(args[0], approximate=a.get("approximate", "tanh"))
    if n in _BINARY:
        return _BINARY[n](*args)
    if n in _REDUCE:
        return _REDUCE[n](args[0], a["dims"])
    if n == "cast":
        return args[0].to(ELEMENT_TO_TORCH[out.dtype])
    if n == "reshape":
        return args[0].reshape(out.shape)
    if n == "transpose":
        return args[0].permute(a["permutation"])
    if n == "broadcast":
        return _broadcast(args[0], op, out)
    if n == "slice":
        return _slice(args[0], op)
    if n == "concat":
        return torch.cat(args, dim=a["dim"])
    if n == "softmax":
        return torch.softmax(args[0], a["dim"])
    if n == "matmul":
        return _matmul(args[0], args[1], op)
    if n == "layer_norm":
        return _norm(args[0], args[1], args[2], op, rms=False)
    if n == "rms_norm":
        return _norm(args[0], args[1], None, op, rms=True)
    if n == "embedding":  # padding_idx: that row gets no gradient
        return F.embedding(args[1].long(), args[0], padding_idx=a.get("padding_idx"))
    if n == "cross_entropy":
        return _cross_entropy(args[0], args[1], args[2] if len(args) > 2 else None, op)
    if n == "label_count":
        return _label_count(args[0], op, out)
    if n == "attention":
        return _attention(*args, op)
    if n == "rotary":
        return _rotary(args[0], op)
    if n == "moe_router":
        return _moe_router(args[0], op, out.shape[-1])
    if n == "moe_dispatch":  # buf[e,g,c,h] = sum_s w[g,s,e,c] x[g,s,h]
        return torch.einsum("gsec,gsh->egch", args[1], args[0])
    if n == "moe_aux_loss":
        return _moe_aux_loss(args[0], op)
    if n == "moe_combine":  # y[g,s,h] = sum_{e,c} w[g,s,e,c] out[e,g,c,h]
        return torch.einsum("gsec,egch->gsh", args[0], args[1])
    raise InterpreterError(f"cannot evaluate cleave.{n}")


def evaluate(program: Program, inputs: Dict[str, torch.Tensor],
             params: Dict[str, torch.Tensor]) -> torch.Tensor:
    """Runs the program; ``inputs`` by ``cleave.input`` name, ``params`` by
    ``cleave.param`` name. Integer inputs may be int64: they are converted."""
    env: Dict[int, torch.Tensor] = {}
    for arg in program.args:
        attrs = arg.arg_attrs
        if "cleave.param" in attrs:
            tensor = params[attrs["cleave.param"]]
        else:
            tensor = inputs[attrs["cleave.input"]]
            if not arg.type.is_float:
                tensor = tensor.to(ELEMENT_TO_TORCH[arg.dtype])
        if tuple(tensor.shape) != arg.shape:
            raise InterpreterError(f"argument %{arg.name}: shape {list(tensor.shape)}, "
                                   f"expected {list(arg.shape)}")
        env[id(arg)] = tensor
    for op in program.ops:
        args = [env[id(v)] for v in op.operands]
        results = evaluate_op(op, args)
        if not isinstance(results, tuple):
            results = (results,)
        for result, value in zip(results, op.results, strict=True):
            if tuple(result.shape) != value.shape:
                raise InterpreterError(f"cleave.{op.name} produced {list(result.shape)}, "
                                       f"its type says {value.type}")
            env[id(value)] = result
    return env[id(program.result)]

