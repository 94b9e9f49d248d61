"""torch.Tensor <-> Cleave tensor files: parameters, batches, results.

- Parameter files hold one F32 tensor per ``cleave.param`` name.
- Loss files hold ``loss``: ``[steps]`` F64, as cleave-run writes them.
- Batch files hold one tensor per ``cleave.input`` name with a leading
  ``steps`` dimension: tensor ``x`` of shape ``[steps, ...]`` is the value of
  input ``x`` at each training step. Floating-point inputs are F32, integer
  ids and labels I32 (checked to fit).
"""

from typing import Dict, Mapping, Optional, Sequence

import torch

from .. import tensorfile
from ..dtypes import DTYPES
from ..tensorfile import Tensor, TensorFileError

_TO_FILE = {getattr(torch, d.torch_name): d.file_name for d in DTYPES}
_FROM_FILE = {v: k for k, v in _TO_FILE.items()}
_INT32 = (-(2 ** 31), 2 ** 31 - 1)


def to_file_tensor(tensor: torch.Tensor, dtype: Optional[torch.dtype] = None) -> Tensor:
    """Raw little-endian bytes of ``tensor`` (converted to ``dtype`` if given)."""
    tensor = tensor.detach().to("cpu")
    if dtype is not None:
        tensor = tensor.to(dtype)
    if tensor.dtype not in _TO_FILE:
        raise TensorFileError(f"cannot store tensors of dtype {tensor.dtype}")
    tensor = tensor.contiguous()
    width = tensor.element_size()
    raw = tensor.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[width]).numpy()
    raw = raw.astype(raw.dtype.newbyteorder("<"), copy=False)  # a no-op on x86
    return Tensor(_TO_FILE[tensor.dtype], tuple(tensor.shape), memoryview(raw).cast("B"))


def from_file_tensor(tensor: Tensor) -> torch.Tensor:
    dtype = _FROM_FILE[tensor.dtype]
    size = torch.tensor([], dtype=dtype).element_size()
    width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    raw = torch.frombuffer(bytearray(tensor.data), dtype=width) if tensor.data else \
        torch.empty(0, dtype=width)
    return raw.view(dtype).reshape(tensor.shape).clone()


#: The index of a stacked parameter's name: ``experts.*.w1.weight`` holds
#: ``experts.0.w1.weight``, ``experts.1.w1.weight``, ... along dimension 0.
STACKED = "*"


def split_stacked(params: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Cleave parameter names to the module's (state_dict) names: a stacked
    ``a.*.b`` of shape ``[E, ...]`` becomes ``a.0.b``, ..., ``a.{E-1}.b``
    (views of it); other tensors keep their names. Order is kept."""
    out: Dict[str, torch.Tensor] = {}
    for name, tensor in params.items():
        parts = name.split(".")
        if parts.count(STACKED) != 1:
            out[name] = tensor
            continue
        if tensor.dim() == 0:
            raise TensorFileError(f"stacked parameter '{name}' is a scalar")
        at = parts.index(STACKED)
        for index, part in enumerate(tensor.unbind(0)):
            out[".".join(parts[:at] + [str(index)] + parts[at + 1:])] = part
    return out


def stack_like(names, params: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """The inverse of ``split_stacked``: the tensors of ``params`` (by the
    module's names) under the cleave ``names``, stacking ``a.*.b`` from
    ``a.0.b``, ``a.1.b``, ... (as many as ``params`` has)."""
    out: Dict[str, torch.Tensor] = {}
    for name in names:
        parts = name.split(".")
        if parts.count(STACKED) != 1:
            out[name] = params[name]
            continue
        at, slices = parts.index(STACKED), []
        while True:
            key = ".".join(parts[:at] + [str(len(slices))] + parts[at + 1:])
            if key not in params:
                break
            slices.append(params[key])
        if not slices:
            raise KeyError(f"no parameter to stack as '{name}'")
        out[name] = torch.stack(slices)
    return out


def save_parameters(path: str, params: Mapping[str, torch.Tensor]) -> None:
    """Writes a parameter file: F32 tensors in mapping order."""
    tensorfile.write(path, {name: to_file_tensor(t, torch.float32) for name, t in params.items()},
                     {"content": "parameters"})


def save_tensors(path: str, tensors: Mapping[str, torch.Tensor], content: str) -> None:
    """Writes tensors in their own dtype (int64 as I64), metadata content=``content``."""
    tensorfile.write(path, {n: to_file_tensor(t) for n, t in tensors.items()},
                     {"content": content})


def save_losses(path: str, losses: torch.Tensor) -> None:
    """Writes per-step losses as cleave-run's ``--save-losses`` does: tensor
    ``loss``, ``[steps]``, F64 (cleave-run also writes ``loss_by_rank``,
    ``[ranks, steps]``, each rank's own value)."""
    tensorfile.write(path, {"loss": to_file_tensor(losses.reshape(-1), torch.float64)},
                     {"content": "losses"})


def load_tensors(path: str) -> Dict[str, torch.Tensor]:
    """Every tensor of a tensor file (checksums checked)."""
    return {name: from_file_tensor(t) for name, t in tensorfile.read(path).tensors.items()}


def _batch_tensor(name: str, tensor: torch.Tensor) -> Tensor:
    if tensor.is_floating_point():
        return to_file_tensor(tensor, torch.float32)
    if tensor.dtype in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8):
        if tensor.numel() and (tensor.min().item() < _INT32[0] or tensor.max().item() > _INT32[1]):
            raise TensorFileError(f"batch input '{name}': values do not fit in int32")
        return to_file_tensor(tensor, torch.int32)
    raise TensorFileError(f"batch input '{name}': unsupported dtype {tensor.dtype}")


def check_ids(spec, stacked: torch.Tensor) -> None:
    """Fails, naming the batch (step) and position, when an id or label of
    ``stacked`` (``[steps] + spec.shape``) is outside ``[0, spec.id_limit)``
    and is not the ``spec.ignore_index`` (``InputSpec``), as cleave-run does:
    a wrong label would otherwise give a wrong loss silently."""
    limit = getattr(spec, "id_limit", None)
    if limit is None or stacked.is_floating_point():
        return
    ignore = getattr(spec, "ignore_index", None)
    bad = (stacked < 0) | (stacked >= limit)
    if ignore is not None:
        bad &= stacked != ignore
    if not bool(bad.any()):
        return
    where = [int(i) for i in bad.nonzero()[0]]
    allowed = f"[0, {limit})" + (f" or the ignore_index {ignore}" if ignore is not None
                                 else " (no ignore_index)")
    raise TensorFileError(f"batch input '{spec.name}', batch {where[0]} (step {where[0] + 1}), "
                          f"position {where[1:]}: {int(stacked[tuple(where)])} is not a valid "
                          f"id or label: the program needs {allowed}")


def stack_batches(batches) -> Dict[str, torch.Tensor]:
    """A list of per-step ``{name: tensor}`` dicts, or a dict of stacked
    ``[steps, ...]`` tensors, as a dict of stacked tensors."""
    if isinstance(batches, Mapping):
        return dict(batches)
    batches = list(batches)
    if not batches:
        raise TensorFileError("no batches")
    names = list(batches[0])
    for step, batch in enumerate(batches):
        if list(batch) != names:
            raise TensorFileError(f"batch {step} has inputs {list(batch)}, batch 0 has {names}")
    return {name: torch.stack([b[name] for b in batches]) for name in names}


def save_batches(path: str, batches, inputs: Optional[Sequence] = None) -> None:
    """Writes per-step batches. ``inputs`` (``ExportedProgram.inputs``), when
    given, is checked: every input present with shape ``[steps] + shape``."""
    stacked = stack_batches(batches)
    steps = {t.shape[0] if t.dim() else None for t in stacked.values()}
    if len(steps) != 1 or None in steps:
        raise TensorFileError(f"batch tensors disagree on the number of steps: "
                              f"{ {n: list(t.shape) for n, t in stacked.items()} }")
    if inputs is not None:
        for spec in inputs:
            if spec.name not in stacked:
                raise TensorFileError(f"batches lack input '{spec.name}'")
            got = tuple(stacked[spec.name].shape[1:])
            if got != tuple(spec.shape):
                raise TensorFileError(f"batch input '{spec.name}' has per-step shape "
                                      f"{list(got)}, the program expects {list(spec.shape)}")
            check_ids(spec, stacked[spec.name])
    tensors = {name: _batch_tensor(name, t) for name, t in stacked.items()}
    tensorfile.write(path, tensors, {"content": "batches", "steps": str(steps.pop())})
