"""``cleave.torch.export``: a torch.nn.Module and its loss as a cleave program."""

import inspect
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from .. import tensorfile
from . import moe, ops_math, ops_nn, ops_shape  # noqa: F401  (register the handlers)
from . import patterns
from .interpreter import evaluate
from .ir import Program, simplify
from .lowering import Lowering
from .params import save_parameters
from .printer import print_program
from .tracer import ConcreteTracer, Problem, traceback_location, user_location

#: How the loss is obtained from what ``forward`` returns.
LossArg = Union[None, int, str, Callable[..., Any]]


class ExportError(Exception):
    """The module cannot be exported; ``problems`` lists each reason with its
    source location. Nothing has been written."""

    def __init__(self, subject: str, problems: Sequence[Problem]):
        self.problems = list(problems)
        count = len(self.problems)
        lines = [f"cannot export {subject} to Cleave: {count} problem{'s' * (count != 1)}"]
        lines += [f"  {p}" for p in self.problems]
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class InputSpec:
    """A data input of the program: its ``cleave.input`` name, per-step shape
    and element type (``f32``, ``i32``, ...). Integer inputs read as class
    labels or embedding ids have ``id_limit``: every value must be in
    ``[0, id_limit)`` or, for labels every use ignores, ``ignore_index``."""

    name: str
    shape: Tuple[int, ...]
    dtype: str
    id_limit: Optional[int] = None
    ignore_index: Optional[int] = None


#: Ops that move integer ids without changing them.
_ID_MOVES = {"reshape", "transpose", "broadcast", "slice", "concat"}


def _id_bounds(program: Program, arg) -> Tuple[Optional[int], Optional[int]]:
    """(id_limit, ignore_index) of an integer input, from the ops that read
    it: the smallest class count or table size, and the ignore_index when
    every bounded use ignores the same label (as cleave-run checks them)."""
    if arg.type.is_float:
        return None, None
    uses = program.uses()
    limit, ignores, worklist, seen = None, [], [arg], set()
    while worklist:
        value = worklist.pop()
        for op in uses.get(id(value), ()):
            if id(op) in seen:
                continue
            seen.add(id(op))
            if op.name == "cross_entropy" and op.operands[1] is value:
                bound, ignore = op.operands[0].shape[-1], op.attrs.get("ignore_index")
            elif op.name == "embedding" and op.operands[1] is value:
                bound, ignore = op.operands[0].shape[0], None
            else:
                if op.name in _ID_MOVES:
                    worklist.extend(op.results)
                continue
            limit = bound if limit is None else min(limit, bound)
            ignores.append(ignore)
    ignore = ignores[0] if ignores and all(i == ignores[0] for i in ignores) else None
    return limit, ignore


@dataclass
class ExportedProgram:
    """The result of ``export``: MLIR text, the parameters' current values (in
    argument order) and a description of the data inputs."""

    mlir: str
    program: Program
    parameters: "OrderedDict[str, torch.Tensor]"
    inputs: List[InputSpec]
    rewrites: Dict[str, int]
    unused_parameters: List[str] = field(default_factory=list)
    uses_dropout_seed: bool = False

    def save(self, mlir_path: str, params_path: Optional[str] = None) -> None:
        """Writes the .mlir file and, if asked, the parameter file; each is
        written to a temporary file and renamed into place."""
        if params_path:
            save_parameters(params_path, self.parameters)
        try:
            tensorfile.write_bytes_atomically(mlir_path, self.mlir.encode("utf-8"))
        except BaseException:
            if params_path and os.path.exists(params_path):
                os.unlink(params_path)
            raise

    def evaluate(self, inputs: Mapping[str, torch.Tensor],
                 parameters: Optional[Mapping[str, torch.Tensor]] = None) -> torch.Tensor:
        """The loss the exported program computes (reference interpreter)."""
        return evaluate(self.program, dict(inputs), dict(parameters or self.parameters))


def _bind_inputs(module: torch.nn.Module, example_inputs) -> "OrderedDict[str, Any]":
    """``forward``'s arguments by name. Inputs given by keyword to a
    ``forward(*args, **kwargs)`` keep their keyword names."""
    signature = inspect.signature(module.forward)
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    var_keyword = next((p.name for p in signature.parameters.values()
                        if p.kind == p.VAR_KEYWORD), None)
    if isinstance(example_inputs, Mapping):
        bound = signature.bind(**example_inputs)
    else:
        bound = signature.bind(*example_inputs)
    arguments = OrderedDict()
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind == inspect.Parameter.VAR_POSITIONAL:
            if value:
                raise TypeError(f"{type(module).__name__}.forward takes *{name}: pass "
                                f"the inputs by keyword (a dict) so that they have names")
        elif name == var_keyword:
            for key in value:
                if key in signature.parameters:
                    raise TypeError(f"input '{key}' is both a parameter of forward() "
                                    f"and one of its **{name}")
            arguments.update(value)
        else:
            arguments[name] = value
    return arguments


def apply_loss(output, loss: LossArg, loss_args: Sequence[Any]):
    """The loss from ``forward``'s output (shared with the reference trainer)."""
    if loss is None:
        return output
    if callable(loss):
        return loss(output, *loss_args)
    if isinstance(loss, (int, str)):
        return output[loss]
    raise TypeError(f"loss must be None, an index or key, or a callable, got {loss!r}")


def _trace(module, model_args, loss, loss_inputs):
    inputs = OrderedDict((k, v) for k, v in model_args.items() if isinstance(v, torch.Tensor))
    for name, value in loss_inputs.items():
        if name in inputs:
            raise ValueError(f"loss input '{name}' has the name of a model input")
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"loss input '{name}' must be a tensor")
        inputs[name] = value

    def body(root, placeholders):
        kwargs = {name: placeholders.get(name, value) for name, value in model_args.items()}
        output = type(root).forward(root, **kwargs)
        return apply_loss(output, loss, [placeholders[n] for n in loss_inputs])

    tracer = ConcreteTracer(inputs, body)
    try:
        graph = tracer.trace(module)
    except Exception as err:  # the user's code failed under tracing
        where = traceback_location(err.__traceback__) or user_location()
        tracer.problems.append(Problem(where, f"tracing failed: {type(err).__name__}: {err}"))
        graph = None
    return graph, tracer, list(inputs)


def _rejected_blocks(tracer) -> List[Problem]:
    """Why modules that look like a mixture-of-experts block were traced
    through instead (reported when the export fails)."""
    return [Problem(location, f"module '{path}' is not exported as a mixture-of-experts "
                              f"block: {reason}. The front-end recognizes a router "
                              f"nn.Linear(H, E, bias=False) with softmax or sigmoid top-k "
                              f"gating over an nn.ModuleList of E SwiGLU experts "
                              f"(docs/pytorch-frontend.md)")
            for path, location, reason in tracer.rejected]


def export(module: torch.nn.Module, example_inputs, loss: LossArg = None,
           loss_inputs: Optional[Mapping[str, torch.Tensor]] = None, *,
           dropout: bool = True, recognize_patterns: bool = True,
           locations: bool = True) -> ExportedProgram:
    """Traces ``module`` on ``example_inputs`` and returns its loss as a cleave
    ``func.func @forward``.

    ``example_inputs`` is a tuple (positional ``forward`` arguments) or a dict
    (by name); tensors become ``cleave.input`` arguments named after
    ``forward``'s parameters, other values are fixed at export. The loss is:

    - ``loss=None``: ``forward`` returns the scalar loss;
    - ``loss=1`` or ``loss="loss"``: ``forward`` returns a tuple/dict and the
      loss is that element (e.g. ``(logits, loss)``);
    - ``loss=fn`` with ``loss_inputs={"targets": t}``: the loss is
      ``fn(forward(...), targets)``, e.g. ``loss=F.cross_entropy``; the loss
      inputs become ``cleave.input`` arguments too.

    The module's mode is respected: dropout with ``p > 0`` in training mode
    becomes ``cleave.dropout`` (seeded by an extra ``dropout_seed`` input)
    unless ``dropout=False``; in eval mode it is the identity. Raises
    ``ExportError`` listing every unsupported op and data-dependent branch.
    """
    if not isinstance(module, torch.nn.Module):
        raise TypeError("export() takes a torch.nn.Module")
    subject = type(module).__name__
    loss_inputs = OrderedDict(loss_inputs or {})
    if loss_inputs and not callable(loss):
        raise TypeError("loss_inputs needs a callable loss=")
    model_args = _bind_inputs(module, example_inputs)
    graph, tracer, input_names = _trace(module, model_args, loss, loss_inputs)
    problems = tracer.problems
    if graph is None:
        raise ExportError(subject, problems + _rejected_blocks(tracer))
    if "dropout_seed" in input_names:
        raise ValueError("'dropout_seed' is reserved for the dropout seed input")
    lowering = Lowering(graph, module, dropout, user_location())
    program = lowering.run()
    problems = problems + lowering.problems
    if problems:
        raise ExportError(subject, sorted(problems + _rejected_blocks(tracer),
                                          key=_problem_order))
    rewrites = patterns.rewrite(program) if recognize_patterns else {}
    for name in ("moe_router", "moe_aux_loss"):  # MoE blocks and balance losses
        rewrites[name] = sum(op.name == name for op in program.ops)
    simplify(program)
    _drop_unused_parameters(program)
    used = set()
    for arg in program.args:
        if "cleave.param" in arg.arg_attrs:
            name = arg.arg_attrs["cleave.param"]
            used.update(lowering.stacks.get(name, [name]))
    parameters = OrderedDict(
        (arg.arg_attrs["cleave.param"],
         lowering.used_params[arg.arg_attrs["cleave.param"]].detach().clone())
        for arg in program.args if "cleave.param" in arg.arg_attrs)
    inputs = [InputSpec(v.arg_attrs["cleave.input"], v.shape, v.dtype, *_id_bounds(program, v))
              for v in lowering.inputs]
    unused = [name for name, _ in module.named_parameters() if name not in used]
    return ExportedProgram(print_program(program, locations), program, parameters, inputs,
                           rewrites, unused, lowering.seed is not None)


def _problem_order(problem: Problem):
    loc = problem.location
    return (loc is None, loc.path if loc else "", loc.line if loc else 0)


def _drop_unused_parameters(program: Program) -> None:
    """Parameters the loss does not depend on get no gradient in PyTorch (and
    so no optimizer update): they are not arguments of the program."""
    uses = program.uses()
    program.args = [arg for arg in program.args
                    if "cleave.param" not in arg.arg_attrs or id(arg) in uses
                    or arg is program.result]
