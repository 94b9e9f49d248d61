"""The PyTorch front-end: ``export(module, example_inputs, loss=...)``.

See docs/pytorch-frontend.md for the API, the command line
(``python3 -m cleave.torch``), the op coverage and the file formats.
"""

from .export import ExportError, ExportedProgram, InputSpec, export
from .params import load_tensors, save_batches, save_parameters, split_stacked, stack_like

__all__ = ["export", "ExportError", "ExportedProgram", "InputSpec", "save_batches",
           "save_parameters", "load_tensors", "split_stacked", "stack_like"]
