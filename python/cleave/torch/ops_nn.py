"""Matrix products and layers: linear, norms, embedding, dropout, softmax, losses."""

import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from .ir import Value
from .lowering import Unsupported, lowers


def _float_value(cx, x, what):
    out_t = cx.out_type()
    if not out_t.is_float:
        raise Unsupported(f"{what} on integer tensors")
    return cx.value(x, out_t.dtype)


# Matrix products -----------------------------------------------------------

def _swaps_last_two(value: Value):
    """The operand of a transpose that swaps only the last two dimensions."""
    op = value.op
    if op is None or op.name != "transpose" or value.type.rank < 2:
        return None
    perm = op.attrs["permutation"]
    rank = len(perm)
    if perm == list(range(rank - 2)) + [rank - 1, rank - 2]:
        return op.operands[0]
    return None


def matmul_values(cx, lhs: Value, rhs: Value, out_shape) -> Value:
    """torch.matmul semantics (1-D promotion, batch broadcasting) with
    transposes of the last two dimensions folded into the op."""
    b = cx.b
    lhs_vec, rhs_vec = lhs.type.rank == 1, rhs.type.rank == 1
    if lhs_vec:
        lhs = b.reshape(lhs, (1,) + lhs.shape)
    if rhs_vec:
        rhs = b.reshape(rhs, rhs.shape + (1,))
    batch = list(torch.broadcast_shapes(lhs.shape[:-2], rhs.shape[:-2]))
    if lhs.type.rank > 2 or rhs.type.rank > 2:
        lhs = cx.broadcast_to(lhs, batch + list(lhs.shape[-2:]))
        if rhs.type.rank > 2:
            rhs = cx.broadcast_to(rhs, batch + list(rhs.shape[-2:]))
    flags = {}
    source = _swaps_last_two(lhs)
    if source is not None:
        lhs, flags["transpose_lhs"] = source, True
    source = _swaps_last_two(rhs)
    if source is not None:
        rhs, flags["transpose_rhs"] = source, True
    result = b.matmul(lhs, rhs, **flags)
    return b.reshape(result, out_shape)


@lowers(operator.matmul, torch.matmul, torch.mm, torch.bmm, "matmul", "mm", "bmm")
def _matmul(cx, input, other):
    out_t = cx.out_type()
    if not out_t.is_float:
        raise Unsupported("matrix product of integer tensors")
    return matmul_values(cx, cx.value(input, out_t.dtype), cx.value(other, out_t.dtype),
                         out_t.shape)


def _scaled_product_plus(cx, input, lhs, rhs, beta, alpha):
    """``beta * input + alpha * (lhs @ rhs)`` (``addmm``, ``baddbmm``): the
    bias is not read when ``beta`` is 0, as in PyTorch."""
    out_t = cx.out_type()
    if not out_t.is_float:
        raise Unsupported("matrix product of integer tensors")
    for name, number in (("beta", beta), ("alpha", alpha)):
        if not isinstance(number, (int, float)) or isinstance(number, bool):
            raise Unsupported(f"{name} must be a number, got {type(number).__name__}")
    b = cx.b
    product = matmul_values(cx, cx.value(lhs, out_t.dtype), cx.value(rhs, out_t.dtype),
                            out_t.shape)
    if alpha != 1:
        product = b.binary("mul", product, b.splat(float(alpha), out_t))
    if beta == 0:
        return product
    bias = cx.operand(input, out_t)
    if beta != 1:
        bias = b.binary("mul", bias, b.splat(float(beta), out_t))
    return b.binary("add", bias, product)


@lowers(torch.addmm, "addmm")
def _addmm(cx, input, mat1, mat2, *, beta=1, alpha=1):
    ranks = [m.type.rank if isinstance(m, Value) else torch.as_tensor(m).dim()
             for m in (mat1, mat2)]
    if ranks != [2, 2]:
        raise Unsupported(f"addmm takes two 2-D matrices, got ranks {ranks}")
    return _scaled_product_plus(cx, input, mat1, mat2, beta, alpha)


@lowers(torch.baddbmm, "baddbmm")
def _baddbmm(cx, input, batch1, batch2, *, beta=1, alpha=1):
    return _scaled_product_plus(cx, input, batch1, batch2, beta, alpha)


def _linear(cx, input, weight: Value, bias):
    out_t = cx.out_type()
    x = cx.value(input, out_t.dtype)
    if x.type.rank == 1:
        y = cx.b.matmul(cx.b.reshape(x, (1,) + x.shape), weight, transpose_rhs=True)
        y = cx.b.reshape(y, out_t.shape)
    else:
        y = cx.b.matmul(x, weight, transpose_rhs=True)
    if bias is not None:
        y = cx.b.binary("add", y, cx.operand(bias, out_t))
    return y


@lowers(F.linear)
def _f_linear(cx, input, weight, bias=None):
    return _linear(cx, input, cx.value(weight), bias)


@lowers(nn.Linear)
def _linear_module(cx, input):
    module = cx.module
    bias = cx.param(module.bias) if module.bias is not None else None
    return _linear(cx, input, cx.param(module.weight), bias)


# Normalization -------------------------------------------------------------

def _layer_norm(cx, input, normalized_shape, weight, bias, eps):
    out_t = cx.out_type()
    x = _float_value(cx, input, "layer_norm")
    normalized_shape = tuple(normalized_shape)
    n = len(normalized_shape)
    if tuple(x.shape[x.type.rank - n:]) != normalized_shape:
        raise Unsupported(f"normalized_shape {list(normalized_shape)} does not match the "
                          f"input {list(x.shape)}")
    size = 1
    for d in normalized_shape:
        size *= d
    flat_t = out_t.with_shape(x.shape[:x.type.rank - n] + (size,))
    x = cx.b.reshape(x, flat_t.shape)
    vec_t = out_t.with_shape((size,))

    def vector(v, default):
        if v is None:
            return cx.b.splat(default, vec_t)
        return cx.b.reshape(cx.value(v, out_t.dtype), vec_t.shape)
    y = cx.b.create1("layer_norm", [x, vector(weight, 1.0), vector(bias, 0.0)],
                     {"epsilon": float(eps)}, flat_t)
    return cx.b.reshape(y, out_t.shape)


@lowers(F.layer_norm)
def _f_layer_norm(cx, input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return _layer_norm(cx, input, normalized_shape, weight, bias, eps)


@lowers(nn.LayerNorm)
def _layer_norm_module(cx, input):
    m = cx.module
    weight = cx.param(m.weight) if m.weight is not None else None
    bias = cx.param(m.bias) if m.bias is not None else None
    return _layer_norm(cx, input, m.normalized_shape, weight, bias, m.eps)


# Embedding -----------------------------------------------------------------

def _embedding(cx, ids, table: Value, padding_idx, max_norm, scale_grad_by_freq, sparse):
    attrs = {}
    if padding_idx is not None:  # that row gets no gradient, as in PyTorch
        rows = table.shape[0]
        if not -rows <= padding_idx < rows:
            raise Unsupported(f"padding_idx {padding_idx} outside the {rows}-row table")
        attrs["padding_idx"] = padding_idx % rows
    if max_norm is not None:
        raise Unsupported("max_norm (renormalizes the table in place)")
    if scale_grad_by_freq or sparse:
        raise Unsupported("scale_grad_by_freq / sparse gradients")
    ids_value = cx.value(ids, "i32")
    if ids_value.type.is_float:
        raise Unsupported("embedding ids must be integers")
    out_t = cx.out_type()
    return cx.b.create1("embedding", [table, ids_value], attrs, out_t)


@lowers(F.embedding)
def _f_embedding(cx, input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False):
    return _embedding(cx, input, cx.value(weight), padding_idx, max_norm,
                      scale_grad_by_freq, sparse)


@lowers(nn.Embedding)
def _embedding_module(cx, input):
    m = cx.module
    return _embedding(cx, input, cx.param(m.weight), m.padding_idx, m.max_norm,
                      m.scale_grad_by_freq, m.sparse)


# Dropout -------------------------------------------------------------------

def _dropout(cx, input, p, training, inplace=False):
    if inplace:
        cx.lowering.check_inplace(cx.node)
    if not training or p == 0 or not cx.lowering.dropout_enabled:
        return input
    if p >= 1:
        raise Unsupported(f"dropout with p={p}")
    x = _float_value(cx, input, "dropout")
    return cx.b.create1("dropout", [x, cx.dropout_seed()],
                        {"rate": float(p), "stream": cx.next_dropout_stream()}, x.type)


@lowers(F.dropout)
def _f_dropout(cx, input, p=0.5, training=True, inplace=False):
    return _dropout(cx, input, p, training, inplace)


@lowers(nn.Dropout)
def _dropout_module(cx, input):
    m = cx.module
    return _dropout(cx, input, m.p, m.training, m.inplace)


# Softmax -------------------------------------------------------------------

def _softmax_dim(rank, dim):
    if dim is None:  # PyTorch's legacy implicit dimension
        return 0 if rank in (0, 1, 3) else 1
    return dim % rank if rank else 0


def _softmax(cx, input, dim, dtype, log=False):
    out_t = cx.out_type()
    x = _float_value(cx, input, "softmax")
    dim = _softmax_dim(x.type.rank, dim)
    if not log:
        return cx.b.create1("softmax", [x], {"dim": dim}, out_t)
    # log_softmax = (x - max) - log(sum(exp(x - max))), as ATen computes it.
    b = cx.b
    reduced = tuple(s for i, s in enumerate(x.shape) if i != dim)
    keep = [i for i in range(x.type.rank) if i != dim]
    row_max = b.broadcast(b.reduce("reduce_max", x, [dim]), x.shape, keep)
    shifted = b.binary("sub", x, row_max)
    total = b.reduce("reduce_sum", b.unary("exp", shifted), [dim])
    assert total.shape == reduced
    return b.binary("sub", shifted, b.broadcast(b.unary("log", total), x.shape, keep))


@lowers(F.softmax, torch.softmax, "softmax")
def _f_softmax(cx, input, dim=None, _stacklevel=3, dtype=None):
    return _softmax(cx, input, dim, dtype)


@lowers(F.log_softmax, torch.log_softmax, "log_softmax")
def _f_log_softmax(cx, input, dim=None, _stacklevel=3, dtype=None):
    return _softmax(cx, input, dim, dtype, log=True)


@lowers(nn.Softmax)
def _softmax_module(cx, input):
    return _softmax(cx, input, cx.module.dim, None)


@lowers(nn.LogSoftmax)
def _log_softmax_module(cx, input):
    return _softmax(cx, input, cx.module.dim, None, log=True)


# Losses --------------------------------------------------------------------

def _cross_entropy(cx, input, target, weight, ignore_index, reduction, label_smoothing,
                   legacy):
    if legacy:
        raise Unsupported("the legacy size_average/reduce arguments; use reduction=")
    if weight is not None:
        raise Unsupported("class weights")
    if label_smoothing:
        raise Unsupported(f"label_smoothing={label_smoothing}")
    if reduction not in ("mean", "sum"):
        raise Unsupported(f"reduction={reduction!r} (the loss must be a scalar)")
    logits = cx.value(input)
    if not logits.type.is_float:
        raise Unsupported("integer logits")
    labels = cx.value(target, "i32")
    if labels.type.is_float:
        raise Unsupported("class probabilities as targets (only class indices lower)")
    b = cx.b
    rank = logits.type.rank
    if rank == 1:
        logits = b.reshape(logits, (1,) + logits.shape)
        labels = b.reshape(labels, (1,))
    elif rank > 2:  # [N, C, d1, ...] -> [N, d1, ..., C]
        logits = b.transpose(logits, [0] + list(range(2, rank)) + [1])
    if labels.shape != logits.shape[:-1]:
        raise Unsupported(f"targets of shape {list(labels.shape)} for logits "
                          f"{list(logits.shape)}")
    loss_t = cx.out_type()
    # PyTorch always ignores targets equal to ignore_index (-100 by default):
    # the mean is over the others.
    mean_t = loss_t.with_dtype("f64" if logits.dtype == "f64" else "f32")
    attrs = {"ignore_index": int(ignore_index)}
    loss = b.create1("cross_entropy", [logits, labels], attrs, mean_t)
    if reduction == "sum":  # mean x the number of kept targets
        count = b.create1("label_count", [labels], attrs, mean_t)
        loss = b.binary("mul", loss, count)
    return cx.convert(loss, loss_t.dtype)


@lowers(F.cross_entropy)
def _f_cross_entropy(cx, input, target, weight=None, size_average=None, ignore_index=-100,
                     reduce=None, reduction="mean", label_smoothing=0.0):
    return _cross_entropy(cx, input, target, weight, ignore_index, reduction,
                          label_smoothing, size_average is not None or reduce is not None)


@lowers(nn.CrossEntropyLoss)
def _cross_entropy_module(cx, input, target):
    m = cx.module
    weight = m.weight if m.weight is not None else None
    return _cross_entropy(cx, input, target, weight, m.ignore_index, m.reduction,
                          m.label_smoothing, False)


def _mse(cx, input, target, reduction):
    if reduction not in ("mean", "sum"):
        raise Unsupported(f"reduction={reduction!r} (the loss must be a scalar)")
    out_t = cx.out_type()
    shape = torch.broadcast_shapes(tuple(getattr(input, "shape", ())),
                                   tuple(getattr(target, "shape", ())))
    full_t = out_t.with_shape(tuple(shape))
    diff = cx.b.binary("sub", cx.operand(input, full_t), cx.operand(target, full_t))
    square = cx.b.binary("mul", diff, diff)
    name = "reduce_mean" if reduction == "mean" else "reduce_sum"
    return cx.b.reduce(name, square, range(full_t.rank))


@lowers(F.mse_loss)
def _f_mse_loss(cx, input, target, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        raise Unsupported("the legacy size_average/reduce arguments; use reduction=")
    return _mse(cx, input, target, reduction)


@lowers(nn.MSELoss)
def _mse_module(cx, input, target):
    return _mse(cx, input, target, cx.module.reduction)
