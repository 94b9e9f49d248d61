"""python3 -m cleave.torch: export a PyTorch model to a cleave .mlir file.

    python3 -m cleave.torch tests/models/gpt.py:make_gpt --config n_layer=2 \\
        --input idx=4x16:int64 --input targets=4x16:int64 --loss-output 1 \\
        -o gpt.mlir --params gpt.safetensors

Nothing is written when the export fails; the error lists every problem.
"""

import argparse
import sys

import torch

from . import cli
from .export import ExportError, export


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m cleave.torch",
        description="Trace a torch.nn.Module and write its loss as a cleave func.func "
                    "@forward, plus its current parameters.")
    cli.add_model_arguments(parser)
    parser.add_argument("--input", action="append", default=[], metavar="NAME=SHAPE:DTYPE",
                        help="a tensor argument of forward(), e.g. idx=4x16:int64 "
                             "(integers are zeros, floats standard normal)")
    parser.add_argument("--weights", metavar="FILE",
                        help="load parameters first: a Cleave tensor file or a torch "
                             "state_dict (.pt)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE.mlir")
    parser.add_argument("--params", metavar="FILE.safetensors",
                        help="write the parameters (F32) for cleave-run")
    parser.add_argument("--no-patterns", action="store_true",
                        help="keep attention, RMSNorm and rotary as primitive ops")
    parser.add_argument("--no-locations", action="store_true",
                        help="omit loc(...) source locations")
    parser.add_argument("--check", action="store_true",
                        help="evaluate the exported program on the example inputs and "
                             "compare its loss with PyTorch's")
    return parser


def _examples(specs, generator):
    examples = {}
    for spec in specs:
        name, shape, dtype, high = cli.parse_input(spec)
        if name in examples:
            raise cli.UsageError(f"input '{name}' given twice")
        examples[name] = cli.example_tensor(shape, dtype, high, generator)
    return examples


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        model = cli.build_model(args)
        if args.weights:
            cli.load_weights(model, args.weights)
        generator = torch.Generator().manual_seed(args.seed)
        inputs = _examples(args.input, generator)
        loss = cli.resolve_loss(args)
        loss_inputs = _examples(args.loss_input, generator)
        exported = export(model, inputs, loss, loss_inputs,
                          recognize_patterns=not args.no_patterns,
                          locations=not args.no_locations)
    except (cli.UsageError, TypeError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except ExportError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if args.check:
        with torch.no_grad():
            expected = torch.as_tensor(_reference_loss(model, inputs, loss, loss_inputs))
            got = exported.evaluate({**inputs, **loss_inputs})
        print(f"check: PyTorch loss {expected.item():.9g}, exported program "
              f"{got.item():.9g}", file=sys.stderr)
        if not torch.allclose(got, expected.to(got.dtype), rtol=1e-5, atol=1e-6):
            print("error: the exported program computes a different loss", file=sys.stderr)
            return 1
    exported.save(args.output, args.params)
    patterns = ", ".join(f"{k} x{v}" for k, v in exported.rewrites.items() if v) or "none"
    print(f"wrote {args.output}: {len(exported.program.ops)} ops, "
          f"{len(exported.parameters)} parameters, inputs "
          f"{', '.join(i.name for i in exported.inputs)}; recognized: {patterns}"
          + (f"; parameters written to {args.params}" if args.params else ""),
          file=sys.stderr)
    if exported.unused_parameters:
        print(f"note: parameters the loss does not use (not exported): "
              f"{', '.join(exported.unused_parameters)}", file=sys.stderr)
    return 0


def _reference_loss(model, inputs, loss, loss_inputs):
    from .export import apply_loss
    return apply_loss(model(**inputs), loss, list(loss_inputs.values()))


if __name__ == "__main__":
    sys.exit(main())
