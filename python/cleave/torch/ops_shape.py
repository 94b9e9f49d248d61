"""Views, data movement, casts, indexing and masking.

Shape arguments are never re-derived from the PyTorch call: the result shape
PyTorch computed on the example inputs is the target (so ``view(-1, n)``,
``flatten(1)``, ``unsqueeze`` and ``squeeze`` all become one reshape to it).
"""

import builtins
import operator

import torch
import torch.nn as nn

from .ir import Value
from .lowering import Unsupported, lowers


def _tensor(x, what="this op") -> Value:
    if not isinstance(x, Value):
        raise Unsupported(f"{what} on a value that is not a traced tensor")
    return x


@lowers(torch.reshape, torch.flatten, torch.squeeze, torch.unsqueeze, torch.ravel,
        "view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "view_as",
        "reshape_as", "ravel", nn.Flatten, nn.Unflatten)
def _reshape(cx, input, *args, **kwargs):
    return cx.b.reshape(_tensor(input, "reshape"), cx.out_type().shape)


@lowers("contiguous", "clone", torch.clone)
def _identity(cx, input, *args, **kwargs):
    return _tensor(input)


@lowers("detach", torch.detach)
def _detach(cx, input):
    value = _tensor(input)
    if value.requires_grad:
        raise Unsupported("detach() of a value that depends on parameters stops its "
                          "gradient; cleave has no stop-gradient op")
    return value


@lowers("to", "type", "type_as", "float", "double", "half", "bfloat16", "long", "int",
        "cpu")
def _convert(cx, input, *args, **kwargs):
    """Casts to the dtype PyTorch produced; device moves are no-ops."""
    return cx.convert(_tensor(input, "a cast"), cx.out_type().dtype)


@lowers(torch.transpose, torch.swapaxes, torch.swapdims, "transpose", "swapaxes",
        "swapdims")
def _transpose(cx, input, dim0, dim1):
    value = _tensor(input, "transpose")
    rank = value.type.rank
    perm = list(range(rank))
    if rank:
        a, b = dim0 % rank, dim1 % rank
        perm[a], perm[b] = perm[b], perm[a]
    return cx.b.transpose(value, perm)


@lowers(torch.permute, "permute")
def _permute(cx, input, *dims):
    value = _tensor(input, "permute")
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    rank = value.type.rank
    return cx.b.transpose(value, [d % rank for d in dims])


@lowers(torch.t, "t")
def _t(cx, input):
    value = _tensor(input, "t")
    return cx.b.transpose(value, [1, 0]) if value.type.rank == 2 else value


@lowers(builtins.getattr)
def _getattr(cx, input, name):
    value = _tensor(input, f"attribute .{name}")
    rank = value.type.rank
    if name == "T":
        return cx.b.transpose(value, list(reversed(range(rank))))
    if name == "mT":
        return _transpose(cx, value, -2, -1)
    if name == "data":
        return _detach(cx, value)
    raise Unsupported(f"tensor attribute .{name}")


@lowers("expand", "expand_as", torch.broadcast_to, "broadcast_to")
def _expand(cx, input, *args, **kwargs):
    return cx.broadcast_to(_tensor(input, "expand"), cx.out_type().shape)


@lowers("repeat")
def _repeat(cx, input, *sizes):
    """Tiling: broadcast to [r0, s0, r1, s1, ...] and merge each pair."""
    value = _tensor(input, "repeat")
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    sizes = [int(r) for r in sizes]
    shape = [1] * (len(sizes) - value.type.rank) + list(value.shape)
    value = cx.b.reshape(value, shape)
    interleaved = [d for pair in zip(sizes, shape) for d in pair]
    tiled = cx.b.broadcast(value, interleaved, [2 * i + 1 for i in range(len(shape))])
    return cx.b.reshape(tiled, cx.out_type().shape)


# Indexing ------------------------------------------------------------------

@lowers(operator.getitem)
def _getitem(cx, base, index):
    if isinstance(base, (tuple, list)):
        return base[index]
    value = _tensor(base, "indexing")
    index = index if isinstance(index, tuple) else (index,)
    offsets, sizes, strides = [], [], []
    gather = None  # (input dim, indices) of one list index such as x[:, [-1], :]
    dim = 0
    ellipsis_dims = value.type.rank - sum(
        1 for i in index if i is not None and i is not Ellipsis)
    for item in index:
        if item is None:
            continue
        if item is Ellipsis:
            for _ in range(ellipsis_dims):
                offsets.append(0), sizes.append(value.shape[dim]), strides.append(1)
                dim += 1
            continue
        size = value.shape[dim]
        if isinstance(item, torch.Tensor) and item.dim() == 1 and not item.is_floating_point() \
                and item.dtype != torch.bool:
            item = item.tolist()
        if isinstance(item, (list, tuple)) and gather is None and item and all(
                isinstance(i, int) and not isinstance(i, bool) for i in item):
            gather = (dim, [i % size for i in item])
            item = slice(None)
        if isinstance(item, bool) or not isinstance(item, (int, slice)):
            raise Unsupported("indexing with a traced tensor, a bool mask or several "
                              "index lists (advanced indexing)")
        if isinstance(item, int):
            offsets.append(item % size), sizes.append(1), strides.append(1)
        else:
            start, stop, step = item.indices(size)
            offsets.append(start), sizes.append(len(range(start, stop, step)))
            strides.append(step)
        dim += 1
    for d in range(dim, value.type.rank):
        offsets.append(0), sizes.append(value.shape[d]), strides.append(1)
    sliced = cx.b.slice(value, offsets, sizes, strides)
    if gather is not None:  # one slice per listed index, joined in order
        axis, indices = gather
        pieces = []
        for i in indices:
            piece_offsets = [0] * len(sizes)
            piece_offsets[axis] = i
            piece_sizes = list(sliced.shape)
            piece_sizes[axis] = 1
            pieces.append(cx.b.slice(sliced, piece_offsets, piece_sizes, [1] * len(sizes)))
        sliced = cx.b.concat(pieces, axis)
    return cx.b.reshape(sliced, cx.out_type().shape)


def _pieces(cx, value: Value, dim: int, squeeze: bool = False):
    """Slices ``value`` along ``dim`` into the pieces PyTorch returned."""
    rank = value.type.rank
    dim %= rank
    pieces, offset = [], 0
    for part in cx.out:
        size = part.shape[dim] if not squeeze else 1
        offsets = [0] * rank
        offsets[dim] = offset
        sizes = list(value.shape)
        sizes[dim] = size
        piece = cx.b.slice(value, offsets, sizes, [1] * rank)
        pieces.append(cx.b.reshape(piece, tuple(part.shape)))
        offset += size
    return tuple(pieces)


@lowers(torch.split, "split")
def _split(cx, tensor, split_size_or_sections, dim=0):
    return _pieces(cx, _tensor(tensor, "split"), dim)


@lowers(torch.chunk, "chunk")
def _chunk(cx, input, chunks, dim=0):
    return _pieces(cx, _tensor(input, "chunk"), dim)


@lowers(torch.tensor_split, "tensor_split")
def _tensor_split(cx, input, indices_or_sections, dim=0):
    return _pieces(cx, _tensor(input, "tensor_split"), dim)


@lowers(torch.unbind, "unbind")
def _unbind(cx, input, dim=0):
    return _pieces(cx, _tensor(input, "unbind"), dim, squeeze=True)


@lowers(torch.narrow, "narrow")
def _narrow(cx, input, dim, start, length):
    value = _tensor(input, "narrow")
    rank = value.type.rank
    dim %= rank
    offsets = [0] * rank
    offsets[dim] = start % value.shape[dim]
    sizes = list(value.shape)
    sizes[dim] = length
    return cx.b.slice(value, offsets, sizes, [1] * rank)


@lowers(torch.select, "select")
def _select(cx, input, dim, index):
    value = _tensor(input, "select")
    full = [slice(None)] * value.type.rank
    full[dim % value.type.rank] = index
    return _getitem(cx, value, tuple(full))


@lowers(torch.cat, torch.concat, torch.concatenate)
def _cat(cx, tensors, dim=0):
    out_t = cx.out_type()
    dim %= out_t.rank
    parts = [cx.value(t, out_t.dtype) for t in tensors if tuple(t.shape) != (0,)]
    return cx.b.concat(parts, dim)


@lowers(torch.stack)
def _stack(cx, tensors, dim=0):
    out_t = cx.out_type()
    dim %= out_t.rank
    parts = []
    for t in tensors:
        value = cx.value(t, out_t.dtype)
        shape = list(value.shape)
        shape.insert(dim, 1)
        parts.append(cx.b.reshape(value, shape))
    return cx.b.concat(parts, dim)


# Masking -------------------------------------------------------------------

def _masked(cx, x, mask, fill):
    """where(mask, fill, x) for a constant mask and a constant fill value."""
    if isinstance(mask, Value):
        raise Unsupported("the mask depends on the inputs or parameters (cleave has no "
                          "select op; only constant masks such as causal masks lower)")
    if isinstance(fill, Value):
        raise Unsupported("the fill value depends on the inputs or parameters")
    if isinstance(fill, torch.Tensor):
        if fill.numel() != 1:
            raise Unsupported("a fill tensor with more than one element")
        fill = fill.item()
    out_t = cx.out_type()
    if not out_t.is_float:
        raise Unsupported("masking an integer tensor")
    value = cx.operand(x, out_t)
    mask = torch.as_tensor(mask).to(torch.bool)
    fill = float(fill)
    # The constants keep the mask's own (broadcastable) shape.
    fill_table = torch.where(mask, torch.tensor(fill), torch.tensor(0.0))
    if fill == float("-inf") or fill == float("inf"):
        # x + (+-inf where masked, else 0): exact for finite x.
        return cx.b.binary("add", value, cx.operand(fill_table, out_t))
    keep = (~mask).to(torch.float32)
    kept = cx.b.binary("mul", value, cx.operand(keep, out_t))
    return cx.b.binary("add", kept, cx.operand(fill_table, out_t))


@lowers(torch.masked_fill, "masked_fill")
def _masked_fill(cx, input, mask, value):
    return _masked(cx, input, mask, value)


@lowers(torch.where)
def _where(cx, condition, input=None, other=None):
    if input is None:
        raise Unsupported("torch.where(condition) returns indices")
    if isinstance(condition, Value):
        raise Unsupported("the condition depends on the inputs or parameters (cleave has "
                          "no select op)")
    condition = torch.as_tensor(condition).to(torch.bool)
    if isinstance(input, Value) and not isinstance(other, Value):
        return _masked(cx, input, ~condition, other)
    if isinstance(other, Value) and not isinstance(input, Value):
        return _masked(cx, other, condition, input)
    raise Unsupported("torch.where between two traced tensors (cleave has no select op)")


# Constants shaped like a traced tensor --------------------------------------

def _filled(cx, value):
    out = cx.out
    if not isinstance(out, torch.Tensor) or out.dtype not in (
            torch.float32, torch.float64, torch.int64, torch.int32, torch.bfloat16,
            torch.float16):
        raise Unsupported(f"constant of dtype {getattr(out, 'dtype', None)}")
    if isinstance(value, (Value, torch.Tensor)):
        raise Unsupported("a fill value that is a tensor")
    return torch.full(tuple(out.shape), value, dtype=out.dtype)


@lowers(torch.zeros_like, torch.empty_like, "new_zeros", "new_empty")
def _zeros(cx, *args, **kwargs):
    return _filled(cx, 0)


@lowers(torch.ones_like, "new_ones")
def _ones(cx, *args, **kwargs):
    return _filled(cx, 1)


@lowers(torch.full_like)
def _full_like(cx, input, fill_value, **kwargs):
    return _filled(cx, fill_value)


@lowers("new_full")
def _new_full(cx, input, size, fill_value, **kwargs):
    return _filled(cx, fill_value)


@lowers(operator.gt, operator.lt, operator.ge, operator.le, operator.eq, operator.ne,
        torch.gt, torch.lt, torch.ge, torch.le, torch.eq, torch.ne, "gt", "lt", "ge", "le",
        "eq", "ne", torch.isnan, torch.isinf, torch.logical_not, operator.invert)
def _compare(cx, *args, **kwargs):
    raise Unsupported("comparison of a traced tensor: cleave has no compare or select op, "
                      "so masks must be constants (buffers, or built from sizes)")
