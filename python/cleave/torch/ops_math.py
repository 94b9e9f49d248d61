"""Elementwise arithmetic, activations and reductions."""

import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from .ir import Value
from .lowering import Unsupported, lowers


def _float_result(cx, what: str):
    out_t = cx.out_type()
    if not out_t.is_float:
        raise Unsupported(f"{what} on integer tensors (cleave arithmetic is "
                          f"floating-point only)")
    return out_t


def _binary(cx, name, lhs, rhs):
    out_t = _float_result(cx, name)
    return cx.b.binary(name, cx.operand(lhs, out_t), cx.operand(rhs, out_t))


def _scaled(cx, other, alpha, out_t):
    value = cx.operand(other, out_t)
    if alpha == 1:
        return value
    return cx.b.binary("mul", value, cx.b.splat(alpha, out_t))


@lowers(operator.add, torch.add, "add")
def _add(cx, input, other, *, alpha=1):
    out_t = _float_result(cx, "addition")
    return cx.b.binary("add", cx.operand(input, out_t), _scaled(cx, other, alpha, out_t))


@lowers(operator.sub, torch.sub, torch.subtract, "sub", "subtract")
def _sub(cx, input, other, *, alpha=1):
    out_t = _float_result(cx, "subtraction")
    return cx.b.binary("sub", cx.operand(input, out_t), _scaled(cx, other, alpha, out_t))


@lowers(torch.rsub, "rsub")
def _rsub(cx, input, other, *, alpha=1):
    out_t = _float_result(cx, "subtraction")
    return cx.b.binary("sub", cx.operand(other, out_t), _scaled(cx, input, alpha, out_t))


@lowers(operator.mul, torch.mul, torch.multiply, "mul", "multiply")
def _mul(cx, input, other):
    return _binary(cx, "mul", input, other)


@lowers(operator.truediv, torch.div, torch.divide, torch.true_divide, "div", "divide",
        "true_divide")
def _div(cx, input, other, *, rounding_mode=None):
    if rounding_mode is not None:
        raise Unsupported(f"division with rounding_mode={rounding_mode!r}")
    return _binary(cx, "div", input, other)


@lowers(torch.maximum, torch.fmax, "maximum")
def _maximum(cx, input, other):
    return _binary(cx, "max", input, other)


@lowers(torch.minimum, torch.fmin, "minimum")
def _minimum(cx, input, other):
    return _binary(cx, "min", input, other)


@lowers(torch.clamp, torch.clip, "clamp", "clip")
def _clamp(cx, input, min=None, max=None):
    out_t = _float_result(cx, "clamp")
    value = cx.operand(input, out_t)
    if min is not None:
        value = cx.b.binary("max", value, cx.operand(min, out_t))
    if max is not None:
        value = cx.b.binary("min", value, cx.operand(max, out_t))
    return value


@lowers(torch.clamp_min, "clamp_min")
def _clamp_min(cx, input, min):
    return _clamp(cx, input, min=min)


@lowers(torch.clamp_max, "clamp_max")
def _clamp_max(cx, input, max):
    return _clamp(cx, input, max=max)


@lowers(operator.pow, torch.pow, "pow")
def _pow(cx, input, exponent):
    """x ** c follows ATen's special cases, so the result is bit-compatible:
    2 -> x*x, 3 -> x*x*x, 0.5 -> sqrt, -0.5 -> rsqrt, -1 -> 1/x, -2 -> 1/(x*x)."""
    out_t = _float_result(cx, "power")
    if isinstance(input, Value) and isinstance(exponent, (int, float)):
        x = cx.operand(input, out_t)
        b = cx.b
        if exponent == 1:
            return x
        if exponent == 2:
            return b.binary("mul", x, x)
        if exponent == 3:
            return b.binary("mul", b.binary("mul", x, x), x)
        if exponent == 0.5:
            return b.unary("sqrt", x)
        if exponent == -0.5:
            return b.unary("rsqrt", x)
        if exponent == -1:
            return b.binary("div", b.splat(1.0, out_t), x)
        if exponent == -2:
            return b.binary("div", b.splat(1.0, out_t), b.binary("mul", x, x))
    return _binary(cx, "pow", input, exponent)


@lowers(torch.square, "square")
def _square(cx, input):
    return _pow(cx, input, 2)


@lowers(torch.reciprocal, "reciprocal")
def _reciprocal(cx, input):
    return _pow(cx, input, -1)


def _unary(name, **attrs):
    def handler(cx, input, *args, **kwargs):
        out_t = _float_result(cx, name)
        return cx.b.unary(name, cx.operand(input, out_t), **attrs)
    return handler


for _name, _targets in {
        "neg": (operator.neg, torch.neg, torch.negative, "neg", "negative"),
        "exp": (torch.exp, "exp"),
        "log": (torch.log, "log"),
        "sqrt": (torch.sqrt, "sqrt"),
        "rsqrt": (torch.rsqrt, "rsqrt"),
        "tanh": (torch.tanh, F.tanh, "tanh", nn.Tanh),
        "sigmoid": (torch.sigmoid, F.sigmoid, "sigmoid", nn.Sigmoid),
}.items():
    lowers(*_targets)(_unary(_name))


def _check_inplace(cx, inplace):
    if inplace:
        cx.lowering.check_inplace(cx.node)


@lowers(torch.relu, F.relu, "relu")
def _relu(cx, input, inplace=False):
    _check_inplace(cx, inplace)
    return cx.b.unary("relu", cx.operand(input, _float_result(cx, "relu")))


@lowers(F.silu)
def _silu(cx, input, inplace=False):
    _check_inplace(cx, inplace)
    return cx.b.unary("silu", cx.operand(input, _float_result(cx, "silu")))


@lowers(F.gelu)
def _gelu(cx, input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise Unsupported(f"gelu approximate={approximate!r}")
    # Always explicit: cleave.gelu defaults to tanh, PyTorch to none.
    return cx.b.unary("gelu", cx.operand(input, _float_result(cx, "gelu")),
                      approximate=approximate)


@lowers(nn.ReLU, nn.SiLU, nn.GELU)
def _activation_module(cx, input):
    module = cx.module
    if isinstance(module, nn.GELU):
        return _gelu(cx, input, module.approximate)
    if getattr(module, "inplace", False):
        cx.lowering.check_inplace(cx.node)
    name = "relu" if isinstance(module, nn.ReLU) else "silu"
    return cx.b.unary(name, cx.operand(input, _float_result(cx, name)))


@lowers(nn.Identity)
def _identity(cx, input, *args, **kwargs):
    return input


# Reductions ----------------------------------------------------------------

def _reduce(cx, name, input, dim, keepdim, dtype=None):
    if not isinstance(input, Value):
        raise Unsupported("reduction of a constant")
    out_t = _float_result(cx, name)
    value = cx.convert(input, out_t.dtype)
    rank = value.type.rank
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        dims = list(range(rank))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = sorted({d % rank if rank else 0 for d in dims})
    if rank == 0:
        return value
    reduced = cx.b.reduce(name, value, dims)
    return cx.b.reshape(reduced, out_t.shape)


@lowers(torch.sum, "sum")
def _sum(cx, input, dim=None, keepdim=False, *, dtype=None):
    return _reduce(cx, "reduce_sum", input, dim, keepdim, dtype)


@lowers(torch.mean, "mean")
def _mean(cx, input, dim=None, keepdim=False, *, dtype=None):
    return _reduce(cx, "reduce_mean", input, dim, keepdim, dtype)


@lowers(torch.amax, "amax")
def _amax(cx, input, dim=(), keepdim=False):
    return _reduce(cx, "reduce_max", input, dim, keepdim)


@lowers(torch.max, "max")
def _max(cx, input, *args, **kwargs):
    other = args[0] if args else kwargs.get("other", kwargs.get("dim"))
    if other is None:
        return _reduce(cx, "reduce_max", input, None, False)
    if isinstance(other, (Value, torch.Tensor)):
        return _binary(cx, "max", input, other)
    raise Unsupported("max over a dimension returns indices; use amax for the values")


@lowers(torch.min, "min")
def _min(cx, input, *args, **kwargs):
    other = args[0] if args else kwargs.get("other")
    if isinstance(other, (Value, torch.Tensor)):
        return _binary(cx, "min", input, other)
    raise Unsupported("min as a reduction (cleave has no reduce_min); only the "
                      "elementwise form torch.min(a, b) is supported")
