"""Lowers a concretely traced fx graph to a cleave ``Program``.

Every fx node becomes one of:

- a cleave ``Value`` when it depends on an input or a parameter (dynamic);
- a Python/torch constant when it does not (a mask buffer, ``torch.arange``,
  shape arithmetic): constants are materialized as ``cleave.constant`` only
  where a dynamic op consumes them;
- a tuple/list of those (``split``, ``chunk``);
- a ``Pending`` value: the start of a computation lowered as a whole when it
  ends (``torch.topk`` in a load-balancing loss, moe.py).

A module the tracer recognized whole (a mixture-of-experts block) is one
``call_module`` node lowered by ``BLOCKS``.

Ops are lowered by handlers registered per fx target in ``ops_*.py``. A
handler receives a ``NodeContext`` and the node's arguments with dynamic
values replaced by ``Value``; it raises ``Unsupported`` for what it cannot
express exactly. After each node the lowered type is checked against the
shape and dtype PyTorch computed on the example inputs.
"""

import functools
import inspect
import operator
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
from torch.fx.node import Node, map_aggregate

from .ir import TORCH_TO_ELEMENT, Builder, Program, TensorType, Value
from .tracer import Location, Problem, concrete, is_dynamic


class Unsupported(Exception):
    """Raised by a handler: the op (or this use of it) cannot be exported."""


class _Poison:
    """The value of a node that could not be lowered."""


POISON = _Poison()


class Pending:
    """The value of a node that has no cleave value of its own but begins a
    known computation (``torch.topk``'s indices in a load-balancing loss,
    moe.py): every node that reads it calls ``lower``, which continues the
    computation (another ``Pending`` or a ``Value``) or raises
    ``Unsupported``."""

    def lower(self, cx: "NodeContext", args, kwargs):
        raise Unsupported(self.expected())

    def expected(self) -> str:
        raise NotImplementedError


def _pending_operand(args, kwargs) -> Optional[Pending]:
    found = []
    map_aggregate((args, kwargs), lambda v: found.append(v) if isinstance(v, Pending) else None)
    return found[0] if found else None

#: Methods whose result may share memory with their input.
VIEW_METHODS = {"view", "view_as", "reshape", "reshape_as", "transpose", "permute", "t",
                "expand", "expand_as", "unsqueeze", "squeeze", "flatten", "unflatten",
                "narrow", "select", "split", "chunk", "unbind", "contiguous", "swapaxes",
                "swapdims", "as_strided", "detach", "tensor_split", "movedim"}

FUNCTIONS: Dict[Any, Callable] = {}
METHODS: Dict[str, Callable] = {}
MODULES: Dict[type, Callable] = {}
#: Handlers of modules the tracer recognized as a whole (``tracer.RECOGNIZERS``),
#: by the type of what the recognizer returned (``node.meta["cleave_block"]``).
BLOCKS: Dict[type, Callable] = {}

#: Methods that read a traced value into Python.
DATA_DEPENDENT = {"item", "tolist", "numpy", "nonzero", "unique", "any", "all",
                  "argmax", "argmin", "__bool__", "__int__", "__float__"}


def lowers(*targets):
    """Registers a handler for functions (callables), tensor methods (str) and
    module classes (types)."""
    def register(handler):
        for target in targets:
            if isinstance(target, str):
                METHODS[target] = handler
            elif isinstance(target, type):
                MODULES[target] = handler
            else:
                FUNCTIONS[target] = handler
        return handler
    return register


def element_type(dtype: torch.dtype) -> str:
    try:
        return TORCH_TO_ELEMENT[dtype]
    except KeyError:
        raise Unsupported(f"tensors of dtype {dtype} are not supported "
                          f"(floating-point and integer ids only)") from None


def type_of(tensor: torch.Tensor) -> TensorType:
    return TensorType(tuple(tensor.shape), element_type(tensor.dtype))


def describe_target(node: Node, root: torch.nn.Module) -> str:
    if node.op == "call_module":
        module = root.get_submodule(node.target)
        cls = type(module)
        qualified = (f"torch.nn.{cls.__name__}" if getattr(torch.nn, cls.__name__, None) is cls
                     else f"{cls.__module__}.{cls.__name__}")
        return f"module {qualified} ('{node.target}')"
    if node.op == "call_method":
        return f"tensor method Tensor.{node.target}"
    target = node.target
    module = getattr(target, "__module__", None) or ""
    module = {"torch._C._nn": "torch.nn.functional", "_operator": "operator",
              "torch._C._VariableFunctions": "torch"}.get(module, module)
    name = getattr(target, "__name__", repr(target))
    return f"function {module + '.' if module else ''}{name}"


class NodeContext:
    """What a handler sees: the builder, the node's concrete result, helpers."""

    def __init__(self, lowering: "Lowering", node: Node):
        self.lowering = lowering
        self.node = node
        self.b = lowering.builder
        self.out = concrete(node)

    @property
    def module(self) -> torch.nn.Module:
        return self.lowering.root.get_submodule(self.node.target)

    def out_type(self, value=None) -> TensorType:
        """The element type and shape PyTorch computed for this node."""
        value = self.out if value is None else value
        if not isinstance(value, torch.Tensor):
            raise Unsupported(f"expected a tensor result, PyTorch returns {type(value).__name__}")
        return type_of(value)

    def param(self, parameter: torch.nn.Parameter) -> Value:
        return self.lowering.param_value(parameter)

    def dropout_seed(self) -> Value:
        return self.lowering.dropout_seed()

    def next_dropout_stream(self) -> int:
        self.lowering.dropout_streams += 1
        return self.lowering.dropout_streams - 1

    # Operands --------------------------------------------------------------

    def value(self, x, dtype: Optional[str] = None) -> Value:
        """``x`` as a cleave value, converted to ``dtype`` when given."""
        if isinstance(x, Value):
            return self.convert(x, dtype or x.dtype)
        if isinstance(x, torch.Tensor):
            return self.b.constant(x, dtype or element_type(x.dtype))
        raise Unsupported(f"expected a tensor, got {type(x).__name__} {x!r}")

    def convert(self, value: Value, dtype: str) -> Value:
        if value.dtype == dtype:
            return value
        if value.type.is_float and dtype in ("f32", "f64", "bf16", "f16"):
            return self.b.cast(value, dtype)
        if not value.type.is_float and not dtype.startswith("f") and not dtype.startswith("bf"):
            return value
        raise Unsupported(f"converting a traced {value.dtype} tensor to {dtype} "
                          f"(cleave.cast converts between floating-point types only)")

    def operand(self, x, type_: TensorType) -> Value:
        """``x`` (value, constant tensor or number) broadcast to ``type_`` the
        way PyTorch broadcasts elementwise operands."""
        if isinstance(x, bool) or isinstance(x, (int, float)):
            return self.b.splat(float(x) if type_.is_float else int(x), type_)
        if isinstance(x, torch.Tensor):
            squeezed, dims = _squeeze_for_broadcast(tuple(x.shape), type_.shape)
            const = self.b.constant(x.reshape(squeezed), type_.dtype)
            return self.b.broadcast(const, type_.shape, dims)
        if isinstance(x, Value):
            return self.broadcast_to(self.convert(x, type_.dtype), type_.shape)
        raise Unsupported(f"unexpected operand {type(x).__name__} {x!r}")

    def broadcast_to(self, value: Value, shape: Sequence[int]) -> Value:
        squeezed, dims = _squeeze_for_broadcast(value.shape, tuple(shape))
        return self.b.broadcast(self.b.reshape(value, squeezed), shape, dims)


def _squeeze_for_broadcast(shape, target):
    """The dims of ``shape`` that survive broadcasting to ``target`` and
    their positions in ``target``."""
    offset = len(target) - len(shape)
    if offset < 0:
        raise Unsupported(f"cannot broadcast shape {list(shape)} to {list(target)}")
    kept, dims = [], []
    for i, size in enumerate(shape):
        if size == target[offset + i]:
            kept.append(size)
            dims.append(offset + i)
        elif size != 1:
            raise Unsupported(f"cannot broadcast shape {list(shape)} to {list(target)}")
    return kept, dims


class Lowering:
    """Walks the graph in order and builds the program."""

    def __init__(self, graph, root: torch.nn.Module, dropout_enabled: bool,
                 default_location: Optional[Location] = None):
        self.graph = graph
        self.default_location = default_location
        self.root = root
        self.dropout_enabled = dropout_enabled
        self.program = Program("forward")
        self.builder = Builder(self.program)
        self.problems: List[Problem] = []
        self.env: Dict[Node, Any] = {}
        self.param_order = {id(p): i for i, (_, p) in enumerate(root.named_parameters())}
        self.param_names = {id(p): n for n, p in root.named_parameters()}
        self.params: Dict[Any, Value] = {}
        #: Stacked parameters: name -> the names of its slices (in order).
        self.stacks: Dict[str, List[str]] = {}
        self.used_params: Dict[str, torch.nn.Parameter] = {}
        self.inputs: List[Value] = []
        self.seed: Optional[Value] = None
        self.dropout_streams = 0
        self.rebind: Dict[Node, Node] = {}

    # Arguments -------------------------------------------------------------

    def param_value(self, parameter) -> Value:
        key = id(parameter)
        if key in self.params:
            return self.params[key]
        name = self._checked_name(parameter)
        value = self.program.add_arg(type_of(parameter), "p." + _ssa_safe(name),
                                     {"cleave.param": name}, requires_grad=True)
        self.params[key] = value
        self.used_params[name] = parameter
        return value

    def _checked_name(self, parameter) -> str:
        name = self.param_names.get(id(parameter))
        if name is None:
            raise Unsupported("uses a parameter that is not registered in the module")
        if not parameter.requires_grad:
            raise Unsupported(f"parameter '{name}' has requires_grad=False: Cleave trains "
                              f"every parameter (register it as a buffer instead)")
        if parameter.dtype != torch.float32:
            raise Unsupported(f"parameter '{name}' is {parameter.dtype}; the front-end "
                              f"exports float32 parameters")
        return name

    def stacked_param_value(self, parameters: Sequence[torch.nn.Parameter]) -> Value:
        """One argument holding ``torch.stack(parameters)``: parameters whose
        names differ only in one index (``experts.0.w1.weight``,
        ``experts.1.w1.weight``, ...) are named with ``*`` in its place
        (``experts.*.w1.weight``); ``params.split_stacked`` splits them."""
        key = tuple(id(p) for p in parameters)
        if key in self.params:
            return self.params[key]
        names = [self._checked_name(p) for p in parameters]
        name = stacked_name(names)
        if name is None or len({tuple(p.shape) for p in parameters}) != 1:
            raise Unsupported(f"cannot stack parameters {names[0]}, ..., {names[-1]}: their "
                              f"names must differ in one index 0..{len(names) - 1}, their "
                              f"shapes must be equal")
        stacked = torch.stack([p.detach() for p in parameters])
        value = self.program.add_arg(type_of(stacked), "p." + _ssa_safe(name),
                                     {"cleave.param": name}, requires_grad=True)
        self.params[key] = value
        self.used_params[name] = stacked
        self.stacks[name] = names
        return value

    def dropout_seed(self) -> Value:
        if self.seed is None:
            self.seed = self.program.add_arg(TensorType((), "i64"), "dropout_seed",
                                             {"cleave.input": "dropout_seed"})
        return self.seed

    def _order_args(self) -> None:
        """Inputs, the dropout seed, then parameters in named_parameters order."""
        def order(item):
            key = item[0]
            return self.param_order[key[0] if isinstance(key, tuple) else key]
        params = sorted(self.params.items(), key=order)
        seed = [self.seed] if self.seed else []
        self.program.args = self.inputs + seed + [value for _, value in params]

    # Nodes -----------------------------------------------------------------

    def run(self) -> Program:
        for node in self.graph.nodes:
            self.builder.loc = _loc_tuple(node.meta.get("cleave_loc"))
            self.env[node] = self._lower(node)
            target = self.rebind.pop(node, None)
            if target is not None:  # later uses of the mutated tensor see the result
                self.env[target] = self.env[node]
        self._order_args()
        return self.program

    def fail(self, node: Node, message: str) -> _Poison:
        location = node.meta.get("cleave_loc") or self.default_location
        self.problems.append(Problem(location, message))
        return POISON

    def _lower(self, node: Node):
        if node.op == "placeholder":
            return self._placeholder(node)
        if node.op == "output":
            return self._output(node)
        if node.op == "get_attr":
            if is_dynamic(node):
                return self._guard(node, lambda: self.param_value(self._param(node.target)))
            return concrete(node)
        if not is_dynamic(node):
            return concrete(node)
        if not node.users and not self._mutates(node):
            return POISON  # dead (e.g. only branched on): nothing to lower
        args = map_aggregate(node.args, lambda n: self.env[n] if isinstance(n, Node) else n)
        kwargs = map_aggregate(node.kwargs,
                               lambda n: self.env[n] if isinstance(n, Node) else n)
        pending = _pending_operand(args, kwargs)
        if pending is not None:
            if node.target is operator.getitem and isinstance(args[0], (tuple, list)):
                return args[0][args[1]]
            return self._guard(node, lambda: pending.lower(NodeContext(self, node), args,
                                                           kwargs))
        handler = self._handler(node)
        if handler is None:
            what = describe_target(node, self.root)
            if node.op == "call_method" and node.target in DATA_DEPENDENT:
                return self.fail(node, f"data-dependent {what}: it reads a traced value "
                                       f"into Python")
            return self.fail(node, f"unsupported {what}")
        if _contains_poison(args) or _contains_poison(kwargs):
            return POISON
        return self._guard(node, lambda: self._call(handler, node, args, kwargs))

    def _guard(self, node, thunk):
        try:
            return thunk()
        except Unsupported as err:
            return self.fail(node, f"{describe_target(node, self.root)}: {err}"
                             if node.op != "get_attr" else str(err))
        except AssertionError as err:  # a lowering that disagrees with PyTorch
            return self.fail(node, f"internal error of the front-end, please report: {err}")

    def _param(self, name):
        return dict(self.root.named_parameters())[name]

    def _mutates(self, node: Node) -> bool:
        if node.op == "call_method":
            return node.target.endswith("_") and not node.target.endswith("__")
        if node.op == "call_module":
            return bool(getattr(self.root.get_submodule(node.target), "inplace", False))
        return bool(node.kwargs.get("inplace", False))

    def check_inplace(self, node: Node) -> None:
        """Allows an in-place op when lowering it out of place and rebinding its
        input is exact: the input is an intermediate that no view aliases."""
        target = node.args[0] if node.args else None
        if not isinstance(target, Node) or target.op in ("placeholder", "get_attr"):
            raise Unsupported("in-place update of an input or parameter")
        if target.op == "call_method" and target.target in VIEW_METHODS or any(
                user.op == "call_method" and user.target in VIEW_METHODS
                or user.target is operator.getitem for user in target.users):
            raise Unsupported("in-place update of a tensor that shares memory with a view")
        self.rebind[node] = target

    def _handler(self, node: Node) -> Optional[Callable]:
        if node.op == "call_method" and node.target.endswith("_") \
                and not node.target.endswith("__") and node.target[:-1] in METHODS:
            plain = METHODS[node.target[:-1]]

            def inplace(cx, *args, **kwargs):
                self.check_inplace(cx.node)
                return plain(cx, *args, **kwargs)
            return inplace
        if node.op == "call_function":
            try:
                return FUNCTIONS.get(node.target)
            except TypeError:
                return None
        if node.op == "call_method":
            return METHODS.get(node.target)
        if node.op == "call_module" and "cleave_block" in node.meta:
            block = node.meta["cleave_block"]
            return functools.partial(BLOCKS[type(block)], block=block)
        if node.op == "call_module":
            for cls in type(self.root.get_submodule(node.target)).__mro__:
                if cls in MODULES:
                    return MODULES[cls]
        return None

    def _call(self, handler, node, args, kwargs):
        cx = NodeContext(self, node)
        try:
            inspect.signature(handler).bind(cx, *args, **kwargs)
        except TypeError as err:
            raise Unsupported(f"these arguments are not supported ({err})") from None
        result = handler(cx, *args, **kwargs)
        _check_result(node, result, cx.out)
        return result

    def _placeholder(self, node: Node):
        example = concrete(node)
        name = node.target
        if not isinstance(example, torch.Tensor):
            return example
        try:
            type_ = type_of(example)
        except Unsupported as err:
            return self.fail(node, f"input '{name}': {err}")
        value = self.program.add_arg(type_, _ssa_safe(name), {"cleave.input": name})
        self.inputs.append(value)
        return value

    def _output(self, node: Node):
        (result,) = node.args
        value = self.env[result] if isinstance(result, Node) else result
        if value is POISON:
            return POISON
        if isinstance(result, Node):  # report problems where the loss is computed
            node.meta["cleave_loc"] = result.meta.get("cleave_loc")
        if not isinstance(value, Value):
            return self.fail(node, "the loss does not depend on the inputs or parameters")
        if value.shape != () or value.dtype != "f32":
            return self.fail(node, f"the loss must be a float32 scalar, got {value.type}; "
                                   f"reduce it or choose it with loss=")
        self.program.result = value
        return value


def _check_result(node: Node, result, expected) -> None:
    if isinstance(result, Value):
        if not isinstance(expected, torch.Tensor) or result.type != type_of(expected):
            raise AssertionError(
                f"internal error lowering {node.format_node()}: produced {result.type}, "
                f"PyTorch computes {getattr(expected, 'shape', expected)} "
                f"{getattr(expected, 'dtype', '')}")
    elif isinstance(result, (tuple, list)):
        if not isinstance(expected, (tuple, list)) or len(result) != len(expected):
            raise AssertionError(f"internal error lowering {node.format_node()}: "
                                 f"produced {len(result)} results")
        for r, e in zip(result, expected):
            if isinstance(r, Value):
                _check_result(node, r, e)


def _contains_poison(value) -> bool:
    found = []
    map_aggregate(value, lambda v: found.append(v) if v is POISON else None)
    return bool(found)


def stacked_name(names: Sequence[str]) -> Optional[str]:
    """``a.*.b`` when ``names`` are ``a.0.b``, ``a.1.b``, ..., else None."""
    parts = [n.split(".") for n in names]
    if not parts or len({len(p) for p in parts}) != 1:
        return None
    differ = [i for i in range(len(parts[0])) if len({p[i] for p in parts}) > 1]
    if len(parts) == 1 or len(differ) != 1:
        return None
    at = differ[0]
    if [p[at] for p in parts] != [str(i) for i in range(len(parts))]:
        return None
    return ".".join(parts[0][:at] + ["*"] + parts[0][at + 1:])


def _ssa_safe(name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "._$" else "_" for c in name)
    return safe if safe[:1].isalpha() or safe[:1] == "_" else "_" + safe


def _loc_tuple(location: Optional[Location]):
    if location is None:
        return None
    return (location.path, location.line, location.column)
