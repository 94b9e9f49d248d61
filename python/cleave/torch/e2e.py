"""python3 -m cleave.torch.e2e: the end-to-end comparison in one command.

    python3 -m cleave.torch.e2e python/tests/models/gpt.py:make_gpt --loss-output 1 \\
        --input idx=4x16:int64:64 --input targets=4x16:int64:64 --steps 5 \\
        --cleave-run build/bin/cleave-run [--ranks 4]

1. exports the model (its weights after ``--seed``) to ``model.mlir`` and
   ``params.safetensors``;
2. writes random per-step batches (``--input``/``--loss-input``
   ``NAME=SHAPE:DTYPE[:HIGH]``, integers uniform in ``[0, HIGH)``, or in
   ``[LOW, HIGH)`` with ``LOW..HIGH``: ``-1..64`` gives ignored -1 targets);
3. trains the PyTorch module from those weights on those batches with
   ``torch.optim.AdamW`` (``ref_losses``/``ref_final``);
4. trains the Cleave side: ``--cleave-run PATH`` runs cleave-run with the
   flags in ``cleave_run_command`` below; ``--interpreter`` uses the
   exported program's reference interpreter instead;
5. compares the per-step losses and the final parameters with the
   criterion of ``python3 -m cleave.torch.compare`` (``compare.criterion``:
   ``--rtol`` relative to each tensor's largest magnitude; final parameters
   also get an absolute floor ``--atol``, by default 1% of one
   learning-rate step, for parameters whose exact gradient is zero; losses
   get none), prints it, and exits 1 on a mismatch.

Files go to ``--workdir`` (a temporary directory by default).
"""

import argparse
import copy
import os
import subprocess
import sys
import tempfile

import torch

from . import cli
from .compare import compare_files
from .export import ExportError, export
from .params import load_tensors, save_batches, save_losses, save_tensors
from .reference import Recipe, evaluate, pin_threads, train, train_exported
from ..tensorfile import TensorFileError


def cleave_run_command(cleave_run, files, args):
    """The cleave-run invocation the comparison assumes (see
    docs/pytorch-frontend.md): parameters by cleave.param name, step s feeds
    row s of each batch tensor, PyTorch's AdamW, losses as tensor 'loss'."""
    beta1, beta2 = args.betas.split(",")
    command = [cleave_run, files["mlir"], "--params", files["params"],
               "--inputs", files["batches"], "--steps", str(args.steps),
               "--optimizer", args.optimizer, "--lr", repr(args.lr),
               "--beta1", beta1, "--beta2", beta2, "--eps", repr(args.eps),
               "--weight-decay", repr(args.weight_decay),
               "--save-losses", files["run_losses"], "--save-params", files["run_final"]]
    recipe = _recipe(args)
    if recipe.lr_schedule != "constant" or recipe.warmup_steps:
        command += ["--lr-schedule", recipe.lr_schedule,
                    "--warmup-steps", str(recipe.warmup_steps),
                    "--lr-min", repr(recipe.lr_min)]
        if recipe.lr_schedule != "constant":
            command += ["--decay-steps", str(recipe.decay_steps)]
    if recipe.no_decay_vectors:
        command.append("--no-decay-vectors")
    if recipe.grad_clip > 0:
        command += ["--grad-clip", repr(recipe.grad_clip)]
    if recipe.accumulate > 1:
        command += ["--accumulate", str(recipe.accumulate)]
    if args.eval_batches:
        command += ["--val-data", files["val"], "--eval-steps", str(args.eval_batches)]
    if args.ranks:
        command += ["-n", str(args.ranks)]
    return command + list(args.run_arg)


def _recipe(args) -> Recipe:
    return Recipe(args.lr_schedule, args.warmup_steps,
                  args.steps if args.decay_steps is None else args.decay_steps,
                  args.lr_min, args.no_decay_vectors, args.grad_clip, args.accumulate)


def _parser():
    parser = argparse.ArgumentParser(prog="python3 -m cleave.torch.e2e",
                                     description=__doc__.split("\n\n")[0])
    cli.add_model_arguments(parser)
    parser.add_argument("--input", action="append", required=True,
                        metavar="NAME=SHAPE:DTYPE[:HIGH|:LOW..HIGH]",
                        help="a forward() input; integers need HIGH (as do "
                             "--loss-input NAME=SHAPE:DTYPE:HIGH)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch-seed", type=int, default=1)
    parser.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"])
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--betas", default="0.9,0.999")
    parser.add_argument("--eps", type=float, default=1e-8)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--lr-schedule", default="constant",
                        choices=["constant", "cosine", "linear"])
    parser.add_argument("--warmup-steps", type=int, default=0)
    parser.add_argument("--decay-steps", type=int, default=None,
                        help="the step the decay ends (default: --steps)")
    parser.add_argument("--lr-min", type=float, default=0.0)
    parser.add_argument("--no-decay-vectors", action="store_true",
                        help="weight decay on matrices only (nanoGPT)")
    parser.add_argument("--grad-clip", type=float, default=0.0,
                        help="clip the global gradient norm (0: no clipping)")
    parser.add_argument("--accumulate", type=int, default=1,
                        help="micro-batches per optimizer update (the batch's rows split)")
    parser.add_argument("--eval-batches", type=int, default=0,
                        help="validation: K more random batches; cleave-run's "
                             "--val-data loss after the last step is compared with "
                             "PyTorch's evaluation (model.eval()) of cleave-run's "
                             "final weights")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=None,
                        help="absolute floor for final parameters "
                             "(default: 0.01 * lr, as cleave.torch.compare)")
    side = parser.add_mutually_exclusive_group(required=True)
    side.add_argument("--cleave-run", metavar="PATH")
    side.add_argument("--interpreter", action="store_true")
    parser.add_argument("--ranks", type=int, default=0)
    parser.add_argument("--run-arg", action="append", default=[],
                        help="an extra argument for cleave-run (repeatable)")
    parser.add_argument("--workdir")
    return parser


def _prepare(args, files):
    """Export, batches and the PyTorch reference; returns the export."""
    model = cli.build_model(args)
    loss = cli.resolve_loss(args)
    specs = [cli.parse_input(s) for s in args.input + args.loss_input]
    loss_names = [cli.parse_input(s)[0] for s in args.loss_input]
    generator = torch.Generator().manual_seed(args.batch_seed)
    batches = {}
    for name, shape, dtype, high in specs:
        if not dtype.is_floating_point and high is None:
            raise cli.UsageError(f"input '{name}': integers need NAME=SHAPE:DTYPE:HIGH")
        batches[name] = cli.example_tensor((args.steps,) + shape, dtype, high, generator)
    examples = {n: t[0] for n, t in batches.items() if n not in loss_names}
    loss_examples = {n: batches[n][0] for n in loss_names}
    reference_model = copy.deepcopy(model)
    exported = export(model, examples, loss, loss_examples)
    exported.save(files["mlir"], files["params"])
    save_batches(files["batches"], batches, exported.inputs)
    if args.eval_batches:
        val = {name: cli.example_tensor((args.eval_batches,) + shape, dtype, high,
                                        generator)
               for name, shape, dtype, high in specs}
        save_batches(files["val"], val, exported.inputs)
        # Evaluated later, with the weights cleave-run trained.
        files["evaluate"] = lambda params: evaluate(
            copy.deepcopy(reference_model), params, load_tensors(files["val"]),
            args.eval_batches, loss, loss_names)
    betas = tuple(float(b) for b in args.betas.split(","))
    losses, final = train(reference_model, load_tensors(files["params"]),
                          load_tensors(files["batches"]), args.steps, loss, loss_names,
                          args.optimizer, args.lr, betas, args.eps, args.weight_decay,
                          _recipe(args))
    save_losses(files["ref_losses"], losses)
    save_tensors(files["ref_final"], final, "parameters")
    return exported


def _run_cleave(args, files, exported):
    if args.interpreter:
        betas = tuple(float(b) for b in args.betas.split(","))
        losses, final = train_exported(exported, load_tensors(files["params"]),
                                       load_tensors(files["batches"]), args.steps,
                                       args.optimizer, args.lr, betas, args.eps,
                                       args.weight_decay, _recipe(args))
        save_losses(files["run_losses"], losses)
        save_tensors(files["run_final"], final, "parameters")
        return 0
    command = cleave_run_command(args.cleave_run, files, args)
    print("+ " + " ".join(command), file=sys.stderr)
    return subprocess.run(command, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"}).returncode


def _compare_validation(files, rtol):
    """cleave-run's last validation loss against PyTorch's evaluation of the
    same (cleave-run's final) weights."""
    ran = load_tensors(files["run_losses"])
    if "val_loss" not in ran:
        print("error: validation: cleave-run saved no val_loss", file=sys.stderr)
        return False
    mine = float(ran["val_loss"][-1])
    ref = files["evaluate"](load_tensors(files["run_final"]))
    error = abs(mine - ref) / max(abs(ref), 1e-30)
    ok = error <= rtol
    print(f"validation: cleave-run {mine:.6f}, PyTorch {ref:.6f} (relative "
          f"{error:.3g}, {'within' if ok else 'NOT within'} {rtol:g})", file=sys.stderr)
    return ok


def _compare(files, rtol, lr, atol):
    ok = "evaluate" not in files or _compare_validation(files, rtol)
    for what in ("losses", "final"):
        rule, errors, report = compare_files(files[f"ref_{what}"], files[f"run_{what}"], rtol,
                                             lr, atol)
        worst = f"{report[0][1]} {report[0][0]:.3g}" if report else "-"
        print(f"{what}: {len(report) - len(errors)}/{len(report)} tensors within "
              f"{rule} (worst relative: {worst})", file=sys.stderr)
        for error in errors:
            print(f"error: {what}: {error}", file=sys.stderr)
        ok = ok and not errors
    return ok


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    pin_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        files = {k: os.path.join(workdir, f) for k, f in (
            ("mlir", "model.mlir"), ("params", "params.safetensors"),
            ("batches", "batches.safetensors"), ("ref_losses", "ref_losses.safetensors"),
            ("ref_final", "ref_final.safetensors"), ("run_losses", "run_losses.safetensors"),
            ("run_final", "run_final.safetensors"), ("val", "val.safetensors"))}
        try:
            exported = _prepare(args, files)
        except (cli.UsageError, ValueError, TypeError, TensorFileError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        except ExportError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        status = _run_cleave(args, files, exported)
        if status != 0:
            print(f"error: the Cleave side exited with status {status}", file=sys.stderr)
            return 1
        try:
            return 0 if _compare(files, args.rtol, args.lr, args.atol) else 1
        except TensorFileError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
