"""Prints a ``Program`` as MLIR text in the cleave dialect's custom syntax."""

import math
import struct
from typing import Dict, List

import torch

from .ir import Op, Program, Value, is_splat

_UNARY = {"neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu", "gelu",
          "rotary"}
_BINARY = {"add", "sub", "mul", "div", "max", "min", "pow"}
_REDUCE = {"reduce_sum", "reduce_mean", "reduce_max"}
_GENERIC = {"matmul", "layer_norm", "rms_norm", "embedding", "cross_entropy", "label_count",
            "attention", "dropout", "moe_router", "moe_dispatch", "moe_combine",
            "moe_aux_loss"}
_BITS = {"f32": ("<f", "<I", 8), "f64": ("<d", "<Q", 16)}


def format_f64(number: float) -> str:
    """An MLIR float literal that parses back to exactly ``number``."""
    if math.isnan(number) or math.isinf(number):
        return "0x" + struct.pack(">d", number).hex().upper()
    text = repr(float(number))
    if "." not in text:
        mantissa, _, exponent = text.partition("e")
        text = mantissa + ".0" + ("e" + exponent if exponent else "")
    return text


def _format_scalar(number, dtype: str) -> str:
    if dtype.startswith("i"):
        return str(int(number))
    if math.isnan(number) or math.isinf(number):
        bits = torch.tensor([number], dtype=_torch_dtype(dtype))
        width = bits.element_size()
        raw = bits.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[width]).item()
        return "0x" + format(raw & ((1 << (8 * width)) - 1), f"0{2 * width}X")
    return format_f64(float(number))


def _torch_dtype(dtype: str):
    from .ir import ELEMENT_TO_TORCH
    return ELEMENT_TO_TORCH[dtype]


def format_dense(data: torch.Tensor, dtype: str, splat: bool) -> str:
    """``dense<...>``: a splat literal, or the raw little-endian bytes in hex."""
    if splat:
        first = data[(0,) * data.dim()].item() if data.numel() else 0
        return f"dense<{_format_scalar(first, dtype)}>"
    width = data.element_size()
    raw = data.contiguous().view({1: torch.int8, 2: torch.int16, 4: torch.int32,
                                  8: torch.int64}[width])
    return 'dense<"0x' + raw.numpy().tobytes().hex().upper() + '">'


def _escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= ord(ch) < 127:
            out.append(ch)
        else:
            out.extend(f"\\{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def _ints(values) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _attr_dict(attrs: Dict[str, object]) -> str:
    parts = []
    for key in sorted(attrs):
        value = attrs[key]
        if value is None or value is False:
            continue
        if value is True:
            parts.append(key)
        elif key == "approximate":
            parts.append(f"approximate = #cleave.gelu_approx<{value}>")
        elif isinstance(value, float):
            parts.append(f"{key} = {format_f64(value)} : f64")
        elif isinstance(value, int):
            parts.append(f"{key} = {value} : i64")
        else:
            raise ValueError(f"cannot print attribute {key} = {value!r}")
    return " {" + ", ".join(parts) + "}" if parts else ""


class Printer:
    """Names values and prints ops one per line."""

    def __init__(self, program: Program, locations: bool = True):
        self.program = program
        self.locations = locations
        self.names: Dict[int, str] = {}

    def name(self, value: Value) -> str:
        return self.names[id(value)]

    def types(self, values: List[Value]) -> str:
        return ", ".join(str(v.type) for v in values)

    def print(self) -> str:
        program = self.program
        args = []
        for arg in program.args:
            self.names[id(arg)] = "%" + arg.name
            attrs = ", ".join(f'{k} = "{_escape(v)}"' for k, v in arg.arg_attrs.items())
            args.append(f"    %{arg.name}: {arg.type} {{{attrs}}}")
        counter = 0
        body = []
        for op in program.ops:
            for result in op.results:
                self.names[id(result)] = f"%{counter}"
                counter += 1
            body.append("  " + self.op(op) + self.loc(op))
        result = program.result
        lines = [f"func.func @{program.name}(\n" + ",\n".join(args) + ")",
                 f"    -> {result.type} {{"]
        lines += body
        lines.append(f"  return {self.name(result)} : {result.type}")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def loc(self, op: Op) -> str:
        if not self.locations or op.loc is None:
            return ""
        path, line, col = op.loc
        return f' loc("{_escape(path)}":{line}:{col})'

    def op(self, op: Op) -> str:
        n = op.name
        res = ", ".join(self.name(r) for r in op.results)
        ins = ", ".join(self.name(v) for v in op.operands)
        out_t = op.results[0].type
        in_t = op.operands[0].type if op.operands else None
        a = op.attrs
        if n == "constant":
            dense = format_dense(a["value"], out_t.dtype, is_splat(op))
            return f"{res} = cleave.constant {dense} : {out_t}"
        if n in _UNARY:
            return f"{res} = cleave.{n} {ins}{_attr_dict(a)} : {out_t}"
        if n in _BINARY:
            return f"{res} = cleave.{n} {ins} : {out_t}"
        if n in ("cast", "reshape"):
            return f"{res} = cleave.{n} {ins} : {in_t} to {out_t}"
        if n in _REDUCE:
            return f"{res} = cleave.{n} {ins} dims = {_ints(a['dims'])} : {in_t} -> {out_t}"
        if n == "broadcast":
            return f"{res} = cleave.broadcast {ins} dims = {_ints(a['dims'])} : {in_t} -> {out_t}"
        if n == "transpose":
            perm = _ints(a["permutation"])
            return f"{res} = cleave.transpose {ins} permutation = {perm} : {in_t} -> {out_t}"
        if n == "slice":
            return (f"{res} = cleave.slice {ins} offsets = {_ints(a['offsets'])} "
                    f"sizes = {_ints(a['sizes'])} strides = {_ints(a['strides'])} "
                    f": {in_t} -> {out_t}")
        if n == "concat":
            return (f"{res} = cleave.concat {ins} dim = {a['dim']} : "
                    f"({self.types(op.operands)}) -> {out_t}")
        if n == "softmax":
            return f"{res} = cleave.softmax {ins} dim = {a['dim']} : {out_t}"
        if n in _GENERIC:
            outs = self.types(op.results)
            outs = outs if len(op.results) == 1 else f"({outs})"
            return (f"{res} = cleave.{n} {ins}{_attr_dict(a)} : "
                    f"({self.types(op.operands)}) -> {outs}")
        raise ValueError(f"no printer for cleave.{n}")


def print_program(program: Program, locations: bool = True) -> str:
    return Printer(program, locations).print()
