"""Command-line pieces shared by ``python3 -m cleave.torch`` (export),
``cleave.torch.reference`` (PyTorch training oracle) and ``cleave.torch.batches``."""

import argparse
import ast
import importlib.util
import os
import sys
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
import torch.nn.functional as F

from . import params as params_io

_DTYPES = {"float32": torch.float32, "float": torch.float32, "f32": torch.float32,
           "float64": torch.float64, "double": torch.float64, "f64": torch.float64,
           "int64": torch.int64, "long": torch.int64, "i64": torch.int64,
           "int32": torch.int32, "int": torch.int32, "i32": torch.int32}


class UsageError(Exception):
    """A bad command line; the message says which argument and why."""


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="FILE.py:NAME",
                        help="the model: a class or factory in a Python file, called with "
                             "the --config values as keyword arguments")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a keyword argument of the constructor; VALUE is a Python "
                             "literal (16, 0.1, True, 'gelu'), else a string")
    parser.add_argument("--seed", type=int, default=0,
                        help="torch.manual_seed before building the model (default 0)")
    parser.add_argument("--eval", action="store_true",
                        help="use the module in eval mode (dropout off); default: training")
    loss = parser.add_argument_group("loss (default: forward() returns the scalar loss)")
    loss.add_argument("--loss-output", metavar="INDEX|KEY",
                      help="forward() returns a tuple or dict; the loss is this element")
    loss.add_argument("--loss-fn", metavar="NAME|FILE.py:FUNC",
                      help="the loss is FUNC(forward(...), *loss inputs); NAME is a "
                           "torch.nn.functional loss such as cross_entropy or mse_loss")
    loss.add_argument("--loss-input", action="append", default=[],
                      metavar="NAME=SHAPE:DTYPE", help="an extra input of --loss-fn")


def parse_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_config(items: List[str]) -> Dict[str, Any]:
    config = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise UsageError(f"--config {item!r}: expected KEY=VALUE")
        config[key] = parse_value(value)
    return config


#: An integer bound: HIGH (from 0) or (LOW, HIGH).
Bound = Union[int, Tuple[int, int]]


def parse_input(spec: str, need_shape: bool = True
                ) -> Tuple[str, Tuple[int, ...], torch.dtype, Optional[Bound]]:
    """NAME=SHAPE:DTYPE[:HIGH|:LOW..HIGH] -> (name, shape, dtype, high). SHAPE
    is like 4x16 (empty for a scalar); HIGH bounds random integers
    (exclusive; from 0, or from LOW: ``-1..64`` draws some -1 targets, as
    ignored labels)."""
    name, sep, rest = spec.partition("=")
    if not name.isidentifier():
        raise UsageError(f"input {spec!r}: expected NAME=SHAPE:DTYPE")
    if not sep:
        if need_shape:
            raise UsageError(f"input {spec!r}: expected NAME=SHAPE:DTYPE")
        return name, (), torch.float32, None
    parts = rest.split(":")
    if len(parts) not in (2, 3):
        raise UsageError(f"input {spec!r}: expected NAME=SHAPE:DTYPE[:HIGH]")
    try:
        shape = tuple(int(d) for d in parts[0].replace(",", "x").split("x") if d)
    except ValueError:
        raise UsageError(f"input {spec!r}: the shape must be integers like 4x16") from None
    high = None
    if len(parts) == 3:
        low, dots, top = parts[2].rpartition("..")
        try:
            high = (int(low), int(top)) if dots else int(top)
        except ValueError:
            raise UsageError(f"input {spec!r}: the bound must be HIGH or LOW..HIGH "
                             f"(integers)") from None
        if dots and high[0] >= high[1]:
            raise UsageError(f"input {spec!r}: LOW..HIGH needs LOW < HIGH")
    if parts[1] not in _DTYPES:
        raise UsageError(f"input {spec!r}: unknown dtype {parts[1]!r} "
                         f"(use one of {', '.join(sorted(_DTYPES))})")
    return name, shape, _DTYPES[parts[1]], high


def example_tensor(shape, dtype, high: Optional[Bound] = None,
                   generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Floats: standard normal. Integers: zeros, or uniform in [0, high)
    (or in [low, high) for a pair)."""
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(dtype)
    if high is None:
        return torch.zeros(shape, dtype=dtype)
    low, high = high if isinstance(high, tuple) else (0, high)
    return torch.randint(low, high, shape, generator=generator, dtype=dtype)


def load_object(spec: str, what: str):
    path, sep, name = spec.rpartition(":")
    if not sep or not path.endswith(".py") or not name:
        raise UsageError(f"{what} {spec!r}: expected FILE.py:NAME")
    if not os.path.isfile(path):
        raise UsageError(f"{what} {spec!r}: no such file {path}")
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)
    module_name = os.path.splitext(os.path.basename(path))[0]
    loaded = sys.modules.get(module_name)
    if loaded is None or os.path.abspath(getattr(loaded, "__file__", "")) != os.path.abspath(path):
        spec_ = importlib.util.spec_from_file_location(module_name, path)
        loaded = importlib.util.module_from_spec(spec_)
        sys.modules[module_name] = loaded
        spec_.loader.exec_module(loaded)
    if not hasattr(loaded, name):
        raise UsageError(f"{what} {spec!r}: {path} defines no {name!r}")
    return getattr(loaded, name)


def build_model(args) -> torch.nn.Module:
    factory = load_object(args.model, "model")
    torch.manual_seed(args.seed)
    model = factory(**parse_config(args.config))
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"model {args.model!r} returned {type(model).__name__}, "
                         f"not a torch.nn.Module")
    model.train(not args.eval)
    return model


def load_weights(model: torch.nn.Module, path: str) -> None:
    """Loads a Cleave tensor file (by parameter name) or a torch state_dict."""
    if path.endswith(".pt") or path.endswith(".pth"):
        state = torch.load(path, map_location="cpu")
        model.load_state_dict(state)
        return
    tensors = params_io.split_stacked(params_io.load_tensors(path))
    named = dict(model.named_parameters())
    for name, tensor in tensors.items():
        if name not in named:
            raise UsageError(f"{path}: tensor '{name}' is no parameter of the model")
        if tuple(named[name].shape) != tuple(tensor.shape):
            raise UsageError(f"{path}: '{name}' has shape {list(tensor.shape)}, the model's "
                             f"parameter has {list(named[name].shape)}")
        with torch.no_grad():
            named[name].copy_(tensor)


def resolve_loss(args):
    """The ``loss=`` argument of export and the loss-input names."""
    if args.loss_output is not None and args.loss_fn is not None:
        raise UsageError("--loss-output and --loss-fn are exclusive")
    if args.loss_input and args.loss_fn is None:
        raise UsageError("--loss-input needs --loss-fn")
    if args.loss_output is not None:
        value = parse_value(args.loss_output)
        return value if isinstance(value, int) else args.loss_output
    if args.loss_fn is None:
        return None
    if ":" in args.loss_fn:
        return load_object(args.loss_fn, "--loss-fn")
    fn = getattr(F, args.loss_fn, None)
    if fn is None or not callable(fn):
        raise UsageError(f"--loss-fn {args.loss_fn!r}: not a torch.nn.functional function")
    return fn
