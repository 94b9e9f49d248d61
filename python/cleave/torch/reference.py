"""The PyTorch side of the end-to-end comparison: train a module for N steps.

    python3 -m cleave.torch.reference tests/models/gpt.py:make_gpt \\
        --loss-output 1 --params params.safetensors --batches batches.safetensors \\
        --steps 5 --lr 1e-3 --weight-decay 0.01 \\
        --out-losses ref_losses.safetensors --out-params ref_final.safetensors

The model is built as for export, then its parameters are replaced by the
ones in ``--params`` (the file the export wrote), so both sides start from
the same weights. Step ``s`` feeds row ``s`` of every tensor of the batches
file to ``forward()`` (and to the loss function), runs backward and one
``torch.optim.AdamW`` (or SGD) step over exactly the parameters in the
parameter file. Outputs: a tensor file with ``loss`` ([steps], F64 as
cleave-run writes it, the loss computed at each step before its update) and
one with the final parameters.

Threads are pinned (OpenBLAS and torch's intra-op pool, ``--threads``, default
1) so that the oracle is reproducible from run to run.
"""

import argparse
import ctypes
import dataclasses
import math
import os
import sys
from typing import Mapping, Sequence

import torch

from . import cli
from . import params as params_io
from ..tensorfile import TensorFileError
from .export import apply_loss


def pin_threads(count: int) -> None:
    """Pins OpenBLAS (already loaded by torch) and torch's thread pools."""
    os.environ["OPENBLAS_NUM_THREADS"] = str(count)
    os.environ["OMP_NUM_THREADS"] = str(count)
    with open("/proc/self/maps") as maps:
        libraries = {line.split()[-1] for line in maps if "openblas" in line and ".so" in line}
    for path in sorted(libraries):
        try:
            ctypes.CDLL(path).openblas_set_num_threads(count)
        except (OSError, AttributeError):
            continue
    torch.set_num_threads(count)


@dataclasses.dataclass
class Recipe:
    """What an LLM trainer adds to the optimizer (cleave-run's --lr-schedule,
    --warmup-steps, --decay-steps, --lr-min, --no-decay-vectors, --grad-clip,
    --accumulate)."""
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    decay_steps: int = 0
    lr_min: float = 0.0
    no_decay_vectors: bool = False
    grad_clip: float = 0.0
    accumulate: int = 1

    def clip(self, parameters) -> None:
        if self.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(parameters, self.grad_clip)

    def lr_at(self, lr: float, step: int) -> float:
        """The rate of 1-based step ``step`` (cleave.lr_schedule: Megatron's
        linear warmup to ``lr`` at ``warmup_steps``, then decay to
        ``lr_min`` at ``decay_steps``)."""
        w, d = self.warmup_steps, self.decay_steps
        if w > 0 and step <= w:
            return lr * step / w
        if self.lr_schedule == "constant":
            return lr
        p = 1.0 if d <= w else min(1.0, max(0.0, (step - w) / (d - w)))
        if self.lr_schedule == "cosine":
            coeff = 0.5 * (1.0 + math.cos(math.pi * p))
        elif self.lr_schedule == "linear":
            coeff = 1.0 - p
        else:
            raise ValueError(f"unknown lr schedule {self.lr_schedule!r}")
        return self.lr_min + coeff * (lr - self.lr_min)


def make_optimizer(parameters, name: str, lr: float, betas, eps: float,
                   weight_decay: float, recipe: Recipe = Recipe()) -> torch.optim.Optimizer:
    parameters = list(parameters)
    if recipe.no_decay_vectors:  # nanoGPT's two groups: matrices decay
        groups = [{"params": [p for p in parameters if p.dim() >= 2]},
                  {"params": [p for p in parameters if p.dim() < 2], "weight_decay": 0.0}]
    else:
        groups = [{"params": parameters}]
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps,
                                 weight_decay=weight_decay)
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer {name!r} (adamw or sgd)")


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    for group in opt.param_groups:
        group["lr"] = lr


def train(model: torch.nn.Module, initial: Mapping[str, torch.Tensor],
          batches: Mapping[str, torch.Tensor], steps: int, loss=None,
          loss_inputs: Sequence[str] = (), optimizer: str = "adamw", lr: float = 1e-3,
          betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.01,
          recipe: Recipe = Recipe()):
    """Trains ``model`` in place; returns (per-step losses, final parameters)."""
    named = dict(model.named_parameters())
    split = params_io.split_stacked(initial)  # experts.*.w1.weight -> experts.{e}.w1.weight
    for name, tensor in split.items():
        if name not in named:
            raise ValueError(f"parameter file: '{name}' is no parameter of the model")
        with torch.no_grad():
            named[name].copy_(tensor)
    trained = [named[name] for name in split]
    opt = make_optimizer(trained, optimizer, lr, tuple(betas), eps, weight_decay, recipe)
    inputs = [n for n in batches if n not in loss_inputs]
    for name in list(inputs) + list(loss_inputs):
        if name not in batches:
            raise ValueError(f"batches file: no input '{name}'")
        if batches[name].shape[0] < steps:
            raise ValueError(f"batches file: '{name}' has {batches[name].shape[0]} steps, "
                             f"{steps} requested")
    losses = []
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        # nanoGPT's gradient accumulation: the batch's rows in `accumulate`
        # micro-batches, each loss scaled by 1/accumulate.
        value = 0.0
        for micro in range(recipe.accumulate):
            def rows(t):
                return _input(t[step].chunk(recipe.accumulate)[micro])
            kwargs = {n: rows(batches[n]) for n in inputs}
            extra = [rows(batches[n]) for n in loss_inputs]
            part = apply_loss(model(**kwargs), loss, extra) / recipe.accumulate
            part.backward()
            value = value + part.detach()
        recipe.clip(trained)
        set_lr(opt, recipe.lr_at(lr, step + 1))
        opt.step()
        losses.append(value.detach().float())
    final = params_io.stack_like(initial, {name: named[name].detach().clone()
                                           for name in split})
    return torch.stack(losses), final


def evaluate(model: torch.nn.Module, params: Mapping[str, torch.Tensor],
             batches: Mapping[str, torch.Tensor], count: int, loss=None,
             loss_inputs: Sequence[str] = ()) -> float:
    """The validation loss of ``model`` with ``params``: the mean loss of
    batches 0..count-1 in evaluation mode (``model.eval()``: no dropout), as
    nanoGPT's ``estimate_loss`` and cleave-run's ``--val-data``."""
    named = dict(model.named_parameters())
    with torch.no_grad():
        for name, tensor in params_io.split_stacked(params).items():
            if name not in named:
                raise ValueError(f"parameter file: '{name}' is no parameter of the model")
            named[name].copy_(tensor)
    inputs = [n for n in batches if n not in loss_inputs]
    was_training = model.training
    model.eval()
    total = 0.0
    with torch.no_grad():
        for k in range(count):
            kwargs = {n: _input(batches[n][k]) for n in inputs}
            extra = [_input(batches[n][k]) for n in loss_inputs]
            total += float(apply_loss(model(**kwargs), loss, extra).double())
    model.train(was_training)
    return total / count


def train_exported(exported, initial: Mapping[str, torch.Tensor],
                   batches: Mapping[str, torch.Tensor], steps: int, optimizer: str = "adamw",
                   lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                   weight_decay: float = 0.01, recipe: Recipe = Recipe()):
    """The same training with the exported program's loss and gradients (the
    reference interpreter): a stand-in for cleave-run that checks the export
    and the files end to end. Returns (per-step losses, final parameters)."""
    if recipe.accumulate != 1:
        raise ValueError("the interpreter runs the exported batch shape: "
                         "accumulation needs --cleave-run")
    params = {n: initial[n].clone().requires_grad_(True) for n in exported.parameters}
    opt = make_optimizer(list(params.values()), optimizer, lr, tuple(betas), eps,
                         weight_decay, recipe)
    losses = []
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        value = exported.evaluate({n: t[step] for n, t in batches.items()}, params)
        value.backward()
        recipe.clip(list(params.values()))
        set_lr(opt, recipe.lr_at(lr, step + 1))
        opt.step()
        losses.append(value.detach().float())
    return torch.stack(losses), {n: p.detach() for n, p in params.items()}


def _input(tensor: torch.Tensor) -> torch.Tensor:
    # Batch files hold ids as int32; PyTorch indexing and losses want int64.
    return tensor.long() if tensor.dtype == torch.int32 else tensor


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m cleave.torch.reference",
        description="Train a PyTorch module for N steps from a Cleave parameter file "
                    "and per-step batches; write the losses and the final parameters.")
    cli.add_model_arguments(parser)
    parser.add_argument("--params", required=True, help="initial parameters (tensor file)")
    parser.add_argument("--batches", required=True, help="per-step inputs (tensor file)")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"])
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--betas", default="0.9,0.999", help="AdamW betas (default 0.9,0.999)")
    parser.add_argument("--eps", type=float, default=1e-8)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out-losses", required=True,
                        help="tensor file: loss [steps] F64 (as cleave-run --save-losses)")
    parser.add_argument("--out-params", required=True, help="tensor file: final parameters")
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    pin_threads(args.threads)
    try:
        model = cli.build_model(args)
        loss = cli.resolve_loss(args)
        loss_inputs = [cli.parse_input(s, need_shape=False)[0] for s in args.loss_input]
        betas = tuple(float(b) for b in args.betas.split(","))
        initial = params_io.load_tensors(args.params)
        batches = params_io.load_tensors(args.batches)
        losses, final = train(model, initial, batches, args.steps, loss, loss_inputs,
                              args.optimizer, args.lr, betas, args.eps, args.weight_decay)
    except (cli.UsageError, ValueError, OSError, TensorFileError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    params_io.save_losses(args.out_losses, losses)
    params_io.save_tensors(args.out_params, final, "parameters")
    print("losses: " + " ".join(f"{v:.7g}" for v in losses.tolist()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
