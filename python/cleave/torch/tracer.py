"""torch.fx tracing with concrete values, for static-shape models.

Cleave programs have static shapes, so the front-end traces with the example
inputs running alongside the symbolic trace: every node records the value it
computes on the examples (this is fx's ShapeProp, done while tracing rather
than after it). That one decision removes the torch 1.13 / Python 3.11
workarounds that plain ``symbolic_trace`` needs (see
/work/shared/examples/libs-spike/REPORT.md section 4):

- ``b, t = idx.size()`` and ``x.shape``: shape queries return concrete
  ``torch.Size``/ints instead of proxies, so no proxy is ever unpacked
  (torch 1.13's ``Proxy.__iter__`` reads 3.11 bytecode by a wrong index) and
  ``assert t <= block_size`` or ``if t > 1:`` are ordinary Python.
- ``torch.arange(0, t)``, ``torch.ones(t, t).tril()``, slicing a registered
  mask buffer: with concrete sizes these run eagerly and become constants;
  nothing needs patching.
- Iterating or unpacking a traced tensor uses its concrete length.

What remains symbolic is what depends on the data: inputs and parameters. A
Python branch on such a value (``if x.sum() > 0:``), ``int(x)``, ``x.item()``
and friends are recorded as problems with their source location; tracing
goes on with the concrete value so that one error can list every problem.
"""

import contextlib
import linecache
import os
import sys
import sysconfig
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.fx
from torch.fx.node import Node, map_aggregate
from torch.fx.proxy import Attribute, Proxy
from torch.nn.utils.stateless import functional_call

#: Attributes of a tensor that are static metadata: answered concretely.
_META_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "layout",
                         "is_sparse", "is_quantized", "is_meta", "is_floating_point"})
#: Tensor methods that only read metadata: answered concretely, never traced.
_META_METHODS = frozenset({"size", "dim", "numel", "nelement", "ndimension",
                           "is_contiguous", "is_floating_point", "stride",
                           "element_size", "get_device"})

#: Recognizers of whole modules (``moe.recognize``): ``(module, input shape,
#: cache) -> (block, reason)``, ``cache`` a dict for the recognizer's use,
#: one per trace. A module a recognizer returns a block for is a leaf of
#: the trace (one ``call_module`` node with ``meta["cleave_block"]``), lowered
#: by ``lowering.BLOCKS``; a reason says why a module that looks like such a
#: block was not recognized (reported if the export then fails).
RECOGNIZERS: List[Callable[[torch.nn.Module, Tuple[int, ...], Dict], Tuple[Any, str]]] = []

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB_DIR = sysconfig.get_paths()["stdlib"] + os.sep


@dataclass(frozen=True)
class Location:
    """A place in the user's source."""

    path: str
    line: int
    column: int = 0

    def __str__(self) -> str:
        path = self.path
        try:
            rel = os.path.relpath(path)
            if not rel.startswith(".."):
                path = rel
        except ValueError:
            pass
        return f"{path}:{self.line}"

    @property
    def source(self) -> str:
        return linecache.getline(self.path, self.line).strip()


@dataclass(frozen=True)
class Problem:
    """Something the front-end cannot export, and where it happens."""

    location: Optional[Location]
    message: str

    def __str__(self) -> str:
        where = str(self.location) if self.location else "<unknown location>"
        text = f"{where}: {self.message}"
        if self.location and self.location.source:
            text += f"\n      {self.location.source}"
        return text


def _is_user_file(path: str) -> bool:
    return not (path.startswith(_TORCH_DIR) or path.startswith(_PACKAGE_DIR)
                or path.startswith(_STDLIB_DIR) or path.startswith("<"))


def _frame_location(frame) -> Location:
    column = 0
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is not None:
        try:
            position = list(positions())[frame.f_lasti // 2]
            column = (position[2] or 0) + 1
        except (IndexError, TypeError):
            column = 0
    return Location(frame.f_code.co_filename, frame.f_lineno, column)


def user_location(frame=None) -> Optional[Location]:
    """The innermost frame of the caller's stack that is user code."""
    frame = frame or sys._getframe(1)
    while frame is not None:
        if _is_user_file(frame.f_code.co_filename):
            return _frame_location(frame)
        frame = frame.f_back
    return None


def traceback_location(tb) -> Optional[Location]:
    """The innermost user frame of an exception's traceback."""
    found = None
    while tb is not None:
        if _is_user_file(tb.tb_frame.f_code.co_filename):
            found = Location(tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


def _has_parameters(module: torch.nn.Module) -> bool:
    return any(True for _ in module.parameters())


def concrete(node_or_proxy) -> Any:
    """The value a traced node computed on the example inputs."""
    node = node_or_proxy.node if isinstance(node_or_proxy, Proxy) else node_or_proxy
    return node.meta["cleave_value"]


def is_dynamic(node: Node) -> bool:
    """True when a node's value depends on an input or a parameter."""
    return node.meta.get("cleave_dynamic", False)


class CleaveProxy(Proxy):
    """A proxy that answers shape questions concretely and reports
    data-dependent Python control flow instead of failing on it."""

    def __getattr__(self, name):
        if name == "device":  # dynamic values are meta tensors; the model runs on the CPU
            return torch.device("cpu")
        if name in ("is_cuda", "is_meta"):
            return False
        if name in _META_ATTRS:
            return getattr(concrete(self), name)
        return CleaveAttribute(self, name)

    def _data_dependent(self, what: str, convert, placeholder):
        """A Python use of the proxy's value. Dynamic values are only known by
        shape (meta tensors): the use is reported and tracing goes on with
        ``placeholder`` so that every problem is found in one run."""
        if is_dynamic(self.node):
            self.tracer.report(f"data-dependent {what}: Python reads the value of a traced "
                               f"tensor, which changes with the inputs or parameters")
            return placeholder
        return convert(concrete(self))

    def __bool__(self):
        return self._data_dependent("control flow", bool, True)

    def __int__(self):
        return self._data_dependent("conversion to int", int, 0)

    def __float__(self):
        return self._data_dependent("conversion to float", float, 0.0)

    def __index__(self):
        return self._data_dependent("use as an index", int, 0)

    def __len__(self):
        return len(concrete(self))

    def __iter__(self):
        return iter([self[i] for i in range(len(concrete(self)))])


class CleaveAttribute(Attribute, CleaveProxy):
    """``proxy.attr``: created lazily like fx's Attribute."""


class ConcreteTracer(torch.fx.Tracer):
    """Traces ``body(root, placeholders)`` with concrete example values.

    ``inputs`` maps placeholder names to example tensors (in order). After
    ``trace()``, every node has ``meta["cleave_value"]`` (its value: real for
    constants, a meta tensor with the right shape and dtype for values that
    depend on inputs or parameters), ``meta["cleave_dynamic"]`` and
    ``meta["cleave_loc"]``; ``problems`` lists the data-dependent uses found.
    """

    def __init__(self, inputs: Dict[str, torch.Tensor],
                 body: Callable[[torch.nn.Module, Dict[str, Proxy]], Any]):
        super().__init__()
        self.inputs = inputs
        self.body = body
        self.problems: List[Problem] = []
        self._evaluating = False
        self._constants: Dict[int, Tuple[torch.Tensor, Node]] = {}
        self._params: Dict[str, torch.nn.Parameter] = {}
        self._blocks: Dict[str, Any] = {}
        self._recognizer_caches: Dict[int, Dict] = {}
        #: Modules that look like a recognized block but are not one:
        #: (path, location of the call, why not).
        self.rejected: List[Tuple[str, Optional[Location], str]] = []

    def report(self, message: str) -> None:
        self.problems.append(Problem(user_location(), message))

    def trace(self, root, concrete_args=None):
        self._params = dict(root.named_parameters())
        return super().trace(root, concrete_args)

    # fx hooks --------------------------------------------------------------

    def proxy(self, node: Node) -> Proxy:
        return CleaveProxy(node, self)

    def create_args_for_root(self, root_fn, is_module, concrete_args=None):
        placeholders = {name: self.create_proxy("placeholder", name, (), {})
                        for name in self.inputs}

        def traced(*_):
            return self.body(self.root, placeholders)
        return traced, list(placeholders.values())

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None,
                     proxy_factory_fn=None):
        if kind == "call_method" and target == "get_device":
            return -1
        if kind == "call_method" and (target in _META_METHODS or (
                target == "type" and len(args) == 1 and not kwargs)):
            return self._evaluate(kind, target, args, kwargs, False)
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr,
                                     proxy_factory_fn)
        node = proxy.node
        node.meta["cleave_loc"] = user_location()
        node.meta["cleave_dynamic"] = (
            kind == "placeholder" or (kind == "get_attr" and target in self._params)
            or (kind == "call_module" and _has_parameters(self.root.get_submodule(target)))
            or any(is_dynamic(n) for n in node.all_input_nodes))
        node.meta["cleave_value"] = self._evaluate(kind, target, args, kwargs,
                                                   node.meta["cleave_dynamic"])
        if kind == "call_module" and target in self._blocks:
            node.meta["cleave_block"] = self._blocks[target]
        return proxy

    def create_arg(self, a):
        if isinstance(a, torch.nn.Parameter):
            node = super().create_arg(a)
            node.meta.setdefault("cleave_value", _to_meta(a.detach()))
            node.meta.setdefault("cleave_dynamic", True)
            node.meta.setdefault("cleave_loc", user_location())
            return node
        if isinstance(a, torch.Tensor):
            entry = self._constants.get(id(a))
            if entry is None:
                node = self.create_node("get_attr", f"_cleave_constant{len(self._constants)}",
                                        (), {})
                node.meta.update(cleave_value=a, cleave_dynamic=False,
                                 cleave_loc=user_location())
                entry = self._constants[id(a)] = (a, node)
            return entry[1]
        return super().create_arg(a)

    def call_module(self, m, forward, args, kwargs):
        if self._evaluating:
            return forward(*args, **kwargs)
        if m not in self.submodule_paths:
            # A module built inside forward() (e.g. nn.CrossEntropyLoss()(y, t)):
            # trace through it; its functional calls are recorded.
            return forward(*args, **kwargs)
        self._recognize(m, args, kwargs)
        return super().call_module(m, forward, args, kwargs)

    def is_leaf_module(self, m, module_qualified_name):
        return module_qualified_name in self._blocks or super().is_leaf_module(
            m, module_qualified_name)

    def _recognize(self, m, args, kwargs) -> None:
        """Runs the recognizers on a module called with one traced tensor
        (positional or by keyword)."""
        path = self.path_of_module(m)
        operands = list(args) + list(kwargs.values())
        if not RECOGNIZERS or path in self._blocks or len(operands) != 1 \
                or not isinstance(operands[0], Proxy):
            return
        example = concrete(operands[0])
        if not isinstance(example, torch.Tensor) or any(p == path for p, _, _ in self.rejected):
            return
        with self._evaluation():
            for recognizer in RECOGNIZERS:
                cache = self._recognizer_caches.setdefault(id(recognizer), {})
                block, reason = recognizer(m, tuple(example.shape), cache)
                if block is not None:
                    self._blocks[path] = block
                    return
                if reason:
                    self.rejected.append((path, user_location(), reason))

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if self._evaluating:
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    # Concrete evaluation ---------------------------------------------------

    @contextlib.contextmanager
    def _evaluation(self):
        previous, self._evaluating = self._evaluating, True
        try:
            with torch.no_grad():
                yield
        finally:
            self._evaluating = previous

    def _evaluate(self, kind, target, args, kwargs, dynamic: bool):
        """The node's value: real for constants; for dynamic values a meta
        tensor (shape and dtype only), so tracing a large model costs no
        activation memory. Ops without a meta kernel run on zeros instead."""
        if kind == "placeholder":
            return _to_meta(self.inputs[target])
        if kind == "get_attr":
            return _to_meta(self._params[target].detach())

        def value_of(a):
            return concrete(a) if isinstance(a, (Proxy, Node)) else a
        cargs = map_aggregate(args, value_of)
        ckwargs = map_aggregate(kwargs, value_of)
        if not dynamic:
            return self._run(kind, target, cargs, ckwargs, meta=False)
        try:
            return self._run(kind, target, _to_meta(cargs), _to_meta(ckwargs), meta=True)
        except (NotImplementedError, RuntimeError):
            real = self._run(kind, target, _materialize(cargs), _materialize(ckwargs),
                             meta=False)
            return _to_meta(real)

    def _run(self, kind, target, args, kwargs, meta: bool):
        with self._evaluation():
            if kind == "call_function":
                return target(*args, **kwargs)
            if kind == "call_method":
                return getattr(args[0], target)(*args[1:], **kwargs)
            if kind == "call_module":
                module = self.root.get_submodule(target)
                if not meta:
                    return module(*args, **kwargs)
                state = {n: _to_meta(t) for n, t in module.named_parameters()}
                state.update((n, _to_meta(t)) for n, t in module.named_buffers())
                return functional_call(module, state, tuple(args), kwargs)
        raise AssertionError(f"unexpected node kind {kind}")


def _to_meta(value):
    def convert(v):
        if isinstance(v, torch.Tensor) and not v.is_meta:
            return torch.empty(v.shape, dtype=v.dtype, device="meta") if not isinstance(
                v, torch.nn.Parameter) else v.detach().to("meta")
        return v
    return map_aggregate(value, convert)


def _materialize(value):
    def convert(v):
        if isinstance(v, torch.Tensor) and v.is_meta:
            return torch.zeros(v.shape, dtype=v.dtype)
        return v
    return map_aggregate(value, convert)
