"""Recognizes hand-written layers and replaces them with the cleave op.

Each matcher accepts only what computes exactly the op's definition, and
leaves everything else as primitive ops (which are always correct):

- attention: ``softmax(q k^T * scale + causal mask) v`` -> ``cleave.attention``.
  Scale and masks come in any order; the scale as ``* c`` or ``/ c`` (a
  number or a constant tensor such as ``torch.full([], c)``) or as
  ``baddbmm``'s ``alpha``; the causal mask as ``masked_fill``/``torch.where``
  with ``-inf`` or a fill <= -1e9 (``torch.finfo(dtype).min``), or added as
  a 0/-inf (or 0/finfo.min) constant; a constant additive mask of zeros (a
  padding mask that hides nothing) is dropped; an upcast softmax
  (``softmax(x.float()).to(dtype)``, ``softmax(x, dtype=torch.float32)``)
  is accepted. A mask computed from an input (a padding mask that varies with
  the batch) cannot be a ``cleave.attention``: such attention stays as
  primitive ops;
- RMSNorm: ``x * rsqrt(mean(x^2, -1) + eps) [* w]`` (or ``x / sqrt(...)``) ->
  ``cleave.rms_norm``;
- rotary embedding, ``rotate_half`` form: ``x * cos + cat(-x2, x1) * sin``
  with constant tables equal to ``cos/sin(pos * theta^(-2i/D))`` ->
  ``cleave.rotary``.

Intermediate values must have no other use, so nothing is computed twice.
"""

import math
from typing import Dict, List, Optional

import torch

from .ir import Builder, Op, Program, Value, first_element, is_splat

#: A mask entry at or below this hides a score exactly in f32: exp() of it
#: minus any realistic row maximum underflows to 0.
_MASKED = -1e9


def const_eval(value: Value) -> Optional[torch.Tensor]:
    """The value of a constant expression (constants and data movement)."""
    op = value.op
    if op is None:
        return None
    if op.name == "constant":
        return op.attrs["value"]
    if op.name not in ("reshape", "broadcast", "transpose", "slice", "cast"):
        return None
    source = const_eval(op.operands[0])
    if source is None:
        return None
    if op.name == "reshape":
        return source.reshape(value.shape)
    if op.name == "transpose":
        return source.permute(op.attrs["permutation"])
    if op.name == "broadcast":
        shape = [1] * value.type.rank
        for i, d in enumerate(op.attrs["dims"]):
            shape[d] = source.shape[i]
        return source.reshape(shape).expand(value.shape)
    if op.name == "slice":
        index = tuple(slice(o, o + (n - 1) * s + 1, s) for o, n, s in zip(
            op.attrs["offsets"], op.attrs["sizes"], op.attrs["strides"]))
        return source[index]
    return source.to(torch.float64)


def _splat_number(value: Value) -> Optional[float]:
    """The number a constant filled with one value holds (a splat, or a
    constant tensor reshaped or broadcast)."""
    op = value.op
    if op is not None and op.name == "constant" and is_splat(op):
        return float(first_element(op))
    table = const_eval(value)
    if table is None or table.numel() == 0 or not table.is_floating_point():
        return None
    first = table.reshape(-1)[0]
    return float(first) if bool((table == first).all()) else None


def _strip_unit_reshapes(value: Value) -> Value:
    while value.op is not None and value.op.name == "reshape":
        source = value.op.operands[0]
        if [d for d in source.shape if d != 1] != [d for d in value.shape if d != 1]:
            break
        value = source
    return value


def _operands(op: Op, name: str):
    """Both orders of a commutative binary op's operands, if ``op`` is ``name``."""
    if op is None or op.name != name:
        return []
    a, b = op.operands
    return [(a, b), (b, a)]


class _Matcher:
    """Shared state of one rewrite attempt."""

    def __init__(self, program: Program, uses: Dict[int, List[Op]]):
        self.program = program
        self.uses = uses
        self.intermediates: List[Value] = []

    def single_use(self, *values: Value) -> bool:
        self.intermediates.extend(values)
        return all(len(self.uses.get(id(v), ())) == 1 for v in values)

    def builder_at(self, root: Op) -> Builder:
        builder = Builder(self.program)
        builder.insert_index = self.program.ops.index(root)
        builder.loc = root.loc
        return builder


# Attention -------------------------------------------------------------------

def _causal_table(value: Value, scores: Value) -> Optional[torch.Tensor]:
    table = const_eval(value)
    if table is None or tuple(table.shape) != scores.shape:
        return None
    lead = (0,) * (table.dim() - 2)
    first = table[lead]
    if not torch.equal(table, first.expand_as(table)):
        return None
    return first.to(torch.float64)


def _is_causal(rows: torch.Tensor, visible: float, hidden) -> bool:
    s, t = rows.shape
    if s != t:
        return False
    lower = torch.ones(s, t, dtype=torch.bool).tril()
    return bool((rows[lower] == visible).all() and hidden(rows[~lower]).all())


def _peel_mask(m: _Matcher, value: Value):
    """``value`` = scores + causal mask: returns the scores, else None."""
    for scores, mask in _operands(value.op, "add"):
        table = _causal_table(mask, value)
        if table is None or not _is_causal(table, 0.0, lambda x: x <= _MASKED):
            continue
        # masked_fill with a finite fill lowers to scores * keep + fill.
        for inner, keep in _operands(scores.op, "mul"):
            keep_table = _causal_table(keep, value)
            if (keep_table is not None and _is_causal(keep_table, 1.0, lambda x: x == 0)
                    and m.single_use(scores)):
                return inner
        return scores
    return None


def _peel_zero_mask(value: Value):
    """``value`` = scores + a constant of zeros (an additive padding mask
    that hides nothing): returns the scores, else None."""
    for scores, mask in _operands(value.op, "add"):
        table = const_eval(mask)
        if table is not None and tuple(table.shape) == value.shape and not bool(
                table.any()):
            return scores
    return None


def _peel_cast(value: Value):
    """``value`` = cast(x) to a wider float type (an upcast): returns x."""
    op = value.op
    if op is None or op.name != "cast":
        return None
    source = op.operands[0]
    widths = {"bf16": 16, "f16": 16, "f32": 32, "f64": 64}
    if widths.get(value.dtype, 0) >= widths.get(source.dtype, 64):
        return source
    return None


def _peel_scale(value: Value):
    op = value.op
    for scores, c in _operands(op, "mul"):
        number = _splat_number(c)
        if number is not None:
            return scores, number
    if op is not None and op.name == "div":
        number = _splat_number(op.operands[1])
        if number:
            return op.operands[0], 1.0 / number
    return None, None


def _unrepeat(m: _Matcher, value: Value):
    """``value`` = repeat_kv(x, rep) (x[:, :, None].expand(...).reshape(...)):
    returns (x, rep), else (value, 1)."""
    op = value.op
    if op is None or op.name != "reshape":
        return value, 1
    expanded = op.operands[0]
    if expanded.op is None or expanded.op.name != "broadcast":
        return value, 1
    if expanded.op.attrs["dims"] != [0, 1, 3, 4]:
        return value, 1
    x = expanded.op.operands[0]
    batch, heads, rep, seq, dim = expanded.shape
    if value.shape != (batch, heads * rep, seq, dim) or x.shape != (batch, heads, seq, dim):
        return value, 1
    if not m.single_use(value, expanded):
        return value, 1
    return x, rep


def match_attention(m: _Matcher, root: Op) -> bool:
    if root.name != "matmul" or root.attrs.get("transpose_lhs"):
        return False
    probs, v = root.operands
    rank = probs.type.rank
    if probs.op is not None and probs.op.name == "cast":  # softmax(...).to(dtype)
        if not m.single_use(probs):
            return False
        probs = probs.op.operands[0]
    softmax = probs.op
    if softmax is None or softmax.name != "softmax" or rank not in (3, 4):
        return False
    if softmax.attrs["dim"] != rank - 1 or not m.single_use(probs):
        return False
    scores, scale, causal = softmax.operands[0], None, False
    peeled = set()
    for _ in range(4):  # each of: upcast, causal mask, zero mask, scale
        if not m.single_use(scores):
            return False
        if "cast" not in peeled:
            inner = _peel_cast(scores)
            if inner is not None:
                scores = inner
                peeled.add("cast")
                continue
        if not causal:
            inner = _peel_mask(m, scores)
            if inner is not None:
                scores, causal = inner, True
                continue
        if "zero" not in peeled:
            inner = _peel_zero_mask(scores)
            if inner is not None:
                scores = inner
                peeled.add("zero")
                continue
        if scale is None:
            inner, number = _peel_scale(scores)
            if inner is not None:
                scores, scale = inner, number
                continue
        break
    qk = scores.op
    if qk is None or qk.name != "matmul" or qk.attrs.get("transpose_lhs"):
        return False
    if not m.single_use(scores):
        return False
    q, k = qk.operands
    if not (q.type.rank == k.type.rank == v.type.rank == rank) or q.dtype != v.dtype:
        return False
    if rank == 4 and qk.attrs.get("transpose_rhs") and not root.attrs.get("transpose_rhs"):
        k_kv, k_rep = _unrepeat(m, k)
        v_kv, v_rep = _unrepeat(m, v)
        if k_rep == v_rep > 1:  # grouped-query attention: use the shared heads
            k, v = k_kv, v_kv
    b = m.builder_at(root)
    if not qk.attrs.get("transpose_rhs"):
        k = b.transpose(k, list(range(rank - 2)) + [rank - 1, rank - 2])
    if root.attrs.get("transpose_rhs"):
        v = b.transpose(v, list(range(rank - 2)) + [rank - 1, rank - 2])
    if rank == 4:
        perm = [0, 2, 1, 3]
        q, k, v = (b.transpose(t, perm) for t in (q, k, v))
    else:
        q, k, v = (b.reshape(t, t.shape[:2] + (1,) + t.shape[2:]) for t in (q, k, v))
    attrs = {"causal": causal, "scale": 1.0 if scale is None else float(scale)}
    out = b.create1("attention", [q, k, v], attrs, q.type.with_shape(
        q.shape[:3] + (v.shape[3],)))
    if rank == 4:
        out = b.transpose(out, [0, 2, 1, 3])
    else:
        out = b.reshape(out, root.results[0].shape)
    m.program.replace_all_uses(root.results[0], out)
    return True


# RMSNorm -----------------------------------------------------------------------

def _rms_core(m: _Matcher, normalized: Value):
    """``normalized`` = x * rsqrt(mean(x*x, -1) + eps): returns (x, eps)."""
    op = normalized.op
    candidates = [(x, r, "rsqrt") for x, r in _operands(op, "mul")]
    if op is not None and op.name == "div":
        candidates.append((op.operands[0], op.operands[1], "sqrt"))
    for x, r, root_name in candidates:
        rank = x.type.rank
        if rank < 1 or r.op is None or r.op.name != "broadcast":
            continue
        if r.op.attrs["dims"] != list(range(rank - 1)):
            continue
        inv = _strip_unit_reshapes(r.op.operands[0])
        if inv.op is None or inv.op.name != root_name:
            continue
        var_eps = inv.op.operands[0]
        for var, eps in _operands(var_eps.op, "add"):
            eps_value = _splat_number(eps)
            mean = _strip_unit_reshapes(var)
            if eps_value is None or mean.op is None or mean.op.name != "reduce_mean":
                continue
            square = mean.op.operands[0]
            if mean.op.attrs["dims"] != [rank - 1] or square.op is None:
                continue
            if square.op.name != "mul" or square.op.operands != [x, x]:
                continue
            if m.single_use(r, r.op.operands[0], inv, var_eps, var, mean, square):
                return x, eps_value
    return None, None


def match_rms_norm(m: _Matcher, root: Op) -> bool:
    if root.name not in ("mul", "div"):
        return False
    normalized = root.results[0]
    x, eps = _rms_core(m, normalized)
    if x is None:
        return False
    hidden = x.shape[-1]
    users = m.uses.get(id(normalized), [])
    gamma, target = None, root
    if len(users) == 1:
        for n, wb in _operands(users[0], "mul"):
            if (n is normalized and wb.op is not None and wb.op.name == "broadcast"
                    and wb.op.attrs["dims"] == [x.type.rank - 1]
                    and wb.op.operands[0].shape == (hidden,)
                    and len(m.uses.get(id(wb), ())) == 1):
                gamma, target = wb.op.operands[0], users[0]
    b = m.builder_at(target)
    if gamma is None:
        gamma = b.splat(1.0, x.type.with_shape((hidden,)))
    out = b.create1("rms_norm", [x, gamma], {"epsilon": eps}, x.type)
    m.program.replace_all_uses(target.results[0], out)
    return True


# Rotary embedding ----------------------------------------------------------------

def _half_slice(value: Value, x: Value, upper: bool) -> bool:
    op = value.op
    if op is None or op.name != "slice" or op.operands[0] is not x:
        return False
    d = x.shape[-1]
    offsets = [0] * (x.type.rank - 1) + [d // 2 if upper else 0]
    sizes = list(x.shape[:-1]) + [d // 2]
    return (op.attrs["offsets"] == offsets and op.attrs["sizes"] == sizes
            and all(s == 1 for s in op.attrs["strides"]))


def _rotate_half_of(rotated: Value) -> Optional[Value]:
    op = rotated.op
    if op is None or op.name != "concat" or len(op.operands) != 2:
        return None
    if op.attrs["dim"] != rotated.type.rank - 1:
        return None
    neg, low = op.operands
    if neg.op is None or neg.op.name != "neg" or low.op is None:
        return None
    x = low.op.operands[0] if low.op.operands else None
    if x is None or not _half_slice(low, x, False) or not _half_slice(neg.op.operands[0], x, True):
        return None
    return x


def _position_table(value: Value, x: Value):
    """A [S, D] table from a constant equal along every dim but the sequence
    one (1 or 2) and the last: returns (table, seq_dim)."""
    full = const_eval(value)
    if full is None or tuple(full.shape) != x.shape:
        return None, None
    for seq in (1, 2):
        other = 3 - seq
        table = full.select(other, 0).select(0, 0)
        index = [slice(None)] * 4
        index[0], index[other] = None, None
        if torch.equal(full, table[tuple(index)].expand_as(full)):
            return table.to(torch.float64), seq
    return None, None


def rotary_tables(length: int, dim: int, theta: float):
    """cos and sin tables of the rotate_half form, [length, dim], float64."""
    inv = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = torch.outer(torch.arange(length, dtype=torch.float64), inv)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def _theta_of(cos: torch.Tensor, sin: torch.Tensor) -> Optional[float]:
    length, dim = cos.shape
    if length < 2 or dim < 4 or dim % 2:
        return None
    angle = math.atan2(sin[1, 1].item(), cos[1, 1].item())
    if not 0 < angle < 1:
        return None
    raw = angle ** (-dim / 2)
    tolerance = (1e-5 + 3e-7 * torch.arange(length, dtype=torch.float64))[:, None]
    for theta in (float(f"{raw:.5g}"), raw):
        want_cos, want_sin = rotary_tables(length, dim, theta)
        if bool(((cos - want_cos).abs() <= tolerance).all()
                and ((sin - want_sin).abs() <= tolerance).all()):
            return theta
    return None


def match_rotary(m: _Matcher, root: Op) -> bool:
    if root.name != "add" or root.results[0].type.rank != 4:
        return False
    for a, c in _operands(root, "add"):
        for x, cos in _operands(a.op, "mul"):
            for rotated, sin in _operands(c.op, "mul"):
                if _rotate_half_of(rotated) is not x:
                    continue
                cos_table, seq = _position_table(cos, x)
                sin_table, seq_sin = _position_table(sin, x)
                if cos_table is None or sin_table is None or seq != seq_sin:
                    continue
                theta = _theta_of(cos_table, sin_table)
                concat = rotated.op
                if theta is None or not m.single_use(a, c, rotated, *concat.operands,
                                                     concat.operands[0].op.operands[0]):
                    continue
                b = m.builder_at(root)
                perm = [0, 2, 1, 3]
                source = x if seq == 1 else b.transpose(x, perm)
                out = b.create1("rotary", [source], {"theta": theta}, source.type)
                if seq == 2:
                    out = b.transpose(out, perm)
                m.program.replace_all_uses(root.results[0], out)
                return True
    return False


_MATCHERS = (match_rotary, match_rms_norm, match_attention)


def rewrite(program: Program) -> Dict[str, int]:
    """Applies every matcher until none applies; returns counts per op."""
    counts = {"rotary": 0, "rms_norm": 0, "attention": 0}
    for matcher in _MATCHERS:
        name = matcher.__name__[len("match_"):]
        changed = True
        while changed:
            changed = False
            uses = program.uses()
            for op in list(program.ops):
                if matcher(_Matcher(program, uses), op):
                    program.remove_dead_ops()
                    counts[name] += 1
                    changed = True
                    break
    return counts
