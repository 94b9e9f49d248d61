"""A small in-memory form of a cleave function, its builder and its printer.

The front-end lowers an fx graph into a ``Program`` (function arguments, a
list of ``Op`` in program order, one result), rewrites known patterns in it
(``patterns.py``), removes dead ops and prints MLIR text that ``cleave-opt``
parses. The builder folds the trivial cases as it goes (a reshape to the
same shape, a transpose of a transpose, a broadcast of a splat constant), so
that broadcasting and view chains written in PyTorch do not leave chains of
no-op data movement behind.
"""

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import torch

#: PyTorch dtypes and the element types they become. Integer tensors are ids
#: and labels: both widths become i32.
TORCH_TO_ELEMENT = {
    torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16",
    torch.float16: "f16", torch.int64: "i32", torch.int32: "i32",
}
ELEMENT_TO_TORCH = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16,
                    "f16": torch.float16, "i32": torch.int32, "i64": torch.int64}
FLOAT_TYPES = ("f32", "f64", "bf16", "f16")


@dataclass(frozen=True)
class TensorType:
    """A static-shape builtin tensor type."""

    shape: Tuple[int, ...]
    dtype: str

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_TYPES

    def with_shape(self, shape: Sequence[int]) -> "TensorType":
        return TensorType(tuple(shape), self.dtype)

    def with_dtype(self, dtype: str) -> "TensorType":
        return TensorType(self.shape, dtype)

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.shape)
        return f"tensor<{dims}{self.dtype}>"


@dataclass(eq=False)
class Value:
    """An SSA value: a function argument (``op`` is None) or an op result."""

    type: TensorType
    op: Optional["Op"] = None
    requires_grad: bool = False
    # Function arguments only: the SSA name and the argument attributes.
    name: Optional[str] = None
    arg_attrs: Dict[str, str] = field(default_factory=dict)

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> str:
        return self.type.dtype

    def __repr__(self) -> str:
        origin = self.name or (self.op.name if self.op else "?")
        return f"Value({origin}: {self.type})"


@dataclass(eq=False)
class Op:
    """One cleave op: its name without the dialect prefix, operands, attributes
    (Python values; printed per op) and results."""

    name: str
    operands: List[Value]
    attrs: Dict[str, object]
    results: List[Value]
    loc: Optional[Tuple[str, int, int]] = None


class Program:
    """A ``func.func`` returning one value."""

    def __init__(self, name: str = "forward"):
        self.name = name
        self.args: List[Value] = []
        self.ops: List[Op] = []
        self.result: Optional[Value] = None

    def add_arg(self, type_: TensorType, name: str, attrs: Dict[str, str],
                requires_grad: bool = False) -> Value:
        value = Value(type_, None, requires_grad, name, dict(attrs))
        self.args.append(value)
        return value

    def uses(self) -> Dict[int, List[Op]]:
        """For every value (by id), the ops that use it (once per operand)."""
        table: Dict[int, List[Op]] = {}
        for op in self.ops:
            for operand in op.operands:
                table.setdefault(id(operand), []).append(op)
        return table

    def replace_all_uses(self, old: Value, new: Value) -> None:
        for op in self.ops:
            op.operands = [new if v is old else v for v in op.operands]
        if self.result is old:
            self.result = new

    def remove_dead_ops(self) -> None:
        """Drops ops whose results nothing uses (every cleave op here is pure)."""
        live = {id(self.result)}
        kept = []
        for op in reversed(self.ops):
            if any(id(r) in live for r in op.results):
                kept.append(op)
                live.update(id(v) for v in op.operands)
        self.ops = list(reversed(kept))


class Builder:
    """Creates ops at an insertion point of a program, folding trivial cases."""

    def __init__(self, program: Program):
        self.program = program
        self.insert_index: Optional[int] = None  # None: append
        self.loc: Optional[Tuple[str, int, int]] = None

    def create(self, name: str, operands: Sequence[Value], attrs: Dict[str, object],
               result_types: Sequence[TensorType]) -> List[Value]:
        requires_grad = any(v.requires_grad for v in operands)
        op = Op(name, list(operands), dict(attrs), [], self.loc)
        op.results = [Value(t, op, requires_grad) for t in result_types]
        if self.insert_index is None:
            self.program.ops.append(op)
        else:
            self.program.ops.insert(self.insert_index, op)
            self.insert_index += 1
        return op.results

    def create1(self, name, operands, attrs, result_type) -> Value:
        return self.create(name, operands, attrs, [result_type])[0]

    # Constants -----------------------------------------------------------

    def constant(self, tensor: torch.Tensor, dtype: str) -> Value:
        """A constant with the shape of ``tensor``, converted to ``dtype``."""
        data = tensor.detach().to("cpu").to(ELEMENT_TO_TORCH[dtype])
        if not _is_broadcast_scalar(data):
            data = data.contiguous()
        return self.create1("constant", [], {"value": data},
                            TensorType(tuple(data.shape), dtype))

    def splat(self, number: float, type_: TensorType) -> Value:
        """A splat constant; its value is a scalar expanded to the shape (no
        memory for the elements)."""
        scalar = torch.tensor(number, dtype=ELEMENT_TO_TORCH[type_.dtype])
        return self.create1("constant", [], {"value": scalar.expand(type_.shape)}, type_)

    # Data movement (folding) ---------------------------------------------

    def reshape(self, value: Value, shape: Sequence[int]) -> Value:
        shape = tuple(shape)
        if value.shape == shape:
            return value
        if math.prod(shape) != math.prod(value.shape):
            raise ValueError(f"reshape {value.shape} -> {shape} changes the size")
        source = value.op
        if source is not None and source.name == "reshape":
            return self.reshape(source.operands[0], shape)
        if source is not None and source.name == "constant":
            if is_splat(source):
                return self.splat(first_element(source), value.type.with_shape(shape))
            return self.constant(source.attrs["value"].reshape(shape), value.dtype)
        return self.create1("reshape", [value], {}, value.type.with_shape(shape))

    def transpose(self, value: Value, perm: Sequence[int]) -> Value:
        perm = [int(p) for p in perm]
        if perm == list(range(value.type.rank)):
            return value
        source = value.op
        if source is not None and source.name == "transpose":
            inner = source.attrs["permutation"]
            return self.transpose(source.operands[0], [inner[p] for p in perm])
        shape = [value.shape[p] for p in perm]
        if source is not None and source.name == "constant":
            if is_splat(source):
                return self.splat(first_element(source), value.type.with_shape(shape))
            return self.constant(source.attrs["value"].permute(perm), value.dtype)
        return self.create1("transpose", [value], {"permutation": perm},
                            value.type.with_shape(shape))

    def broadcast(self, value: Value, shape: Sequence[int], dims: Sequence[int]) -> Value:
        """Operand dim ``i`` becomes result dim ``dims[i]``; the others are new."""
        shape, dims = tuple(shape), [int(d) for d in dims]
        if len(dims) == len(shape):
            return value
        source = value.op
        if source is not None and source.name == "constant" and is_splat(source):
            return self.splat(first_element(source), value.type.with_shape(shape))
        if source is not None and source.name == "broadcast":
            inner = source.attrs["dims"]
            return self.broadcast(source.operands[0], shape, [dims[d] for d in inner])
        return self.create1("broadcast", [value], {"dims": dims}, value.type.with_shape(shape))

    def slice(self, value: Value, offsets, sizes, strides) -> Value:
        offsets, sizes, strides = list(offsets), list(sizes), list(strides)
        if list(value.shape) == sizes and all(o == 0 for o in offsets):
            return value
        source = value.op
        if source is not None and source.name == "constant":
            if is_splat(source):
                return self.splat(first_element(source), value.type.with_shape(sizes))
            data = source.attrs["value"]
            index = tuple(slice(o, o + (n - 1) * s + 1, s) if n else slice(0, 0)
                          for o, n, s in zip(offsets, sizes, strides))
            return self.constant(data[index], value.dtype)
        return self.create1("slice", [value],
                            {"offsets": offsets, "sizes": sizes, "strides": strides},
                            value.type.with_shape(sizes))

    def cast(self, value: Value, dtype: str) -> Value:
        if value.dtype == dtype:
            return value
        return self.create1("cast", [value], {}, value.type.with_dtype(dtype))

    def concat(self, values: Sequence[Value], dim: int) -> Value:
        if len(values) == 1:
            return values[0]
        shape = list(values[0].shape)
        shape[dim] = sum(v.shape[dim] for v in values)
        return self.create1("concat", list(values), {"dim": dim},
                            values[0].type.with_shape(shape))

    # Computation ---------------------------------------------------------

    def unary(self, name: str, value: Value, **attrs) -> Value:
        return self.create1(name, [value], attrs, value.type)

    def binary(self, name: str, lhs: Value, rhs: Value) -> Value:
        if lhs.type != rhs.type:
            raise ValueError(f"cleave.{name} needs equal types, got {lhs.type} and {rhs.type}")
        return self.create1(name, [lhs, rhs], {}, lhs.type)

    def reduce(self, name: str, value: Value, dims: Sequence[int]) -> Value:
        dims = sorted(int(d) for d in dims)
        if not dims:
            return value
        shape = [d for i, d in enumerate(value.shape) if i not in dims]
        return self.create1(name, [value], {"dims": dims}, value.type.with_shape(shape))

    def matmul(self, lhs: Value, rhs: Value, transpose_lhs=False, transpose_rhs=False) -> Value:
        m = lhs.shape[-1] if transpose_lhs else lhs.shape[-2]
        n = rhs.shape[-2] if transpose_rhs else rhs.shape[-1]
        shape = tuple(lhs.shape[:-2]) + (m, n)
        attrs = {"transpose_lhs": transpose_lhs, "transpose_rhs": transpose_rhs}
        return self.create1("matmul", [lhs, rhs], attrs, lhs.type.with_shape(shape))


def _is_broadcast_scalar(data: torch.Tensor) -> bool:
    return all(stride == 0 for stride, size in zip(data.stride(), data.shape) if size > 1)


def is_splat(op: Op) -> bool:
    """True when a constant op's elements are all equal."""
    data = op.attrs["value"]
    if data.numel() <= 1 or _is_broadcast_scalar(data):
        return True
    flat = data.reshape(-1)
    return bool(torch.equal(flat, flat[:1].expand_as(flat)))


def first_element(op: Op):
    """The first element of a constant op, as a Python number."""
    data = op.attrs["value"]
    return data[(0,) * data.dim()].item() if data.numel() else 0


def simplify(program: Program) -> None:
    """Folds chains the rewrites leave behind (a transpose of a transpose, a
    reshape of a reshape, identities), then removes dead ops."""
    for op in program.ops:
        source = op.operands[0].op if op.operands else None
        if op.name == "transpose" and source is not None and source.name == "transpose":
            inner = source.attrs["permutation"]
            op.attrs["permutation"] = [inner[p] for p in op.attrs["permutation"]]
            op.operands = [source.operands[0]]
        elif op.name == "reshape" and source is not None and source.name == "reshape":
            op.operands = [source.operands[0]]
        identity = (op.name == "transpose" and op.attrs["permutation"] == sorted(
            op.attrs["permutation"])) or (op.name == "reshape"
                                          and op.operands[0].type == op.results[0].type)
        if identity:
            program.replace_all_uses(op.results[0], op.operands[0])
    program.remove_dead_ops()
